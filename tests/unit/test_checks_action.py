"""blackwell.serving.checks: several checks in one task, each with its own message, evaluated in order and stopped at
the first that fails, as the row of assert tasks it replaces in the roles' preflights. Run by ansible-playbook."""
import json

import pytest

from conftest import run_local_playbook

try:
    from ansible.release import __version__ as ANSIBLE_CORE
except ImportError:  # no ansible-core in this interpreter: the tests below need one anyway
    ANSIBLE_CORE = "0"
# ansible-core 2.19 lets an action template its own arguments (finalize_task_arg); before, a task's arguments are
# templated before it runs, every message included, as assert's fail_msg is there
LAZY = tuple(int(x) for x in ANSIBLE_CORE.split(".")[:2]) >= (2, 19)
lazy_only = pytest.mark.skipif(not LAZY, reason=f"ansible-core {ANSIBLE_CORE} templates every message before the "
                                                 "task runs (2.19 and later: only the failing check's)")

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The checks
      blackwell.serving.checks:
        checks:
          - that:
              - branch is match('^[0-9]{3}$')
              - version.split('.')[0] == branch
            msg: "{{ inventory_hostname }}: version {{ version }} is not of branch {{ branch }}"
          # reads what the first check vouches for: not evaluated where it failed
          - that: branch | int >= 570 and __parts | length == 3
            msg: "branch {{ branch }} is too old {{ only_where_this_check_fails | default('(templated)') }}"
          - that: __later | bool
            msg: "the last check: {{ undefined_unless_it_fails }}"
      vars:
        __parts: "{{ version.split('.') }}"
        __later: "{{ version is not search('9$') }}"
      register: result
      ignore_errors: true

    - name: Write what it returned
      ansible.builtin.copy:
        content: "{{ result | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
"""


def run(tmp_path, playbook=PLAYBOOK, **extra):
    out = tmp_path / "result.json"
    proc = run_local_playbook(tmp_path, playbook, {"out": str(out), **extra})
    return json.loads(out.read_text()), proc.stdout


@lazy_only
def test_all_checks_pass_without_templating_a_message(tmp_path):
    result, _ = run(tmp_path, branch="580", version="580.95.05")
    assert result.get("failed") is not True and result["changed"] is False
    assert result["msg"] == "all 3 checks passed"


@pytest.mark.parametrize("branch, version, check, assertion, msg", [
    # the first condition fails: the second (split) is not evaluated, nor any later check
    ("58x", "580.95.05", 1, "branch is match('^[0-9]{3}$')", "localhost: version 580.95.05 is not of branch 58x"),
    ("581", "580.95.05", 1, "version.split('.')[0] == branch", "localhost: version 580.95.05 is not of branch 581"),
    ("560", "560.35", 2, "branch | int >= 570 and __parts | length == 3", "branch 560 is too old (templated)"),
    ("580", "580.95.09", 3, "__later | bool", None),
])
def test_the_first_failing_check_stops_with_its_own_message(tmp_path, branch, version, check, assertion, msg):
    if not LAZY:
        # every message is templated before the checks run there: the last one must template on any input
        result, out = run(tmp_path, PLAYBOOK.replace("{{ undefined_unless_it_fails }}", "{{ version }}"),
                          branch=branch, version=version)
        assert result["failed"] is True
        if msg is not None:
            assert (result["check"], result["assertion"], result["msg"]) == (check, assertion, msg)
        else:
            assert result["check"] == check and result["msg"] == f"the last check: {version}"
        return
    result, out = run(tmp_path, branch=branch, version=version)
    assert result["failed"] is True
    if msg is None:
        # the failing check's message is templated, and only then: here it names an undefined variable
        assert "undefined_unless_it_fails" in result["msg"]
    else:
        assert (result["check"], result["assertion"], result["msg"]) == (check, assertion, msg)


@pytest.mark.parametrize("checks, error", [
    ("[]", "checks must be a non-empty list"),
    ("[{that: 'true'}]", "check 1: expected a mapping with exactly the keys that and msg"),
    ("[{that: 'true', msg: a, fail_msg: b}]", "check 1: expected a mapping with exactly the keys that and msg"),
    ("[{that: [], msg: a}]", "check 1: that must be a condition or a list of conditions"),
])
def test_malformed_checks_are_refused_by_name(tmp_path, checks, error):
    playbook = PLAYBOOK.split("        checks:\n")[0] + f"        checks: {checks}\n      register: result\n" \
        "      ignore_errors: true\n\n" + "    - name: Write" + PLAYBOOK.split("    - name: Write")[1]
    result, _ = run(tmp_path, playbook)
    assert result["failed"] is True and error in result["msg"], result


def test_assert_options_are_refused(tmp_path):
    playbook = PLAYBOOK.replace("        checks:\n", "        quiet: true\n        checks:\n", 1)
    playbook = playbook.replace("{{ undefined_unless_it_fails }}", "{{ version }}")
    result, _ = run(tmp_path, playbook, branch="580", version="580.95.05")
    assert result["failed"] is True and "unsupported options ['quiet']" in result["msg"]


def test_plain_booleans_are_conditions_as_assert_takes_them(tmp_path):
    playbook = PLAYBOOK.split("        checks:\n")[0] + (
        "        checks:\n          - that: true\n            msg: never\n"
        "          - that: [true, false]\n            msg: the second\n"
        "      register: result\n      ignore_errors: true\n\n") + "    - name: Write" + PLAYBOOK.split("    - name: Write")[1]
    result, _ = run(tmp_path, playbook)
    assert (result["failed"], result["check"], result["assertion"], result["msg"]) == (True, 2, False, "the second")
