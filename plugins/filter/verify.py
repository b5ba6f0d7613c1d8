# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Filters of the verify role: judge gathered facts against the pins, and tabulate the result."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.module_utils import verify


def stack_checks(found, expected, groups=verify.STACK_GROUPS):
    try:
        return verify.judge(expected, found, tuple(groups))
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError(f"stack_checks: {exc}") from exc


def checks_table(reports):
    return verify.table(reports)


def unit_drift(found_text, expected_text):
    return verify.unit_drift(expected_text, found_text)


def stack_drift(checks, unit=None, model=None):
    return verify.drift(checks, unit, model)


def drift_table(reports):
    return verify.drift_table(reports)


class FilterModule:
    def filters(self):
        return {"stack_checks": stack_checks, "checks_table": checks_table, "unit_drift": unit_drift,
                "stack_drift": stack_drift, "drift_table": drift_table}
