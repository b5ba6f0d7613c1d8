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
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from . import elfstub, paths, serve
from .hosts import MIRROR_NAME
from .util import LabError, digest, fetch_pinned, log, run

# Where NVIDIA serves it, relative to its host: kept so that only the host differs.
REPO_PATH = "compute/cuda/repos/debian12/x86_64"
KEY_FILE = "3bf863cc.pub"  # the name of NVIDIA's CUDA repository key file
KEYRING_LIST = "cuda-debian12-x86_64.list"  # the source entry NVIDIA's cuda-keyring package installs
# where lab hosts reach the repository (the keyring's entry names it, as NVIDIA's names NVIDIA's)
REPO_URL = f"http://{MIRROR_NAME}:{serve.HTTP_PORT}/{REPO_PATH}/"
DRIVER_VERSIONS = ["580.82.07", "580.95.05", "580.105.08", "590.48.01"]
# (package suffix, toolkit version, nvcc version)
CUDA_RELEASES = [("12-8", "12.8.1", "12.8.93"), ("12-9", "12.9.0", "12.9.41"),
                 ("12-9", "12.9.1", "12.9.86"), ("13-0", "13.0.2", "13.0.88")]
RTX_CAPTURES = paths.FIXTURES / "gpu" / "rtx-pro-6000-x8-real"
# what the stand-in nvidia-smi takes from other real captures (see lab/standins/nvidia_smi.py): the sections the -q
# capture lacks, from a complete one of the same card model, and the format of topo -p2p r
SMI_EXTRA = {"completion-nvidia-smi-q.txt": paths.FIXTURES / "gpu" / "rtx-pro-6000-x8-asus-community" / "nvidia-smi-q.txt",
             "format-topo-p2p-r.txt": paths.FIXTURES / "gpu" / "h100-device" / "captures" / "topo-p2p-r.txt"}
STANDINS = paths.LAB_SRC / "standins"
# The kernel module's source that the stand-in DKMS packages ship (a real module that does nothing)
MODULE_SOURCE = STANDINS / "nvidia-module"
# NVIDIA's DKMS packages from 570.148 on need a newer dkms than bookworm's 3.0.10, and NVIDIA's repositories
# ship one (STACK.md). Which version NVIDIA's debian12 repository has was not found in a source: the stand-in
# serves Debian's own dkms of a later release in its place (fetched from Debian's mirror, checked against its
# sha256), the real program that builds the module.
DKMS_DEPENDENCY = "dkms (>= 3.1.8)"
DKMS_DEB = ("pool/main/d/dkms/dkms_3.2.2-1~deb13u1_all.deb",
            "6840d049df96419be706d135bcba4355e08864b0794977a616db16330871d412")
# the licence each flavour's module declares (modinfo -F license): what tells them apart on a host
MODULE_LICENSES = {"open": "Dual MIT/GPL", "proprietary": "NVIDIA"}
# the lower bound of cuda-drivers-580's dependencies (the branch's first release)
CUDA_DRIVERS_FLOOR = "580.65.06"


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
    source: str | None = None
    arch: str = "amd64"
    replaces: list[str] = field(default_factory=list)
    prerm: str | None = None
    postrm: str | None = None


# The sources the NVIDIA packages are built from, as in NVIDIA's debian12 repository: most come from
# nvidia-graphics-drivers; nvidia-persistenced, nvidia-modprobe and nvidia-settings have their own, released
# at the driver's version.
GRAPHICS = "nvidia-graphics-drivers"


def _doc(name: str, v: str) -> dict[str, tuple[bytes, int]]:
    return {f"usr/share/doc/{name}/README.lab-standin": (f"Lab stand-in of {name} {v}\n".encode(), 0o644)}


