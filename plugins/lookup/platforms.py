# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
name: platforms
short_description: The platforms this collection supports, as its meta/platforms.yml says
version_added: 0.9.0
description:
  - Returns the distributions the collection supports (as in C(ansible_facts['distribution'])), each mapped to its
    supported major versions (as in C(ansible_facts['distribution_major_version'])), read from the
    C(meta/platforms.yml) of the collection this plugin belongs to; the default of the preflight role's
    C(preflight_supported_platforms).
  - The roles check a host's platform with the filter C(blackwell.serving.platform_refusal), which reads the same
    file.
author: blackwell.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Show the supported platforms
  ansible.builtin.debug:
    msg: "{{ lookup('blackwell.serving.platforms') }}"
"""

RETURN = r"""
_raw:
  description: One mapping of each distribution to its major versions, for example Ubuntu to C(['22', '24']).
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

from ansible_collections.blackwell.serving.plugins.plugin_utils import platforms as _platforms


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleLookupError("blackwell.serving.platforms takes no terms")
        try:
            return [_platforms.majors()]
        except _platforms.PlatformsError as exc:
            raise AnsibleLookupError(str(exc)) from None
