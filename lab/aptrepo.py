"""Stand-in for NVIDIA's CUDA apt repository (Debian 12, x86_64), signed with a lab key.

Packages carry the real repository's names and versions for the pinned
driver branch and CUDA release, plus one older and one newer of each (and a
590 driver, the branch that a loose 580 dependency pulls in), so that pinning
and re-pinning can be tested. The contents are stand-ins: nvidia-smi replays
the real captures of an 8x RTX PRO 6000 host, nvcc answers --version, the
kernel-module package records the version that the lab image "loads" at boot.
"""
from __future__ import annotations

import gzip
import hashlib
import shutil
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import paths
from .util import LabError, digest, log, run

# Where NVIDIA serves it, relative to its host: kept so that only the host differs.
REPO_PATH = "compute/cuda/repos/debian12/x86_64"
KEY_FILE = "3bf863cc.pub"  # the name of NVIDIA's CUDA repository key file
DRIVER_VERSIONS = ["580.82.07", "580.95.05", "580.105.08", "590.48.01"]
# (package suffix, toolkit version, nvcc version)
CUDA_RELEASES = [("12-8", "12.8.1", "12.8.93"), ("12-9", "12.9.0", "12.9.41"),
                 ("12-9", "12.9.1", "12.9.86"), ("13-0", "13.0.2", "13.0.88")]
RTX_CAPTURES = paths.FIXTURES / "gpu" / "rtx-pro-6000-x8-real"
STANDINS = paths.LAB_SRC / "standins"


@dataclass
class Deb:
    name: str
    version: str
    description: str
    depends: list[str] = field(default_factory=list)
    conflicts: list[str] = field(default_factory=list)
    provides: list[str] = field(default_factory=list)
    files: dict[str, tuple[bytes, int]] = field(default_factory=dict)  # path -> (content, mode)
    postinst: str | None = None
    section: str = "multiverse/devel"


def driver_debs(ver: str) -> list[Deb]:
    v = f"{ver}-1"
    branch = ver.split(".")[0]
    doc = lambda n: {f"usr/share/doc/{n}/README.lab-standin": (f"Lab stand-in of {n} {v}\n".encode(), 0o644)}
    smi = (STANDINS / "nvidia_smi.py").read_text().replace("@LIB_VERSION@", ver)
    smi_files = {"usr/bin/nvidia-smi": (smi.encode(), 0o755)}
    for cap in sorted(RTX_CAPTURES.iterdir()):
        smi_files[f"usr/share/lab-standin/nvidia-smi/{cap.name}"] = (cap.read_bytes(), 0o644)
    module = lambda flavour: {
        "usr/lib/lab-standin/nvidia-kernel-module": (
            f"MODULE_VERSION={ver}\nMODULE_FLAVOUR={flavour}\nGPU_COUNT=8\n".encode(), 0o644),
        f"usr/src/nvidia-{ver}/dkms.conf": (f'PACKAGE_NAME="nvidia"\nPACKAGE_VERSION="{ver}"\n'.encode(), 0o644)}
    persistenced_unit = (
        "[Unit]\nDescription=NVIDIA Persistence Daemon\nWants=syslog.target\n\n"
        "[Service]\nType=forking\nExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced\n"
        "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced\n\n"
        "[Install]\nWantedBy=multi-user.target\n")
    persistenced_bin = (
        "#!/bin/sh\n# Lab stand-in of nvidia-persistenced: daemonises and holds a pid file.\n"
        "mkdir -p /var/run/nvidia-persistenced\n"
        "( trap 'exit 0' TERM; while :; do sleep 3600; done ) >/dev/null 2>&1 &\n"
        "echo $! > /var/run/nvidia-persistenced/nvidia-persistenced.pid\n")
    return [
        Deb("nvidia-open", v, "NVIDIA driver metapackage with open GPU kernel modules",
            depends=[f"nvidia-driver (= {v})", f"nvidia-kernel-open-dkms (= {v})"]),
        Deb("nvidia-driver", v, "NVIDIA metapackage",
            depends=[f"nvidia-smi (= {v})", f"libcuda1 (= {v})", f"libnvidia-ml1 (= {v})",
                     f"nvidia-persistenced (= {v})", f"firmware-nvidia-gsp (= {v})",
                     f"nvidia-kernel-open-dkms (= {v}) | nvidia-kernel-dkms (= {v})"], files=doc("nvidia-driver")),
        Deb("nvidia-kernel-open-dkms", v, "NVIDIA open GPU kernel module DKMS source",
            conflicts=["nvidia-kernel-dkms"], provides=[f"nvidia-kernel-dkms-any (= {v})"],
            files=module("open"), section="multiverse/kernel"),
        Deb("nvidia-kernel-dkms", v, "NVIDIA proprietary kernel module DKMS source",
            conflicts=["nvidia-kernel-open-dkms"], provides=[f"nvidia-kernel-dkms-any (= {v})"],
            files=module("proprietary"), section="multiverse/kernel"),
        Deb("nvidia-smi", v, "NVIDIA System Management Interface", depends=[f"libnvidia-ml1 (= {v})"],
            files=smi_files),
        Deb("libcuda1", v, "NVIDIA CUDA Driver Library", files=doc("libcuda1")),
        Deb("libnvidia-ml1", v, "NVIDIA Management Library (NVML) runtime library", files=doc("libnvidia-ml1")),
        Deb("firmware-nvidia-gsp", v, "NVIDIA GSP firmware", files=doc("firmware-nvidia-gsp")),
        Deb("nvidia-persistenced", v, "daemon to maintain persistent software state in the NVIDIA driver",
            files={"usr/bin/nvidia-persistenced": (persistenced_bin.encode(), 0o755),
                   "lib/systemd/system/nvidia-persistenced.service": (persistenced_unit.encode(), 0o644)},
            postinst="#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then\n"
                     "  getent passwd nvidia-persistenced >/dev/null || "
                     "useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin nvidia-persistenced\nfi\n"),
        # NVIDIA's branch metapackage: its dependency has no upper bound, so it is no pin (STACK.md).
        Deb(f"cuda-drivers-{branch}", v, f"CUDA drivers metapackage for branch {branch}",
            depends=["nvidia-driver (>= 580.65.06)"]),
    ]


