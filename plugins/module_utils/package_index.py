# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Which versions of a project Python package indexes offer, judged as uv picks an index.

No Ansible imports: pages in, plain data out. A simple index (PEP 503 HTML, or PEP 691 JSON, which PyPI answers
when asked) lists a project's files; their names carry the versions (wheels: ``name-version-...whl``; source
distributions: ``name-version.tar.gz``). uv, given ``--index A --default-index B``, takes each project from the
first index that has it at all ("first-index", uv's default index strategy): a version only the second offers is
not found. So a pinned version is judged on the first index that lists the project.
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

ACCEPT = "application/vnd.pypi.simple.v1+json, application/vnd.pypi.simple.v1+html;q=0.2, text/html;q=0.1"
_SDIST = (".tar.gz", ".zip", ".tar.bz2", ".tgz")


def normalize(name):
    """PEP 503's normalized project name (the path of its page on a simple index)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def normalize_version(version):
    """Versions compared as PEP 440 writes them the same (a leading v, case, a local label's separators)."""
    return re.sub(r"[-_]", ".", version.strip().lower().lstrip("v"))


class _Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.names = []
        self._in_a = False

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            href = dict(attrs).get("href") or ""
            self.names.append(href.split("#", 1)[0].split("?", 1)[0].rstrip("/").rsplit("/", 1)[-1])


def filenames(body, content_type=""):
    """The file names of a project's page: PEP 691's JSON files, or the links of PEP 503's HTML."""
    if "json" in (content_type or ""):
        return [f.get("filename", "") for f in json.loads(body).get("files", [])]
    parser = _Links()
    parser.feed(body)
    return [n for n in parser.names if n]


def version_of(filename, project):
    """The version a distribution file's name carries, or None when it is not this project's."""
    want = normalize(project)
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        if len(parts) >= 5 and normalize(parts[0]) == want:
            return parts[1]
        return None
    for ext in _SDIST:
        if filename.endswith(ext):
            stem = filename[: -len(ext)]
            name, dash, version = stem.rpartition("-")
            return version if dash and name and normalize(name) == want else None
    return None


def _key(version):
    """Sorts release numbers as numbers (9.10 after 9.9); a pre- or dev-release part sorts as text after them."""
    return [(0, int(p), "") if p.isdigit() else (1, 0, p) for p in re.split(r"[.+-]", version)]


def versions(names, project):
    """The versions these file names offer of the project, as written, oldest first."""
    return sorted({v for v in (version_of(n, project) for n in names) if v}, key=_key)


def judge(requirement, pages):
    """One pinned requirement ({name, version}) against the indexes' pages of it, in uv's order: [(index, names or
    None when the index does not have the project)]. Returns {index (the one uv would use, or None), offered
    (its versions), found (whether the pinned version is among them)}."""
    for index, names in pages:
        if names is None:
            continue
        offered = versions(names, requirement["name"])
        want = normalize_version(requirement["version"])
        return {"index": index, "offered": offered, "found": any(normalize_version(v) == want for v in offered)}
    return {"index": None, "offered": [], "found": False}
