#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

# Documentation only: the action plugin plugins/action/checks.py does the work on the controller.

from __future__ import annotations

DOCUMENTATION = r"""
module: checks
short_description: Several checks, each with its own message, in one task
version_added: 0.3.0
description:
  - Evaluates each check's conditions in order, as a row of M(ansible.builtin.assert) tasks would, and stops at the
    first condition that is false with that check's message; a later check is not evaluated (it may read what an
    earlier one vouches for).
  - A check's message is templated only where the check fails.
  - Runs in the play's own process on the controller; no module is sent and no connection is made. The roles'
    preflights check their inputs with it, one task where they had one per check.
options:
  checks:
    description: The checks, in order.
    type: list
    elements: dict
    required: true
    suboptions:
      that:
        description: A condition, or a list of conditions that must all hold, written as for M(ansible.builtin.assert).
        type: raw
        required: true
      msg:
        description: What to say where a condition of this check is false.
        type: str
        required: true
author: blackwell.serving maintainers (!UNKNOWN)
attributes:
  action:
    description: Evaluated in the play's own process on the controller.
    support: full
  check_mode:
    description: Reads only; runs the same in check mode.
    support: full
  diff_mode:
    description: Changes nothing, so has no diff.
    support: none
seealso:
  - module: ansible.builtin.assert
"""

EXAMPLES = r"""
- name: The toolkit's inputs
  blackwell.serving.checks:
    checks:
      - that: cuda_toolkit_version is match('^[0-9]+\.[0-9]+\.[0-9]+$')
        msg: "cuda_toolkit_version must be an exact release such as 13.0.2; found {{ cuda_toolkit_version }}."
      - that:
          - cuda_toolkit_version is version('12.8', '>=')
        msg: "CUDA {{ cuda_toolkit_version }} does not build for SM120; pin 12.8 or newer."
"""

RETURN = r"""
msg:
  description: The failed check's message, or how many checks passed.
  returned: always
  type: str
  sample: "gpu-01: cuda_toolkit_version must be an exact release major.minor.patch, at least 12.9; found 12.9."
assertion:
  description: The condition that was false.
  returned: failure
  type: str
  sample: cuda_toolkit_version is match('^[0-9]+\.[0-9]+\.[0-9]+$')
check:
  description: The number of the check that failed, from 1.
  returned: failure
  type: int
  sample: 1
"""
