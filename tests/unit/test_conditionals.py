"""Every conditional in the collection's YAML is a string (or a boolean), as ansible-core 2.19 requires.

A list item like `- x is search('^Status: manual$')` is a YAML mapping, not a string: the colon and space inside
make it one. Ansible fails it at run time ("Conditional expressions must be strings"), and only on the host where
the task runs, so a Molecule verify found it after a converge of several minutes. Reading the files here finds it
in a second.
"""
import pytest
import yaml

from conftest import REPO, yaml_tasks

CONDITION_KEYS = ("when", "failed_when", "changed_when", "until")
ASSERT_ACTIONS = ("assert", "ansible.builtin.assert", "ansible.legacy.assert")


def _yaml_files():
    files = []
    for pattern in ("roles/*/tasks/**/*.yml", "roles/*/handlers/*.yml", "playbooks/**/*.yml", "molecule/*/*.yml",
                    "tests/**/*.yml", "benchmarks/*.yml"):
        files.extend(REPO.glob(pattern))
    return sorted(set(files))


def _conditions(task):
    for key in CONDITION_KEYS:
        if key in task:
            yield key, task[key]
    for action in ASSERT_ACTIONS:
        if isinstance(task.get(action), dict) and "that" in task[action]:
            yield f"{action}.that", task[action]["that"]


def _bad(value):
    """The items of a conditional that are neither a string nor a boolean."""
    items = value if isinstance(value, list) else [value]
    return [item for item in items if not isinstance(item, (str, bool))]


def problems(text, name="<text>"):
    found = []
    for task in yaml_tasks(yaml.safe_load(text)):
        for key, value in _conditions(task):
            for item in _bad(value):
                found.append(f"{name}: {task.get('name', '(unnamed)')}: {key}: {item!r}")
    return found


def test_a_colon_inside_a_list_item_is_found():
    text = """
- name: An assertion
  ansible.builtin.assert:
    that:
      - x is defined
      - y.stdout is search('(?m)^Status: manual$')
"""
    assert problems(text) == [
        "<text>: An assertion: ansible.builtin.assert.that: {\"y.stdout is search('(?m)^Status\": \"manual$')\"}"
    ]


def test_nested_blocks_and_when_are_read():
    text = """
- block:
    - name: Inner
      ansible.builtin.debug:
      when:
        - a: b
"""
    assert problems(text) == ["<text>: Inner: when: {'a': 'b'}"]


def test_strings_and_booleans_pass():
    text = """
- name: Fine
  ansible.builtin.command: "true"
  changed_when: false
  failed_when: "'x: y' in out"
  when: [a, "b is search('c: d')"]
"""
    assert problems(text) == []


@pytest.mark.parametrize("path", _yaml_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_conditionals_are_strings(path):
    assert problems(path.read_text(), str(path.relative_to(REPO))) == []
