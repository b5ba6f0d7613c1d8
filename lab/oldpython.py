"""The oldest Python a supported target runs (RHEL 9's platform Python is 3.9), for the unit tests of the modules
and module_utils (tests/integration/test_target_python_oldest.py).

No registry this machine reaches offers a CPython 3.9 build for it except Debian's own: bullseye's python3.9
packages, on the Debian mirror the lab's image is built from. They are downloaded (each checked against the
SHA-256 the suite's Packages index gives), unpacked with dpkg-deb into the lab's state directory - not installed -
and run with PYTHONHOME there. pytest and ansible-core (whose module_utils the controller ships to a target) are
pinned wheels installed beside them for Python 3.9. What is fetched is named in lab/files/oldest-python.json.
"""
from __future__ import annotations

import gzip
import hashlib
import json
import os
import sys
import urllib.request
from pathlib import Path

from . import image, paths, util

SPEC = paths.LAB_SRC / "files" / "oldest-python.json"


def _spec() -> dict:
    return json.loads(SPEC.read_text())


def _packages_index(mirror: str, suite: str) -> dict[str, dict[str, str]]:
    """Package -> its fields (Filename, SHA256, Version) from the suite's main/binary-amd64 Packages index."""
    url = f"{mirror}/dists/{suite}/main/binary-amd64/Packages.gz"
    with urllib.request.urlopen(url, timeout=120) as r:
        text = gzip.decompress(r.read()).decode("utf-8", errors="replace")
    out: dict[str, dict[str, str]] = {}
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if "Package" in fields:
            out[fields["Package"]] = fields
    return out


def _download(url: str, dest: Path, sha256: str) -> None:
    with urllib.request.urlopen(url, timeout=300) as r:
        data = r.read()
    got = hashlib.sha256(data).hexdigest()
    if got != sha256:
        raise util.LabError(f"{url}: SHA-256 {got}, the Packages index says {sha256}")
    dest.write_bytes(data)


def root() -> Path:
    spec = _spec()
    return paths.state_dir() / "oldest-python" / util.digest([json.dumps(spec, sort_keys=True)])[:16]


def ensure() -> Path:
    """The unpacked interpreter and its wheels (a directory holding usr/ and site/); built once per spec."""
    spec = _spec()
    where = root()
    done = where / ".complete"
    if done.exists():
        return where
    where.mkdir(parents=True, exist_ok=True)
    mirror, _security = image.host_debian_mirrors()
    index = _packages_index(mirror, spec["suite"])
    debs = where / "debs"
    debs.mkdir(exist_ok=True)
    for name in spec["debs"]:
        fields = index.get(name)
        if not fields:
            raise util.LabError(f"{mirror} {spec['suite']} lists no package {name}")
        dest = debs / Path(fields["Filename"]).name
        if not dest.exists():
            util.log(f"fetching {name} {fields['Version']} ({spec['suite']})")
            _download(f"{mirror}/{fields['Filename']}", dest, fields["SHA256"])
        util.run(["dpkg-deb", "-x", str(dest), str(where)], quiet=True)
    site = where / "site"
    util.run([sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check", "--target", str(site),
              "--python-version", spec["python"], "--only-binary=:all:", "--no-compile", "--no-deps",
              "--ignore-requires-python", *spec["wheels"]])
    done.write_text(json.dumps(spec, sort_keys=True))
    return where


def command(where: Path, extra_path: list[str] | None = None) -> tuple[list[str], dict[str, str]]:
    """The interpreter's argv and the environment it runs in (its libraries, its home, its wheels first on the path)."""
    spec = _spec()
    libs = [str(where / "usr" / "lib" / "x86_64-linux-gnu"), str(where / "lib" / "x86_64-linux-gnu")]
    env = {"LD_LIBRARY_PATH": os.pathsep.join(libs), "PYTHONHOME": str(where / "usr"),
           "PYTHONPATH": os.pathsep.join([str(where / "site"), *(extra_path or [])]), "PYTHONNOUSERSITE": "1"}
    return [str(where / "usr" / "bin" / f"python{spec['python']}")], env
