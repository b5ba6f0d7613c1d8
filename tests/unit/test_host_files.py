"""host_files writes the entries a role's state read judges: after it, host_state reads the same entries as holding;
check mode changes nothing and says what a real run changes; a second run changes nothing; a secret's content is in
no diff and no output; a bad entry or a failed validation stops it with the paths before untouched."""
import json
import os

from conftest import run_local_playbook

PLAYBOOK = """
- name: A phase's desired state, written and read back
  hosts: localhost
  gather_facts: false
  vars:
    entries:
      - path: "{{ root }}/conf"
        state: directory
        mode: "0750"
      - path: "{{ root }}/conf/server.yaml"
        content: "api_key: {{ key }}\\n"
        mode: "0640"
        secret: true
      - path: "{{ root }}/conf/unit.service"
        content: "[Unit]\\nDescription={{ description }}\\n"
        mode: "0644"
        validate: "{{ validate }}"
      - path: "{{ root }}/current"
        state: link
        src: "{{ root }}/conf"
      - path: "{{ root }}/old.env"
        state: absent
      # a setting that turns a file off: its content omitted (a none would be the string "None" before 2.19)
      - path: "{{ root }}/off.conf"
        state: "{{ 'file' if on | default(false) else 'absent' }}"
        content: "{{ 'on\\n' if on | default(false) else omit }}"
        mode: "0644"
  tasks:
    - name: Write them
      blackwell.serving.host_files:
        files: "{{ entries }}"
      register: written
    - name: Read them as the state read does (the same entries)
      blackwell.serving.host_state:
        files: "{{ entries }}"
      register: read
    - name: Keep what they said
      ansible.builtin.copy:
        content: "{{ {'written': written, 'holds': read.holds} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
      diff: false
"""


def run(tmp_path, *flags, key="k-1", description="one", validate="true %s", entries=None):
    pb = PLAYBOOK if entries is None else PLAYBOOK.replace("files: \"{{ entries }}\"", f"files: {json.dumps(entries)}")
    out = tmp_path / "said.json"
    out.unlink(missing_ok=True)
    extra = {"root": str(tmp_path / "root"), "key": key, "description": description, "validate": validate,
             "out": str(out)}
    proc = run_local_playbook(tmp_path, pb, extra, flags=flags, env={"ANSIBLE_NOCOLOR": "1"}, must_pass=False)
    said = json.loads(out.read_text()) if out.exists() else None
    return proc, said


