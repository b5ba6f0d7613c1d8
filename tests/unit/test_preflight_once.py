"""A role's main entry point skips its preflight checks where they passed on the same inputs earlier in the run.

The inputs are the options of the role's argument spec (entry point main), plus the other roles' variables and the
host facts its checks read, as a digest (filter inputs_digest, in each role's `__<role>_preflight_key`). A variable
that the run itself sets between the preflight play and the role's main entry point (a registered result or a
set_fact of any role, or a variable a playbook passes to the main entry point and not to the preflight) must not
change it, or the checks run a second time on every host and every run: nvidia_driver's did, after its GPU read was
registered as nvidia_driver_gpus_read and while site.yml passes nvidia_driver_reboot_deferred (12 tasks, 2 round
trips of a no-op run). A changed input must change it, so that the checks see it.
"""
import json

import jinja2
import pytest
import yaml
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.filter import preflight as filters
from conftest import REPO, run_local_playbook, yaml_tasks

SPEC = """argument_specs:
  main:
    short_description: a role
    options:
      probe_a: {type: str, description: an input}
      probe_b: {type: list, elements: str, description: another}
      probe_quiet: {type: bool, description: read by no check}
  other:
    short_description: another entry point
    options:
      probe_other_only: {type: str, description: not an input of main}
"""


def make_role(root, spec=SPEC):
    (root / "meta").mkdir(parents=True, exist_ok=True)
    (root / "meta" / "argument_specs.yml").write_text(spec)
    return str(root)


def render(role, variables, args=""):
    env = jinja2.Environment(undefined=jinja2.StrictUndefined)
    env.filters["inputs_digest"] = filters.inputs_digest
    return env.from_string("{{ role_path | inputs_digest(%s) }}" % args).render(dict(variables, role_path=role))


BASE = {"probe_a": "x", "probe_b": ["1", "2"], "probe_quiet": False, "probe_out": "set by the role",
        "other_url": "https://a", "ansible_facts": {"nvidia_gpu": {"count": 8}, "os_family": "Debian"}}
ARGS = "others=['other_url'], facts=['nvidia_gpu'], unread=['probe_quiet']"


@pytest.mark.parametrize("change, differs", [
    ({"probe_a": "y"}, True),
    ({"probe_b": ["1"]}, True),
    ({"probe_a": None}, True),
    ({"other_url": "https://b"}, True),
    ({"ansible_facts": {"nvidia_gpu": {"count": 7}, "os_family": "Debian"}}, True),
    # an output the role sets, an option of another entry point, an unread option, a fact no check reads
    ({"probe_out": "set again"}, False),
    ({"probe_other_only": "z"}, False),
    ({"probe_quiet": True}, False),
    ({"ansible_facts": {"nvidia_gpu": {"count": 8}, "os_family": "RedHat"}}, False),
])
def test_the_digest_changes_with_an_input_and_with_nothing_else(tmp_path, change, differs):
    role = make_role(tmp_path / "probe")
    assert (render(role, BASE, ARGS) != render(role, dict(BASE, **change), ARGS)) is differs


def test_the_digest_is_over_names_and_values_not_their_order(tmp_path):
    role = make_role(tmp_path / "probe")
    one = render(role, {"probe_a": {"k": 1, "j": [2]}, "probe_b": []})
    assert one == render(role, {"probe_b": [], "probe_a": {"j": [2], "k": 1}})
    # a value moved to another name is another input
    assert render(role, {"probe_a": "v"}) != render(role, {"probe_b": "v"})
    # an undefined input is left out; defined, even empty, it counts
    assert render(role, {"probe_a": "v"}) != render(role, {"probe_a": "v", "probe_b": []})
    assert len(one) == 64 and int(one, 16) >= 0


def test_the_argument_spec_is_read_once_while_the_file_stays_the_same(tmp_path, monkeypatch):
    role = make_role(tmp_path / "probe")
    first = render(role, BASE)
    opened = []
    real_open = open
    monkeypatch.setattr("builtins.open", lambda *a, **k: opened.append(a[0]) or real_open(*a, **k))
    assert render(role, BASE) == first and opened == []
    # an option added to the spec is an input from then on
    make_role(tmp_path / "probe", SPEC.replace("    options:\n", "    options:\n      probe_out: {type: str}\n", 1))
    assert render(role, BASE) != first and len(opened) == 1


