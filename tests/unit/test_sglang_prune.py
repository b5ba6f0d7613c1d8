"""sglang's prune, run by ansible-playbook on this machine against a directory tree: on a converged host it takes
the releases from state.yml's one read (host_state read entries) instead of a find of its own; what it removes
must be what the find's list removed: the releases beyond the newest sglang_releases_keep by modification time,
never the current one nor the previous, never a hidden directory (find leaves those out), a link or a file."""
import getpass
import grp
import json
import os
from pathlib import Path

from conftest import run_local_playbook

ROLE = "blackwell.serving.sglang"

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The release this pin set would build
      ansible.builtin.include_role:
        name: {role}
        tasks_from: state
        public: true
    - name: The pin set's release, complete and current where asked
      when: current | bool
      check_mode: false
      block:
        - ansible.builtin.file:
            path: "{{{{ __sglang_release_dir }}}}"
            state: directory
            mode: "0755"
        - ansible.builtin.copy:
            content: "{{}}\\n"
            dest: "{{{{ __sglang_release_dir }}}}/.release.json"
            mode: "0644"
        - ansible.builtin.file:
            src: "{{{{ __sglang_release_dir }}}}"
            dest: "{{{{ sglang_home }}}}/current"
            state: link
            follow: false
    - ansible.builtin.include_role:
        name: {role}
        tasks_from: state
    - ansible.builtin.include_role:
        name: {role}
        tasks_from: prune
    - ansible.builtin.copy:
        content: "{{{{ {{'holds': __sglang_state.holds, 'release': __sglang_release_dir}} | to_json }}}}"
        dest: "{{{{ out }}}}"
        mode: "0644"
      check_mode: false
"""


def run_prune(tmp_path, current, check=False):
    out = tmp_path / "out.json"
    home = tmp_path / "home"
    run_local_playbook(tmp_path, PLAYBOOK.format(role=ROLE), {
        "out": str(out), "current": current, "sglang_home": str(home), "sglang_commit": "f" * 40,
        "sglang_releases_keep": 2, "sglang_user": getpass.getuser(), "sglang_group": grp.getgrgid(os.getgid()).gr_name,
        "uv_venv_envs": {str(home / "venv"): {"uv": "/usr/bin/uv", "interpreter": "/usr/bin/python3"}}}, check=check)
    return json.loads(out.read_text())


def make_tree(tmp_path):
    """Releases r1 (oldest) to r5; the pin set's own release is made newest by the playbook's marker."""
    releases = tmp_path / "home" / "releases"
    for age, name in enumerate(["r5", "r4", "r3", "r2", "r1", ".partial"]):
        (releases / name).mkdir(parents=True)
        os.utime(releases / name, (1_000_000 - age * 1000, 1_000_000 - age * 1000))
    (releases / "link").symlink_to(releases / "r1")
    (releases / "notes.txt").write_text("kept\n")
    os.utime(releases / "notes.txt", (1, 1))
    return releases


def test_a_converged_host_prunes_from_the_read_what_the_find_would_have(tmp_path):
    releases = make_tree(tmp_path)
    got = run_prune(tmp_path, current=True)
    assert got["holds"], "state.yml's read should hold on a converged tree"
    own = Path(got["release"]).name
    # kept: the two newest (the pin set's own, made last, and r5), hidden, links and files; the rest pruned
    assert sorted(p.name for p in releases.iterdir()) == sorted([own, "r5", ".partial", "link", "notes.txt"])


def test_check_mode_prunes_nothing(tmp_path):
    releases = make_tree(tmp_path)
    got = run_prune(tmp_path, current=True, check=True)
    assert got["holds"]
    assert {"r1", "r2", "r3", "r4", "r5"} <= {p.name for p in releases.iterdir()}


def test_a_host_where_the_read_does_not_hold_lists_the_releases_itself(tmp_path):
    releases = make_tree(tmp_path)
    got = run_prune(tmp_path, current=False)
    assert not got["holds"]
    assert sorted(p.name for p in releases.iterdir()) == sorted(["r5", "r4", ".partial", "link", "notes.txt"])
