# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters for preflight checks that believe the host, and the digest of the inputs they passed on."""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping

import yaml
from jinja2 import pass_context
from jinja2.runtime import Undefined
from jinja2.utils import missing

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.module_utils import known_bad as _known_bad
from ansible_collections.blackwell.serving.plugins.module_utils.nvidia import gpu_shortfall as _gpu_shortfall


def gpu_shortfall(facts, needed):
    return _gpu_shortfall(facts, needed) or ""


def known_bad(options, capability, packages=None):
    """The rows of the known-bad table that hold for these server options, capability and packages, each with a
    one-line description (``line``)."""
    rows = _known_bad.matches(capability, dict(options or {}), dict(packages or {}))
    return [dict(row, line=_known_bad.describe(row)) for row in rows]


# each argument spec parsed once per process (keyed by its path, size and time): a converged run evaluates every
# role's digest once per host, and twice where the role's preflight ran before its main entry point
_SPECS = {}


def role_inputs(role_path):
    """The options of the main entry point of the role at role_path (its meta/argument_specs.yml): the variables the
    role takes; what it sets while it runs is not among them."""
    if isinstance(role_path, Undefined) or not str(role_path):
        raise AnsibleFilterError("inputs_digest: role_path is not defined: use it inside a role ({{ role_path | ... }})")
    path = os.path.join(str(role_path), "meta", "argument_specs.yml")
    try:
        st = os.stat(path)
        key = (path, st.st_size, st.st_mtime_ns)
        if key not in _SPECS:
            with open(path, encoding="utf-8") as fh:
                specs = yaml.safe_load(fh) or {}
            main = (specs.get("argument_specs") or {}).get("main") or {}
            options = main.get("options") if isinstance(main, Mapping) else None
            if not isinstance(options, Mapping) or not options:
                raise AnsibleFilterError(f"inputs_digest: {path} gives the entry point main no options")
            _SPECS[key] = frozenset(options)
    except OSError as exc:
        raise AnsibleFilterError(f"inputs_digest: no argument spec for the role at {role_path}: cannot read {path}: "
                                 f"{exc.strerror}") from exc
    except yaml.YAMLError as exc:
        raise AnsibleFilterError(f"inputs_digest: {path} is not YAML: {exc}") from exc
    return _SPECS[key]


def _plain(value, name):
    """The value as JSON can write it in one way: mappings and sequences copied item by item (ansible-core 2.19's
    lazy containers template an item when it is read, not when the container is), tagged scalars as plain ones."""
    if isinstance(value, Undefined):
        raise AnsibleFilterError(f"inputs_digest: {name} is undefined in its value")
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value)
    if isinstance(value, Mapping):
        return {str(k): _plain(v, name) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(v, name) for v in value]
    if isinstance(value, (set, frozenset)):
        return sorted((_plain(v, name) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    return str(value)


def digest(values):
    """A hex digest of the (name, value) pairs, sorted by name: equal exactly where every name has an equal value."""
    pairs = [[name, _plain(values[name], name)] for name in sorted(values)]
    return hashlib.sha256(json.dumps(pairs, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _names(arg, what):
    if arg is None:
        return []
    if isinstance(arg, str) or not all(isinstance(n, str) for n in arg):
        raise AnsibleFilterError(f"inputs_digest: {what} is a list of variable names")
    return [str(n) for n in arg]


@pass_context
def inputs_digest(context, role_path, others=None, facts=None, unread=None):
    """A digest of the inputs of the role at role_path, as the template sees them: the options of its argument spec
    (entry point main) less those in unread, the variables named in others and the host facts named in facts. A name
    that is not defined is left out."""
    own = role_inputs(role_path)
    others, facts, unread = _names(others, "others"), _names(facts, "facts"), _names(unread, "unread")
    stray = sorted(set(unread) - own)
    if stray:
        raise AnsibleFilterError(f"inputs_digest: unread names {', '.join(stray)}, not options of the role's entry "
                                 f"point main ({role_path}/meta/argument_specs.yml)")
    twice = sorted(set(others) & own)
    if twice:
        raise AnsibleFilterError(f"inputs_digest: others names {', '.join(twice)}, options of the role itself "
                                 f"({role_path}/meta/argument_specs.yml): they are its inputs already")
    values = {}
    for name in (own - set(unread)) | set(others):
        value = context.resolve_or_missing(name)
        if value is not missing:
            values[name] = value
    if facts:
        gathered = context.resolve_or_missing("ansible_facts")
        gathered = gathered if isinstance(gathered, Mapping) else {}
        for name in facts:
            if name in gathered:
                values[f"ansible_facts['{name}']"] = gathered[name]
    return digest(values)


class FilterModule:
    def filters(self):
        return {"gpu_shortfall": gpu_shortfall, "known_bad": known_bad, "inputs_digest": inputs_digest}
