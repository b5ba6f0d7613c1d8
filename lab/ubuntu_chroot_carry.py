"""Lay out what lab/ubuntu_chroot.py needs on the lent machine, in one directory that `run` carries.

    python3 -m lab.ubuntu_chroot_carry DEST --sources DIR --wheels DIR...

DIR of --sources holds Debian's python-apt_2.6.0.tar.xz and libapt-pkg-dev_2.6.1_amd64.deb (checked against the
sha256 below, from Debian bookworm's Sources and Packages indexes); --wheels the wheels of ansible-core and what it
needs for Python 3.12 (Ubuntu's Python has no jinja2, PyYAML, MarkupSafe, packaging of its own there).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import shutil
from pathlib import Path

from . import aptrepo_ubuntu, paths

SOURCES = {"python-apt_2.6.0.tar.xz": "557a705723f8acbb62c8af2989d0258dccb0a71f35e34aca53a9b492dbfbcfdd",
           "libapt-pkg-dev_2.6.1_amd64.deb": "ee583cbe4be04fdf140a38275dd437fed6a13ef90a79bf4b67174177ba5a19c6"}
PLAY = paths.LAB_SRC / "files" / "ubuntu-chroot"
COLLECTION = ["galaxy.yml", "meta", "plugins", "roles"]


def lay_out(dest: Path, sources: Path, wheels: list[Path]) -> dict:
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    for name, want in SOURCES.items():
        got = hashlib.sha256((sources / name).read_bytes()).hexdigest()
        if got != want:
            raise SystemExit(f"{sources / name}: sha256 {got}, expected {want}")
        shutil.copy(sources / name, dest / name)
    (dest / "whl").mkdir()
    for d in wheels:
        for w in sorted(d.glob("*.whl")):
            shutil.copy(w, dest / "whl" / w.name)
    (dest / "collection").mkdir()
    for name in COLLECTION:
        src = paths.REPO / name
        (shutil.copytree if src.is_dir() else shutil.copy)(src, dest / "collection" / name)
    info = aptrepo_ubuntu.build(dest / "www", f"http://127.0.0.1:8681/{aptrepo_ubuntu.REPO_PATH}/", dest / "gnupg")
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
    p.add_argument("--sources", type=Path, required=True)
    p.add_argument("--wheels", type=Path, nargs="+", required=True)
    a = p.parse_args()
    print(json.dumps(lay_out(a.dest, a.sources, a.wheels)))


if __name__ == "__main__":
    main()
