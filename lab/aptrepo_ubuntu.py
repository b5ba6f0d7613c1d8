"""Stand-in for NVIDIA's ubuntu2404 apt repository and an Ubuntu archive's driver, for the Ubuntu chroot run.

Built here (dpkg-deb, gpg) and carried to the lent Ubuntu 24.04 machine, where lab/ubuntu_chroot.py serves it
inside a chroot of that machine's own userland. The dependency shape is Ubuntu's nvidia-graphics-drivers-<branch>
packaging as NVIDIA's ubuntu2204/ubuntu2404 repositories carry it for 580 and older (branch-named packages:
roles/nvidia_driver/vars/Ubuntu.yml, STACK.md); from 590 on the branch leaves the names (STACK.md: nvidia-dkms-open,
libnvidia-compute, ...). Which other packages the real 590 set has was not confirmed: the stand-in's 590 set is
the 580 set with the branch taken out of every name. The contents are stand-ins (documentation files; nvidia-utils
carries the replaying nvidia-smi). The kernel module packages ship the module's source only: the real ones run DKMS,
which needs a kernel's headers that no Ubuntu archive here can give (the stand-in linux-headers-generic is empty).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from . import aptrepo
from .aptrepo import Deb

REPO_PATH = "compute/cuda/repos/ubuntu2404/x86_64"
KEYRING_LIST = "cuda-ubuntu2404-x86_64.list"
ARCHIVE_PATH = aptrepo.ARCHIVE_PATH
# the pinned release, one older and one newer of the branch, and the renamed branch after it
DRIVER_VERSIONS = ["580.82.07", "580.95.05", "580.105.08", "590.48.01"]
# Ubuntu's packaging revision as NVIDIA's ubuntu2404 repository has it for 580.95.05 (STACK.md)
REVISION = "0ubuntu1"
CUDA_RELEASES = [r for r in aptrepo.CUDA_RELEASES if r[0] == "12-9"]
# the headers metapackage that follows the kernel (roles/nvidia_driver/vars/Ubuntu.yml): an empty stand-in
HEADERS_GENERIC = ("linux-headers-generic", "6.8.0-90.91")


def driver_debs(ver: str) -> list[Deb]:
    """One release in Ubuntu's headless shape: nvidia-headless-<b>[-open] on nvidia-dkms-<b>[-open] and
    nvidia-headless-no-dkms-<b>[-open], which pull the compute library, libnvidia-cfg1, the compute utilities, the
    kernel source and the firmware, each at exactly this version; nvidia-smi is in nvidia-utils-<b>. For 590 and
    later <b> is empty: the renamed packages."""
    v = f"{ver}-{REVISION}"
    branch = ver.split(".")[0]
    b = f"-{branch}" if int(branch) <= 580 else ""
    smi = (aptrepo.STANDINS / "nvidia_smi.py").read_text().replace("@LIB_VERSION@", ver)
    smi_files = {"usr/bin/nvidia-smi": (smi.encode(), 0o755)}
    for cap in sorted(aptrepo.RTX_CAPTURES.iterdir()):
        smi_files[f"usr/share/lab-standin/nvidia-smi/{cap.name}"] = (cap.read_bytes(), 0o644)
    src = f"nvidia-graphics-drivers{b}"

    def deb(name: str, desc: str, depends=(), section="restricted/libs", files=None, **kw) -> Deb:
        return Deb(name, v, desc, depends=list(depends), source=src, section=section,
                   files=files if files is not None else aptrepo._doc(name, v), **kw)

    exact = lambda *names: [f"{n} (= {v})" for n in names]
    debs = []
    for flavour, fl in (("open", "-open"), ("proprietary", "")):
        other = "" if fl else "-open"
        debs += [
            deb(f"nvidia-headless{b}{fl}", "NVIDIA headless metapackage",
                exact(f"nvidia-dkms{b}{fl}", f"nvidia-headless-no-dkms{b}{fl}")),
            deb(f"nvidia-headless-no-dkms{b}{fl}", "NVIDIA headless metapackage - no DKMS",
                exact(f"libnvidia-compute{b}", f"libnvidia-cfg1{b}", f"nvidia-compute-utils{b}",
                      f"nvidia-kernel-source{b}{fl}", f"nvidia-firmware{b}")),
            deb(f"nvidia-dkms{b}{fl}", f"NVIDIA DKMS package ({flavour} kernel module)",
                exact(f"nvidia-kernel-common{b}", f"nvidia-kernel-source{b}{fl}"), section="restricted/kernel",
                conflicts=[f"nvidia-dkms{b}{other}"]),
            deb(f"nvidia-kernel-source{b}{fl}", f"NVIDIA kernel source package ({flavour})",
                section="restricted/kernel", conflicts=[f"nvidia-kernel-source{b}{other}"],
                files=aptrepo.module_source(ver, flavour)),
        ]
    debs += [
        deb(f"nvidia-kernel-common{b}", "Shared files used with the kernel module", section="restricted/kernel"),
        deb(f"nvidia-firmware{b}", "Firmware files used by the kernel module", section="restricted/kernel"),
        deb(f"libnvidia-compute{b}", "NVIDIA libcompute package"),
        deb(f"libnvidia-cfg1{b}", "NVIDIA binary OpenGL/GLX configuration library"),
        # Ubuntu's packaging puts nvidia-persistenced (program, unit, its user) in the compute utilities
        deb(f"nvidia-compute-utils{b}", "NVIDIA compute utilities", exact(f"libnvidia-compute{b}"),
            section="restricted/utils", files={**aptrepo._doc(f"nvidia-compute-utils{b}", v),
                                               **aptrepo.persistenced_files()},
            postinst=aptrepo.PERSISTENCED_POSTINST),
        # no package of the set pulls nvidia-modprobe: NVIDIA's repository has it on its own, at each release
        Deb("nvidia-modprobe", v, "utility to load NVIDIA kernel modules and create device nodes",
            source="nvidia-modprobe", section="multiverse/utils", files=aptrepo.modprobe_files()),
        deb(f"nvidia-utils{b}", "NVIDIA driver support binaries", exact(f"libnvidia-compute{b}"),
            section="restricted/utils", files=smi_files),
        # NVIDIA's version-locking packages (the same on every platform of its repositories)
        *[d for d in aptrepo.driver_debs(ver) if d.name.startswith("nvidia-driver-pinning-")],
    ]
    return debs


def nvidia_debs(key_binary: bytes, repo_url: str) -> list[Deb]:
    debs: list[Deb] = []
    for ver in DRIVER_VERSIONS:
        debs += driver_debs(ver)
    for rel in CUDA_RELEASES:
        debs += aptrepo.cuda_debs(*rel)
    debs += [d for d in aptrepo.cuda_config_debs() if "12-8" not in d.name and "13" not in d.name]
    keyring = aptrepo.cuda_keyring(key_binary, repo_url)
    keyring.files = {k.replace(aptrepo.KEYRING_LIST, KEYRING_LIST): val for k, val in keyring.files.items()}
    return [*debs, keyring]


def archive_debs() -> list[Deb]:
    """The distribution archive: Ubuntu's headless 550 set (aptrepo.distribution_debs) and the headers
    metapackage that follows the kernel."""
    name, ver = HEADERS_GENERIC
    return [*aptrepo.distribution_debs(),
            Deb(name, ver, "Generic Linux kernel headers", source="linux-meta", section="main/kernel",
                files=aptrepo._doc(name, ver))]


class Keyring(aptrepo.Keyring):
    """A signing key in a GnuPG home of the caller's (the chroot run's scratch), not the lab's state."""

    def __init__(self, home: Path) -> None:  # pylint: disable=super-init-not-called
        self.home = home
        self.home.mkdir(parents=True, exist_ok=True)
        self.home.chmod(0o700)


