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
    # purged: not even their configuration is left in dpkg's database
    assert not any("550" in l for l in installed)
    # the device unit's program, which no package of Ubuntu's set pulls, at the pinned release and held
    assert "nvidia-modprobe 580.95.05-0ubuntu1 hi " in installed


def test_pin_holds_with_newer_580_and_590_offered():
    assert RUN["after"]["dist_upgrade"] == ["0 upgraded, 0 newly installed, 0 to remove and 0 not upgraded."]
    policy = "\n".join(RUN["after"]["upgrade_590_offered"])
    assert "Candidate: 590.48.01-0ubuntu1" in policy and "580.105.08-0ubuntu1 500" in policy


def test_without_systemd_the_run_stops_before_any_change():
    """The userland as it is (a container image, no systemd package): the preflight names the missing tools, and
    neither dpkg's database nor /etc changed."""
    run = RUN["without_systemd"]
    assert run["recap"]["changed"] == 0 and run["recap"]["failed"] == 1
    assert "systemctl and systemd-analyze are not on this host (a chroot" in run["messages"][0]
    assert "Nothing was changed" in run["messages"][0]
    assert run["dpkg_unchanged"] is True and run["etc_written"] == []


def test_systemd_tools_and_sudo_as_a_server_image_has_them():
    tools = RUN["systemd_tools"]
    assert tools["systemctl"] == ["systemd 252 (252.39-1~deb12u2)"] == tools["analyze"]
    assert tools["sudo"]["rc"] == 0 and tools["sudo"]["version"] == ["Sudo version 1.9.13p3"]


def test_first_run_converges_and_second_changes_nothing():
    first, second = RUN["runs"]
    assert first["recap"]["failed"] == 0 and second["recap"]["failed"] == 0
    assert first["recap"]["changed"] > 0 and second["recap"]["changed"] == 0
    # every role of the play ran: the driver (with the repository), the toolkit, the virtual environment
    roles = {t.split(" : ")[0] for t in first["changed_tasks"]}
    assert roles == {f"blackwell.serving.{r}" for r in ("nvidia_repo", "nvidia_driver", "cuda_toolkit", "uv_venv")}


def test_units_enabled_for_the_image():
    """In a chroot the units are enabled for the image's boots (systemctl's offline mode)."""
    assert {"nvidia-persistenced.service", "nvidia-devices.service", "blackwell-pcie-acs.service"} <= set(
        RUN["after"]["enabled_units"])


def test_boot_tools_absent_their_handlers_skip():
    """No initramfs-tools or grub in this userland: the handlers skip instead of failing the run."""
    lines = LOG.splitlines()
    for handler in ("Rebuild the initramfs", "Update the boot loader"):
        at = next(i for i, l in enumerate(lines) if f"RUNNING HANDLER [blackwell.serving.nvidia_driver : {handler}]" in l)
        assert lines[at + 1].strip() == "ok: [image]"


def test_virtual_environment_on_ubuntus_python():
    python, owner, uv = RUN["after"]["venv"]
    assert python == "/opt/sglang/venv/bin/python 3.12.3 /usr"
    assert owner.startswith("sglang:sglang") and uv.startswith("uv 0.13.9 ")


def test_clear_stop_above_580():
    run = RUN["above_580"]
    assert run["recap"]["changed"] == 0 and run["recap"]["failed"] == 1
    assert "driver branches after 580 drop the branch" in run["messages"][0]
    assert "Nothing was changed" in run["messages"][0]


def test_log_kept():
    assert "PLAY RECAP" in LOG and "modules | Keep nouveau off the GPUs" in LOG
