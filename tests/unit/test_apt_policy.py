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
                        "origin": "installed by hand (dpkg's status file only)"}]


@pytest.mark.parametrize("base", [NVIDIA, NVIDIA + "/"])
def test_the_base_url_may_end_with_a_slash(base):
    text = ("nvidia-smi:\n  Installed: 580.95.05-1\n  Candidate: 580.95.05-1\n  Version table:\n"
            f" *** 580.95.05-1 1001\n        500 {NVIDIA}/debian12/x86_64  Packages\n"
            "        100 /var/lib/dpkg/status\n")
    assert apt_policy.foreign(apt_policy.parse_policy(text), ["nvidia-smi"], base) == []
