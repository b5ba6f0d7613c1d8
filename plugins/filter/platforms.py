# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters on the platforms the collection supports (meta/platforms.yml), read on the controller from the
facts already gathered: a role's platform check costs no round trip to the host."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.plugin_utils import platforms as _platforms


def _table():
    try:
        return _platforms.load()
    except _platforms.PlatformsError as exc:
        raise AnsibleFilterError(str(exc)) from None


def platform_refusal(facts, role, supported=None):
    """Empty where the host's platform is supported; else one sentence naming the role, what it supports and what
    was found."""
    return _platforms.refusal(dict(facts or {}), str(role), supported, _table())


def platform_version(facts):
    """The table's entry for the host's distribution and major version ({} where it has none)."""
    return _platforms.version(dict(facts or {}), _table())


def platforms_text(supported=None):
    """Supported platforms as people write them (the collection's, or the mapping given)."""
    return _platforms.describe(supported, _table())


class FilterModule:
    def filters(self):
        return {"platform_refusal": platform_refusal, "platform_version": platform_version,
                "platforms_text": platforms_text}
