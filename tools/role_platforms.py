"""Each role's galaxy_info.platforms (roles/*/meta/main.yml), generated from the collection's one platform list,
meta/platforms.yml.

``python3 tools/role_platforms.py`` rewrites the ``platforms:`` block of every role's meta/main.yml (nothing else in
the file); ``--check`` changes nothing and fails, naming the files, where one is stale
(tests/unit/test_platforms.py runs it). Never edit the blocks by hand. Needs only Python 3 and PyYAML.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parent.parent
MARK = "  # generated from meta/platforms.yml by `python3 tools/role_platforms.py`; do not edit\n"


def _platforms_module():
    """plugins/plugin_utils/platforms.py, loaded by path (no Ansible needed)."""
    spec = importlib.util.spec_from_file_location("blackwell_platforms", REPO / "plugins/plugin_utils/platforms.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _scalar(value: str) -> str:
    """A version as YAML must write it to read back as text: 9 in quotes, jammy bare."""
    return value if yaml.safe_load(value) == value and value.strip() == value else f'"{value}"'


def block(table: dict | None = None) -> str:
    """The ``platforms:`` block of galaxy_info, indented as in the roles' meta/main.yml."""
    platforms = _platforms_module()
    entries = platforms.galaxy_platforms(platforms.load() if table is None else table)
    lines = [MARK.rstrip("\n"), "  platforms:"]
    for entry in entries:
        lines.append(f"    - name: {_scalar(entry['name'])}")
        lines.append(f"      versions: [{', '.join(_scalar(v) for v in entry['versions'])}]")
    return "\n".join(lines) + "\n"


def expected_meta(path: Path, table: dict | None = None) -> str:
    """The meta/main.yml with its platforms block generated: the block replaced where there is one, else added at the
    end of galaxy_info."""
    lines = path.read_text().splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == "  platforms:")
        end = start + 1
        if start > 0 and lines[start - 1] == MARK:
            start -= 1
        while end < len(lines) and (lines[end].startswith("    ") or not lines[end].strip()):
            end += 1
    except StopIteration:
        info = next(i for i, line in enumerate(lines) if line.rstrip() == "galaxy_info:")
        start = end = next((i for i in range(info + 1, len(lines)) if lines[i].strip() and not lines[i].startswith(" ")),
                           len(lines))
    return "".join(lines[:start]) + block(table) + "".join(lines[end:])


def metas() -> list[Path]:
    return sorted((REPO / "roles").glob("*/meta/main.yml"))


def main(argv: list[str]) -> int:
    check = "--check" in argv
    stale = []
    for path in metas():
        want = expected_meta(path)
        if path.read_text() != want:
            stale.append(path.relative_to(REPO))
            if not check:
                path.write_text(want)
    if check and stale:
        print("stale galaxy_info.platforms (run python3 tools/role_platforms.py): "
              + ", ".join(str(p) for p in stale), file=sys.stderr)
        return 1
    if not check:
        for p in stale:
            print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
