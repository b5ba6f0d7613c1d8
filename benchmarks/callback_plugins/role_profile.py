"""A callback for benchmarks/fleet_noop.py: where a playbook run's tasks and time go, per role.

Enabled by the benchmark only (ANSIBLE_CALLBACK_PLUGINS points here, ANSIBLE_CALLBACKS_ENABLED names it).
For each task it records the wall time from its start to the next task's start (the linear strategies run
a task on every host before the next one), the role it belongs to (play-level tasks count as "(play)"),
and each host's outcome; at the end it writes one JSON file, BLACKWELL_ROLE_PROFILE, with a row per task.
"""
from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: role_profile
type: aggregate
short_description: per-role task counts and wall time, written as JSON (benchmarks only)
description: Writes one JSON row per task (role, name, seconds, outcomes) to $BLACKWELL_ROLE_PROFILE.
"""


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "role_profile"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._rows = []
        self._current = None

    def _close(self):
        if self._current is not None:
            self._current["seconds"] = round(time.monotonic() - self._current.pop("_start"), 4)
            self._rows.append(self._current)
            self._current = None

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close()
        role = task._role.get_name() if task._role else "(play)"
        self._current = {"role": role, "task": task.get_name(), "_start": time.monotonic(),
                         "ok": 0, "changed": 0, "skipped": 0, "failed": 0}

    v2_playbook_on_handler_task_start = v2_playbook_on_task_start

    def _count(self, key, result):
        if self._current is None:
            return
        # a loop reports each item and then the task: count the task once per host
        self._current[key] += 1

    def v2_runner_on_ok(self, result):
        self._count("changed" if result._result.get("changed") else "ok", result)

    def v2_runner_on_skipped(self, result):
        self._count("skipped", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count("failed", result)

    def v2_runner_on_unreachable(self, result):
        self._count("failed", result)

    def v2_playbook_on_stats(self, stats):
        self._close()
        path = os.environ.get("BLACKWELL_ROLE_PROFILE")
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(self._rows, fh, indent=1)
