"""A callback for benchmarks/fleet_noop.py: where a playbook run's tasks and time go, per role.

Enabled by the benchmark only (ANSIBLE_CALLBACK_PLUGINS points here, ANSIBLE_CALLBACKS_ENABLED names it).
For each task it records its play, the wall time from its start to the next task's start (the linear strategies run
a task on every host before the next one), the role it belongs to (play-level tasks count as "(play)"),
its action, each host's outcome, and the module calls it made on the hosts (round trips: one per host that
ran it, one per loop item; actions that run on the controller only, and tasks delegated to the controller,
make none); at the end it writes one JSON file, BLACKWELL_ROLE_PROFILE, with a row per task.
"""
from __future__ import annotations

import json
import os
import time

from ansible.plugins.callback import CallbackBase

DOCUMENTATION = """
name: role_profile
type: aggregate
short_description: per-role task counts, round trips and wall time, written as JSON (benchmarks only)
description: Writes one JSON row per task (role, name, action, seconds, outcomes, round trips) to $BLACKWELL_ROLE_PROFILE.
"""

# actions that the controller runs itself: no module goes to the host
LOCAL = {"set_fact", "assert", "debug", "fail", "meta", "include_tasks", "import_tasks", "include_role",
         "import_role", "include_vars", "validate_argument_spec", "add_host", "group_by", "set_stats", "pause",
         "include", "import_playbook",
         # the collection's own actions that run in the play's process on the controller
         "checks", "report_file"}


def short(action):
    return action.rsplit(".", 1)[-1]


class CallbackModule(CallbackBase):
    CALLBACK_VERSION = 2.0
    CALLBACK_TYPE = "aggregate"
    CALLBACK_NAME = "role_profile"
    CALLBACK_NEEDS_ENABLED = True

    def __init__(self):
        super().__init__()
        self._rows = []
        self._current = None
        self._play = None

    def _close(self):
        if self._current is not None:
            self._current["seconds"] = round(time.monotonic() - self._current.pop("_start"), 4)
            self._rows.append(self._current)
            self._current = None

    def v2_playbook_on_play_start(self, play):
        self._close()
        self._play = play.get_name()

    def v2_playbook_on_task_start(self, task, is_conditional):
        self._close()
        role = task._role.get_name() if task._role else "(play)"
        delegated = str(task.delegate_to or "") in ("localhost", "127.0.0.1")
        self._current = {"play": self._play, "role": role, "task": task.get_name(), "action": short(task.action),
                         "_start": time.monotonic(), "_remote": short(task.action) not in LOCAL and not delegated,
                         "ok": 0, "changed": 0, "skipped": 0, "failed": 0, "round_trips": 0}

    v2_playbook_on_handler_task_start = v2_playbook_on_task_start

    def _count(self, key, result):
        if self._current is None:
            return
        # a loop reports each item and then the task: count the task once per host
        self._current[key] += 1
        # a task without a loop made one call on the host; a loop's calls are counted per item below
        if key != "skipped" and self._current["_remote"] and "results" not in result._result:
            self._current["round_trips"] += 1

    def _item(self, result):
        if self._current is not None and self._current["_remote"] and not result._result.get("skipped"):
            self._current["round_trips"] += 1

    def v2_runner_on_ok(self, result):
        self._count("changed" if result._result.get("changed") else "ok", result)

    def v2_runner_on_skipped(self, result):
        self._count("skipped", result)

    def v2_runner_on_failed(self, result, ignore_errors=False):
        self._count("failed", result)

    def v2_runner_on_unreachable(self, result):
        self._count("failed", result)

    v2_runner_item_on_ok = _item
    v2_runner_item_on_failed = _item

    def v2_playbook_on_stats(self, stats):
        self._close()
        for row in self._rows:
            row.pop("_remote", None)
        path = os.environ.get("BLACKWELL_ROLE_PROFILE")
        if path:
            with open(path, "w", encoding="utf-8") as fh:
                json.dump(self._rows, fh, indent=1)
