"""nvidia_driver's reboot waits until systemd has finished booting, not until the host first answers.

CI once read the driver right after a simulated reboot, while the new boot was still starting: systemd-tmpfiles
emptied /tmp under the module that ran there (its payload vanished). On a real host sshd can answer before
nvidia-devices and the persistence daemon are done. The reboot task's test_command is run here with a stand-in
systemctl answering each state systemd can be in.
"""
import os
import subprocess
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ROLE = REPO / "roles" / "nvidia_driver"


def _command():
    return yaml.safe_load((ROLE / "vars" / "main.yml").read_text())["__nvidia_driver_boot_finished_command"]


def _run(tmp_path, state, rc=0):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "systemctl"
    # is-system-running prints the state; it exits non-zero unless the state is "running"
    stub.write_text("#!/bin/sh\n" + (f"echo {state}\n" if state else "") + f"exit {rc}\n")
    stub.chmod(0o755)
    env = dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}")
    return subprocess.run(["sh", "-c", _command()], env=env, capture_output=True, text=True, timeout=30)


def test_the_reboot_task_waits_for_the_boot_to_finish():
    def flat(items):
        for t in items:
            yield from flat(t["block"]) if "block" in t else [t]
    tasks = yaml.safe_load((ROLE / "tasks" / "reboot_due.yml").read_text())
    reboot = next(t for t in flat(tasks) if "ansible.builtin.reboot" in t)
    assert reboot["ansible.builtin.reboot"]["test_command"] == "{{ __nvidia_driver_boot_finished_command }}"


@pytest.mark.parametrize("state,rc", [("running", 0), ("degraded", 1)])
def test_a_finished_boot_is_ready(tmp_path, state, rc):
    assert _run(tmp_path, state, rc).returncode == 0


@pytest.mark.parametrize("state,rc", [("starting", 1), ("initializing", 1), ("maintenance", 1), ("stopping", 1),
                                      ("offline", 1), ("", 1)])
def test_a_boot_not_finished_is_tried_again(tmp_path, state, rc):
    proc = _run(tmp_path, state, rc)
    assert proc.returncode != 0
    assert f"systemd is {state or 'not answering'}" in proc.stderr