def module_source(ver: str, flavour: str) -> dict[str, tuple[bytes, int]]:
    """The kernel module's source where DKMS finds it (/usr/src/<name>-<version>), as NVIDIA's packages lay it
    out: one DKMS package named ``nvidia`` for either flavour (from 570.148 on, the open flavour's is no longer
    ``nvidia-open``: awslabs/amazon-eks-ami#2284)."""
    return {f"usr/src/nvidia-{ver}/{f.name}": (
        f.read_text().replace("@VERSION@", ver).replace("@FLAVOUR@", flavour)
        .replace("@LICENSE@", MODULE_LICENSES[flavour]).encode(), 0o644)
        for f in sorted(MODULE_SOURCE.iterdir())}


def dkms_deb() -> Path:
    """Debian's dkms package (see DKMS_DEB), from the lab's cache or Debian's mirror."""
    from .image import host_debian_mirrors
    pool_path, want = DKMS_DEB
    return fetch_pinned(f"{host_debian_mirrors()[0]}/{pool_path}", want, paths.sub("downloads") / Path(pool_path).name)


PERSISTENCED_UNIT = (
    "[Unit]\nDescription=NVIDIA Persistence Daemon\nWants=syslog.target\n\n"
    "[Service]\nType=forking\nExecStart=/usr/bin/nvidia-persistenced --user nvidia-persistenced\n"
    "ExecStopPost=/bin/rm -rf /var/run/nvidia-persistenced\n\n"
    "[Install]\nWantedBy=multi-user.target\n")
PERSISTENCED_BIN = (
    "#!/bin/sh\n# Lab stand-in of nvidia-persistenced: daemonises and holds a pid file.\n"
    "mkdir -p /var/run/nvidia-persistenced\n"
    "( trap 'exit 0' TERM; while :; do sleep 3600; done ) >/dev/null 2>&1 &\n"
    "echo $! > /var/run/nvidia-persistenced/nvidia-persistenced.pid\n")
# the daemon's user, made at configure as the real packages' maintainer scripts do
PERSISTENCED_POSTINST = (
    "#!/bin/sh\nset -e\nif [ \"$1\" = configure ]; then\n"
    "  getent passwd nvidia-persistenced >/dev/null || "
    "useradd --system --no-create-home --home-dir / --shell /usr/sbin/nologin nvidia-persistenced\nfi\n")


def persistenced_files() -> dict[str, tuple[bytes, int]]:
    """nvidia-persistenced's program (a stand-in) and its systemd unit, as the real packages ship them."""
    return {"usr/bin/nvidia-persistenced": (PERSISTENCED_BIN.encode(), 0o755),
            "lib/systemd/system/nvidia-persistenced.service": (PERSISTENCED_UNIT.encode(), 0o644)}


def modprobe_files() -> dict[str, tuple[bytes, int]]:
    """nvidia-modprobe's program (the lab's stand-in)."""
    return {"usr/bin/nvidia-modprobe": ((STANDINS / "nvidia_modprobe.py").read_text().encode(), 0o755)}


