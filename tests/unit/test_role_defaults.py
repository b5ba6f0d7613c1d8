"""role_defaults: the other roles' defaults that verify falls back on, read as from_yaml reads them, once per process."""
from pathlib import Path

import pytest
from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.filter import verify as filters

REPO = Path(__file__).resolve().parents[2]


def test_reads_merges_and_picks_names_like_the_files_say(tmp_path):
    for role, text in (("a", "x: 1\ny: '{{ z }}'\n"), ("b", "y: 2\nw: [1]\n")):
        (tmp_path / role / "defaults").mkdir(parents=True)
        (tmp_path / role / "defaults" / "main.yml").write_text(text)
    assert filters.role_defaults(["a", "b"], str(tmp_path)) == {"x": 1, "y": 2, "w": [1]}
    # a template in a defaults file stays text, as from_yaml leaves it
    assert filters.role_defaults(["a"], str(tmp_path), ["y"]) == {"y": "{{ z }}"}
    # a changed file is read again; what a caller changes in a result is not kept
    got = filters.role_defaults(["b"], str(tmp_path))
    got["w"].append(2)
    (tmp_path / "b" / "defaults" / "main.yml").write_text("y: 3\nw: [1]\nv: true\n")
    assert filters.role_defaults(["b"], str(tmp_path)) == {"y": 3, "w": [1], "v": True}


def test_the_collections_roles_give_verify_its_pins():
    got = filters.role_defaults(["nvidia_driver", "sglang"], str(REPO / "roles"), ["nvidia_driver_version", "sglang_commit"])
    assert set(got) == {"nvidia_driver_version", "sglang_commit"}


def test_errors_name_what_is_wrong(tmp_path):
    with pytest.raises(AnsibleFilterError, match="cannot read"):
        filters.role_defaults(["missing"], str(tmp_path))
    with pytest.raises(AnsibleFilterError, match="list of role names"):
        filters.role_defaults("sglang", str(tmp_path))
