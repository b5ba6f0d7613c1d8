"""A role that reads the host's facts gathers them itself where the play did not (gather_facts: false).

Without it the role stops with "object of type 'dict' has no attribute 'distribution'" on its first platform
check, as the Molecule verify of cuda_toolkit did when it included the role in a play that gathers nothing.
"""
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import jinja2
import pytest
import yaml

from conftest import PLAYBOOK_HANG_BOUND, REPO

FACT = re.compile(r"ansible_facts(?:\[['\"]|\.)([a-z_0-9]+)")
# what ansible.builtin.setup's subsets give: min (platform, distribution, cmdline) and hardware (processor)
MIN = {"os_family", "distribution", "distribution_version", "distribution_major_version", "distribution_release",
       "architecture", "kernel", "machine_id", "cmdline", "proc_cmdline"}
HARDWARE = {"processor", "processor_count", "memtotal_mb", "mounts"}
# and chroot (is_chroot: whether the role builds an image in a chroot)
CHROOT = {"is_chroot"}
# facts that other modules set (package_facts, gpu_facts) or that only a group's own play gathers
SET_ELSEWHERE = {"packages", "nvidia_gpu", "default_ipv4"}


def facts_read(role):
    found = set()
    for sub in ("tasks", "vars", "defaults", "templates", "handlers"):
        for path in (REPO / "roles" / role / sub).glob("**/*"):
            if path.is_file():
                found |= set(FACT.findall(path.read_text()))
    return found - SET_ELSEWHERE


ROLES = sorted(p.name for p in (REPO / "roles").iterdir() if (p / "tasks" / "main.yml").exists())


def test_every_fact_read_is_known():
    unknown = {role: facts_read(role) - MIN - HARDWARE - CHROOT for role in ROLES}
    assert {role: facts for role, facts in unknown.items() if facts} == {}


@pytest.mark.parametrize("role", [r for r in ROLES if facts_read(r)])
def test_role_gathers_what_it_reads(role):
    first = yaml.safe_load((REPO / "roles" / role / "tasks" / "main.yml").read_text())[0]
    assert "ansible.builtin.setup" in first, f"{role}: the first task of main.yml gathers facts"
    subsets = set(first["ansible.builtin.setup"]["gather_subset"])
    needs = facts_read(role)
    assert "min" in subsets
    assert ("hardware" in subsets) == bool(needs & HARDWARE), (role, needs & HARDWARE)
    assert ("chroot" in subsets) == bool(needs & CHROOT), (role, needs & CHROOT)
    # the condition, evaluated: false where the play gathered every fact the role reads (the task is skipped, no
    # round trip), true where any one of them is missing
    when = first["when"] if isinstance(first["when"], str) else " or ".join(f"({w})" for w in first["when"])
    condition = jinja2.Environment().compile_expression(when)
    everything = {fact: "x" for fact in needs | {"os_family"}}
    assert not condition(ansible_facts=everything), f"{role}: gathers again where the play gathered all it reads"
    for name, subset in (("min", MIN | {"os_family"}), ("hardware", HARDWARE), ("chroot", CHROOT)):
        if needs & subset or name == "min":
            missing = {k: v for k, v in everything.items() if k not in subset}
            assert condition(ansible_facts=missing), f"{role}: does not gather where the play left out {name}"
    assert first["tags"] == ["always"]


def test_the_roles_that_read_facts():
    assert sorted(r for r in ROLES if facts_read(r)) == [
        "cuda_toolkit", "nvidia_driver", "nvidia_repo", "preflight", "sglang", "sglang_service", "uv_venv"]


def test_the_preflight_plays_gather_what_the_roles_read_and_no_more():
    """site.yml's facts come from playbooks/preflight.yml: every play gathers the platform (min) and the addresses
    (network: the routers' workers and the site cache's URL read default_ipv4); the servers' play also the
    hardware and chroot subsets, for nvidia_driver's CPU vendor and its image builds, so that no role gathers again
    (its own setup task is then skipped, no round trip); none gathers everything."""
    needs_hardware = set().union(*(facts_read(r) for r in ROLES)) & HARDWARE
    assert needs_hardware == {"processor"}
    plays = yaml.safe_load((REPO / "playbooks" / "preflight.yml").read_text())
    gathered = {}
    # (the first play forgets earlier runs' facts and gathers none: test_the_preflight_forgets_earlier_facts_...)
    for play in plays[1:]:
        setup = [t for t in play["tasks"] if "ansible.builtin.setup" in t]
        assert len(setup) == 1 and play["gather_facts"] is False, play["name"]
        gathered[play["hosts"]] = set(setup[0]["ansible.builtin.setup"]["gather_subset"])
    servers = gathered.pop("{{ blackwell_serving_hosts | default('gpu_servers') }}")
    # every subset a server role would gather for itself where no play did (its first task): gathered here, once
    own = set().union(*(yaml.safe_load((REPO / "roles" / r / "tasks" / "main.yml").read_text())[0]
                        ["ansible.builtin.setup"]["gather_subset"] for r in ROLES if facts_read(r)))
    assert servers == {"min", "network"} | own, "the servers' preflight gathers what their roles would gather again"
    assert gathered and all(subsets == {"min", "network"} for subsets in gathered.values()), gathered