def driver_debs(ver: str) -> list[Deb]:
    """One driver release in the dependency shape of NVIDIA's debian12 repository.

    The desktop metapackage ``nvidia-driver`` depends at the exact version on the X driver and the GL/EGL/GLX
    libraries; the compute-only set is ``nvidia-driver-cuda`` and a kernel module package (NVIDIA driver
    installation guide, Debian, "compute-only"); the kernel module packages need ``nvidia-kernel-support``
    and the GSP firmware; ``nvidia-driver-pinning-<version>`` and ``-<branch>`` are NVIDIA's version-locking
    packages ("Version locking", "Recent updates"). Dependencies on the separately built packages
    (nvidia-persistenced, nvidia-modprobe) carry a lower bound only, as upstream's do.
    """
    v = f"{ver}-1"
    branch = ver.split(".")[0]
    doc = lambda n: _doc(n, v)
    smi = (STANDINS / "nvidia_smi.py").read_text().replace("@LIB_VERSION@", ver)
    smi_files = {"usr/bin/nvidia-smi": (smi.encode(), 0o755)}
    for cap in sorted(RTX_CAPTURES.iterdir()):
        smi_files[f"usr/share/lab-standin/nvidia-smi/{cap.name}"] = (cap.read_bytes(), 0o644)
    for name, cap in SMI_EXTRA.items():
        smi_files[f"usr/share/lab-standin/nvidia-smi/{name}"] = (cap.read_bytes(), 0o644)
    module = lambda flavour: {
        "usr/lib/lab-standin/nvidia-kernel-module": (
            f"MODULE_VERSION={ver}\nMODULE_FLAVOUR={flavour}\nGPU_COUNT=8\n".encode(), 0o644),
        **module_source(ver, flavour)}
    # as dh_dkms writes them: the real DKMS (dkms, served beside; Debian's autoinstall_all_kernels) adds the source
    # and builds and installs the module for every kernel whose headers are installed; a kernel whose headers come
    # later gets it from DKMS's own header_postinst.d hook
    dkms_build = ("#!/bin/sh\nset -e\ncase \"$1\" in\n  configure)\n"
                  f"    /usr/lib/dkms/common.postinst nvidia {ver} \"\" \"\" \"$2\"\n    ;;\nesac\n")
    dkms_remove = ("#!/bin/sh\nset -e\ncase \"$1\" in\n  remove|upgrade|deconfigure)\n"
                   f"    if [ \"$(dkms status -m nvidia -v {ver})\" ]; then dkms remove -m nvidia -v {ver} --all; fi\n"
                   "    ;;\nesac\n")
    exact = lambda *names: [f"{n} (= {v})" for n in names]
    gfx = lambda name, desc, **kw: Deb(name, v, desc, source=GRAPHICS, files=kw.pop("files", doc(name)), **kw)
    pinning = lambda name, pattern: Deb(
        name, v, f"NVIDIA driver version locking ({pattern})", source=name, arch="all",
        conflicts=["nvidia-driver-pinning"], provides=["nvidia-driver-pinning"], replaces=["nvidia-driver-pinning"],
        files={"etc/apt/preferences.d/nvidia-driver-pinning": (
            "".join(f"Package: {glob}\nPin: version {pattern}\nPin-Priority: 1000\n\n"
                    for glob in ("*nvidia*", "libcuda*", "libnv*")).encode(), 0o644)}, section="multiverse/admin")
    return [
        # NVIDIA's metapackages: desktop driver plus module flavour
        Deb("nvidia-open", v, "NVIDIA driver metapackage with open GPU kernel modules", source="nvidia-open",
            depends=exact("nvidia-driver", "nvidia-kernel-open-dkms")),
        # Debian's desktop metapackage: X driver, GL/EGL/GLX, each at exactly this version
        gfx("nvidia-driver", "NVIDIA metapackage",
            depends=exact("nvidia-driver-libs", "nvidia-driver-bin", "xserver-xorg-video-nvidia",
                          "nvidia-vdpau-driver", "nvidia-alternative", "nvidia-smi", "libcuda1", "libnvidia-ml1",
                          "firmware-nvidia-gsp")
            + [f"nvidia-persistenced (>= {branch})",
               f"nvidia-kernel-dkms (= {v}) | nvidia-kernel-open-dkms (= {v})"]),
        gfx("nvidia-driver-libs", "NVIDIA metapackage (OpenGL/GLX/EGL/GLES libraries)",
            depends=exact("libgl1-nvidia-glvnd-glx", "libglx-nvidia0", "libegl-nvidia0", "nvidia-egl-icd")),
        gfx("nvidia-driver-bin", "NVIDIA driver support binaries", depends=exact("nvidia-alternative")),
        gfx("xserver-xorg-video-nvidia", "NVIDIA binary Xorg driver",
            depends=exact("nvidia-alternative", "libglx-nvidia0"), section="multiverse/x11"),
        gfx("libgl1-nvidia-glvnd-glx", "NVIDIA binary OpenGL/GLX library (GLVND variant)",
            depends=exact("libglx-nvidia0"), section="multiverse/libs"),
        gfx("libglx-nvidia0", "NVIDIA binary GLX library", depends=exact("nvidia-alternative", "libnvidia-glcore"),
            section="multiverse/libs"),
        gfx("libegl-nvidia0", "NVIDIA binary EGL library", depends=exact("libnvidia-eglcore"),
            section="multiverse/libs"),
        gfx("libnvidia-glcore", "NVIDIA binary OpenGL/GLX core libraries", section="multiverse/libs"),
        gfx("libnvidia-eglcore", "NVIDIA binary EGL core libraries", section="multiverse/libs"),
        gfx("nvidia-egl-icd", "NVIDIA EGL installable client driver (ICD)", depends=exact("libegl-nvidia0")),
        gfx("nvidia-vdpau-driver", "Video Decode and Presentation API for Unix - NVIDIA driver",
            depends=exact("nvidia-alternative")),
        gfx("nvidia-alternative", "allows the selection of NVIDIA as GLX provider"),
        # the compute-only set (NVIDIA driver installation guide, Debian, compute-only system)
        gfx("nvidia-driver-cuda", "NVIDIA driver CUDA integration components",
            depends=exact("nvidia-smi", "libcuda1", "libnvidia-ml1", "libnvidia-ptxjitcompiler1")
            + [f"nvidia-persistenced (>= {branch})", f"nvidia-modprobe (>= {branch})"]),
        gfx("nvidia-kernel-open-dkms", "NVIDIA open GPU kernel module DKMS source",
            depends=exact("nvidia-kernel-support", "firmware-nvidia-gsp") + [DKMS_DEPENDENCY],
            conflicts=["nvidia-kernel-dkms"], provides=[f"nvidia-kernel-dkms-any (= {v})"],
            files=module("open"), postinst=dkms_build, prerm=dkms_remove, section="multiverse/kernel"),
        gfx("nvidia-kernel-dkms", "NVIDIA proprietary kernel module DKMS source",
            depends=exact("nvidia-kernel-support", "firmware-nvidia-gsp") + [DKMS_DEPENDENCY],
            conflicts=["nvidia-kernel-open-dkms"], provides=[f"nvidia-kernel-dkms-any (= {v})"],
            files=module("proprietary"), postinst=dkms_build, prerm=dkms_remove, section="multiverse/kernel"),
        gfx("nvidia-kernel-support", "NVIDIA binary kernel module support files",
            depends=[f"nvidia-modprobe (>= {branch})"], section="multiverse/kernel"),
        gfx("firmware-nvidia-gsp", "NVIDIA GSP firmware", section="multiverse/kernel"),
        gfx("nvidia-smi", "NVIDIA System Management Interface", depends=exact("libnvidia-ml1"),
            files=smi_files),
        # the driver's CUDA library, which sgl-kernel's extension needs (DT_NEEDED libcuda.so.1): a stub of that
        # soname where the loader's cache finds it (dpkg runs ldconfig through libc-bin's trigger; here postinst)
        gfx("libcuda1", "NVIDIA CUDA Driver Library", depends=exact("libnvidia-ptxjitcompiler1"),
            files={**doc("libcuda1"), **{path: (elfstub.build(soname=soname), 0o644)
                                         for path, soname in elfstub.sonames()["libcuda1"].items()}},
            postinst="#!/bin/sh\nset -e\n[ \"$1\" = configure ] && ldconfig || true\n",
            postrm="#!/bin/sh\nset -e\nldconfig || true\n", section="multiverse/libs"),
        gfx("libnvidia-ptxjitcompiler1", "NVIDIA PTX JIT Compiler library", section="multiverse/libs"),
        gfx("libnvidia-ml1", "NVIDIA Management Library (NVML) runtime library", section="multiverse/libs"),
        Deb("nvidia-persistenced", v, "daemon to maintain persistent software state in the NVIDIA driver",
            source="nvidia-persistenced",
            files=persistenced_files(), postinst=PERSISTENCED_POSTINST),
        Deb("nvidia-modprobe", v, "utility to load NVIDIA kernel modules and create device nodes",
            source="nvidia-modprobe", files=modprobe_files()),
        # NVIDIA's version-locking packages: one per release and one per branch, one installed at a time
        pinning(f"nvidia-driver-pinning-{ver}", f"{ver}-*"),
        pinning(f"nvidia-driver-pinning-{branch}", f"{branch}.*"),
        # NVIDIA's separately built tools that the branch metapackage pulls
        Deb("nvidia-settings", v, "tool for configuring the NVIDIA graphics driver", source="nvidia-settings",
            files=doc("nvidia-settings"), section="multiverse/x11"),
        Deb("nvidia-xconfig", v, "deprecated X configuration tool for non-free NVIDIA drivers",
            source="nvidia-xconfig", files=doc("nvidia-xconfig"), section="multiverse/x11"),
        # NVIDIA's branch metapackage, with the dependencies its debian12 package has (STACK.md): the desktop and
        # compute sets and the proprietary kernel module, each with a lower bound only, so it is no pin and it
        # pulls the proprietary module wherever it is installed.
        Deb(f"cuda-drivers-{branch}", v, f"CUDA drivers metapackage for branch {branch}", source="cuda-drivers",
            depends=[f"{n} (>= {CUDA_DRIVERS_FLOOR})" for n in ("nvidia-driver", "nvidia-driver-cuda",
                                                                  "nvidia-kernel-dkms", "nvidia-settings",
                                                                  "nvidia-xconfig")]),
    ]


