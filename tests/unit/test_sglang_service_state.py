"""sglang_service's user and config phases, run by ansible-playbook on this machine against a directory tree: their
desired state is data (vars/main.yml), which state.yml's one host_state read judges and the phases' tasks write.
What the writes leave, the read must find holding (else a converged host would run the writes on every run); what
differs, it must name and the writes must put back; and the files must be what the template and copy tasks the
loops replaced wrote, byte for byte. Check mode with diff shows the unit's diff and never the API key.

The user phase's group, user and package tasks change this machine's accounts and packages, so they are not run:
the read is asked about an account that is there (nobody), and the phase's directories are made from the same data
the phase writes. The lab runs the whole phase (tests/integration/test_site_lab.py: site.yml twice, the second
changing nothing)."""
import grp
import json
import os
import pwd
import stat
from pathlib import Path

import pytest

from conftest import REPO, run_local_playbook

ROLE = "blackwell.serving.sglang_service"
KEY = "sk-test-d0n0tl0g-7f3a"

try:
    NOBODY = pwd.getpwnam("nobody")
    GROUP = grp.getgrgid(NOBODY.pw_gid).gr_name
except KeyError:
    NOBODY = GROUP = None

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the phases' files are root's: chown needs root"),
    pytest.mark.skipif(NOBODY is None or NOBODY.pw_shell != "/usr/sbin/nologin",
                       reason="needs the account nobody with /usr/sbin/nologin (read as the service's user)"),
]

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  diff: true
  tasks:
    - ansible.builtin.setup:
        gather_subset: [min]
    - name: The read
      ansible.builtin.include_role:
        name: {role}
        tasks_from: state
        public: true
    - name: What it found
      ansible.builtin.set_fact:
        before: "{{{{ {{'holds': __sglang_service_holds, 'differences': __sglang_service_state.differences}} }}}}"
    - name: The phases' writes, and the read again
      when: write | bool
      block:
        # user.yml's directories, from the same data (its group, user and package tasks would change this machine)
        - blackwell.serving.host_files:
            files: "{{{{ __sglang_service_user_files }}}}"
        - ansible.builtin.include_role:
            name: {role}
            tasks_from: config_write
        # deploy.yml's inputs to the restart decision
        - ansible.builtin.set_fact:
            written:
              unit_changed: "{{{{ __sglang_service_unit_path in __sglang_service_written.changed_paths }}}}"
              env_changed: "{{{{ __sglang_service_env_path in __sglang_service_written.changed_paths }}}}"
        - ansible.builtin.include_role:
            name: {role}
            tasks_from: state
    - name: The record
      ansible.builtin.copy:
        content: >-
          {{{{ {{'before': before, 'written': written | default(none),
                'after': {{'holds': __sglang_service_holds, 'differences': __sglang_service_state.differences}}
                         if write | bool else none}} | to_json }}}}
        dest: "{{{{ out }}}}"
        mode: "0644"
      check_mode: false
      diff: false
    # what the template tasks the loop replaced wrote, to compare with: the role's templates and files, rendered by
    # ansible.builtin.template from a role of their own (the fixture's)
    - name: The old writers' files
      when: old | bool
      ansible.builtin.include_role:
        name: old_writers
"""
OLD_WRITERS = """
- ansible.builtin.template:
    src: "{{ item }}"
    dest: "{{ old_dir }}/{{ item }}"
    mode: "0600"
  loop: [sglang.service.j2, sglang.yaml.j2]
  check_mode: false
  no_log: true
"""


@pytest.fixture
def tree(tmp_path, monkeypatch):
    """The service's paths under tmp_path, and a systemd-analyze that notes the name of the unit it was asked about
    (the lab's is the real one: here the unit's release does not exist)."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    (bindir / "systemd-analyze").write_text(f'#!/bin/sh\nbasename "$2" >> {tmp_path}/verified\n')
    (bindir / "systemd-analyze").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    (tmp_path / "old").mkdir()
    role = tmp_path / "roles" / "old_writers"
    (role / "tasks").mkdir(parents=True)
    (role / "tasks" / "main.yml").write_text(OLD_WRITERS)
    for sub in ("templates", "files"):
        (role / sub).symlink_to(REPO / "roles" / "sglang_service" / sub)
    return tmp_path


def run(tree, check=False, old=False, write=True, **extra):
    out = tree / "out.json"
    proc = run_local_playbook(tree, PLAYBOOK.format(role=ROLE), {
        "out": str(out), "old": old, "write": write, "old_dir": str(tree / "old"),
        "sglang_service_user": "nobody", "sglang_service_group": GROUP, "sglang_service_home": NOBODY.pw_dir,
        "sglang_service_api_key": KEY,
        # dpkg is there wherever dpkg is read
        "__sglang_service_runtime_packages": ["dpkg"],
        "__sglang_service_conf_dir": str(tree / "etc" / "sglang"),
        "__sglang_service_unit_path": str(tree / "systemd" / "sglang.service"),
        "__sglang_service_startup_dir": str(tree / "home" / "python-startup"),
        "__sglang_service_current": str(tree / "home" / "current"), **extra}, check=check)
    return json.loads(out.read_text()), proc.stdout


