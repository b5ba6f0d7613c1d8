# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters for preflight checks that believe the host."""

from __future__ import annotations

from ansible_collections.blackwell.serving.plugins.module_utils import known_bad as _known_bad
from ansible_collections.blackwell.serving.plugins.module_utils.nvidia import gpu_shortfall as _gpu_shortfall


def gpu_shortfall(facts, needed):
    return _gpu_shortfall(facts, needed) or ""


def known_bad(options, capability, packages=None):
    """The rows of the known-bad table that hold for these server options, capability and packages, each with a
    one-line description (``line``)."""
    rows = _known_bad.matches(capability, dict(options or {}), dict(packages or {}))
    return [dict(row, line=_known_bad.describe(row)) for row in rows]


class FilterModule:
    def filters(self):
        return {"gpu_shortfall": gpu_shortfall, "known_bad": known_bad}