# A distribution archive's driver, as hosts have it before this collection runs (issue 32): Ubuntu's
# nvidia-graphics-drivers-550 in its compute-only ("headless") shape, the branch in the names and every
# dependency at the exact version, from an archive other than NVIDIA's repository. Served flat under
# ARCHIVE_PATH, signed with the lab key; the contents are stand-ins (documentation files only, so that they
# can sit beside a converged host's NVIDIA packages, as a half-replaced driver does).
ARCHIVE_PATH = "lab-standin-distribution-archive"
ARCHIVE_URL = f"http://{MIRROR_NAME}:{serve.HTTP_PORT}/{ARCHIVE_PATH}/"
ARCHIVE_DRIVER = ("550", "550.163.01-0ubuntu0.24.04.1")


def distribution_debs() -> list[Deb]:
    """Ubuntu's headless 550 set: nvidia-headless-550 on nvidia-dkms-550 and nvidia-headless-no-dkms-550, which
    pull the compute library, the utilities and the kernel source, each at exactly this version."""
    branch, v = ARCHIVE_DRIVER
    exact = lambda *names: [f"{n}-{branch} (= {v})" for n in names]
    deb = lambda name, desc, depends=(): Deb(f"{name}-{branch}", v, desc, depends=list(depends),
                                               source=f"nvidia-graphics-drivers-{branch}",
                                               files=_doc(f"{name}-{branch}", v), section="restricted/libs")
    return [
        deb("nvidia-headless", "NVIDIA headless metapackage", exact("nvidia-dkms", "nvidia-headless-no-dkms")),
        deb("nvidia-headless-no-dkms", "NVIDIA headless metapackage - no DKMS",
            exact("libnvidia-compute", "libnvidia-cfg1", "nvidia-compute-utils", "nvidia-kernel-source")),
        deb("nvidia-dkms", "NVIDIA DKMS package", exact("nvidia-kernel-common", "nvidia-kernel-source")),
        deb("nvidia-kernel-common", "Shared files used with the kernel module"),
        deb("nvidia-kernel-source", "NVIDIA kernel source package"),
        deb("libnvidia-compute", "NVIDIA libcompute package"),
        deb("libnvidia-cfg1", "NVIDIA binary OpenGL/GLX configuration library"),
        deb("nvidia-compute-utils", "NVIDIA compute utilities", exact("libnvidia-compute")),
        deb("nvidia-utils", "NVIDIA driver support binaries", exact("libnvidia-compute")),
    ]