def prepare(tree):
    (tree / "systemd").mkdir()
    (tree / "home" / "releases" / "r1").mkdir(parents=True)
    (tree / "home" / "current").symlink_to(tree / "home" / "releases" / "r1")


def owner_mode(path):
    st = path.lstat()
    return pwd.getpwuid(st.st_uid).pw_name, grp.getgrgid(st.st_gid).gr_name, oct(stat.S_IMODE(st.st_mode))


def test_what_the_writes_leave_the_read_finds_holding_as_the_old_tasks_left_it(tree):
    prepare(tree)
    got, _ = run(tree, old=True)
    assert not got["before"]["holds"]
    assert got["written"] == {"unit_changed": True, "env_changed": True}
    assert got["after"]["holds"], f"the read does not hold after the writes: {got['after']['differences']}"
    conf = tree / "etc" / "sglang"
    assert owner_mode(conf) == ("root", GROUP, "0o750")
    assert owner_mode(conf / "deployed") == ("root", GROUP, "0o700")
    assert owner_mode(tree / "home" / "python-startup") == ("root", "root", "0o755")
    assert owner_mode(tree / "home" / "python-startup" / "sitecustomize.py") == ("root", "root", "0o644")
    assert owner_mode(conf / "sglang.yaml") == ("root", GROUP, "0o640")
    assert owner_mode(tree / "systemd" / "sglang.service") == ("root", "root", "0o644")
    # byte for byte what the template and copy tasks wrote
    assert (conf / "sglang.yaml").read_bytes() == (tree / "old" / "sglang.yaml.j2").read_bytes()
    assert KEY in (conf / "sglang.yaml").read_text()
    assert (tree / "systemd" / "sglang.service").read_bytes() == (tree / "old" / "sglang.service.j2").read_bytes()
    assert (tree / "home" / "python-startup" / "sitecustomize.py").read_bytes() == \
        (REPO / "roles" / "sglang_service" / "files" / "sitecustomize.py").read_bytes()
    # the unit was checked under its own name before it was installed
    assert (tree / "verified").read_text().split() == ["sglang.service"]

    # every path the writes made is one the read judges: each changed, the read names each (a write outside the
    # data would be skipped on a converged host, and never made)
    made = [tree / "systemd" / "sglang.service"] + [
        p for top in (tree / "etc" / "sglang", tree / "home" / "python-startup") for p in [top, *top.rglob("*")]]
    assert len(made) == 6, made
    for path in made:
        path.chmod(path.stat().st_mode ^ 0o001)
    got, _ = run(tree, write=False)
    named = json.dumps(got["before"]["differences"])
    assert [str(p) for p in made if f'"{p} ' not in named] == [], named


def test_what_differs_is_named_put_back_and_only_the_unit_counts_as_the_unit(tree):
    prepare(tree)
    run(tree)
    conf = tree / "etc" / "sglang"
    (conf / "sglang.yaml").chmod(0o644)
    (conf / "sglang.env").write_text("OLD=1\n")
    startup = tree / "home" / "python-startup" / "sitecustomize.py"
    startup.write_text("# edited\n")
    got, _ = run(tree)
    assert not got["before"]["holds"]
    named = json.dumps(got["before"]["differences"])
    for path in (conf / "sglang.yaml", conf / "sglang.env", startup):
        assert str(path) in named, f"{path} not named in {named}"
    # the options file's mode changed (unit_deploy restarts on it); the start-up code is not the unit
    assert got["written"] == {"unit_changed": False, "env_changed": True}
    assert not (conf / "sglang.env").exists()
    assert got["after"]["holds"], got["after"]["differences"]


def test_check_mode_shows_the_units_diff_never_the_key_and_changes_nothing(tree):
    prepare(tree)
    run(tree)
    unit = tree / "systemd" / "sglang.service"
    options = tree / "etc" / "sglang" / "sglang.yaml"
    before = unit.read_bytes(), options.read_bytes()
    got, stdout = run(tree, check=True, sglang_service_served_model_name="another-name",
                      sglang_service_api_key=KEY + "-new")
    assert not got["before"]["holds"] and got["written"] == {"unit_changed": True, "env_changed": True}
    assert "another-name" in stdout, "check mode showed no diff of the unit"
    assert KEY not in stdout, "the API key was printed"
    assert (unit.read_bytes(), options.read_bytes()) == before
