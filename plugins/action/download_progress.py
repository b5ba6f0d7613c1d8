# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
action: download_progress
short_description: Wait for a background download and show its progress
version_added: 0.2.0
description:
  - Waits for an asynchronous job (a task run with C(async) and C(poll=0)) that downloads into O(path), and
    prints a line every O(interval) seconds with the bytes on disk under O(path), the share of O(total_bytes),
    the rate and the time left, so that a download of hours shows that it moves.
  - Fails with the end of the job's output when the job fails, and when it has not finished after O(timeout)
    seconds (the job goes on; the next run attaches to what it left).
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
author: blackwell.serving maintainers (!UNKNOWN)
"""

import shlex
import time

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase
from ansible.utils.display import Display

from ansible_collections.blackwell.serving.plugins.module_utils.snapshot import human_duration, progress_line

display = Display()


class ActionModule(ActionBase):
    TRANSFERS_FILES = False
    _requires_connection = True

    def _bytes_under(self, path):
        # du counts partial downloads too; no module needed for one number
        res = self._low_level_execute_command(f"du -sb -- {shlex.quote(path)} 2>/dev/null || echo 0")
        try:
            return int((res.get("stdout") or "0").split()[0])
        except (ValueError, IndexError):
            return 0

    def _status(self, jid, task_vars, mode="status"):
        async_dir = self._remote_expand_user(self.get_shell_option("async_dir", default="~/.ansible_async"))
        return self._execute_module(module_name="ansible.legacy.async_status", task_vars=task_vars,
                                    module_args={"jid": jid, "mode": mode, "_async_dir": async_dir})

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "jid": {"type": "str", "required": True},
            "path": {"type": "path", "required": True},
            "total_bytes": {"type": "int", "required": True},
            "interval": {"type": "int", "default": 30},
            "timeout": {"type": "int", "default": 86400},
            "label": {"type": "str", "default": "download"},
        })
        host = task_vars.get("inventory_hostname", "?")
        start = time.monotonic()
        first = self._bytes_under(args["path"])
        last_t, last_b = start, first
        while True:
            status = self._status(args["jid"], task_vars)
            if status.get("failed") and not status.get("finished"):
                raise AnsibleActionFail(f"{host}: cannot follow the job {args['jid']}: {status.get('msg', status)}")
            if status.get("finished"):
                break
            elapsed = time.monotonic() - start
            if elapsed > args["timeout"]:
                raise AnsibleActionFail(
                    f"{host}: {args['label']} has not finished after {human_duration(elapsed)} (job {args['jid']} "
                    f"goes on in the background). Run again later to attach to what it left, or raise the timeout.")
            time.sleep(min(args["interval"], max(args["timeout"] - elapsed, 1)))
            now, done = time.monotonic(), self._bytes_under(args["path"])
            rate = (done - last_b) / (now - last_t) if now > last_t else None
            last_t, last_b = now, done
            display.display(f"{host}: {args['label']}: {progress_line(done, args['total_bytes'], now - start, rate)}"
                            f" [{human_duration(now - start)} so far]")
        self._status(args["jid"], task_vars, mode="cleanup")
        for key in ("rc", "stdout", "stderr", "cmd", "start", "end", "delta"):
            if key in status:
                result[key] = status[key]
        result["elapsed"] = round(time.monotonic() - start, 1)
        result["changed"] = True
        if status.get("failed") or status.get("rc", 0) != 0:
            tail = (status.get("stderr") or status.get("msg") or "").strip()[-2000:]
            result["failed"] = True
            result["msg"] = f"{host}: {args['label']} failed (rc={status.get('rc')}): {tail}"
        else:
            result["msg"] = f"{host}: {args['label']} finished in {human_duration(result['elapsed'])}"
        return result