def cuda_keyring(key_binary: bytes, repo_url: str) -> Deb:
    """NVIDIA's cuda-keyring 1.1-1 as laid out upstream: the key as a binary keyring under
    /usr/share/keyrings and a one-line source entry for the repository, signed by it."""
    return Deb("cuda-keyring", "1.1-1", "GPG keyring for the CUDA repository", source="cuda-keyring", arch="all",
               files={"usr/share/keyrings/cuda-archive-keyring.gpg": (key_binary, 0o644),
                      f"etc/apt/sources.list.d/{KEYRING_LIST}": (
                          f"deb [signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg] {repo_url} /\n".encode(),
                          0o644)},
               section="multiverse/admin")


def cuda_config_debs() -> list[Deb]:
    """The toolkit's configuration packages as in NVIDIA's repository (checked on a host with CUDA 13.0 from it):
    every ``cuda-cudart-X-Y`` depends on ``cuda-toolkit-config-common``, ``cuda-toolkit-X-config-common`` and
    ``cuda-toolkit-X-Y-config-common`` (architecture all). The release's own one registers ``/usr/local/cuda``
    and ``/usr/local/cuda-X`` as alternatives (``update-alternatives --install``, priority XY without the dot)
    in its postinst and removes them in its postrm: dpkg owns the stable path, and in automatic mode the
    newest toolkit installed wins it. One package of each shared name, at the newest release of its scope, one
    release-specific package per toolkit version. Their maintainer scripts are NVIDIA's, line for line; as there,
    ``update-alternatives --install`` fails where the release's directory is not there yet (apt unpacks the
    toolkit's other packages first)."""
    debs: list[Deb] = []
    newest_of: dict[str, str] = {}
    for suffix, version, _ in CUDA_RELEASES:
        major = suffix.split("-")[0]
        for name in ("cuda-toolkit-config-common", f"cuda-toolkit-{major}-config-common"):
            newest_of[name] = max(newest_of.get(name, version), version, key=lambda v: tuple(map(int, v.split("."))))
        release = suffix.replace("-", ".")
        prefix = f"/usr/local/cuda-{release}"
        priority = int(suffix.replace("-", ""))
        postinst = ("#! /bin/sh\n\nset -e\n\ncase \"$1\" in\n    configure)\n        echo Setting alternatives\n"
                    f"        update-alternatives --install /usr/local/cuda cuda {prefix} {priority}\n"
                    f"        update-alternatives --install /usr/local/cuda-{major} cuda-{major} {prefix} {priority}\n"
                    "        ldconfig\n        ;;\nesac\n\nexit 0\n")
        postrm = ("#! /bin/sh\n\nset -e\n\ncase \"$1\" in\n    remove|purge)\n        echo Removing alternatives\n"
                  f"        update-alternatives --remove cuda {prefix}\n"
                  f"        update-alternatives --remove cuda-{major} {prefix}\n"
                  "        ldconfig\n        ;;\nesac\n")
        debs.append(Deb(f"cuda-toolkit-{suffix}-config-common", f"{version}-1",
                        f"Common config package for CUDA Toolkit {release}", arch="all",
                        postinst=postinst, postrm=postrm, section="multiverse/devel"))
    ldconfig = ("#! /bin/sh\n\nset -e\n\ncase \"$1\" in\n    configure)\n        ldconfig\n        ;;\nesac\n\nexit 0\n",
                "#! /bin/sh\n\nset -e\n\ncase \"$1\" in\n    remove|purge)\n        ldconfig\n        ;;\nesac\n")
    for name, version in newest_of.items():
        major = name.removeprefix("cuda-toolkit-").removesuffix("config-common").strip("-")
        conf, lib = ((f"{1000 - int(major)}_cuda-{major}.conf", f"/usr/local/cuda-{major}/targets/x86_64-linux/lib")
                     if major else ("000_cuda.conf", "/usr/local/cuda/targets/x86_64-linux/lib"))
        debs.append(Deb(name, f"{version}-1", f"Common config package for CUDA Toolkit{' ' + major if major else ''}",
                        arch="all", files={f"etc/ld.so.conf.d/{conf}": (f"{lib}\n".encode(), 0o644)},
                        postinst=ldconfig[0], postrm=ldconfig[1]))
    return debs


