"""report_file writes the verify role's reports on the controller in the play's own process (no module, no
connection): atomically, only where the content or mode differ, in check mode too, with a diff, and with a clear
error where it cannot write."""
import json
import os
import subprocess
import sys
from pathlib import Path

from modrun import REPO

PLAYBOOK = """
- name: Reports for hosts that cannot be reached
  hosts: all
  gather_facts: false
  tasks:
    - name: Write the report
      blackwell.serving.report_file:
        path: "{{ report_dir }}/{{ inventory_hostname }}.json"
        content: "{{ {'host': inventory_hostname, 'n': n | int} | to_nice_json }}\\n"
      register: written
    - name: Keep what it said
      ansible.builtin.copy:
        content: "{{ written | to_json }}"
        dest: "{{ report_dir }}/../{{ inventory_hostname }}.result"
        mode: "0644"
      delegate_to: localhost
      check_mode: false
"""


def _run(tmp_path, n, *extra):
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    # hosts nobody can reach: the plugin must not need a connection to them
    (tmp_path / "hosts.yml").write_text(json.dumps({"all": {"hosts": {"gpu-a": {"ansible_host": "192.0.2.1"},
                                                                       "gpu-b": {"ansible_host": "192.0.2.2"}}}}))
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"), ANSIBLE_TIMEOUT="2")
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts.yml"),
                           str(tmp_path / "pb.yml"), "-e", json.dumps({"report_dir": str(tmp_path / "r" / "reports"),
                                                                      "n": n}), *extra],
                          capture_output=True, text=True, env=env, timeout=300, cwd=tmp_path)
    results = {h: json.loads((tmp_path / "r" / f"{h}.result").read_text())
               for h in ("gpu-a", "gpu-b") if (tmp_path / "r" / f"{h}.result").exists()}
    return proc, results


def test_writes_on_the_controller_once_and_in_check_mode(tmp_path):
    (tmp_path / "r").mkdir()
    proc, res = _run(tmp_path, 1)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    report = tmp_path / "r" / "reports" / "gpu-a.json"
    assert json.loads(report.read_text()) == {"host": "gpu-a", "n": 1}
    assert oct(report.stat().st_mode & 0o777) == "0o644"
    assert oct(report.parent.stat().st_mode & 0o777) == "0o755"
    assert res["gpu-a"]["changed"] and res["gpu-a"]["path"] == str(report)
    # the same content again: nothing written
    before = report.stat().st_mtime_ns
    proc, res = _run(tmp_path, 1)
    assert proc.returncode == 0 and not res["gpu-b"]["changed"]
    assert report.stat().st_mtime_ns == before
    # check mode writes the controller's file too, and --diff shows it
    proc, res = _run(tmp_path, 2, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads(report.read_text())["n"] == 2 and res["gpu-a"]["changed"]
    assert '-    "n": 1' in proc.stdout and '+    "n": 2' in proc.stdout
    assert not list(report.parent.glob(".gpu-a.json.*")), "a temporary file was left"


def test_says_why_it_cannot_write(tmp_path):
    (tmp_path / "r").mkdir()
    (tmp_path / "r" / "reports").write_text("a file where the directory should be\n")
    proc, _ = _run(tmp_path, 1)
    assert proc.returncode != 0
    assert "cannot write the report" in proc.stdout and "on the controller" in proc.stdout, proc.stdout[-3000:]
