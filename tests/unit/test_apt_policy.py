"""Where each installed package came from (issue 32, point 1): apt-cache policy's answer, parsed, and the driver
packages that NVIDIA's repository did not install. Read on captures of the real command (tests/fixtures/apt/)."""
from pathlib import Path

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import apt_policy

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "apt"
NVIDIA = "https://developer.download.nvidia.com/compute/cuda/repos"


def test_a_debian_hosts_answer_names_each_versions_sources():
    """This machine (Debian 12): bash installed at a version only dpkg's status lists, libc6 from the archive."""
    policy = apt_policy.parse_policy((FIXTURES / "policy-this-machine-debian12.txt").read_text())
    assert set(policy) == {"bash", "libc6"}, "a package apt does not know is left out"
    bash = policy["bash"]
    assert bash["installed"] != bash["candidate"]
    assert bash["versions"][bash["installed"]] == ["/var/lib/dpkg/status"]
    assert bash["versions"][bash["candidate"]] == ["http://deb.debian.org/debian bookworm/main amd64 Packages"]
    libc = policy["libc6"]
    assert libc["versions"][libc["installed"]] == ["http://deb.debian.org/debian bookworm/main amd64 Packages",
                                                   "/var/lib/dpkg/status"]
    foreign = apt_policy.foreign(policy, ["bash", "libc6", "not-installed"], "http://deb.debian.org/debian")
    assert foreign == [{"name": "bash", "version": bash["installed"],
                        "origin": "installed by hand (dpkg's status file only)", "movable": False}]


def test_the_lab_host_with_a_distribution_driver_beside_nvidias():
    """A converged lab host (Debian 12, real apt) after Debian's own nvidia-kernel-common (contrib) and a
    distribution's headless 550 set were installed (captured by tests/integration/test_site_lab_faults.py): only those
    are foreign; NVIDIA's packages are not."""
    text = (FIXTURES / "policy-lab-foreign-driver.txt").read_text()
    policy = apt_policy.parse_policy(text)
    base = "http://lab-mirror:8680/compute/cuda/repos"
    names = sorted(policy)
    foreign = {p["name"]: p for p in apt_policy.foreign(policy, names, base)}
    assert "nvidia-kernel-common" in foreign and foreign["nvidia-kernel-common"]["version"] == "20220217+3~deb12u1"
    assert "bookworm/contrib" in foreign["nvidia-kernel-common"]["origin"]
    assert "nvidia-headless-550" in foreign and "lab-standin-distribution-archive" in foreign["nvidia-headless-550"]["origin"]
    assert "nvidia-driver-cuda" not in foreign and "nvidia-kernel-open-dkms" not in foreign
    assert all(p["origin"] for p in foreign.values())
    # the headless set pulls eight of the archive's nine packages (nvidia-utils-550 is not among its dependencies)
    assert len(foreign) == 9 and all(n.endswith("-550") for n in foreign if n != "nvidia-kernel-common")


@pytest.mark.parametrize("base", [NVIDIA, NVIDIA + "/"])
def test_the_base_url_may_end_with_a_slash(base):
    text = ("nvidia-smi:\n  Installed: 580.95.05-1\n  Candidate: 580.95.05-1\n  Version table:\n"
            f" *** 580.95.05-1 1001\n        500 {NVIDIA}/debian12/x86_64  Packages\n"
            "        100 /var/lib/dpkg/status\n")
    assert apt_policy.foreign(apt_policy.parse_policy(text), ["nvidia-smi"], base) == []


def test_debians_own_driver_under_nvidias_names_moves_to_the_pin_and_the_rest_is_purged():
    """Debian's non-free archive packages its driver under the names NVIDIA's debian12 repository uses (nvidia-smi,
    libcuda1, ...): those are foreign but movable (NVIDIA's repository offers them at the pinned release, and apt
    moves them in the install); a name NVIDIA does not carry at the pin (nvidia-kernel-common) must be purged. The
    shape is the lab capture's, with Debian's 535 release in place of the stand-in archive's packages."""
    base = "http://lab-mirror:8680/compute/cuda/repos"
    text = (FIXTURES / "policy-lab-foreign-driver.txt").read_text()
    nvidia_smi = text[text.index("nvidia-smi:\n"):]
    debian = nvidia_smi.replace("Installed: 580.95.05-1", "Installed: 535.216.01-1~deb12u1").replace(
        " *** 580.95.05-1 1001\n", "     580.95.05-1 1001\n").replace(
        "     580.82.07-1 500\n", " *** 535.216.01-1~deb12u1 500\n"
        "        500 http://deb.debian.org/debian bookworm/non-free amd64 Packages\n"
        "        100 /var/lib/dpkg/status\n     580.82.07-1 500\n")
    policy = apt_policy.parse_policy(debian + text[text.index("nvidia-kernel-common:\n"):text.index("nvidia-kernel-common-550:")])
    got = {p["name"]: p for p in apt_policy.foreign(policy, ["nvidia-smi", "nvidia-kernel-common"], base, "580.95.05-*")}
    assert got["nvidia-smi"]["version"] == "535.216.01-1~deb12u1" and got["nvidia-smi"]["movable"] is True
    assert "bookworm/non-free" in got["nvidia-smi"]["origin"]
    assert got["nvidia-kernel-common"]["movable"] is False
    # another release pinned, which NVIDIA's repository does not carry: nothing to move to
    assert not any(p["movable"] for p in apt_policy.foreign(policy, ["nvidia-smi"], base, "999.1.1-*"))