def cuda_debs(suffix: str, version: str, nvcc_version: str) -> list[Deb]:
    v = f"{version}-1"
    release = suffix.replace("-", ".")
    nvcc = (STANDINS / "nvcc.py").read_text().replace("@RELEASE@", release).replace("@FULL@", nvcc_version)
    return [
        Deb(f"cuda-toolkit-{suffix}", v, f"CUDA Toolkit {release} meta-package",
            depends=[f"cuda-nvcc-{suffix} (= {nvcc_version}-1)", f"cuda-cudart-{suffix} (= {version}-1)"]),
        Deb(f"cuda-nvcc-{suffix}", f"{nvcc_version}-1", "CUDA nvcc",
            files={f"usr/local/cuda-{release}/bin/nvcc": (nvcc.encode(), 0o755)}),
        Deb(f"cuda-cudart-{suffix}", v, "CUDA Runtime native Libraries",
            files={f"usr/local/cuda-{release}/lib64/README.lab-standin": (b"Lab stand-in of libcudart\n", 0o644)}),
        # The full meta-package also pulls the driver: the toolkit role must not install it.
        Deb(f"cuda-{suffix}", v, f"CUDA {release} meta-package (toolkit and driver)",
            depends=[f"cuda-toolkit-{suffix} (= {v})", "cuda-drivers (>= 575.51.03) | nvidia-driver (>= 575.51.03)"]),
    ]


def all_debs() -> list[Deb]:
    debs: list[Deb] = []
    for ver in DRIVER_VERSIONS:
        debs += driver_debs(ver)
    for rel in CUDA_RELEASES:
        debs += cuda_debs(*rel)
    return debs


