"""playbooks/verify.yml over SSH against the lab host: passes on a converged host, read-only, and fails with
a clear message on a host whose sglang release was pinned, with the explicit override, to a commit without the
SM120 fix. Runs after test_site_lab.py, on the host that test converged."""
import json
import os
import subprocess

import pytest

from helpers import REPO, needs_lab, playbook, recap
from lab import hosts

SITE = REPO / "playbooks" / "site.yml"
VERIFY = REPO / "playbooks" / "verify.yml"
HOST = "lab-gpu-1"
# lab/sglang_repo.py: sglang v0.5.8.post1 from its sdist, the release before the SM120 fix


@pytest.fixture(scope="module")
def rebooted():
    hosts.start(HOST, os.environ["BLACKWELL_LAB_IMAGE"])
    # a host waits for its reboot after the first converge; the play reboots it, then verifies it
    return playbook(SITE, "-e", "nvidia_driver_reboot=true")


@needs_lab
def test_site_reboots_and_verifies(rebooted):
    assert rebooted.returncode == 0, "site.yml with nvidia_driver_reboot=true failed (output above)"
    assert "No host waits for a reboot." in rebooted.stdout
    assert "report | Summary of every host" in rebooted.stdout


@needs_lab
def test_verify_passes_and_changes_nothing(rebooted, tmp_path):
    proc = playbook(VERIFY, "-e", f"verify_report_dir={tmp_path}")
    assert proc.returncode == 0, "verify.yml failed on a converged host (output above)"
    assert recap(proc.stdout)[HOST]["changed"] == 0
    report = json.loads((tmp_path / f"{HOST}.json").read_text())
    assert report["passed"] is True
    names = {c["name"] for c in report["checks"]}
    assert {"sm120_fix", "compute_capability", "gpu_count", "kernel_module", "driver_version", "cuda_toolkit",
            "package flashinfer-python", "package flashinfer-cubin", "package transformers", "sglang_commit",
            "unit_active", "endpoint /health", "chat_completion"} <= names


@needs_lab
def test_verify_passes_in_check_mode(rebooted, tmp_path):
    proc = playbook(VERIFY, "--check", "-e", f"verify_report_dir={tmp_path}")
    assert proc.returncode == 0
    assert recap(proc.stdout)[HOST]["changed"] == 0


@needs_lab
def test_a_release_pinned_without_the_fix_fails_verify_clearly(rebooted, tmp_path):
    # the lab's revert of the fix on top of the pin: its server runs (the stand-in), its kernel is the old one
    from lab import paths, sglang_repo
    pre_fix = sglang_repo.build(paths.sub("git"))["revert_sm120"]
    # (built without bytecode: this release is here for verify's refusal, not its build)
    override = ["-e", f"sglang_commit={pre_fix}", "-e", "sglang_allow_missing_sm120_fix=true",
                "-e", "sglang_compile_bytecode=false"]
    try:
        site = playbook(SITE, *override)
        # the site installs it (the override says so), serves it, and its own verify step refuses it
        assert site.returncode != 0 and "check sm120_fix failed" in site.stdout
        proc = playbook(VERIFY, *override, "-e", f"verify_report_dir={tmp_path}")
        assert proc.returncode != 0
        assert "check sm120_fix failed" in proc.stdout
        assert "lacks the SM120 fix" in proc.stdout and "over the 101376" in proc.stdout
        report = json.loads((tmp_path / f"{HOST}.json").read_text())
        failed = [c["name"] for c in report["checks"] if not c["ok"]]
        assert failed == ["sm120_fix"], failed
    finally:
        restored = playbook(SITE)
    assert restored.returncode == 0, "site.yml did not bring the pinned release back (output above)"


def current():
    return subprocess.run(["docker", "exec", hosts.container(HOST), "readlink", "/opt/sglang/current"],
                          capture_output=True, text=True, check=True).stdout.strip()


@needs_lab
def test_a_release_on_disk_without_the_fix_is_refused_before_current_moves(rebooted):
    """The release built with the override (previous test) stays on disk; pinned again without the override, its
    cached compiler verdict stops the switch: the SM120 refusal gates every switch, not only a build."""
    from lab import paths, sglang_repo
    pre_fix = sglang_repo.build(paths.sub("git"))["revert_sm120"]
    serving = current()
    on_disk = subprocess.run(["docker", "exec", hosts.container(HOST), "sh", "-c",
                              f"ls -d /opt/sglang/releases/{pre_fix[:12]}-*/.release.json"], capture_output=True, text=True)
    assert on_disk.returncode == 0, "the release built with the override is not on disk to switch to"
    proc = playbook(SITE, "-e", f"sglang_commit={pre_fix}")
    assert proc.returncode != 0
    assert "the compiler condemns sglang release" in proc.stdout and "Nothing was switched" in proc.stdout
    assert "sglang_allow_missing_sm120_fix" in proc.stdout
    assert current() == serving
    assert recap(proc.stdout)[HOST]["changed"] == 0
