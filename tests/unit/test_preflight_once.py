"""A role's main entry point skips its preflight checks where they passed on the same inputs earlier in the run.

The inputs are a digest of the variables named by the role's `__<role>_preflight_inputs` pattern. A variable that
the run itself sets between the preflight play and the role's main entry point (a registered result or a set_fact
of any role, or a variable a playbook passes to the main entry point and not to the preflight) changes the digest,
and the checks run a second time on every host and every run: nvidia_driver's did, after its GPU read was
registered as nvidia_driver_gpus_read and while site.yml passes nvidia_driver_reboot_deferred (12 tasks, 2 round
trips of a no-op run).
"""
import re

import pytest
import yaml

from conftest import REPO, yaml_tasks

INPUTS = re.compile(r"^(__(\w+)_preflight_inputs):\s*(?:>-\s*)?(.*?)(?=^\S)", re.M | re.S)
PATTERN = re.compile(r"varnames',\s*'([^']+)'")


def patterns():
    found = {}
    for path in sorted((REPO / "roles").glob("*/vars/main.yml")):
        for m in INPUTS.finditer(path.read_text() + "\nend: true\n"):
            found[m.group(2)] = PATTERN.search(m.group(3)).group(1)
    return found


def all_tasks():
    files = list((REPO / "roles").glob("*/tasks/*.yml")) + list((REPO / "roles").glob("*/handlers/*.yml"))
    files += list((REPO / "playbooks").glob("*.yml"))
    for path in files:
        for task in yaml_tasks(yaml.safe_load(path.read_text()) or []):
            yield path, task


def set_by_the_run():
    """Every variable a task registers or sets with set_fact."""
    names = {}
    for path, task in all_tasks():
        if isinstance(task.get("register"), str):
            names.setdefault(task["register"], path.relative_to(REPO))
        facts = task.get("ansible.builtin.set_fact")
        if isinstance(facts, dict):
            for name in facts:
                if name != "cacheable":
                    names.setdefault(name, path.relative_to(REPO))
    return names


def passed_to(role, playbooks, entry):
    """The variables the playbooks pass to a role's entry point (import_role/include_role with vars)."""
    names = set()
    for play in playbooks:
        for _path, task in ((p, t) for p, t in all_tasks() if p.name == play):
            call = task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role")
            if not isinstance(call, dict) or call.get("name") != f"blackwell.serving.{role}":
                continue
            if call.get("tasks_from", "main") == entry:
                names |= set(task.get("vars") or {})
    return names


ROLES = patterns()


def test_the_pattern_is_found_for_each_role_that_skips_its_preflight():
    skipping = {p.parent.parent.name for p in (REPO / "roles").glob("*/tasks/main.yml")
                if "_preflight_passed | default('') != " in p.read_text()}
    assert skipping and skipping == set(ROLES)


@pytest.mark.parametrize("role", sorted(ROLES))
def test_nothing_the_run_sets_is_an_input(role):
    pattern = re.compile(ROLES[role])
    outputs = {name: str(where) for name, where in set_by_the_run().items() if pattern.search(name)}
    assert outputs == {}, f"{role}: set during the run, yet part of its preflight's inputs (exclude them)"


@pytest.mark.parametrize("role", sorted(ROLES))
def test_the_main_entry_point_gets_the_inputs_its_preflight_got(role):
    pattern = re.compile(ROLES[role])
    main = passed_to(role, ["site.yml", "repin.yml"], "main")
    preflight = passed_to(role, ["preflight.yml"], "preflight")
    differ = sorted(n for n in main - preflight if pattern.search(n))
    assert differ == [], f"{role}: the playbooks pass these to its main entry point only, and its key reads them"
