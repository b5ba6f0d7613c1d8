"""nvidia_driver on apt: the packaging revision of the pinned release is the repository's, not a constant (issue 32,
point 5). NVIDIA's ubuntu2404 repository gave 580.95.05 as -0ubuntu1; a later upload of the same release may carry
-1ubuntu1, and debian12 gives -1. The role asks apt-cache madison (a stand-in on PATH here, in the real command's
output shape) and installs the exact version offered; the preferences pin and the state read name the release with a
glob (host_state's version glob, tests/unit/test_host_state.py), which apt's preferences read the same way."""
import json
import os
import stat

import pytest

from conftest import REPO, run_local_playbook

ROLE = REPO / "roles" / "nvidia_driver"
SOURCE = "https://developer.download.nvidia.com/compute/cuda/repos/ubuntu2404/x86_64  Packages"

PLAYBOOK = f"""
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_vars: {ROLE / "vars" / "Ubuntu.yml"}
    - ansible.builtin.include_role:
        name: blackwell.serving.nvidia_driver
        tasks_from: offered-debian
        public: true
    - ansible.builtin.copy:
        dest: "{{{{ out }}}}"
        mode: "0644"
        content: >-
          {{{{ {{'version': __nvidia_driver_apt_version, 'pinning': __nvidia_driver_pinning_offered | bool,
               'pref': lookup('ansible.builtin.template', '{ROLE / "templates" / "nvidia-driver.pref.j2"}')}} | to_json }}}}
"""


def madison(*versions, pinning=True):
    lines = [f"nvidia-headless-580-open | {v} | {SOURCE}" for v in versions]
    if pinning:
        lines.append(f"nvidia-driver-pinning-580.95.05 |        1.0 | {SOURCE}")
    return "\n".join(lines) + "\n"


@pytest.mark.parametrize("offered, chosen", [
    (["580.105.08-0ubuntu1", "580.95.05-0ubuntu1", "580.82.07-0ubuntu1"], "580.95.05-0ubuntu1"),
    # two uploads of the pinned release: madison lists the newer first, which the pin's glob lets apt choose too
    (["580.105.08-1ubuntu1", "580.95.05-1ubuntu1", "580.95.05-0ubuntu1"], "580.95.05-1ubuntu1"),
])
def test_the_install_asks_for_the_revision_the_repository_offers(tmp_path, monkeypatch, offered, chosen):
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    (tmp_path / "madison.txt").write_text(madison(*offered))
    fake = bin_dir / "apt-cache"
    fake.write_text(f"#!/bin/sh\n[ \"$1\" = madison ] || exit 100\ncat {tmp_path / 'madison.txt'}\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    out = tmp_path / "out.json"
    run_local_playbook(tmp_path, PLAYBOOK, {"out": str(out), "nvidia_driver_version": "580.95.05",
                                            "nvidia_driver_branch": "580", "nvidia_driver_kernel_modules": "open"})
    got = json.loads(out.read_text())
    assert got["version"] == chosen
    assert got["pinning"] is True
    assert "Pin: version 580.95.05-*\n" in got["pref"]
    assert "Package: nvidia-* libnvidia-*" in got["pref"]


WANTED = f"""
- hosts: localhost
  gather_facts: false
  vars_files: [{ROLE}/defaults/main.yml, {ROLE}/vars/main.yml, {ROLE}/vars/Debian_12.yml]
  tasks:
    - ansible.builtin.copy:
        dest: "{{{{ out }}}}"
        mode: "0644"
        content: "{{{{ {{'wanted': __nvidia_driver_wanted, 'purged': __nvidia_driver_purged}} | to_json }}}}"
      vars:
        __nvidia_driver_packages_read: "{{{{ read }}}}"
"""


def test_foreign_packages_under_nvidias_names_move_to_the_pin_and_the_others_are_purged(tmp_path):
    """Issue 32, point 1: Debian's own nvidia-smi 535 (a name NVIDIA's repository has at the pin) is asked for at the
    pinned release in the same transaction; Debian's nvidia-kernel-common (no such name at the pin) is purged."""
    installed = {"nvidia-smi": "535.216.01-1~deb12u1", "nvidia-kernel-common": "20220217+3~deb12u1",
                 "libnvidia-ml1": "580.95.05-1"}
    foreign = [{"name": "nvidia-kernel-common", "version": "20220217+3~deb12u1", "origin": "x", "movable": False},
               {"name": "nvidia-smi", "version": "535.216.01-1~deb12u1", "origin": "y", "movable": True}]
    out = tmp_path / "out.json"
    run_local_playbook(tmp_path, WANTED, {"out": str(out), "__nvidia_driver_foreign": foreign,
                                          "read": {"installed": installed}})
    got = json.loads(out.read_text())
    assert got["purged"] == ["nvidia-kernel-common"]
    assert set(got["wanted"]) == {"nvidia-driver-cuda", "nvidia-kernel-open-dkms", "nvidia-smi", "libnvidia-ml1"}
