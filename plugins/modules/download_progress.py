#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

# Documentation only: the action plugin plugins/action/download_progress.py does the work on the controller.

from __future__ import annotations

DOCUMENTATION = r"""
module: download_progress
short_description: Wait for a background download and show its progress
version_added: 0.2.0
description:
  - Waits for an asynchronous job (a task run with C(async) and C(poll=0)) that downloads into O(path), and
    prints a line every O(interval) seconds with the bytes on disk under O(path), the share of O(total_bytes),
    the rate and the time left, so that a download of hours shows that it moves.
  - Fails with the end of the job's output when the job fails, and when it has not finished after O(timeout)
    seconds; what was downloaded stays, and a download started again resumes from there.
  - Runs as the same user as the job (set C(become_user) alike), whose async directory holds the job's status.
options:
  jid:
    description: The job id of the background task (its registered C(ansible_job_id)).
    type: str
    required: true
  path:
    description: The directory the job downloads into.
    type: path
    required: true
  total_bytes:
    description: The size of the whole download, for the share and the time left.
    type: int
    required: true
  interval:
    description: Seconds between two progress lines.
    type: int
    default: 30
  timeout:
    description: Seconds to wait before giving up.
    type: int
    default: 86400
  label:
    description: What is downloaded, for the progress lines.
    type: str
    default: download
  progress_file:
    description:
      - For a job that reports its own progress (the re-hash of M(blackwell.serving.model_snapshot)), a file on
        the host that holds the bytes done and the total, read instead of the bytes under O(path).
    type: path
author: blackwell.serving maintainers (!UNKNOWN)
attributes:
  action:
    description: Runs on the controller and asks the host for the job's status and the bytes on disk.
    support: full
  check_mode:
    description: Not supported; there is no job to wait for in check mode.
    support: none
  diff_mode:
    description: Returns no diff.
    support: none
seealso:
  - module: blackwell.serving.model_snapshot
  - name: Asynchronous actions and polling
    description: How a task runs in the background (C(async), C(poll=0)) and is waited for.
    link: https://docs.ansible.com/ansible/latest/playbook_guide/playbooks_async.html
"""

EXAMPLES = r"""
- name: Start a download in the background
  ansible.builtin.command:
    argv: [/opt/sglang/venv/bin/hf, download, ORG/NAME, --revision, "{{ revision }}", --local-dir, /srv/models/NAME]
  async: 86400
  poll: 0
  register: job

- name: Wait for it, with a progress line every 30 seconds
  blackwell.serving.download_progress:
    jid: "{{ job.ansible_job_id }}"
    path: /srv/models/NAME
    total_bytes: 440234567890
"""

RETURN = r"""
rc:
  description: The background command's exit status.
  returned: when the job finished
  type: int
  sample: 0
stdout:
  description: The background command's output.
  returned: when the job finished
  type: str
  sample: "Download complete: 9 files"
stderr:
  description: The background command's error output.
  returned: when the job finished
  type: str
  sample: ""
elapsed:
  description: Seconds this task waited.
  returned: always
  type: float
  sample: 5412.7
job:
  description: The finished job's own result (a module's return values).
  returned: when the job finished
  type: dict
  sample: {complete: true, files: 9}
"""
