# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

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
            # a job that reports its own progress (model_snapshot's re-hash): "DONE TOTAL" in this file
            "progress_file": {"type": "path"},
        })
        host = task_vars.get("inventory_hostname", "?")
        start = time.monotonic()
        total = args["total_bytes"]
        if args["progress_file"]:
            def measure():
                res = self._low_level_execute_command(f"cat -- {shlex.quote(args['progress_file'])} 2>/dev/null")
                words = (res.get("stdout") or "").split()
                return [int(w) for w in words[:2]] if len(words) >= 2 and all(w.isdigit() for w in words[:2]) \
                    else [0, total]
        else:
            def measure():
                return [self._bytes_under(args["path"]), total]
        first = measure()[0]
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
                    f"{host}: {args['label']} has not finished after {human_duration(elapsed)} (job {args['jid']}). "
                    f"What was downloaded stays; run again to resume from there, or raise the timeout.")
            time.sleep(min(args["interval"], max(args["timeout"] - elapsed, 1)))
            now, (done, total) = time.monotonic(), measure()
            rate = (done - last_b) / (now - last_t) if now > last_t else None
            last_t, last_b = now, done
            display.display(f"{host}: {args['label']}: {progress_line(done, total, now - start, rate)}"
                            f" [{human_duration(now - start)} so far]")
        display.display(f"{host}: {args['label']}: finished after {human_duration(time.monotonic() - start)}")
        self._status(args["jid"], task_vars, mode="cleanup")
        # a module's job: its own result, for the task that follows
        internal = ("ansible_job_id", "finished", "started", "results_file", "invocation")
        result["job"] = {k: v for k, v in status.items() if k not in internal}
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
