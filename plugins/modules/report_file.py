#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

# Documentation only: the action plugin plugins/action/report_file.py does the work on the controller.

from __future__ import annotations

DOCUMENTATION = r"""
module: report_file
short_description: Write a report into a file on the controller
version_added: 0.3.0
description:
  - Writes O(content) into O(path) on the controller (the machine that runs the play), creating its directory,
    atomically (a temporary file renamed over it), and only where the content or the mode differ.
  - Runs in the play's own process on the controller; no module is sent and no connection is made, whatever host the
    task runs for. The verify role writes each host's report with it.
  - The file is on the controller, not on a managed host, so it is written in check mode too (a read-only run
    still leaves its report).
options:
  path:
    description: The file on the controller.
    type: path
    required: true
  content:
    description: What the file holds.
    type: str
    required: true
  mode:
    description: The file's permissions, octal.
    type: raw
    default: "0644"
  directory_mode:
    description: The permissions of the file's directory where it is created, octal.
    type: raw
    default: "0755"
author: blackwell.serving maintainers (!UNKNOWN)
attributes:
  action:
    description: Runs on the controller only.
    support: full
  check_mode:
    description: Writes the file in check mode too (it is the controller's, not the host's), and says so.
    support: full
  diff_mode:
    description: Returns the file's content before and after where it changed.
    support: full
seealso:
  - module: ansible.builtin.copy
"""

EXAMPLES = r"""
- name: Write this host's report on the controller
  blackwell.serving.report_file:
    path: "{{ playbook_dir }}/verify-reports/{{ inventory_hostname }}.json"
    content: "{{ verify_report | to_nice_json }}\n"
"""

RETURN = r"""
path:
  description: The file written (or found already holding the content).
  returned: success
  type: str
  sample: /srv/fleet/playbooks/verify-reports/gpu-01.json
"""
