# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Jinja filters over what apt says of installed packages."""

from __future__ import annotations

from ansible_collections.blackwell.serving.plugins.module_utils import apt_policy as apt_policy_utils


def foreign_packages(policy_text, names, base_url, pin=None):
    """The installed packages among names whose installed version does not come from a repository under base_url;
    each movable where that repository offers it at a version the glob pin matches."""
    return apt_policy_utils.foreign(apt_policy_utils.parse_policy(policy_text), names, base_url, pin)


def apt_policy(policy_text):
    """apt-cache policy's answer: {name: {installed, candidate, versions: {version: [sources]}}}."""
    return apt_policy_utils.parse_policy(policy_text)


class FilterModule:
    def filters(self):
        return {"foreign_packages": foreign_packages, "apt_policy": apt_policy}
