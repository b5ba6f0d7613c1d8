"""The lab's stack file (inventories/lab/group_vars/all/stack.yml): the pins the stand-ins build to.

The lab builds what it serves at the versions a site pins (the stand-in wheels of flashinfer, the Hub stand-in's
repository), so a re-pin is one edit of the stack files, not a second one here. The file is read with the standard
library (the lab runs on the host's Python alone): its top-level `name: value` scalars, which is all a stack file
holds; tests/unit/test_lab_stack.py checks the reading against a YAML parser.
"""
from __future__ import annotations

import re
from functools import lru_cache

from . import paths

STACK = paths.REPO / "inventories" / "lab" / "group_vars" / "all" / "stack.yml"
_SCALAR = re.compile(r"""^([a-z][a-z0-9_]*):[ \t]+(?:"([^"]*)"|'([^']*)'|([^#\s][^#]*?))[ \t]*(?:#.*)?$""")


@lru_cache(maxsize=None)
def pins() -> dict[str, str]:
    """Every top-level scalar of the lab's stack file, as text."""
    out = {}
    for line in STACK.read_text().splitlines():
        m = _SCALAR.match(line)
        if m:
            out[m.group(1)] = next(g for g in m.groups()[1:] if g is not None)
    return out


def pin(name: str) -> str:
    try:
        return pins()[name]
    except KeyError:
        raise KeyError(f"{STACK} has no scalar {name}") from None