def build(www: Path, repo_url: str, gnupg_home: Path, archive_extra: tuple[Path, ...] = ()) -> dict[str, str]:
    """Build both repositories under www; return the key's fingerprint and the paths. archive_extra: real packages
    (.deb files) the distribution archive serves besides its stand-ins."""
    keyring = Keyring(gnupg_home)
    keyring.ensure()
    out = {}
    for rel, debs, fields in (
            (REPO_PATH, nvidia_debs(keyring.public_binary(), repo_url),
             ["Origin: NVIDIA", "Label: NVIDIA CUDA", "Description: Lab stand-in of NVIDIA's ubuntu2404 repository"]),
            (ARCHIVE_PATH, archive_debs(),
             ["Origin: Lab stand-in", "Label: distribution archive",
              "Description: Lab stand-in of Ubuntu's driver packages"])):
        repo = www / rel
        if repo.exists():
            shutil.rmtree(repo)
        repo.mkdir(parents=True)
        with tempfile.TemporaryDirectory() as scratch:
            built = [aptrepo.build_deb(d, repo, Path(scratch)) for d in debs]
        if rel == ARCHIVE_PATH:
            for deb in archive_extra:
                shutil.copy(deb, repo / deb.name)
                built.append(repo / deb.name)
        aptrepo._write_index(repo, built, keyring, fields)
        out[rel] = str(repo)
    (www / REPO_PATH / aptrepo.KEY_FILE).write_text(keyring.public_armored())
    # the key as a binary keyring, for the distribution archive's entry in the chroot
    (www / "lab-standin-archive-keyring.gpg").write_bytes(keyring.public_binary())
    out["fingerprint"] = keyring.fingerprint()
    return out


def main() -> None:
    import argparse
    import json
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("www", type=Path)
    p.add_argument("--url", default="http://127.0.0.1:8681/")
    p.add_argument("--gnupg-home", type=Path, required=True)
    a = p.parse_args()
    info = build(a.www, a.url + REPO_PATH + "/", a.gnupg_home)
    (a.www / "standin.json").write_text(json.dumps(info, indent=1) + "\n")
    print(json.dumps(info))


if __name__ == "__main__":
    main()
