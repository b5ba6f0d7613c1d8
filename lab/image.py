"""A systemd-capable Debian bookworm image, built without a registry.

debootstrap makes the root file system from Debian's mirror (the one the
host's own apt uses), the host's extra CA certificates are copied in and
trusted, and ``docker import`` turns the tree into an image. The image's tag
is a digest of everything that goes into it, so a changed input rebuilds it.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

from . import paths
from .engine import docker
from .util import LabError, digest, log, run

SUITE = "bookworm"
IMAGE_REPO = "blackwell-lab/debian"
# What a freshly installed Debian server has, plus what Ansible needs on a target.
PACKAGES = [
    "python3", "python3-apt", "systemd", "systemd-sysv", "dbus", "sudo", "ca-certificates",
    "procps", "iproute2", "openssh-server", "kmod", "gnupg", "curl", "less", "udev",
    "locales", "cron", "unattended-upgrades", "apt-utils", "initramfs-tools",
]
EXTRA_CA_DIR = Path("/usr/local/share/ca-certificates")
IMAGE_FILES = paths.LAB_SRC / "image"
# the build tree of the running kernel's stand-in headers package (see _install_kernel_headers_standin)
KERNEL_BUILD_STANDIN = paths.LAB_SRC / "standins" / "kernel"


def host_debian_mirrors() -> tuple[str, str]:
    """The Debian and Debian-security URIs the host's apt uses (or BLACKWELL_LAB_DEBIAN_MIRROR)."""
    override = os.environ.get("BLACKWELL_LAB_DEBIAN_MIRROR")
    uris: list[str] = []
    for src in [Path("/etc/apt/sources.list.d/debian.sources"), Path("/etc/apt/sources.list"),
                *sorted(Path("/etc/apt/sources.list.d").glob("*.list"))]:
        if src.is_file():
            text = src.read_text(errors="replace")
            uris += re.findall(r"^URIs:\s*(\S+)", text, re.M)
            uris += re.findall(r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)", text, re.M)
    main = override or next((u for u in uris if re.search(r"/debian/?$", u)), None)
    if not main:
        raise LabError("cannot find the host's Debian mirror; set BLACKWELL_LAB_DEBIAN_MIRROR")
    security = next((u for u in uris if "debian-security" in u), main.rstrip("/") + "-security")
    return main.rstrip("/"), security.rstrip("/")


def extra_ca_certs() -> list[Path]:
    if not EXTRA_CA_DIR.is_dir():
        return []
    return sorted(p for p in EXTRA_CA_DIR.rglob("*.crt") if p.is_file())


def image_tag() -> str:
    mirror, security = host_debian_mirrors()
    parts: list[bytes | str] = [SUITE, mirror, security, *PACKAGES, os.uname().release]
    for cert in extra_ca_certs():
        parts += [cert.name, cert.read_bytes()]
    for f in sorted([*IMAGE_FILES.rglob("*"), *KERNEL_BUILD_STANDIN.iterdir()]):
        if f.is_file():
            parts += [str(f.relative_to(paths.LAB_SRC)), f.read_bytes()]
    parts.append(Path(__file__).read_bytes())
    return f"{IMAGE_REPO}:{SUITE}-{digest(parts)}"


def image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def ensure_image() -> str:
    tag = image_tag()
    if image_exists(tag):
        return tag
    mirror, security = host_debian_mirrors()
    work = paths.sub("image")
    rootfs = work / "rootfs"
    if rootfs.exists():
        shutil.rmtree(rootfs)
    log(f"building {tag} with debootstrap from {mirror} (about a minute)")
    run(["debootstrap", "--variant=minbase", f"--include={','.join(PACKAGES)}", SUITE, str(rootfs), mirror],
        capture=True)
    _customise(rootfs, mirror, security)
    log("importing the root file system into the engine")
    tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
    imp = subprocess.run(
        ["docker", "import", "-c", "ENV container=docker", "-c", 'CMD ["/lib/systemd/systemd"]',
         "-", tag],
        stdin=tar.stdout, capture_output=True, text=True)
    tar.stdout.close()  # so that tar ends (and does not block) if the import stopped early
    tar.wait()
    if imp.returncode != 0 or tar.returncode != 0:
        raise LabError(f"docker import failed: {imp.stderr}")
    shutil.rmtree(rootfs)
    return tag


