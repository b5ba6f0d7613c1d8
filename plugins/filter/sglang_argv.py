# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Filter over module_utils/sglang_argv.py: sglang's server options from the sglang_service role's variables."""

from __future__ import annotations

from ansible.errors import AnsibleFilterError

from ansible_collections.blackwell.serving.plugins.module_utils import sglang_argv


def sglang_server_args(settings):
    try:
        return sglang_argv.server_options(settings)
    except sglang_argv.ArgvError as exc:
        raise AnsibleFilterError(str(exc)) from exc


def sglang_option_refusals(bad_values):
    """One phrase per value the server refuses, naming the role variable that gives it."""
    return [f"{sglang_argv.variable_of(b['flag'])}={b['value']} ({b['flag']}: {b['why']})" for b in bad_values or []]


class FilterModule:
    def filters(self):
        return {"sglang_server_args": sglang_server_args, "sglang_option_refusals": sglang_option_refusals}
