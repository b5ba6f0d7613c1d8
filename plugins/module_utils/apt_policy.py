# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Where each installed package came from, read from ``apt-cache policy``'s answer.

No Ansible imports: text in, plain data out, tested on captures of the real command
(tests/fixtures/apt/). A driver package is *foreign* to NVIDIA's repository when no source of its installed
version is under the repository's base URL: a distribution's driver (Ubuntu's branch-named packages, Debian's
archive packages such as ``nvidia-kernel-common 20220217+3~deb12u1``) or one installed by hand (dpkg's status file
is its only source). NVIDIA's own packages at another release are not foreign: a re-pin moves them.
"""

from __future__ import annotations

import fnmatch
import re

_PACKAGE = re.compile(r"^(\S+):$")
_FIELD = re.compile(r"^\s+(Installed|Candidate):\s*(\S+)")
_VERSION = re.compile(r"^\s(?:\*\*\*| {3})\s(\S+)\s+(-?\d+)$")
_SOURCE = re.compile(r"^\s+(-?\d+)\s+(.+?)\s*$")
DPKG_STATUS = "/var/lib/dpkg/status"


def parse_policy(text):
    """``apt-cache policy NAME...`` (LC_ALL=C): {name: {installed, candidate, versions: {version: [sources]}}}.

    A source is the line's text after its priority (``http://deb.debian.org/debian bookworm/contrib amd64
    Packages``, ``/var/lib/dpkg/status``); ``installed`` is None for a package that is not installed (``(none)``)."""
    out = {}
    pkg = version = None
    in_table = False
    for line in (text or "").splitlines():
        m = _PACKAGE.match(line)
        if m:
            # a foreign architecture's package is named with it (libfoo:i386); the name is the package
            pkg = out.setdefault(m.group(1).split(":")[0], {"installed": None, "candidate": None, "versions": {}})
            version, in_table = None, False
            continue
        if pkg is None:
            continue
        m = _FIELD.match(line)
        if m:
            pkg[m.group(1).lower()] = None if m.group(2) == "(none)" else m.group(2)
            continue
        if line.strip() == "Version table:":
            in_table = True
            continue
        if not in_table:
            continue
        m = _VERSION.match(line)
        if m:
            version = m.group(1)
            pkg["versions"].setdefault(version, [])
            continue
        m = _SOURCE.match(line)
        if m and version is not None:
            pkg["versions"][version].append(m.group(2))
    return out


def _under(source, base_url):
    return source.split()[0].rstrip("/").startswith(base_url.rstrip("/"))


def foreign(policy, names, base_url, pin=None):
    """The installed packages among ``names`` whose installed version no source under ``base_url`` offers, sorted:
    [{name, version, origin, movable}], origin naming where that version comes from (its repositories, or
    "installed by hand (dpkg's status file only)"); movable when a source under ``base_url`` offers the package at a
    version the glob ``pin`` matches (Debian's own archive names its driver packages as NVIDIA's debian12 repository
    does: those move to NVIDIA's release in the install, where the others must be purged)."""
    out = []
    for name in sorted(set(names or [])):
        entry = (policy or {}).get(name)
        if not entry or not entry.get("installed"):
            continue
        sources = entry["versions"].get(entry["installed"], [])
        if any(_under(s, base_url) for s in sources):
            continue
        others = [s for s in sources if s != DPKG_STATUS]
        origin = "; ".join(others) if others else "installed by hand (dpkg's status file only)"
        movable = bool(pin) and any(fnmatch.fnmatchcase(v, pin) and any(_under(s, base_url) for s in srcs)
                                    for v, srcs in entry["versions"].items())
        out.append({"name": name, "version": entry["installed"], "origin": origin, "movable": movable})
    return out
