"""sglang's state.yml, run by ansible-playbook on this machine against a directory tree: its one host_state read says
whether the release of this pin set is complete (__sglang_release_complete, which decides the build) and where
current points (__sglang_previous, which the messages and the prune name), as the stat module finds them (a link not
followed, where it resolves to), on a converged host, a fresh one, and between releases."""
import getpass
import grp
import json
import os

import pytest

from conftest import run_local_playbook

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: blackwell.serving.sglang
        tasks_from: state
        public: true
    # what the stat module finds, to compare with
    - ansible.builtin.stat:
        path: "{{ __sglang_release_dir }}/.release.json"
      register: marker
    - ansible.builtin.stat:
        path: "{{ sglang_home }}/current"
      register: current
    - ansible.builtin.copy:
        content: "{{ {'holds': __sglang_state.holds, 'complete': __sglang_release_complete, 'previous': __sglang_previous,
                      'release': __sglang_release_dir, 'marker': marker.stat.exists,
                      'current': current.stat.lnk_source | default('') if current.stat.islnk | default(false) else ''}
                     | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""


def run_state(tmp_path, check=False):
    out = tmp_path / "out.json"
    home = tmp_path / "home"
    run_local_playbook(tmp_path, PLAYBOOK, {
        "out": str(out), "sglang_home": str(home), "sglang_commit": "f" * 40,
        "sglang_user": getpass.getuser(), "sglang_group": grp.getgrgid(os.getgid()).gr_name,
        "uv_venv_envs": {str(home / "venv"): {"uv": "/usr/bin/uv", "interpreter": "/usr/bin/python3"}}}, check=check)
    return json.loads(out.read_text())


def release_dir(tmp_path):
    """The pin set's release directory, as state.yml names it (a first run on an empty home)."""
    return run_state(tmp_path)["release"]


@pytest.mark.parametrize("check", [False, True])
def test_a_fresh_host_has_no_release_and_no_current(tmp_path, check):
    got = run_state(tmp_path, check=check)
    assert got["holds"] is False and got["complete"] is False and got["previous"] == ""
    assert got["marker"] is False and got["current"] == ""


def test_a_converged_host_holds(tmp_path):
    release = release_dir(tmp_path)
    os.makedirs(release)
    with open(os.path.join(release, ".release.json"), "w") as fh:
        fh.write("{}\n")
    os.symlink(release, tmp_path / "home" / "current")
    got = run_state(tmp_path)
    assert got["holds"] is True and got["complete"] is True and got["previous"] == release


def test_a_complete_release_beside_the_one_in_service(tmp_path):
    """Staged (repin.yml) but not switched: complete, and current still on the other release, where it resolves to."""
    release = release_dir(tmp_path)
    os.makedirs(release)
    with open(os.path.join(release, ".release.json"), "w") as fh:
        fh.write("{}\n")
    other = tmp_path / "home" / "releases" / "other"
    other.mkdir()
    # written relative, resolved as stat's lnk_source resolves it
    os.symlink("releases/other", tmp_path / "home" / "current")
    got = run_state(tmp_path)
    assert got["holds"] is False and got["complete"] is True
    assert got["previous"] == str(other) == got["current"]


def test_an_interrupted_build_is_no_complete_release_and_current_no_link_is_nothing(tmp_path):
    release = release_dir(tmp_path)
    os.makedirs(os.path.join(release, "src"))
    (tmp_path / "home" / "current").mkdir()
    got = run_state(tmp_path)
    assert got["holds"] is False and got["complete"] is False and got["marker"] is False
    assert got["previous"] == "" == got["current"]