@pytest.mark.parametrize("spec, args, message", [
    (None, "", "no argument spec for the role at"),
    ("argument_specs:\n  other:\n    options: {x: {type: str}}\n", "", "gives the entry point main no options"),
    ("argument_specs:\n  main:\n    short_description: none\n", "", "gives the entry point main no options"),
    ("argument_specs: [\n", "", "is not YAML"),
    (SPEC, "unread=['probe_typo']", "unread names probe_typo, not options of the role's entry point main"),
    (SPEC, "others=['probe_a']", "others names probe_a, options of the role itself"),
    (SPEC, "others='other_url'", "others is a list of variable names"),
])
def test_an_unknown_or_wrong_argument_spec_stops_with_its_path(tmp_path, spec, args, message):
    role = tmp_path / "probe"
    role.mkdir()
    if spec is not None:
        make_role(role, spec)
    with pytest.raises(AnsibleFilterError, match="inputs_digest: ") as err:
        render(str(role), BASE, args)
    assert message in str(err.value)
    if spec is None:
        assert str(role / "meta" / "argument_specs.yml") in str(err.value)


def test_outside_a_role_it_says_role_path_is_missing(tmp_path):
    env = jinja2.Environment()
    env.filters["inputs_digest"] = filters.inputs_digest
    with pytest.raises(AnsibleFilterError, match="role_path is not defined"):
        env.from_string("{{ role_path | inputs_digest }}").render({})


# The mechanism as a role uses it, under ansible-playbook: the key in vars/main.yml, the checks included where it
# differs from what they passed on, an input changed by a second include_role's vars, an output set in between.
PROBE_TASKS = {
    "main.yml": [{"name": "Checks, unless they passed on these inputs", "ansible.builtin.include_tasks": "preflight.yml",
                  "when": "__probe_preflight_passed | default('') != __probe_preflight_key"}],
    "preflight.yml": [
        {"name": "A check", "ansible.builtin.set_fact": {"probe_checks": "{{ probe_checks + [probe_a ~ ' ' ~ probe_b[0]] }}"}},
        {"name": "Passed", "ansible.builtin.set_fact": {"__probe_preflight_passed": "{{ __probe_preflight_key }}"}}],
}
PROBE = {"ansible.builtin.include_role": {"name": "probe"}}
PROBE_PLAY = [{"hosts": "all", "gather_facts": False, "tasks": [
    dict(PROBE, name="First"),
    dict(PROBE, name="Same inputs"),
    {"name": "An output of the role", "ansible.builtin.set_fact": {"probe_out": "changed"}},
    dict(PROBE, name="Same inputs again"),
    {"name": "Another role's variable the checks read", "ansible.builtin.set_fact": {"other_url": "https://b"}},
    dict(PROBE, name="Checked again"),
    {"name": "What an input's template reads", "ansible.builtin.set_fact": {"probe_base": "/srv"}},
    dict(PROBE, name="Checked on the input's new value"),
    dict(PROBE, name="An input changed", vars={"probe_a": "two"}),
    dict(PROBE, name="The same change", vars={"probe_a": "two"}),
    {"name": "Say which ran", "ansible.builtin.copy": {
        "content": "{{ probe_checks | to_json }}", "dest": "{{ playbook_dir }}/checks.json", "mode": "0644"}}],
    "vars": {"probe_checks": [], "other_url": "https://a", "probe_base": "/opt"}}]


def test_a_role_checks_again_on_changed_inputs_only(tmp_path):
    role = tmp_path / "roles" / "probe"
    make_role(role)
    (role / "defaults").mkdir()
    (role / "defaults" / "main.yml").write_text("probe_a: one\nprobe_b: ['{{ probe_base }}/b']\nprobe_quiet: false\n")
    (role / "vars").mkdir()
    (role / "vars" / "main.yml").write_text(
        "__probe_preflight_key: \"{{ role_path | blackwell.serving.inputs_digest(others=['other_url']) }}\"\n")
    (role / "tasks").mkdir()
    for name, tasks in PROBE_TASKS.items():
        (role / "tasks" / name).write_text(yaml.safe_dump(tasks))
    run_local_playbook(tmp_path, yaml.safe_dump(PROBE_PLAY), {})
    assert json.loads((tmp_path / "checks.json").read_text()) == ["one /opt/b", "one /opt/b", "one /srv/b", "two /srv/b"]


# The collection's roles: their own key, evaluated by ansible-playbook with the role's defaults and vars
def all_tasks():
    files = list((REPO / "roles").glob("*/tasks/*.yml")) + list((REPO / "roles").glob("*/handlers/*.yml"))
    files += list((REPO / "playbooks").glob("*.yml"))
    for path in files:
        for task in yaml_tasks(yaml.safe_load(path.read_text()) or []):
            yield path, task


