"""Faults injected into a converged lab host (issue 19): a run killed at each step of the service's deploy
sequence is finished by the next one. Runs after test_site_lab.py, on the host that test converged."""
import os
import subprocess

import pytest

from helpers import REPO, needs_lab, playbook, recap
from lab import hosts

SITE = REPO / "playbooks" / "site.yml"
SERVICE = REPO / "tests" / "integration" / "playbooks" / "sglang_service.yml"
HOST = "lab-gpu-1"
INTERRUPT = {"ANSIBLE_CALLBACK_PLUGINS": str(REPO / "tests" / "integration" / "callbacks"),
             "ANSIBLE_CALLBACKS_ENABLED": "interrupt"}

# Each step of the deploy sequence, named by the task the run is killed before, with what is done by then.
STEPS = {
    "env_written": "config | The unit, checked by systemd-analyze",      # the environment file, not the unit
    "unit_written": "deploy | Decide whether to restart",               # the unit, not reloaded
    "reloaded": "deploy | Clear the unit's start-limit count",           # reloaded, not restarted
    "restarted": "started | The unit and environment file",              # restarted, nothing noted
    "in_gate": "gate | One token from /health_generate",                 # restarted, in the health gate
    "recording": "deploy | Record the release that passed the gate",     # unit and environment recorded
}


def on_host(*argv):
    return subprocess.run(["docker", "exec", hosts.container(HOST), *argv], capture_output=True, text=True,
                          check=True).stdout


@pytest.fixture(scope="module")
def converged():
    hosts.start(HOST, os.environ["BLACKWELL_LAB_IMAGE"])
    proc = playbook(SITE)
    assert proc.returncode == 0, "site.yml did not converge the lab host (output above)"
    yield
    # leave the host on the stack file's settings for the tests that follow
    assert playbook(SERVICE).returncode == 0


def server_args():
    props = dict(line.split("=", 1) for line in on_host(
        "systemctl", "show", "sglang.service", "--property", "MainPID,NeedDaemonReload,ActiveState").splitlines())
    argv = on_host("cat", f"/proc/{props['MainPID']}/cmdline").split("\0")
    return props, argv


@needs_lab
@pytest.mark.parametrize("step", list(STEPS))
def test_an_interrupted_run_is_finished_by_the_next(converged, step):
    # a value no other step uses, so that each step has a change to make
    value = f"0.{70 + list(STEPS).index(step)}"
    setting = ["-e", f"sglang_service_mem_fraction_static={value}"]
    killed = playbook(SERVICE, *setting, env={**INTERRUPT, "BLACKWELL_INTERRUPT_AT": STEPS[step]})
    assert killed.returncode == -9, f"the run was not interrupted at {STEPS[step]!r} (output above)"

    again = playbook(SERVICE, *setting)
    assert again.returncode == 0, "the run after the interruption failed (output above)"
    props, argv = server_args()
    assert props["NeedDaemonReload"] == "no" and props["ActiveState"] == "active", props
    assert argv[argv.index("--mem-fraction-static") + 1] == value, f"the server runs {argv}"
    # what last passed the gate is what runs
    for installed, recorded in (("/etc/systemd/system/sglang.service", "/etc/sglang/deployed/sglang.service"),
                                ("/etc/sglang/sglang.env", "/etc/sglang/deployed/sglang.env")):
        on_host("cmp", installed, recorded)
    assert on_host("readlink", "/etc/sglang/deployed/release") == on_host("readlink", "/opt/sglang/current")

    third = playbook(SERVICE, *setting)
    assert third.returncode == 0 and recap(third.stdout)[HOST]["changed"] == 0, "a third run changed something"
