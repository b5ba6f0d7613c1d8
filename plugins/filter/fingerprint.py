# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filter that judges the fleet's greedy fingerprints (module_utils.fingerprint)."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.module_utils import fingerprint


def fingerprint_judge(fleet, reference=None, rule=None, stack=None, stale_ok=False):
    fleet = dict(fleet or {})
    try:
        return {host: fingerprint.judge(fp, reference or None, fleet, rule, stack, bool(stale_ok))
                for host, fp in sorted(fleet.items())}
    except (KeyError, TypeError, fingerprint.FingerprintError) as exc:
        raise AnsibleFilterError(f"fingerprint_judge: a fingerprint cannot be read: {exc}") from exc


def fingerprint_stack_changes(recorded, current):
    return fingerprint.stack_changes(recorded, current)


class FilterModule:
    def filters(self):
        return {"fingerprint_judge": fingerprint_judge, "fingerprint_stack_changes": fingerprint_stack_changes}
