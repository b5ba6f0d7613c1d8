"""uv_venv's preflight asks the system Python it is told to use for its version (host_state's commands, one round
trip), and stops naming what it found: a Python that does not run, or one of another version."""
import sys

import pytest

from conftest import run_local_playbook

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The uv_venv preflight
      ansible.builtin.include_role:
        name: blackwell.serving.uv_venv
        tasks_from: preflight
"""
HERE = "%d.%d" % sys.version_info[:2]


@pytest.mark.parametrize("python, version, says", [
    ("/nonexistent/python3", HERE, "it does not run ([Errno 2] No such file or directory: /nonexistent/python3)"),
    (sys.executable, "3.99", f"should be Python 3.99; it is {HERE}."),
    # runs, fails, says nothing: its exit code
    ("/bin/false", HERE, "it does not run (exit code 1)"),
    (sys.executable, HERE, None),
])
def test_the_system_python_is_asked_and_judged(tmp_path, python, version, says):
    proc = run_local_playbook(tmp_path, PLAYBOOK, {"uv_venv_python": python, "uv_venv_python_version": version},
                              must_pass=False)
    if says is None:
        assert proc.returncode == 0, proc.stdout[-3000:]
        assert "failed=0" in proc.stdout
    else:
        assert proc.returncode != 0 and says in proc.stdout, proc.stdout[-3000:]
        assert f"uv_venv_python={python}" in proc.stdout and "Nothing was changed" in proc.stdout
