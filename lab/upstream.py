"""Real upstream files the lab takes from the package index (never committed, fetched at build time).

sglang publishes a source distribution per release on PyPI; its root is what sglang's
repository keeps under ``python/``. The lab builds its sglang history from them, and the
tests judge real kernels in them. Each file is pinned by its sha256 as the index lists it,
so that a changed or truncated download stops the lab instead of testing something else.
``BLACKWELL_LAB_PYPI_SIMPLE`` points the look-up at a mirror of the simple index.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tarfile
import urllib.request
from pathlib import Path

from . import paths
from .util import LabError, log

SIMPLE = os.environ.get("BLACKWELL_LAB_PYPI_SIMPLE", "https://pypi.org/simple")

# (project, file name) -> sha256, as PyPI lists them
PINNED = {
    ("sglang", "sglang-0.5.8.post1.tar.gz"): "332f568fed2c600f385528a269e7e404f3749d7027b5d49486b11e7c72e61de4",
    ("sglang", "sglang-0.5.9.tar.gz"): "11b1445bfb039c20217783850fda66a71b814391b2cf313f4e6cadc3b9fea41b",
}


def _file_url(project: str, filename: str) -> str:
    req = urllib.request.Request(f"{SIMPLE.rstrip('/')}/{project}/",
                                 headers={"Accept": "application/vnd.pypi.simple.v1+json"})
    try:
        with urllib.request.urlopen(req, timeout=60) as resp:
            index = json.load(resp)
    except (OSError, ValueError) as exc:
        raise LabError(f"cannot read the package index's page for {project} ({SIMPLE}): {exc}") from None
    for entry in index.get("files", []):
        if entry.get("filename") == filename:
            return entry["url"]
    raise LabError(f"the package index lists no {filename} for {project} ({SIMPLE})")


def fetch(project: str, filename: str) -> Path:
    """The file, from the lab's cache or the index, checked against its pinned sha256."""
    want = PINNED.get((project, filename))
    if want is None:
        raise LabError(f"{project}/{filename} is not pinned in lab/upstream.py")
    target = paths.sub("upstream") / filename
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == want:
        return target
    url = _file_url(project, filename)
    log(f"fetching {filename} from the package index")
    try:
        with urllib.request.urlopen(url, timeout=300) as resp:
            data = resp.read()
    except OSError as exc:
        raise LabError(f"cannot download {url}: {exc}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise LabError(f"{filename} from {url} has sha256 {got}, pinned {want}: not using it")
    tmp = target.with_suffix(".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    return target


def sglang_sdist(version: str) -> Path:
    return fetch("sglang", f"sglang-{version}.tar.gz")


def extract_sdist(sdist: Path, dest: Path) -> Path:
    """Unpack an sdist's single top directory into dest; returns dest (the tree sglang keeps as python/)."""
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(sdist) as tf:
        members = tf.getmembers()
        tops = {m.name.split("/", 1)[0] for m in members}
        if len(tops) != 1:
            raise LabError(f"{sdist.name} has {len(tops)} top directories, expected one")
        top = tops.pop()
        for m in members:
            if m.name == top or not (m.isfile() or m.isdir()):
                continue
            m.name = m.name.split("/", 1)[1]
            tf.extract(m, dest, filter="data")
    return dest


def sglang_tree(version: str) -> Path:
    """sglang's python/ tree of a release, unpacked once under the lab's state directory (read it, don't write)."""
    sdist = sglang_sdist(version)
    dest = paths.sub("upstream") / f"sglang-{version}-python"
    stamp = dest / ".lab-sha256"
    want = PINNED[("sglang", sdist.name)]
    if stamp.is_file() and stamp.read_text() == want:
        return dest
    if dest.exists():
        shutil.rmtree(dest)
    tmp = dest.with_name(dest.name + ".part")
    if tmp.exists():
        shutil.rmtree(tmp)
    extract_sdist(sdist, tmp)
    (tmp / ".lab-sha256").write_text(want)
    tmp.replace(dest)
    return dest
