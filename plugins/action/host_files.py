# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

import shlex

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase

# what host_state reads of an entry, and what only the writes take
READ_KEYS = {"path", "state", "content", "src", "owner", "group", "mode"}
WRITE_KEYS = {"validate", "secret", "systemd_unit"}
# a unit's check before it is installed: systemd-analyze verify takes a unit by its file name, and copy's temporary
# file has none, so it is copied under the unit's name first (%s: that file; then the name)
UNIT_CHECK = "sh -c 'd=$(mktemp -d) && cp \"$1\" \"$d/$2\" && systemd-analyze verify \"$d/$2\"; rc=$?; rm -rf \"$d\"; exit $rc' sh %s"
STATES = {"file", "absent", "directory", "link"}


def entry_errors(number, entry):
    """What is wrong with one entry, as messages (none: it can be written)."""
    if not isinstance(entry, dict):
        return [f"entry {number}: expected a mapping with a path, found {entry!r}"]
    where = f"entry {number} ({entry.get('path', 'no path')})"
    errors = []
    unknown = set(entry) - READ_KEYS - WRITE_KEYS
    if unknown:
        errors.append(f"{where}: unknown keys {sorted(unknown)}; known: {sorted(READ_KEYS | WRITE_KEYS)}")
    if not isinstance(entry.get("path"), str) or not entry.get("path"):
        errors.append(f"{where}: path is required")
    state = entry.get("state", "file")
    if state not in STATES:
        errors.append(f"{where}: state must be one of {sorted(STATES)}, found {state!r}")
    if "content" in entry and state != "file":
        errors.append(f"{where}: content is written to a file (state file), not with state {state!r}")
    if state == "link" and not entry.get("src"):
        errors.append(f"{where}: a link needs its src")
    if entry.get("systemd_unit") and entry.get("validate"):
        errors.append(f"{where}: systemd_unit is a validate (systemd-analyze verify): give one or the other")
    return errors


class ActionModule(ActionBase):
    """Makes a host's files, directories and links what a list of entries says, in the list's order: the same
    entries a role's state read gives blackwell.serving.host_state (its `files`), so the read and the writes cannot
    disagree. An entry with content is written by ansible.builtin.copy (its check mode, diff and validate), any other
    by ansible.builtin.file. Every entry is checked before the first is written."""

    TRANSFERS_FILES = True
    _requires_connection = True
    _supports_check_mode = True
    _supports_async = False

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        unknown = set(self._task.args) - {"files"}
        if unknown:
            raise AnsibleActionFail(f"unsupported options {sorted(unknown)}; the only option is files")
        files = self._task.args.get("files")
        if not isinstance(files, list):
            raise AnsibleActionFail(f"files must be a list of entries, found {type(files).__name__}")
        # a key whose value is none is left out (an entry's content where a setting turns the file off)
        files = [{k: v for k, v in e.items() if v is not None} if isinstance(e, dict) else e for e in files]
        errors = [e for number, entry in enumerate(files, 1) for e in entry_errors(number, entry)]
        if errors:
            raise AnsibleActionFail("; ".join(errors))
        results, diffs = [], []
        try:
            for entry in files:
                secret = "secret" in entry
                outcome = self._write(entry, secret, task_vars)
                item = {"path": entry["path"], "changed": bool(outcome.get("changed"))}
                if outcome.get("failed"):
                    item.update(failed=True, msg=outcome.get("msg", "failed"))
                results.append(item)
                if item.get("failed"):
                    result.update(failed=True, msg=f"{entry['path']}: {item['msg']}")
                    break
                if not secret and outcome.get("diff") and self._task.diff:
                    diffs.extend(outcome["diff"] if isinstance(outcome["diff"], list) else [outcome["diff"]])
        finally:
            self._remove_tmp_path(self._connection._shell.tmpdir)
        # not `results`: Ansible reads a result with that key as a loop's in places (callbacks, profilers)
        result["files"] = results
        result["changed"] = any(r["changed"] for r in results)
        result["changed_paths"] = [r["path"] for r in results if r["changed"]]
        if diffs:
            result["diff"] = diffs
        return result

    def _write(self, entry, secret, task_vars):
        common = {k: entry[k] for k in ("owner", "group", "mode") if entry.get(k) is not None}
        if "content" not in entry:
            args = dict(common, path=entry["path"], state=entry.get("state", "file"))
            if entry.get("src"):
                args["src"] = entry["src"]
            if args["state"] in ("absent", "link"):
                args.pop("mode", None)
            if args["state"] == "link":
                # the link itself, as host_state judges it: an owner or group is the link's, not its target's
                args["follow"] = False
            if args["state"] == "link" and self._task.check_mode:
                # the target may be one this run makes before (a release it builds): check mode says the link
                # changes instead of failing on a target that is not there yet; a real run still refuses one
                args["force"] = True
            return self._execute_module(module_name="ansible.legacy.file", module_args=args, task_vars=task_vars)
        task = self._task.copy()
        task.args = dict(common, dest=entry["path"], content=entry["content"])
        if entry.get("validate"):
            task.args["validate"] = entry["validate"]
        elif entry.get("systemd_unit"):
            task.args["validate"] = f"{UNIT_CHECK} {shlex.quote(entry['path'].rsplit('/', 1)[-1])}"
        if secret:
            task.diff = False
            task.no_log = True
        copy = self._shared_loader_obj.action_loader.get(
            "ansible.legacy.copy", task=task, connection=self._connection, play_context=self._play_context,
            loader=self._loader, templar=self._templar, shared_loader_obj=self._shared_loader_obj)
        return copy.run(task_vars=task_vars)
