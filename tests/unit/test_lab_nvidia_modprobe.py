"""The stand-in nvidia-modprobe: device nodes only when asked, only with the module loaded, only as root."""
import os
import stat
import subprocess
import sys

import pytest

from lab import aptrepo

TOOL = aptrepo.STANDINS / "nvidia_modprobe.py"


def run(tmp_path, *args, loaded=True):
    (tmp_path / "dev").mkdir(exist_ok=True)
    version = tmp_path / "version"
    if loaded:
        version.write_text("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build\n")
    env = dict(os.environ, LAB_NVIDIA_PROC_VERSION=str(version), LAB_NVIDIA_DEV=str(tmp_path / "dev"))
    return subprocess.run([sys.executable, str(TOOL), *args], env=env, capture_output=True, text=True)


needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="mknod needs root, as the real tool is setuid root")


@needs_root
def test_uvm_node_only_when_asked(tmp_path):
    assert run(tmp_path, "-c", "0").returncode == 0
    assert sorted(os.listdir(tmp_path / "dev")) == ["nvidia0", "nvidiactl"]
    assert run(tmp_path, "-u", "-c", "0").returncode == 0
    uvm = os.stat(tmp_path / "dev" / "nvidia-uvm")
    assert stat.S_ISCHR(uvm.st_mode) and os.major(uvm.st_rdev) == 510
    assert (tmp_path / "dev" / "nvidia-uvm-tools").exists()
    ctl = os.stat(tmp_path / "dev" / "nvidiactl")
    assert (os.major(ctl.st_rdev), os.minor(ctl.st_rdev)) == (195, 255)


@needs_root
def test_nothing_without_the_module(tmp_path):
    proc = run(tmp_path, "-u", "-c", "0", loaded=False)
    assert proc.returncode == 1 and "not loaded" in proc.stderr
    assert os.listdir(tmp_path / "dev") == []


def test_unknown_option_is_refused(tmp_path):
    assert run(tmp_path, "--frobnicate").returncode == 2
