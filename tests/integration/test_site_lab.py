"""site.yml over SSH against a fresh lab host, as a fleet operator runs it."""
import json
import os
import re
import subprocess

import pytest
import yaml

import provenance
from helpers import REPO, needs_lab, playbook, recap
from lab import hosts

SITE = REPO / "playbooks" / "site.yml"
HOST = "lab-gpu-1"
# this host's fresh converge (the `converged` fixture) is the run's converged server image, which the fault tests'
# host and the fleet's servers start from (lab/hosts.py, converged_image; tests/conftest.py registers it)
PUBLISHES_CONVERGED_IMAGE = HOST


@pytest.fixture(scope="module")
def fresh_check():
    hosts.start(HOST, os.environ["BLACKWELL_LAB_IMAGE"], fresh=True)
    return playbook(SITE, "--check", "--diff")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    return tmp_path_factory.mktemp("verify-reports")


@pytest.fixture(scope="module")
def converged(fresh_check, reports):
    proc = playbook(SITE, "-e", f"verify_report_dir={reports}")
    hosts.publish_converged(HOST, proc.returncode == 0)
    return proc


@needs_lab
def test_check_diff_runs_through_on_a_fresh_host(fresh_check):
    assert fresh_check.returncode == 0, "site.yml --check --diff failed on a fresh host (output above)"
    assert recap(fresh_check.stdout)[HOST]["changed"] > 0, "check mode on a fresh host reported nothing to do"
    # no value printed as a blank: a fresh host has no module loaded, and the message says so
    assert "REBOOT REQUIRED on lab-gpu-1: loaded now: no NVIDIA module; installed: the open NVIDIA module" \
        in fresh_check.stdout
    assert not re.search(r"(is|now:)\s+[,;.]", fresh_check.stdout)


@needs_lab
def test_fresh_host_converges(converged, reports):
    assert converged.returncode == 0, "site.yml failed on a fresh lab host (output above)"
    r = recap(converged.stdout)[HOST]
    assert r["failed"] == 0 and r["unreachable"] == 0
    # the lab allows reboots (its hosts are containers): a first run ends serving and verified, the verify
    # table the last thing it prints, every check passing
    out = converged.stdout
    assert "REBOOT REQUIRED" not in out and "No host waits for a reboot." in out
    table_at = out.index("report | Summary of every host")
    assert "PLAY [" not in out[table_at:].replace("PLAY RECAP", ""), "something ran after verify's table"
    report = json.loads((reports / f"{HOST}.json").read_text())
    assert report["passed"] is True, [c for c in report["checks"] if not c["ok"]]
    assert {"unit_active", "chat_completion", "sm120_fix"} <= {c["name"] for c in report["checks"]}


def on_host(*argv):
    return subprocess.run(["docker", "exec", hosts.container(HOST), *argv], capture_output=True, text=True,
                          check=True).stdout


@needs_lab
def test_dkms_built_the_driver_for_the_debian_kernel_whose_headers_the_role_installed(converged):
    """Issue 32, point 3: Debian's real DKMS (the dkms package that NVIDIA's repository stand-in serves) compiled the
    stand-in module source against the real headers of the kernel that Debian's headers metapackage follows, as
    it does for every installed kernel with headers; the module's vermagic is that kernel's, written by the real
    kernel build."""
    assert converged.returncode == 0
    running = on_host("uname", "-r").strip()
    kernels = on_host("ls", "/lib/modules").split()
    debian = [k for k in kernels if k != running and re.fullmatch(r"\d+\.\d+\.\d+-\d+-amd64", k)]
    assert debian, f"no Debian kernel's headers were installed: {kernels}"
    status = on_host("dkms", "status")
    version = yaml.safe_load((REPO / "inventories/lab/group_vars/all/stack.yml").read_text())["nvidia_driver_version"]
    for kernel in debian:
        assert f"nvidia/{version}, {kernel}, x86_64: installed" in status, status
        ko = f"/lib/modules/{kernel}/updates/dkms/nvidia.ko"
        assert on_host("modinfo", "-F", "vermagic", ko).startswith(f"{kernel} SMP preempt mod_unload modversions")
        assert on_host("modinfo", "-F", "version", ko).strip() == version
        assert on_host("modinfo", "-F", "license", ko).strip() == "Dual MIT/GPL"  # the open flavour


@needs_lab
@pytest.mark.parametrize("dist, version, index_var", provenance.EXPECTED)
def test_release_packages_came_from_the_configured_indexes(converged, dist, version, index_var):
    """torch from the configured PyTorch index, not the pypi.org that sglang's pyproject names (--no-sources),
    proven from the installation's RECORD and the indexes' METADATA (tests/integration/provenance.py)."""
    provenance.check(HOST, dist, version, index_var)


@needs_lab
def test_second_run_changes_nothing(converged):
    second = playbook(SITE)
    assert second.returncode == 0
    assert recap(second.stdout)[HOST]["changed"] == 0, "the second site.yml run changed something"
    # the repository's state read holds: NVIDIA's key is not fetched again, nor the sources searched
    assert "repository-debian-entry |" not in second.stdout, "a converged host fetched NVIDIA's repository key again"


@needs_lab
def test_check_diff_on_a_converged_host_reports_nothing(converged):
    check = playbook(SITE, "--check", "--diff")
    assert check.returncode == 0
    assert recap(check.stdout)[HOST]["changed"] == 0


@needs_lab
def test_installed_collection_runs_site_by_name(converged, tmp_path):
    """The playbook as a user of the installed collection runs it: only the installed copy on the path."""
    from helpers import run
    out = tmp_path / "build"
    assert run(["ansible-galaxy", "collection", "build", "--force", "--output-path", out, REPO]).returncode == 0
    tarball = next(out.glob("blackwell-serving-*.tar.gz"))
    env = {"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "c")}
    assert run(["ansible-galaxy", "collection", "install", "--offline", "--force", "-p", tmp_path / "c", tarball],
               env=env).returncode == 0
    installed = playbook("blackwell.serving.site", env=env)
    assert installed.returncode == 0, "ansible-playbook blackwell.serving.site failed (output above)"
    assert recap(installed.stdout)[HOST]["changed"] == 0
