# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

import getpass
import os
import socket
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

from ansible_collections.blackwell.serving.plugins.module_utils import fleet_lock


def _start_time(pid):
    """A process's start time on this machine (clock ticks since boot, /proc/PID/stat), or None where it is gone."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as fh:
            return fh.read().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


class ActionModule(ActionBase):
    """The fleet's lock (module fleet_lock), decided on the control node: this run is the ansible-playbook process
    that forked this worker, named by its control node, its process id and that process's start time (the token:
    the same for every task of the run, so that the lock is kept and released without a value carried between
    plays). A lock whose holder ran on this control node and whose process is gone (or another has its id) is taken
    over; one of another control node only when it is older than stale_after, or with break_lock."""

    TRANSFERS_FILES = False
    _supports_check_mode = True
    # it runs module fleet_lock on the lock's host
    _requires_connection = True

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        args = dict(self._task.args)
        unknown = set(args) - {"state", "path", "operation", "stale_after", "break_lock"}
        if unknown:
            raise AnsibleActionFail(f"unsupported options {sorted(unknown)}")
        pid = os.getppid()
        controller = socket.gethostname()
        holder = {"controller": controller, "pid": pid, "user": getpass.getuser(),
                  "playbook": args.get("operation") or "a fleet operation",
                  "token": f"{controller}:{pid}:{_start_time(pid)}"}
        answer = self._execute_module(module_name="blackwell.serving.fleet_lock",
                                      module_args=dict(args, holder=holder), task_vars=task_vars)
        if answer.get("failed") or answer.get("state") != "busy":
            result.update(answer)
            return result
        other = answer.get("holder") or {}
        why = self._gone(other, controller, int(args.get("stale_after", 21600)), bool(args.get("break_lock")))
        where = (task_vars or {}).get("ansible_delegated_vars", {}) or {}
        host = next(iter(where), None) or (task_vars or {}).get("inventory_hostname")
        if why is None:
            result.update(failed=True, state="busy", holder=other, msg=(
                f"{holder['playbook']} stops before any change: the fleet's lock ({args.get('path') or 'fleet.lock'} "
                f"on {host}) is held by {fleet_lock.describe(other)}. One fleet operation at a time: wait for it "
                "to end. If that run is gone for good (its control node lost, say), run again with "
                "-e fleet_lock_break=true."))
            return result
        taken = self._execute_module(module_name="blackwell.serving.fleet_lock",
                                     module_args=dict(args, holder=holder, takeover_token=other.get("token")),
                                     task_vars=task_vars)
        result.update(taken)
        if taken.get("state") == "taken_over":
            message = f"took the fleet's lock over from {fleet_lock.describe(other)}: {why}"
            result["msg"] = message
            result.setdefault("warnings", []).append(message)
        elif not taken.get("failed"):
            result.update(failed=True, msg=f"{holder['playbook']} stops before any change: another run took the "
                                           f"fleet's lock first ({fleet_lock.describe(taken.get('holder'))}).")
        return result

    @staticmethod
    def _gone(other, controller, stale_after, break_lock):
        """Why the holder may be replaced, or None where it may not."""
        if break_lock:
            return "fleet_lock_break is set"
        if other.get("unreadable") or not other.get("token"):
            return "the lock file could not be read"
        if other.get("controller") == controller:
            pid = other.get("pid")
            start = _start_time(pid) if isinstance(pid, int) else None
            if start is None or f"{controller}:{pid}:{start}" != other.get("token"):
                return f"its process {pid} on this control node is gone"
            return None
        since = other.get("since")
        if isinstance(since, (int, float)) and time.time() - since > stale_after:
            return f"it is older than {stale_after} s and its control node ({other.get('controller')}) cannot be asked"
        return None