def cuda_debs(suffix: str, version: str, nvcc_version: str) -> list[Deb]:
    v = f"{version}-1"
    release = suffix.replace("-", ".")
    major = suffix.split("-")[0]
    nvcc = (STANDINS / "nvcc.py").read_text().replace("@RELEASE@", release).replace("@FULL@", nvcc_version)
    return [
        Deb(f"cuda-toolkit-{suffix}", v, f"CUDA Toolkit {release} meta-package",
            depends=[f"cuda-nvcc-{suffix} (= {nvcc_version}-1)", f"cuda-cudart-{suffix} (= {version}-1)"]),
        Deb(f"cuda-nvcc-{suffix}", f"{nvcc_version}-1", "CUDA nvcc",
            files={f"usr/local/cuda-{release}/bin/nvcc": (nvcc.encode(), 0o755)}),
        Deb(f"cuda-cudart-{suffix}", v, "CUDA Runtime native Libraries",
            depends=["cuda-toolkit-config-common", f"cuda-toolkit-{major}-config-common",
                     f"cuda-toolkit-{suffix}-config-common"],
            files={f"usr/local/cuda-{release}/lib64/README.lab-standin": (b"Lab stand-in of libcudart\n", 0o644)}),
        # The full meta-package also pulls the driver: the toolkit role must not install it.
        Deb(f"cuda-{suffix}", v, f"CUDA {release} meta-package (toolkit and driver)",
            depends=[f"cuda-toolkit-{suffix} (= {v})", "cuda-drivers (>= 575.51.03) | nvidia-driver (>= 575.51.03)"]),
    ]


