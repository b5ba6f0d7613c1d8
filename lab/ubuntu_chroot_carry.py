"""Lay out what lab/ubuntu_chroot.py needs on the lent machine, in one directory that `run` carries.

    python3 -m lab.ubuntu_chroot_carry DEST --wheels DIR...

What it fetches (SOURCES: Debian's mirror and PyPI, checked against the sha256 from Debian bookworm's Sources and
Packages indexes and PyPI's JSON API; cached in the lab's downloads): python-apt 2.6.0's source and libapt-pkg-dev
2.6.1, to build python-apt there; the systemd tools and sudo that the lent machine's userland (a container image)
lacks and a server's image has (Debian bookworm's: Ubuntu's archive is out of reach); uv's wheel for uv_venv.
--wheels: the wheels of ansible-core and what it needs for Python 3.12 (Ubuntu's Python has no jinja2, PyYAML,
MarkupSafe, packaging of its own there).
"""
from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

from . import aptrepo_ubuntu, paths
from .util import fetch_pinned

DEBIAN = "http://deb.debian.org/debian"
PYPI_FILES = "https://files.pythonhosted.org/packages"
# name: (URL, sha256)
SOURCES = {
    "python-apt_2.6.0.tar.xz": (f"{DEBIAN}/pool/main/p/python-apt/python-apt_2.6.0.tar.xz",
                                "557a705723f8acbb62c8af2989d0258dccb0a71f35e34aca53a9b492dbfbcfdd"),
    "libapt-pkg-dev_2.6.1_amd64.deb": (f"{DEBIAN}/pool/main/a/apt/libapt-pkg-dev_2.6.1_amd64.deb",
                                       "ee583cbe4be04fdf140a38275dd437fed6a13ef90a79bf4b67174177ba5a19c6"),
    "systemd_252.39-1~deb12u2_amd64.deb": (
        f"{DEBIAN}/pool/main/s/systemd/systemd_252.39-1~deb12u2_amd64.deb",
        "286f879c537bfba92e59d580c075ad20ab49020244c79634656850a306dd462b"),
    "libsystemd-shared_252.39-1~deb12u2_amd64.deb": (
        f"{DEBIAN}/pool/main/s/systemd/libsystemd-shared_252.39-1~deb12u2_amd64.deb",
        "01458465c816b9eb63b92241869ddb46f332b8f498cf7a5979b84ec293cfdfda"),
    "libkmod2_30+20221128-1_amd64.deb": (f"{DEBIAN}/pool/main/k/kmod/libkmod2_30+20221128-1_amd64.deb",
                                         "af63bbbfc15fbd1f254b15c393b3b95b18b18cc81348fc1b4f1c9c34b4d672d7"),
    "libip4tc2_1.8.9-2_amd64.deb": (f"{DEBIAN}/pool/main/i/iptables/libip4tc2_1.8.9-2_amd64.deb",
                                    "f2c48b367f9ec13f9aa577e7ccf81b371ce5d5fe22dddf9d7aa99f1e0bb7cfc4"),
    "libapparmor1_3.0.8-3_amd64.deb": (f"{DEBIAN}/pool/main/a/apparmor/libapparmor1_3.0.8-3_amd64.deb",
                                       "4b79f49eafc2017374da9ec206b5495433eadd2b1ea078c3895c99e72825e9d3"),
    # served by the stand-in distribution archive: the role installs pciutils for the ACS unit (lspci, setpci)
    "pciutils_3.9.0-4_amd64.deb": (f"{DEBIAN}/pool/main/p/pciutils/pciutils_3.9.0-4_amd64.deb",
                                   "6085d289984c35c7c16bcf6b46600e731622a1c18068e887b0a89981385b49d1"),
    "libpci3_3.9.0-4_amd64.deb": (f"{DEBIAN}/pool/main/p/pciutils/libpci3_3.9.0-4_amd64.deb",
                                  "75519023eb1f0cdc556709b109765e2ea36f6e5c66b8ca94cec45843b3e3bee7"),
    "pci.ids_0.0~2023.04.11-1_all.deb": (f"{DEBIAN}/pool/main/p/pci.ids/pci.ids_0.0~2023.04.11-1_all.deb",
                                         "eac5f889128f3f53100be7f16f9a7dd5aade7499fa9571f53a6c1cfa0bf4565d"),
    "sudo_1.9.13p3-1+deb12u4_amd64.deb": (f"{DEBIAN}/pool/main/s/sudo/sudo_1.9.13p3-1+deb12u4_amd64.deb",
                                          "ea9987f92630be504998516e1ed9c821c483131d0576ff35a09d6e7f8deff10f"),
    "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl": (
        f"{PYPI_FILES}/3d/aa/26d64642d808de4a652579ef950d7cd2d37f080a8babf9c67c6b75fc4c3f/"
        "uv-0.13.9-py3-none-manylinux_2_17_x86_64.manylinux2014_x86_64.whl",
        "d7f459fe4fd247d830351c75686d3996ace3c6f3f728eb0e85a30b7ada0cef19"),
}
PLAY = paths.LAB_SRC / "files" / "ubuntu-chroot"
COLLECTION = ["galaxy.yml", "meta", "plugins", "roles"]