def test_the_preflight_forgets_earlier_facts_once_before_any_play_gathers():
    """The fact cache merges what each run gathers into what it held: a converging run's package_facts (hundreds of
    kilobytes of installed packages on a real server) stayed in it for good, and every task of every later run
    decoded and copied it. preflight.yml's first play clears the cache of every host of the run, once, before any
    play gathers: a play of its own, since clear_facts clears every host of its play, so a host in two groups (a
    router on a GPU server) would lose in the second play what the first gathered (nvidia_gpu)."""
    plays = yaml.safe_load((REPO / "playbooks" / "preflight.yml").read_text())
    first, rest = plays[0], plays[1:]
    actions = [next(k for k in t if k.startswith("ansible.builtin.")) for t in first["tasks"]]
    assert "ansible.builtin.setup" not in actions and first["gather_facts"] is False
    assert [t["ansible.builtin.meta"] for t in first["tasks"] if "ansible.builtin.meta" in t] == ["clear_facts"]
    assert first["hosts"].split(":") == sorted({p["hosts"] for p in rest}, key=first["hosts"].split(":").index)
    for play in rest:
        assert not any("ansible.builtin.meta" in t for t in play["tasks"]), play["name"]


def test_the_forgetting_keeps_the_interpreter_found_and_nothing_else(tmp_path):
    """Run preflight.yml's first play on a cache that holds a package list and the interpreter found earlier: the
    packages are gone, the interpreter stays, and no module of the run looks for one again (a round trip or two per
    host and run where the inventory names none)."""
    plays = yaml.safe_load((REPO / "playbooks" / "preflight.yml").read_text())
    (tmp_path / "forget.yml").write_text(yaml.safe_dump([plays[0]], sort_keys=False))
    (tmp_path / "seed.yml").write_text(yaml.safe_dump([{"hosts": "gpu_servers", "gather_facts": False, "tasks": [
        {"name": "What a converging run leaves in the cache", "ansible.builtin.set_fact": {
            "discovered_interpreter_python": sys.executable, "packages": {"nvidia-driver": [{"version": "580"}]},
            "cacheable": True}}]}]))
    (tmp_path / "after.yml").write_text(yaml.safe_dump([{"hosts": "gpu_servers", "gather_facts": False, "tasks": [
        {"name": "A module", "ansible.builtin.ping": {}},
        {"name": "What is left", "ansible.builtin.copy": {"content": "{{ ansible_facts | to_json }}",
                                                         "dest": str(tmp_path / "left.json"), "mode": "0644"}}]}]))
    (tmp_path / "hosts.yml").write_text(yaml.safe_dump({"all": {"children": {
        "gpu_servers": {"hosts": {"h1": {"ansible_connection": "local"}}},
        "sglang_routers": {"hosts": {"h1": {}}}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_CACHE_PLUGIN="jsonfile",
               ANSIBLE_CACHE_PLUGIN_CONNECTION=str(tmp_path / "facts"), ANSIBLE_GATHERING="smart",
               ANSIBLE_INTERPRETER_PYTHON="auto_silent")
    runs = {}
    for play in ("seed", "forget", "after"):
        proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-vvv", "-i",
                               str(tmp_path / "hosts.yml"), str(tmp_path / f"{play}.yml")],
                              capture_output=True, text=True, env=env, timeout=PLAYBOOK_HANG_BOUND,
                              cwd=tmp_path)
        assert proc.returncode == 0, proc.stdout[-3000:]
        runs[play] = proc.stdout
    left = json.loads((tmp_path / "left.json").read_text())
    assert "packages" not in left
    assert left["discovered_interpreter_python"] == sys.executable
    assert "interpreter discovery" not in runs["after"].lower()


# the top-level names setup gives each fact (ansible_distribution, ...) when inject_facts_as_vars is on
INJECTED = re.compile(r"\bansible_(?!facts\b)(" + "|".join(sorted(MIN | HARDWARE | SET_ELSEWHERE | {
    "hostname", "fqdn", "nodename", "os_family", "all_ipv4_addresses", "interfaces", "default_ipv6", "date_time",
    "env", "lsb", "python", "python_version", "pkg_mgr", "service_mgr", "system", "machine", "user_id", "devices",
    "processor_vcpus", "processor_cores", "memory_mb", "virtualization_type", "virtualization_role"})) + r")\b")


def test_no_fact_is_read_by_its_top_level_name():
    """ansible.cfg sets inject_facts_as_vars = false (each task of a run copied every fact again as a top-level
    variable: a tenth of a no-op run's controller time), so a fact is only ever ansible_facts['name']."""
    cfg = (REPO / "ansible.cfg").read_text()
    assert re.search(r"^inject_facts_as_vars = false$", cfg, re.M)
    offenders = []
    for top in ("roles", "playbooks", "inventories", "molecule", "plugins", "lab", "benchmarks"):
        for path in (REPO / top).glob("**/*"):
            if path.is_file() and path.suffix in (".yml", ".yaml", ".j2", ".py", ".cfg", ".ini"):
                for n, line in enumerate(path.read_text(errors="replace").splitlines(), 1):
                    if INJECTED.search(line):
                        offenders.append(f"{path.relative_to(REPO)}:{n}: {line.strip()}")
    assert offenders == []