def _customise(rootfs: Path, mirror: str, security: str) -> None:
    # Trust what the host trusts: extra CA certificates are copied at build time, never committed.
    dest = rootfs / "usr/local/share/ca-certificates"
    dest.mkdir(parents=True, exist_ok=True)
    for cert in extra_ca_certs():
        shutil.copy2(cert, dest / cert.name)
    run(["chroot", str(rootfs), "update-ca-certificates"], capture=True)
    (rootfs / "etc/apt/sources.list").unlink(missing_ok=True)
    (rootfs / "etc/apt/sources.list.d/debian.sources").write_text(
        f"Types: deb\nURIs: {mirror}\nSuites: {SUITE} {SUITE}-updates\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n\n"
        f"Types: deb\nURIs: {security}\nSuites: {SUITE}-security\nComponents: main\n"
        "Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg\n")
    # Files of the simulated machine (its stand-in hardware), see lab/image/.
    for src in IMAGE_FILES.rglob("*"):
        if src.is_file():
            target = rootfs / src.relative_to(IMAGE_FILES)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, target)
    _install_kernel_headers_standin(rootfs)
    wants = rootfs / "etc/systemd/system/multi-user.target.wants"
    wants.mkdir(parents=True, exist_ok=True)
    for unit in (IMAGE_FILES / "etc/systemd/system").glob("*.service"):
        link = wants / unit.name
        if not link.exists():
            link.symlink_to(f"/etc/systemd/system/{unit.name}")
    # Units that make no sense in a container, and a first boot without a machine id.
    for unit in ["systemd-remount-fs.service", "getty@tty1.service", "systemd-firstboot.service",
                 "apt-daily.timer", "apt-daily-upgrade.timer"]:
        mask = rootfs / "etc/systemd/system" / unit
        mask.unlink(missing_ok=True)
        mask.symlink_to("/dev/null")
    (rootfs / "etc/machine-id").write_text("")
    (rootfs / "etc/hostname").write_text("localhost\n")
    shutil.rmtree(rootfs / "var/lib/apt/lists", ignore_errors=True)
    (rootfs / "var/lib/apt/lists/partial").mkdir(parents=True, exist_ok=True)
    shutil.rmtree(rootfs / "var/cache/apt/archives", ignore_errors=True)
    (rootfs / "var/cache/apt/archives/partial").mkdir(parents=True, exist_ok=True)
    for key in (rootfs / "etc/ssh").glob("ssh_host_*"):
        key.unlink()  # made anew per container by the ssh-keygen unit below


def _install_kernel_headers_standin(rootfs: Path) -> None:
    """The simulated machine runs this host's kernel, which no Debian package matches: it ships a
    stand-in of that kernel's headers package, as a real server's vendor kernel would ship its own. Like
    Debian's, it links /lib/modules/<kernel>/build to its tree, where the real DKMS builds modules for the
    running kernel; the tree's build system is a stand-in (lab/standins/kernel/kbuild.py) that writes each
    module's ELF object with its module information instead of compiling it."""
    release = os.uname().release
    stage = paths.sub("scratch") / f"linux-headers-{release}"
    if stage.exists():
        shutil.rmtree(stage)
    (stage / "DEBIAN").mkdir(parents=True)
    tree = stage / "usr/src" / f"linux-headers-{release}"
    (tree / "include").mkdir(parents=True)
    (tree / "README.lab-standin").write_text(f"Lab stand-in of the headers of kernel {release}.\n")
    (tree / "Makefile").write_text((KERNEL_BUILD_STANDIN / "Makefile").read_text().replace("@KERNEL@", release))
    shutil.copy(KERNEL_BUILD_STANDIN / "kbuild.py", tree / "kbuild.py")
    (stage / "lib/modules" / release).mkdir(parents=True)
    (stage / "lib/modules" / release / "build").symlink_to(f"/usr/src/linux-headers-{release}")
    (stage / "DEBIAN/control").write_text(
        f"Package: linux-headers-{release}\nVersion: 1.0-lab\nArchitecture: amd64\n"
        "Maintainer: blackwell.serving lab <lab@localhost>\n"
        f"Description: Lab stand-in of the headers of kernel {release}\n")
    deb = stage.parent / f"linux-headers-{release}.deb"
    run(["dpkg-deb", "--root-owner-group", "--build", str(stage), str(deb)], capture=True, quiet=True)
    shutil.copy(deb, rootfs / "tmp" / deb.name)
    run(["chroot", str(rootfs), "dpkg", "-i", f"/tmp/{deb.name}"], capture=True)
    (rootfs / "tmp" / deb.name).unlink()
    shutil.rmtree(stage)