def all_debs(key_binary: bytes = b"", repo_url: str = REPO_URL) -> list[Deb]:
    debs: list[Deb] = []
    for ver in DRIVER_VERSIONS:
        debs += driver_debs(ver)
    for rel in CUDA_RELEASES:
        debs += cuda_debs(*rel)
    debs += cuda_config_debs()
    debs += [cuda_keyring(key_binary, repo_url)]
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
    control = [f"Package: {deb.name}", *([f"Source: {deb.source}"] if deb.source and deb.source != deb.name else []),
               f"Version: {deb.version}", f"Architecture: {deb.arch}",
               "Maintainer: blackwell.serving lab <lab@localhost>", f"Installed-Size: {size_kb}",
               f"Section: {deb.section}", "Priority: optional"]
    for key, vals in (("Depends", deb.depends), ("Conflicts", deb.conflicts), ("Replaces", deb.replaces),
                      ("Provides", deb.provides)):
        if vals:
            control.append(f"{key}: {', '.join(vals)}")
    control.append(f"Description: {deb.description} (lab stand-in)\n"
                   " Built by the blackwell.serving lab; its content is a stand-in.")
    (stage / "DEBIAN/control").write_text("\n".join(control) + "\n")
    for script, text in (("postinst", deb.postinst), ("prerm", deb.prerm), ("postrm", deb.postrm)):
        if text:
            (stage / "DEBIAN" / script).write_text(text)
            (stage / "DEBIAN" / script).chmod(0o755)
    path = out / f"{deb.name}_{deb.version.split(':')[-1]}_{deb.arch}.deb"
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

    def public_binary(self) -> bytes:
        return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(self.home), "--export"],
                              capture_output=True, check=True).stdout

    def fingerprint(self) -> str:
        """The primary key's fingerprint (what a site pins as nvidia_repo_key_fingerprint)."""
        for line in self.gpg("--with-colons", "--fingerprint").splitlines():
            if line.startswith("fpr:"):
                return line.split(":")[9]
        raise LabError("the lab's signing key has no fingerprint")