def test_check_mode_then_a_run_then_nothing_left_to_change(tmp_path):
    root = tmp_path / "root"
    root.mkdir()
    (root / "old.env").write_text("API_KEY=old\n")
    proc, said = run(tmp_path, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert said["written"]["changed"] and not said["holds"]
    # check mode wrote nothing, and said which paths a run changes
    assert sorted(os.listdir(root)) == ["old.env"]
    assert set(said["written"]["changed_paths"]) == {str(root / p) for p in
                                                      ("conf", "conf/server.yaml", "conf/unit.service", "current",
                                                       "old.env")}
    proc, said = run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert said["written"]["changed"] and said["holds"], said
    assert oct((root / "conf").stat().st_mode & 0o777) == "0o750"
    assert (root / "conf" / "server.yaml").read_text() == "api_key: k-1\n"
    assert oct((root / "conf" / "server.yaml").stat().st_mode & 0o777) == "0o640"
    assert os.readlink(root / "current") == str(root / "conf") and not (root / "old.env").exists()
    assert not (root / "off.conf").exists()
    proc, said = run(tmp_path)
    assert proc.returncode == 0 and not said["written"]["changed"] and said["written"]["changed_paths"] == []
    assert said["holds"]
    # the setting turned on, then off again
    proc, said = run(tmp_path, "-e", "on=true")
    assert proc.returncode == 0 and said["written"]["changed_paths"] == [str(root / "off.conf")] and said["holds"]
    assert (root / "off.conf").read_text() == "on\n"
    proc, said = run(tmp_path)
    assert proc.returncode == 0 and said["written"]["changed_paths"] == [str(root / "off.conf")] and said["holds"]
    assert not (root / "off.conf").exists()


def test_a_diff_shows_what_changes_but_never_a_secret(tmp_path):
    assert run(tmp_path)[0].returncode == 0
    proc, said = run(tmp_path, "--diff", key="k-2-new-secret", description="two")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert said["written"]["changed_paths"] == [str(tmp_path / "root" / "conf" / p) for p in
                                                ("server.yaml", "unit.service")]
    assert "+Description=two" in proc.stdout and "-Description=one" in proc.stdout
    assert "k-2-new-secret" not in proc.stdout + proc.stderr + json.dumps(said)
    assert (tmp_path / "root" / "conf" / "server.yaml").read_text() == "api_key: k-2-new-secret\n"


def test_a_failed_validation_stops_with_the_file_as_it_was(tmp_path):
    assert run(tmp_path)[0].returncode == 0
    proc, said = run(tmp_path, description="bad", validate="false %s")
    assert proc.returncode != 0 and said is None
    assert "conf/unit.service" in proc.stdout and "failed to validate" in proc.stdout
    assert (tmp_path / "root" / "conf" / "unit.service").read_text() == "[Unit]\nDescription=one\n"


def test_a_bad_entry_stops_before_any_write(tmp_path):
    entries = [{"path": str(tmp_path / "root" / "a"), "state": "directory"},
               {"path": str(tmp_path / "root" / "b"), "content": "x", "mode": "0644", "ownr": "root"},
               {"path": str(tmp_path / "root" / "c"), "state": "link"},
               {"path": str(tmp_path / "root" / "d"), "state": "directory", "content": "x"}]
    proc, said = run(tmp_path, entries=entries)
    assert proc.returncode != 0 and said is None
    assert "entry 2" in proc.stdout and "ownr" in proc.stdout
    assert "entry 3" in proc.stdout and "needs its src" in proc.stdout
    assert "entry 4" in proc.stdout and "not with state 'directory'" in proc.stdout
    assert not (tmp_path / "root").exists()


SYSTEMD_ANALYZE = """#!/bin/sh
# stand-in: `systemd-analyze verify FILE` refuses a unit whose file is not named as a unit, or that says "bad"
echo "$*" >> "$(dirname "$0")/systemd-analyze.log"
case "$2" in *.service) ;; *) echo "$2: not a unit name" >&2; exit 1 ;; esac
! grep -q bad "$2"
"""


def test_a_systemd_unit_is_verified_under_its_own_name_before_it_is_installed(tmp_path, monkeypatch):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (bin_dir / "systemd-analyze").write_text(SYSTEMD_ANALYZE)
    (bin_dir / "systemd-analyze").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}:{os.environ['PATH']}")
    unit = tmp_path / "root" / "blackwell-test.service"
    (tmp_path / "root").mkdir()

    def entries(text):
        return [{"path": str(unit), "content": text, "mode": "0644", "systemd_unit": True}]
    proc, said = run(tmp_path, entries=entries("[Service]\nExecStart=/bin/true\n"))
    assert proc.returncode == 0 and said["written"]["changed"], proc.stdout[-3000:]
    verified = (bin_dir / "systemd-analyze.log").read_text().split()
    assert verified[0] == "verify" and verified[1].endswith("/blackwell-test.service") and verified[1] != str(unit)
    proc, said = run(tmp_path, entries=entries("[Service]\nExecStart=/bin/bad\n"))
    assert proc.returncode != 0 and "failed to validate" in proc.stdout
    assert unit.read_text() == "[Service]\nExecStart=/bin/true\n"
    both = [dict(entries("x")[0], validate="true %s")]
    proc, said = run(tmp_path, entries=both)
    assert proc.returncode != 0 and "give one or the other" in proc.stdout
