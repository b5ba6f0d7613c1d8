# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The platforms the collection supports, read from its meta/platforms.yml: the one source of every role's platform
check and message, of the preflight role's default supported platforms and of the roles' galaxy_info.platforms
(tools/role_platforms.py).

Controller side only (the lookup and filter plugins, the tool); needs nothing but Python and PyYAML, so that the
tool can load it by path without Ansible."""

from __future__ import annotations

import copy
import os

import yaml

TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "meta", "platforms.yml")
FIELDS = ("name", "galaxy", "nvidia_repo")

_cache: dict = {}


class PlatformsError(ValueError):
    """meta/platforms.yml is missing or malformed."""


def load(path: str = TABLE) -> dict:
    """{distribution: {"galaxy": str, "versions": {major: {"name", "galaxy", "nvidia_repo"}}}}, checked; read once
    per process and file version. A copy: what a caller changes is not kept."""
    try:
        stamp = os.stat(path).st_mtime_ns
    except OSError as exc:
        raise PlatformsError(f"cannot read the collection's platform table {path}: {exc}") from None
    if _cache.get(path, (None,))[0] != stamp:
        with open(path, encoding="utf-8") as fh:
            _cache[path] = (stamp, _checked(yaml.safe_load(fh), path))
    return copy.deepcopy(_cache[path][1])


def _checked(data, path) -> dict:
    if not isinstance(data, dict) or not data:
        raise PlatformsError(f"{path}: expected a mapping of distributions")
    for dist, entry in data.items():
        if not isinstance(entry, dict) or not isinstance(entry.get("galaxy"), str) \
                or not isinstance(entry.get("versions"), dict) or not entry["versions"]:
            raise PlatformsError(f"{path}: {dist}: expected galaxy (text) and versions (a mapping)")
        for major, version in entry["versions"].items():
            if not isinstance(major, str) or not major.isdigit():
                raise PlatformsError(f"{path}: {dist}: the version {major!r} is not a major version in quotes")
            if not isinstance(version, dict) or sorted(version) != sorted(FIELDS) \
                    or not all(isinstance(version[f], str) and version[f] for f in FIELDS):
                raise PlatformsError(f"{path}: {dist} {major}: expected exactly {', '.join(FIELDS)}, each text")
    return data


def majors(table: dict | None = None) -> dict:
    """{distribution: [major, ...]}: the shape of the preflight role's preflight_supported_platforms."""
    table = load() if table is None else table
    return {dist: list(entry["versions"]) for dist, entry in table.items()}


def _normal(supported) -> dict:
    """A supported-platforms mapping in either shape (the table, or {distribution: [major, ...]}), as
    {distribution: [major as text, ...]}."""
    out = {}
    for dist, entry in (supported or {}).items():
        versions = entry.get("versions", {}) if isinstance(entry, dict) else entry
        out[str(dist)] = [str(v) for v in (versions or [])]
    return out


def describe(supported=None, table: dict | None = None, only: str | None = None) -> str:
    """The supported platforms as people write them: "Ubuntu 22.04, 24.04, Debian 12, RedHat 9"; a major the table
    does not name is written as it is. only: one distribution's versions."""
    table = load() if table is None else table
    supported = _normal(table if supported is None else supported)
    parts = []
    for dist, versions in supported.items():
        if only is not None and dist != only:
            continue
        known = table.get(dist, {}).get("versions", {})
        parts.append(f"{dist} " + ", ".join(known.get(v, {}).get("name", v) for v in versions))
    return ", ".join(parts)


def found(facts: dict) -> str:
    """The host's platform as its facts name it: "Ubuntu 26.04"."""
    facts = facts or {}
    return " ".join(str(facts.get(k, "")) for k in ("distribution", "distribution_version")).strip() or "an unknown platform"


def is_supported(facts: dict, supported=None, table: dict | None = None) -> bool:
    facts = facts or {}
    supported = _normal((load() if table is None else table) if supported is None else supported)
    return str(facts.get("distribution_major_version", "")) in supported.get(str(facts.get("distribution", "")), [])


def refusal(facts: dict, role: str, supported=None, table: dict | None = None) -> str:
    """Empty where the host's distribution and major version are supported; else why not, in one sentence that
    names the role, what it supports (the host's distribution's versions, where it knows the distribution) and what
    was found: "nvidia_driver supports Ubuntu 22.04, 24.04; found Ubuntu 26.04. Nothing was changed." """
    table = load() if table is None else table
    if is_supported(facts, supported, table):
        return ""
    normal = _normal(table if supported is None else supported)
    dist = str((facts or {}).get("distribution", ""))
    return (f"{role} supports {describe(normal, table, only=dist if dist in normal else None)}; "
            f"found {found(facts)}. Nothing was changed.")


def version(facts: dict, table: dict | None = None) -> dict:
    """The table's entry for the host's distribution and major version ({"name", "galaxy", "nvidia_repo"}), or {}
    where it has none."""
    table = load() if table is None else table
    facts = facts or {}
    entry = table.get(str(facts.get("distribution", "")), {})
    return dict(entry.get("versions", {}).get(str(facts.get("distribution_major_version", "")), {}))


def galaxy_platforms(table: dict | None = None) -> list:
    """galaxy_info.platforms: one entry per galaxy name, in the table's order, versions without repeats (the RHEL
    rebuilds are all EL)."""
    table = load() if table is None else table
    out: dict = {}
    for entry in table.values():
        versions = out.setdefault(entry["galaxy"], [])
        for v in entry["versions"].values():
            if v["galaxy"] not in versions:
                versions.append(v["galaxy"])
    return [{"name": name, "versions": versions} for name, versions in out.items()]
