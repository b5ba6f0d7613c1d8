"""site.yml's order: the model's download starts first and no reboot cuts it.

`hf download` writes each file to a temporary name of its own process and deletes it when the process dies, so a
reboot while it runs costs every unfinished file from its first byte (benchmarks/time_to_serving.py measured it:
the early start then gained nothing). The driver's reboot therefore waits until the model's main entry point has
waited for the download, and comes before the service, the first thing that needs the new driver loaded.
"""
import yaml

from conftest import REPO

SITE = REPO / "playbooks" / "site.yml"


def _steps():
    """(index, role, entry point, task vars) of every role a server's play runs, in order."""
    steps = []
    for play in yaml.safe_load(SITE.read_text()):
        if "import_playbook" in play or "ansible.builtin.import_playbook" in play:
            continue
        if "gpu_servers" not in str(play.get("hosts")):
            continue
        for task in play.get("tasks", []):
            for key in ("ansible.builtin.import_role", "ansible.builtin.include_role"):
                if key in task:
                    role = task[key]["name"].rsplit(".", 1)[-1]
                    steps.append((len(steps), role, task[key].get("tasks_from", "main"), task.get("vars", {})))
    return steps


def _first(steps, role, entry):
    found = [s for s in steps if s[1] == role and s[2] == entry]
    assert found, f"site.yml runs no {role} entry point {entry} on the servers"
    return found[0]


def test_the_download_starts_before_the_driver():
    steps = _steps()
    assert _first(steps, "model_weights", "start")[0] < _first(steps, "nvidia_driver", "main")[0]


def test_no_reboot_while_the_download_runs():
    steps = _steps()
    start = _first(steps, "model_weights", "start")[0]
    waited = _first(steps, "model_weights", "main")[0]
    for index, role, entry, task_vars in steps:
        if role == "nvidia_driver" and entry == "main" and start < index < waited:
            assert task_vars.get("nvidia_driver_reboot_deferred") is True, (
                "site.yml runs nvidia_driver between the download's start and its end without"
                " nvidia_driver_reboot_deferred: its reboot would cut the download")
    reboot = _first(steps, "nvidia_driver", "reboot")
    assert waited < reboot[0] < _first(steps, "sglang_service", "main")[0], (
        "the deferred reboot must come after the model's download has ended and before the service starts")
    assert reboot[3].get("nvidia_driver_reboot_deferred") is False


def test_the_reboot_entry_point_exists_and_is_documented():
    specs = yaml.safe_load((REPO / "roles" / "nvidia_driver" / "meta" / "argument_specs.yml").read_text())
    assert "reboot" in specs["argument_specs"]
    assert "nvidia_driver_reboot_deferred" in specs["argument_specs"]["main"]["options"]
    assert (REPO / "roles" / "nvidia_driver" / "tasks" / "reboot.yml").exists()


def test_the_reboot_tail_is_tagged_as_it_was():
    """reboot.yml includes the reboot itself where one is due; the include carries no tags of its own, so that its
    tasks are selected as before: by the main entry point's import tags, and in the entry point `reboot` (which
    site.yml includes without apply) by none, so that --tags nvidia_driver_reboot cannot reboot without the judge."""
    tasks = yaml.safe_load((REPO / "roles" / "nvidia_driver" / "tasks" / "reboot.yml").read_text())
    include = next(t for t in tasks if "ansible.builtin.include_tasks" in t)
    assert include["ansible.builtin.include_tasks"] == "reboot_due.yml" and "tags" not in include
    due = list(_walk(yaml.safe_load((REPO / "roles" / "nvidia_driver" / "tasks" / "reboot_due.yml").read_text())))
    assert any("ansible.builtin.reboot" in t for t in due) and not any("tags" in t for t in due)


def _walk(tasks):
    """Each task and block, and what the blocks hold (the reboot is in one)."""
    for task in tasks:
        yield task
        for key in ("block", "rescue", "always"):
            yield from _walk(task.get(key, []))