def set_by_the_run():
    """Every variable a task registers or sets with set_fact."""
    names = set()
    for _path, task in all_tasks():
        if isinstance(task.get("register"), str):
            names.add(task["register"])
        facts = task.get("ansible.builtin.set_fact")
        if isinstance(facts, dict):
            names |= set(facts) - {"cacheable"}
    return names


def passed_to(role, playbooks, entry):
    """The variables the playbooks pass to a role's entry point (import_role/include_role with vars)."""
    names = set()
    for path, task in all_tasks():
        if path.name not in playbooks or path.parent.name != "playbooks":
            continue
        call = task.get("ansible.builtin.import_role") or task.get("ansible.builtin.include_role")
        if isinstance(call, dict) and call.get("name") == f"blackwell.serving.{role}" \
                and call.get("tasks_from", "main") == entry:
            names |= set(task.get("vars") or {})
    return names


def options(role):
    spec = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())
    return sorted(spec["argument_specs"]["main"]["options"])


ROLES = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/vars/main.yml")
               if f"__{p.parent.parent.name}_preflight_key:" in p.read_text())


def test_the_roles_that_skip_their_preflight_have_a_key():
    skipping = {p.parent.parent.name for p in (REPO / "roles").glob("*/tasks/main.yml")
                if "_preflight_key" in p.read_text()}
    assert skipping and skipping == set(ROLES)


@pytest.fixture(scope="module")
def role_keys(tmp_path_factory):
    """For each role: its key as the preflight computes it, after the run set the role's outputs, with the variables
    the playbooks give the main entry point alone, and with its first option changed."""
    tmp = tmp_path_factory.mktemp("keys")
    outputs = set_by_the_run()
    plays = []
    for role in ROLES:
        mine = {n: "set by the run" for n in sorted(outputs) if n.startswith(role + "_")}
        main_only = {n: "given to main" for n in passed_to(role, ["site.yml", "repin.yml"], "main")
                     - passed_to(role, ["preflight.yml"], "preflight")}
        first = options(role)[0]
        record = {"__keys": "{{ __keys | default({}) | combine({'%s': {stage: key}}, recursive=true) }}" % role}
        plays.append({
            "name": role, "hosts": "all", "gather_facts": False,
            "vars": {"role_path": str(REPO / "roles" / role), "key": "{{ __%s_preflight_key }}" % role},
            "vars_files": [str(REPO / "roles" / role / "defaults" / "main.yml"),
                           str(REPO / "roles" / role / "vars" / "main.yml")],
            "tasks": [
                {"name": "Before", "ansible.builtin.set_fact": record, "vars": {"stage": "before"}},
                {"name": "Main only", "ansible.builtin.set_fact": record, "vars": dict(main_only, stage="main_only")},
                {"name": "Changed", "ansible.builtin.set_fact": record, "vars": {first: "changed", "stage": "changed"}},
                {"name": "Outputs", "ansible.builtin.set_fact": mine} if mine else
                {"name": "Outputs", "ansible.builtin.meta": "noop"},
                {"name": "After", "ansible.builtin.set_fact": record, "vars": {"stage": "after"}},
            ]})
    plays.append({"name": "Write", "hosts": "all", "gather_facts": False, "tasks": [
        {"name": "Keys", "ansible.builtin.copy": {
            "content": "{{ __keys | to_json }}", "dest": str(tmp / "keys.json"), "mode": "0644"}}]})
    run_local_playbook(tmp, yaml.safe_dump(plays), {})
    return json.loads((tmp / "keys.json").read_text())


@pytest.mark.parametrize("role", ROLES)
def test_nothing_the_run_sets_is_an_input(role_keys, role):
    assert role_keys[role]["after"] == role_keys[role]["before"], \
        f"{role}: a variable the run sets changes its preflight key (make it no option of the role's main entry point)"


@pytest.mark.parametrize("role", ROLES)
def test_the_main_entry_point_gets_the_inputs_its_preflight_got(role_keys, role):
    assert role_keys[role]["main_only"] == role_keys[role]["before"], \
        f"{role}: the playbooks pass variables to its main entry point only, and its key reads them"


@pytest.mark.parametrize("role", ROLES)
def test_a_changed_input_is_checked_again(role_keys, role):
    assert role_keys[role]["changed"] != role_keys[role]["before"]


def test_the_key_is_evaluated_for_every_role(role_keys):
    assert sorted(role_keys) == ROLES
    assert all(len(k) == 64 for keys in role_keys.values() for k in keys.values())
