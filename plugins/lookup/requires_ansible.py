# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
name: requires_ansible
short_description: The ansible-core versions this collection supports, as its meta/runtime.yml says
version_added: 0.5.0
description:
  - Returns the collection's C(requires_ansible) specifier (for example C(>=2.16.0)) and the lowest version it
    admits, read from the C(meta/runtime.yml) of the collection this plugin belongs to (a checkout or an installed
    collection alike), so that a playbook can stop on an older control node with a message, before any host is
    touched.
  - Uses only the standard library, so that it loads on the control nodes it is there to refuse.
author: blackwell.serving maintainers (!UNKNOWN)
"""

EXAMPLES = r"""
- name: Stop on an ansible-core older than the collection supports
  ansible.builtin.assert:
    that: ansible_version.full is version(lookup('blackwell.serving.requires_ansible')[1], '>=')
"""

RETURN = r"""
_raw:
  description: The specifier, then the lowest version it admits (empty where it names none).
  type: list
  elements: str
"""

import os
import re

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

RUNTIME = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "meta", "runtime.yml")


def requires_ansible(path=RUNTIME):
    """(specifier, lowest version) from a meta/runtime.yml's requires_ansible line (read as text: no YAML needed)."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise AnsibleLookupError(f"cannot read the collection's meta/runtime.yml ({path}): {exc}") from None
    found = re.search(r"^requires_ansible:\s*['\"]?([^'\"\n]+)['\"]?\s*$", text, re.M)
    if not found:
        raise AnsibleLookupError(f"{path} says no requires_ansible")
    spec = found.group(1).strip()
    floor = re.search(r">=\s*([0-9][0-9.]*)", spec)
    return spec, floor.group(1) if floor else ""


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        return list(requires_ansible())
