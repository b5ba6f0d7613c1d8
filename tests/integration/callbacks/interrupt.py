# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Test-only callback: kill ansible-playbook (SIGKILL, as a lost control node or kill -9 does) when a task whose
name contains BLACKWELL_INTERRUPT_AT is about to start. The task does not run; whatever ran before stays."""

from __future__ import annotations

DOCUMENTATION = r"""
name: interrupt
type: aggregate
short_description: Kill the run just before a named task (tests only)
description:
  - Kills ansible-playbook with SIGKILL when a task whose name contains E(BLACKWELL_INTERRUPT_AT) starts.
requirements:
  - enable in configuration
"""

import os
import signal

from ansible.plugins.callback import CallbackBase


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "interrupt"
    CALLBACK_NEEDS_ENABLED = True

    def v2_playbook_on_task_start(self, task, is_conditional):
        at = os.environ.get("BLACKWELL_INTERRUPT_AT")
        if at and at in task.get_name():
            os.kill(os.getpid(), signal.SIGKILL)