def build_deb(deb: Deb, out: Path, scratch: Path) -> Path:
    stage = scratch / f"{deb.name}_{deb.version}"
    if stage.exists():
        shutil.rmtree(stage)
    (stage / "DEBIAN").mkdir(parents=True)
    for rel, (content, mode) in deb.files.items():
        target = stage / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(content)
        target.chmod(mode)
    size_kb = max(1, sum(len(c) for c, _ in deb.files.values()) // 1024)
    control = [f"Package: {deb.name}", f"Version: {deb.version}", "Architecture: amd64",
               "Maintainer: blackwell.serving lab <lab@localhost>", f"Installed-Size: {size_kb}",
               f"Section: {deb.section}", "Priority: optional"]
    for key, vals in (("Depends", deb.depends), ("Conflicts", deb.conflicts), ("Provides", deb.provides)):
        if vals:
            control.append(f"{key}: {', '.join(vals)}")
    control.append(f"Description: {deb.description} (lab stand-in)\n"
                   " Built by the blackwell.serving lab; its content is a stand-in.")
    (stage / "DEBIAN/control").write_text("\n".join(control) + "\n")
    if deb.postinst:
        (stage / "DEBIAN/postinst").write_text(deb.postinst)
        (stage / "DEBIAN/postinst").chmod(0o755)
    path = out / f"{deb.name}_{deb.version}_amd64.deb"
    run(["dpkg-deb", "--root-owner-group", "-Zgzip", "-z1", "--build", str(stage), str(path)], capture=True, quiet=True)
    shutil.rmtree(stage)
    return path


def _hashes(data: bytes) -> dict[str, str]:
    return {"MD5Sum": hashlib.md5(data).hexdigest(), "SHA256": hashlib.sha256(data).hexdigest()}


def packages_index(debs: list[Path], base: Path) -> bytes:
    stanzas = []
    for path in sorted(debs):
        control = subprocess.run(["dpkg-deb", "-f", str(path)], capture_output=True, text=True, check=True).stdout
        data = path.read_bytes()
        h = _hashes(data)
        stanzas.append(control.rstrip("\n") + f"\nFilename: ./{path.relative_to(base)}\nSize: {len(data)}\n"
                       f"MD5sum: {h['MD5Sum']}\nSHA256: {h['SHA256']}\n")
    return "\n".join(stanzas).encode()


class Keyring:
    """The lab's signing key: made once per lab state, never committed."""

    def __init__(self) -> None:
        self.home = paths.sub("gpg")
        self.home.chmod(0o700)

    def gpg(self, *args: str, input: str | None = None) -> str:
        return run(["gpg", "--batch", "--quiet", "--homedir", str(self.home), *args],
                   capture=True, quiet=True, input=input).stdout

    def ensure(self) -> None:
        if not self.gpg("--list-secret-keys").strip():
            log("making the lab's apt signing key")
            self.gpg("--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key",
                     "blackwell.serving lab stand-in repository <lab@localhost>", "ed25519", "sign", "never")

    def public_armored(self) -> str:
        return self.gpg("--armor", "--export")


def build(www: Path) -> Path:
    """Build the repository under www/REPO_PATH (only when its inputs changed)."""
    repo = www / REPO_PATH
    sources = [Path(__file__).read_bytes(), *[p.read_bytes() for p in sorted(STANDINS.glob("*.py"))],
               *[p.read_bytes() for p in sorted(RTX_CAPTURES.iterdir())]]
    keyring = Keyring()
    keyring.ensure()
    key = digest([*sources, keyring.public_armored()])
    stamp = repo / ".lab-digest"
    if stamp.is_file() and stamp.read_text() == key:
        return repo
    log(f"building the stand-in NVIDIA apt repository ({len(DRIVER_VERSIONS)} driver and "
        f"{len(CUDA_RELEASES)} CUDA versions)")
    if repo.exists():
        shutil.rmtree(repo)
    repo.mkdir(parents=True)
    scratch = paths.sub("scratch")
    debs = [build_deb(d, repo, scratch) for d in all_debs()]
    packages = packages_index(debs, repo)
    (repo / "Packages").write_bytes(packages)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    files = {"Packages": packages, "Packages.gz": (repo / "Packages.gz").read_bytes()}
    release = ["Origin: NVIDIA", "Label: NVIDIA CUDA", "Architecture: amd64",
               f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}",
               "Description: Lab stand-in of NVIDIA's CUDA repository"]
    for algo in ("MD5Sum", "SHA256"):
        release.append(f"{algo}:")
        for name, data in files.items():
            release.append(f" {_hashes(data)[algo]} {len(data)} {name}")
    release_text = "\n".join(release) + "\n"
    (repo / "Release").write_text(release_text)
    (repo / "InRelease").write_text(keyring.gpg("--clearsign", "--digest-algo", "SHA256", input=release_text))
    (repo / "Release.gpg").write_text(keyring.gpg("--armor", "--detach-sign", "--digest-algo", "SHA256",
                                                  input=release_text))
    (repo / KEY_FILE).write_text(keyring.public_armored())
    stamp.write_text(key)
    if not debs:
        raise LabError("no packages were built")
    return repo
