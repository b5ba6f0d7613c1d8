"""site.yml over SSH against a fresh lab host, as a fleet operator runs it."""
import os

import pytest

from helpers import REPO, needs_lab, playbook, recap
from lab import hosts

SITE = REPO / "playbooks" / "site.yml"
HOST = "lab-gpu-1"


@pytest.fixture(scope="module")
def converged():
    hosts.start(HOST, os.environ["BLACKWELL_LAB_IMAGE"], fresh=True)
    first = playbook(SITE)
    return first


@needs_lab
def test_fresh_host_converges(converged):
    assert converged.returncode == 0, "site.yml failed on a fresh lab host (output above)"
    r = recap(converged.stdout)[HOST]
    assert r["failed"] == 0 and r["unreachable"] == 0


@needs_lab
def test_second_run_changes_nothing(converged):
    second = playbook(SITE)
    assert second.returncode == 0
    assert recap(second.stdout)[HOST]["changed"] == 0, "the second site.yml run changed something"


@needs_lab
def test_check_diff_on_a_converged_host_reports_nothing(converged):
    check = playbook(SITE, "--check", "--diff")
    assert check.returncode == 0
    assert recap(check.stdout)[HOST]["changed"] == 0
