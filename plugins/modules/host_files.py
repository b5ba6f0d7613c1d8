#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

# Documentation only: the action plugin plugins/action/host_files.py does the work.

from __future__ import annotations

DOCUMENTATION = r"""
module: host_files
short_description: Make a host's files, directories and links what a role's data says
version_added: 0.4.0
description:
  - Writes each entry of O(files), in the list's order, stopping at the first that fails.
  - The entries are those a role's state read gives M(blackwell.serving.host_state) in its C(files) option, the
    same keys (O(files[].validate), O(files[].systemd_unit) and O(files[].secret) are this writer's; the read
    ignores them). A role writes
    its desired state as data once, and both the read and this writer loop over it, so they cannot disagree.
  - An entry with O(files[].content) is written by M(ansible.builtin.copy) (check mode, diff, validate), any other by
    M(ansible.builtin.file).
  - Every entry is checked before the first is written; a wrong key or state stops the task with nothing changed.
  - A key whose value is null is left out, as host_state leaves it out. Where a setting turns a file off, give
    the entry C(state=absent) and its content C(omit), which every ansible-core drops from a task's arguments (a
    null in a template is the string C(None) before ansible-core 2.19).
options:
  files:
    description: The entries.
    type: list
    elements: dict
    required: true
    suboptions:
      path:
        description: The path.
        type: path
        required: true
      state:
        description: A regular file, nothing, a directory, or a symbolic link.
        type: str
        choices: [file, absent, directory, link]
        default: file
      content:
        description: The file's exact content (state C(file)); without it an existing file's owner, group and mode
          are set.
        type: str
      src:
        description: The link's target (state C(link)).
        type: str
      owner:
        description: The owner's name.
        type: str
      group:
        description: The group's name.
        type: str
      mode:
        description: The permission bits, as an octal string such as C("0644").
        type: str
      validate:
        description: A command that checks the new content before it is installed (M(ansible.builtin.copy)'s); not
          used by an entry without content.
        type: str
      systemd_unit:
        description: The content is a systemd unit, checked by C(systemd-analyze verify) under the entry's file name
          before it is installed (a O(files[].validate) of its own; not both); not used by an entry without content.
        type: bool
        default: false
      secret:
        description: Whatever its value, the entry's content is neither shown in a diff nor logged.
        type: raw
author: blackwell.serving maintainers (!UNKNOWN)
attributes:
  check_mode:
    description: Says what it would write.
    support: full
  diff_mode:
    description: A diff for each entry that changes, except secret ones.
    support: full
seealso:
  - module: blackwell.serving.host_state
  - module: ansible.builtin.copy
  - module: ansible.builtin.file
"""

EXAMPLES = r"""
- name: Write what the state read judged
  blackwell.serving.host_files:
    files:
      - path: /etc/example
        state: directory
        owner: root
        group: root
        mode: "0755"
      - path: /etc/example/example.conf
        content: "{{ lookup('ansible.builtin.template', 'example.conf.j2') }}"
        owner: root
        group: root
        mode: "0644"
      - path: /etc/systemd/system/example.service
        content: "{{ lookup('ansible.builtin.template', 'example.service.j2') }}"
        owner: root
        group: root
        mode: "0644"
        systemd_unit: true
"""

RETURN = r"""
files:
  description: Each entry written, in order, with whether it changed.
  returned: always
  type: list
  elements: dict
  sample: [{"path": "/etc/example", "changed": false}]
changed_paths:
  description: The paths of the entries that changed.
  returned: always
  type: list
  elements: str
  sample: ["/etc/example/example.conf"]
"""
