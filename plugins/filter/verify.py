# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Filters of the verify role: judge gathered facts against the pins, and tabulate the result."""

from __future__ import annotations

import copy
import os

from ansible.errors import AnsibleFilterError
from ansible.plugins.filter.core import from_yaml

from ansible_collections.blackwell.serving.plugins.module_utils import verify


# each defaults file parsed once per process (keyed by its path, size and time): verify's defaults read the other
# roles' defaults on every reference of a pin, dozens of times in its argument validation alone
_ROLE_DEFAULTS = {}


def role_defaults(roles, roles_dir, names=None):
    """The defaults/main.yml of each role under roles_dir, merged in order, as the from_yaml filter reads them; only
    the variables names lists, where it is given."""
    if isinstance(roles, str) or not all(isinstance(r, str) for r in roles):
        raise AnsibleFilterError("role_defaults expects a list of role names")
    merged = {}
    # a set, once: `in` on the lazy list a template passes walks (and renders) it on every test
    wanted = None if names is None else {str(n) for n in names}
    for role in roles:
        path = os.path.join(str(roles_dir), role, "defaults", "main.yml")
        try:
            st = os.stat(path)
            key = (path, st.st_size, st.st_mtime_ns)
            if key not in _ROLE_DEFAULTS:
                with open(path, encoding="utf-8") as fh:
                    _ROLE_DEFAULTS[key] = from_yaml(fh.read()) or {}
        except OSError as exc:
            raise AnsibleFilterError(f"role_defaults: cannot read {path}: {exc.strerror}") from exc
        merged.update(_ROLE_DEFAULTS[key] if wanted is None else
                      {k: v for k, v in _ROLE_DEFAULTS[key].items() if k in wanted})
    # scalars are immutable: only containers are copied, so that no caller changes the cache
    return {k: v if isinstance(v, (str, int, float, bool, type(None))) else copy.deepcopy(v) for k, v in merged.items()}


def stack_checks(found, expected, groups=verify.STACK_GROUPS):
    try:
        return verify.judge(expected, found, tuple(groups))
    except (KeyError, ValueError) as exc:
        raise AnsibleFilterError(f"stack_checks: {exc}") from exc


def checks_table(reports):
    return verify.table(reports)


def check_failures(checks, host):
    return verify.failures(host, checks)


def unit_drift(found_text, expected_text):
    return verify.unit_drift(expected_text, found_text)


def stack_drift(checks, unit=None, model=None, routers=None):
    return verify.drift(checks, unit, model, routers)


def drift_table(reports):
    return verify.drift_table(reports)


class FilterModule:
    def filters(self):
        return {"stack_checks": stack_checks, "checks_table": checks_table, "check_failures": check_failures,
                "unit_drift": unit_drift, "stack_drift": stack_drift, "drift_table": drift_table, "role_defaults": role_defaults}
