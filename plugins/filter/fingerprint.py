# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filter that judges the fleet's greedy fingerprints (module_utils.fingerprint)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.module_utils import fingerprint


def fingerprint_judge(fleet, reference=None, rule=None, stack=None):
    fleet = dict(fleet or {})
    try:
        return {host: fingerprint.judge(fp, reference or None, fleet, rule, stack)
                for host, fp in sorted(fleet.items())}
    except (KeyError, TypeError, fingerprint.FingerprintError) as exc:
        raise AnsibleFilterError(f"fingerprint_judge: a fingerprint cannot be read: {exc}") from exc


class FilterModule:
    def filters(self):
        return {"fingerprint_judge": fingerprint_judge}