def key_fingerprint() -> str:
    """The fingerprint of the key the stand-in repository is signed with (the lab's inventory pins it)."""
    keyring = Keyring()
    keyring.ensure()
    return keyring.fingerprint()


def build(www: Path) -> Path:
    """Build the repository under www/REPO_PATH (only when its inputs changed)."""
    repo = www / REPO_PATH
    sources = [Path(__file__).read_bytes(), *[p.read_bytes() for p in sorted(STANDINS.glob("*.py"))],
               *[p.read_bytes() for p in sorted(MODULE_SOURCE.iterdir())],
               Path(elfstub.__file__).read_bytes(), elfstub.NEEDED.read_bytes(),
               *[p.read_bytes() for p in sorted(RTX_CAPTURES.iterdir())],
               *[p.read_bytes() for p in SMI_EXTRA.values()]]
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
    # a scratch directory of this build's own: two builds at once (two test workers) never share a stage
    with tempfile.TemporaryDirectory(dir=paths.sub("scratch")) as scratch:
        debs = [build_deb(d, repo, Path(scratch)) for d in all_debs(keyring.public_binary())]
    debs.append(Path(shutil.copy(dkms_deb(), repo)))
    if not debs:
        raise LabError("no packages were built")
    _write_index(repo, debs, keyring, ["Origin: NVIDIA", "Label: NVIDIA CUDA",
                                       "Description: Lab stand-in of NVIDIA's CUDA repository"])
    (repo / KEY_FILE).write_text(keyring.public_armored())
    # the distribution archive's driver, signed with the same key (a host that trusts the lab's NVIDIA key
    # reads it with signed-by=/usr/share/keyrings/cuda-archive-keyring.gpg)
    archive = www / ARCHIVE_PATH
    if archive.exists():
        shutil.rmtree(archive)
    archive.mkdir(parents=True)
    with tempfile.TemporaryDirectory(dir=paths.sub("scratch")) as scratch:
        archive_debs = [build_deb(d, archive, Path(scratch)) for d in distribution_debs()]
    _write_index(archive, archive_debs, keyring, ["Origin: Lab stand-in", "Label: distribution archive",
                                                  "Description: Lab stand-in of a distribution's driver packages"])
    stamp.write_text(key)
    return repo


def _write_index(repo: Path, debs: list[Path], keyring: Keyring, fields: list[str]) -> None:
    """A flat repository's Packages, Release (with the fields given), InRelease and Release.gpg."""
    packages = packages_index(debs, repo)
    (repo / "Packages").write_bytes(packages)
    (repo / "Packages.gz").write_bytes(gzip.compress(packages, mtime=0))
    files = {"Packages": packages, "Packages.gz": (repo / "Packages.gz").read_bytes()}
    release = [*fields, "Architecture: amd64", f"Date: {time.strftime('%a, %d %b %Y %H:%M:%S +0000', time.gmtime())}"]
    for algo in ("MD5Sum", "SHA256"):
        release.append(f"{algo}:")
        for name, data in files.items():
            release.append(f" {_hashes(data)[algo]} {len(data)} {name}")
    release_text = "\n".join(release) + "\n"
    (repo / "Release").write_text(release_text)
    (repo / "InRelease").write_text(keyring.gpg("--clearsign", "--digest-algo", "SHA256", input=release_text))
    (repo / "Release.gpg").write_text(keyring.gpg("--armor", "--detach-sign", "--digest-algo", "SHA256",
                                                  input=release_text))
