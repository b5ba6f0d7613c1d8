# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters for preflight checks that believe the host."""

from __future__ import annotations

from ansible_collections.blackwell.serving.plugins.module_utils.nvidia import gpu_shortfall as _gpu_shortfall


def gpu_shortfall(facts, needed):
    return _gpu_shortfall(facts, needed) or ""


class FilterModule:
    def filters(self):
        return {"gpu_shortfall": gpu_shortfall}
