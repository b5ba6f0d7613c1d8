# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

import os
import tempfile

from ansible.errors import AnsibleActionFail
from ansible.module_utils.common.text.converters import to_bytes, to_text
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    """Writes a report into a file on the controller, in the worker's own process: no module runs, no connection
    is made (ansible.builtin.copy delegated to localhost starts an interpreter for the module, twice with its
    directory, about 0.8 s a host in the lab)."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        _valid, args = self.validate_argument_spec(argument_spec={
            "path": {"type": "path", "required": True},
            "content": {"type": "str", "required": True},
            "mode": {"type": "raw", "default": "0644"},
            "directory_mode": {"type": "raw", "default": "0755"},
        })
        path = args["path"]
        try:
            mode, dir_mode = (int(str(m), 8) for m in (args["mode"], args["directory_mode"]))
        except ValueError as exc:
            raise AnsibleActionFail(f"mode and directory_mode are octal, like '0644': {exc}") from exc
        data = to_bytes(args["content"])
        directory = os.path.dirname(path) or "."
        try:
            before = None
            if os.path.isfile(path):
                with open(path, "rb") as fh:
                    before = fh.read()
            same = before == data and (os.stat(path).st_mode & 0o7777) == mode
            if not same:
                os.makedirs(directory, mode=dir_mode, exist_ok=True)
                fd, tmp_path = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", dir=directory)
                try:
                    with os.fdopen(fd, "wb") as fh:
                        fh.write(data)
                    os.chmod(tmp_path, mode)
                    os.replace(tmp_path, path)
                except BaseException:
                    if os.path.exists(tmp_path):
                        os.unlink(tmp_path)
                    raise
        except OSError as exc:
            raise AnsibleActionFail(f"cannot write the report {path} on the controller: {exc}") from exc
        result.update(changed=not same, path=path)
        if self._task.diff and not same:
            result["diff"] = {"before_header": path, "after_header": path,
                              "before": to_text(before or b""), "after": to_text(data)}
        return result
