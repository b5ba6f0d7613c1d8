"""What the Ubuntu 24.04 chroot run (lab/ubuntu_chroot.py, on the lent H100 machine's real userland) showed."""
import gzip
import json

from lab import paths

FIX = paths.FIXTURES / "ubuntu2404-chroot"
RUN = json.loads((FIX / "summary.json").read_text())
LOG = gzip.decompress((FIX / "run.log.gz").read_bytes()).decode()


def test_real_ubuntu_tooling_with_python_apt_built_against_ubuntus_libapt():
    assert RUN["os_release"]["VERSION_ID"].strip('"') == "24.04"
    assert RUN["apt"][0].startswith("apt 2.8.3")
    pa = RUN["python_apt"]
    assert pa["import"].startswith("2.8.3 amd64")  # apt_pkg.VERSION: Ubuntu's libapt-pkg, not Debian's 2.6.1
    assert any("libapt-pkg.so.6.0 => /lib/x86_64-linux-gnu/libapt-pkg.so.6.0" in l for l in pa["libapt"])
    assert pa["python"] == "Python 3.12.3" and "Ubuntu" in pa["compiler"]
    assert RUN["is_chroot"] == "True"


def test_host_unchanged():
    assert RUN["host_unchanged"] is True
    assert RUN["host_before"] == RUN["host_after"]


def test_repository_entry_and_key():
    after = RUN["after"]
    assert "URIs: http://127.0.0.1:8681/compute/cuda/repos/ubuntu2404/x86_64/" in after["sources"]
    assert "Signed-By: /etc/apt/keyrings/nvidia-cuda.asc" in after["sources"]
    assert any(l.startswith("fpr:") for l in after["keys"])


def test_550_purged_pinning_package_first_then_580_held():
    log = RUN["after"]["dpkg_log_installs"]
    pinning = log.index("install nvidia-driver-pinning-580.95.05:all <none>")
    first_580 = next(i for i, l in enumerate(log) if l.startswith("install") and "-580" in l and "pinning" not in l)
    removed_550 = [l for l in log if l.startswith("remove") and "550" in l]
    assert pinning < first_580 and len(removed_550) == 9
    installed = RUN["after"]["installed"]
    assert "nvidia-headless-580-open 580.95.05-0ubuntu1 hi " in installed
    assert not any("550" in l and " ii" in l for l in installed)


def test_pin_holds_with_newer_580_and_590_offered():
    assert RUN["after"]["dist_upgrade"] == ["0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded."]
    policy = "\n".join(RUN["after"]["upgrade_590_offered"])
    assert "Candidate: 590.48.01-0ubuntu1" in policy and "580.105.08-0ubuntu1 500" in policy


def test_second_run_changed_nothing_up_to_where_both_stopped():
    first, second = RUN["runs"]
    assert first["recap"]["changed"] > 0 and second["recap"]["changed"] == 0
    # both stopped at the same task: this userland has no systemd (no systemctl) to enable units with
    for run in (first, second):
        assert run["recap"]["failed"] == 1 and 'required executable \\"systemctl\\"' in run["failed"][0]


def test_clear_stop_above_580():
    run = RUN["above_580"]
    assert run["recap"]["changed"] == 0 and run["recap"]["failed"] == 1
    assert "driver branches after 580 drop the branch" in run["messages"][0]
    assert "Nothing was changed" in run["messages"][0]


def test_log_kept():
    assert "PLAY RECAP" in LOG and "modules | Keep nouveau off the GPUs" in LOG