def fetch(name: str) -> Path:
    """One of SOURCES, from the lab's downloads or its URL, checked against its sha256."""
    url, want = SOURCES[name]
    return fetch_pinned(url, want, paths.sub("downloads") / name)


def lay_out(dest: Path, wheels: list[Path]) -> dict:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name in SOURCES:
        shutil.copy(fetch(name), dest / name)
    # a package index of uv's wheel alone (PEP 503), for uv_venv's bootstrap
    uv = next(n for n in SOURCES if n.startswith("uv-"))
    (dest / "www/simple/uv").mkdir(parents=True)
    (dest / "www/packages").mkdir()
    shutil.move(dest / uv, dest / "www/packages" / uv)
    (dest / "www/simple/uv/index.html").write_text(
        f'<!DOCTYPE html><html><body><a href="../../packages/{uv}#sha256={SOURCES[uv][1]}">{uv}</a></body></html>\n')
    (dest / "whl").mkdir()
    for d in wheels:
        for w in sorted(d.glob("*.whl")):
            shutil.copy(w, dest / "whl" / w.name)
    (dest / "collection").mkdir()
    for name in COLLECTION:
        src = paths.REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / "collection" / name)
    # Debian's pciutils and what it needs, for Ubuntu's (its libkmod2 is the one the systemd tools use)
    archive = tuple(dest / n for n in ("pciutils_3.9.0-4_amd64.deb", "libpci3_3.9.0-4_amd64.deb",
                                       "pci.ids_0.0~2023.04.11-1_all.deb", "libkmod2_30+20221128-1_amd64.deb"))
    info = aptrepo_ubuntu.build(dest / "www", f"http://127.0.0.1:8681/{aptrepo_ubuntu.REPO_PATH}/", dest / "gnupg",
                                archive)
    shutil.rmtree(dest / "gnupg")
    (dest / "play").mkdir()
    for f in ("site.yml", "ansible.cfg"):
        shutil.copy(PLAY / f, dest / "play" / f)
    (dest / "play/inventory.yml").write_text(
        (PLAY / "inventory.yml.j2").read_text().replace("@FINGERPRINT@", info["fingerprint"]))
    shutil.copy(paths.LAB_SRC / "ubuntu_chroot.py", dest / "ubuntu_chroot.py")
    return info


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("dest", type=Path)
    p.add_argument("--wheels", type=Path, nargs="+", required=True)
    a = p.parse_args()
    print(json.dumps(lay_out(a.dest, a.wheels)))


if __name__ == "__main__":
    main()
