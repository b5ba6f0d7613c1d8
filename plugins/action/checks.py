# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

import typing as t

from ansible.errors import AnsibleActionFail
from ansible.plugins.action import ActionBase


class ActionModule(ActionBase):
    """Several checks of a role's inputs in one task, each with its own message: evaluated in order, stopping at the
    first that fails (as a row of ansible.builtin.assert tasks would), on the controller, with no module and no
    connection. A task costs the controller a worker process and a round of the strategy whatever it does (about
    30 ms a host here); a preflight of ten asserts paid that ten times."""

    TRANSFERS_FILES = False
    _requires_connection = False
    _supports_check_mode = True
    _supports_async = False

    @classmethod
    def finalize_task_arg(cls, name: str, value: t.Any, templar: t.Any, context: t.Any) -> t.Any:
        # the checks are evaluated one by one, and a message templated only for the check that failed: a later
        # check may read what an earlier one vouches for (a version's shape before its parts), as with asserts.
        # ansible-core 2.19 and later call this; before, a task's arguments are templated before it runs (every
        # message then, as assert's fail_msg is there), so a message must be one that templates on any input.
        if name == "checks":
            return value
        return super().finalize_task_arg(name, value, templar, context)

    def _holds(self, that, task_vars):
        """A condition, evaluated as assert evaluates its own: through the templar where it can (ansible-core 2.19
        and later), else through a Conditional, as assert does on the versions before."""
        if hasattr(self._templar, "evaluate_conditional"):
            return self._templar.evaluate_conditional(conditional=that)
        from ansible.playbook.conditional import Conditional

        conditional = Conditional(loader=self._loader)
        conditional.when = [that]
        return conditional.evaluate_conditional(templar=self._templar, all_vars=task_vars)

    def run(self, tmp=None, task_vars=None):
        result = super().run(tmp, task_vars)
        del tmp
        checks = self._task.args.get("checks")
        unknown = set(self._task.args) - {"checks"}
        if unknown:
            raise AnsibleActionFail(f"unsupported options {sorted(unknown)}; the only option is checks")
        if not isinstance(checks, list) or not checks:
            raise AnsibleActionFail("checks must be a non-empty list of {that, msg} mappings")
        for number, check in enumerate(checks, 1):
            if not isinstance(check, dict) or set(check) != {"that", "msg"}:
                raise AnsibleActionFail(f"check {number}: expected a mapping with exactly the keys that and msg, "
                                        f"found {check!r}")
            thats = check["that"] if isinstance(check["that"], list) else [check["that"]]
            # a condition is an expression, as assert's; or a plain true or false, as YAML writes them
            if not thats or not all(isinstance(that, (str, bool)) for that in thats):
                raise AnsibleActionFail(f"check {number}: that must be a condition or a list of conditions")
            for that in thats:
                if not (that if isinstance(that, bool) else self._holds(that, task_vars)):
                    result.update(failed=True, evaluated_to=False, assertion=that, check=number,
                                  msg=self._templar.template(check["msg"]))
                    return result
        result.update(changed=False, msg=f"all {len(checks)} checks passed")
        return result
