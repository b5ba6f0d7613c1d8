"""Real upstream files the lab takes from the package index (never committed, fetched at build time).

sglang publishes a source distribution per release on PyPI up to 0.5.10.post1; its root is what
sglang's repository keeps under ``python/``. The lab builds its sglang history from them, and the
tests judge real kernels in them. From 0.5.11 on sglang publishes wheels only: their ``sglang/``
package is the same tree (``python/sglang`` in the repository), so the SM120 judge's tests read
the releases after the pin from them (``sglang_release_tree``). Each file is pinned by its sha256 as the index lists it,
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
import zipfile
from pathlib import Path

from . import paths
from .util import LabError, fetch_pinned

SIMPLE = os.environ.get("BLACKWELL_LAB_PYPI_SIMPLE", "https://pypi.org/simple")

# (project, file name) -> sha256, as PyPI lists them
PINNED = {
    ("sglang", "sglang-0.5.8.post1.tar.gz"): "332f568fed2c600f385528a269e7e404f3749d7027b5d49486b11e7c72e61de4",
    ("sglang", "sglang-0.5.9.tar.gz"): "11b1445bfb039c20217783850fda66a71b814391b2cf313f4e6cadc3b9fea41b",
    # releases after the pin, for the SM120 judge's tests over 2026 (tests/fixtures/sm120/upstream-trees.json)
    ("sglang", "sglang-0.5.10rc0-py3-none-any.whl"): "7cd37d6e4a4cfb7b18ac8f54a6fd9c526ea02104a88d400ddf564ceed5e6d7d1",
    ("sglang", "sglang-0.5.10-py3-none-any.whl"): "ac8855a5d57dac8831fee526bca5212f1ae451f378e2ab08b3baecbc4deb4076",
    ("sglang", "sglang-0.5.11-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "fe0748beaff218d3e16c9018a5e19f018db06fc3c7ac4f90d2f93da1cf074b6f",
    ("sglang", "sglang-0.5.13-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "9d26266ab7e99165098f9e173f4a5a0ef6a0b64a6f30ef0b5ee859eead37e75a",
    ("sglang", "sglang-0.5.15-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "21492759b4b99e117bd81610f633422f3fdae2896c2cde6931eab886deccc44f",
    ("sglang", "sglang-0.5.16-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "d5f345a18953dd35df568ac56bdcb7f5ee910ab39efea4469b714556d1070713",
    ("sglang", "sglang-0.5.17-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "575e38f5683624ded3b4bb267f637a098e5ed37d13a1d1ff5ea09bd781a04d16",
    ("sglang", "sglang-0.5.18-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "e97b585dd2d5db2802599feba47c84cce972f5e1231a6816fef996200207b5cf",
    ("sglang", "sglang-0.5.19-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "425e87377e725d03db8262382008f3fd9561a6cf5d82f485f8b9929f02ffe12b",
    ("sglang", "sglang-0.5.20-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "1573527042f4f6b4ead838302818595fc77fdc611dbcc2e40cd150fbc8f8513c",
    ("sglang", "sglang-0.5.21-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "96c029f75dec99baa33a5db3d41b1bebefdd6bcfba3a2f7c807fe1cf49a87c20",
    ("sglang", "sglang-0.5.23-cp311-cp311-manylinux_2_34_x86_64.whl"):
        "00b3cd5b265ac76c64185fbb6b95424f324ddd9f428d0306b77bc9db9d859937",
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
    return fetch_pinned(_file_url(project, filename), want, target)


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


def extract_wheel(wheel: Path, dest: Path) -> Path:
    """Unpack the Python source files of a wheel's sglang/ package into dest (laid out as sglang's python/)."""
    dest.mkdir(parents=True, exist_ok=True)
    with zipfile.ZipFile(wheel) as zf:
        for name in zf.namelist():
            if name.startswith("sglang/") and name.endswith(".py"):
                zf.extract(name, dest)
    return dest


def pinned_file(project: str, version: str) -> str:
    """The pinned file of a release: its source distribution where one is pinned, else its wheel."""
    names = [name for (proj, name) in PINNED if proj == project
             and (name == f"{project}-{version}.tar.gz" or name.startswith(f"{project}-{version}-"))]
    if not names:
        raise LabError(f"no file of {project} {version} is pinned in lab/upstream.py")
    return sorted(names, key=lambda n: not n.endswith(".tar.gz"))[0]


def sglang_tree(version: str) -> Path:
    """sglang's python/ tree of a release (from its sdist, or its wheel where sglang published none), unpacked once
    under the lab's state directory (read it, don't write)."""
    filename = pinned_file("sglang", version)
    sdist = fetch("sglang", filename)
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
    (extract_sdist if filename.endswith(".tar.gz") else extract_wheel)(sdist, tmp)
    (tmp / ".lab-sha256").write_text(want)
    tmp.replace(dest)
    return dest
