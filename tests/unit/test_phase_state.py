"""A phase that a host_state read lets a converged host skip: the read judges what the phase's tasks would change.
(Where the read asks a command the phase asks too, both take it from the role's vars/main.yml, and the phases' files
are one list both take: CONTRIBUTING.md, mechanism 1.)"""
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]


def tasks(path):
    """The tasks of a task file, blocks flattened."""
    def walk(items):
        for t in items or []:
            if "block" in t:
                yield from walk(t["block"])
            else:
                yield t
    return list(walk(yaml.safe_load(path.read_text())))


def test_unit_deploy_skips_the_enablement_only_where_its_read_judges_what_it_would_change():
    """deploy.yml's one read judges the unit's enablement (and a pending daemon reload, which judge_unit counts); the
    enablement task is skipped on `holds`, so it may change nothing the read does not judge."""
    deploy = tasks(REPO / "roles" / "unit_deploy" / "tasks" / "deploy.yml")
    read = next(t for t in deploy if "blackwell.serving.host_state" in t)
    spec = read["blackwell.serving.host_state"]
    assert set(spec) == {"read", "units"}, "the read judges only the unit: anything else would make holds mean more"
    enable = next(t for t in deploy if t.get("ansible.builtin.systemd_service", {}).get("enabled") is True)
    args = enable["ansible.builtin.systemd_service"]
    assert set(args) <= {"name", "enabled", "daemon_reload"}, f"the enablement task changes more than the read judges: {args}"
    assert spec["units"] == [{"name": args["name"], "enabled": True}]
    conditions = enable["when"] if isinstance(enable["when"], list) else [enable["when"]]
    assert any(f"not {read['register']}.holds" in c for c in conditions), conditions
    # a unit file this run changed is always enabled (and systemd reloaded), whatever the read found before the write
    assert any("unit_deploy_unit_changed" in c and "holds" in c for c in conditions), conditions
