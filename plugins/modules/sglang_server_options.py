#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_server_options
short_description: The options an sglang tree's server accepts, and which of some arguments it does not know
version_added: 0.2.0
description:
  - Reads C(python/sglang/srt/server_args.py) under O(path) and collects the option strings of its
    C(add_argument) calls by parsing the file (nothing is imported, so no GPU and no installed stack are needed).
  - With O(args), names the flags among them that the server does not accept, and the values it would refuse - not
    one of an option's literal C(choices) (a list in the call, or a module-level name bound to one), or not a number
    where the option's C(type) is C(int) or C(float). Choices computed at run time (a registry's keys) are not checked.
  - Reads only; never changes anything.
author: blackwell.serving maintainers (!UNKNOWN)
options:
  path:
    description: The root of an sglang checkout (the directory that holds C(python/)).
    type: path
    required: true
  args:
    description: Command-line words to check; each word that starts with C(-) is a flag (C(--flag=value) counts as C(--flag)).
    type: list
    elements: str
    default: []
attributes:
  check_mode:
    description: Runs in check mode as without it.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
seealso:
  - module: blackwell.serving.sglang_sm120_check
  - name: sglang server arguments
    description: The options of sglang's server, as sglang documents them.
    link: https://docs.sglang.io/advanced_features/server_arguments.html
"""

EXAMPLES = r"""
- name: Flags the pinned sglang does not know
  blackwell.serving.sglang_server_options:
    path: /opt/sglang/current/src
    args: [--context-length, "65536", --enable-torch-compile]
  register: options
"""

RETURN = r"""
found:
  description: Whether the tree has the file and it defines any option.
  returned: always
  type: bool
  sample: true
file:
  description: The file read.
  returned: always
  type: str
  sample: /opt/sglang/current/src/python/sglang/srt/server_args.py
options:
  description: The option strings the server accepts.
  returned: always
  type: list
  elements: str
  sample: [--api-key, --model-path, --tp-size]
unknown:
  description: The flags of O(args) that are not among RV(options) (empty when RV(found) is false).
  returned: always
  type: list
  elements: str
  sample: [--enable-torch-compiel]
bad_values:
  description: The options of O(args) whose value the server would refuse, each with its flag, value and why.
  returned: always
  type: list
  elements: dict
  sample: [{flag: --attention-backend, value: flashinfer2, why: "not one of triton, torch_native, flashinfer"}]
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import server_args


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            args=dict(type="list", elements="str", default=[]),
        ),
        supports_check_mode=True,
    )
    p = module.params
    path = os.path.join(p["path"], server_args.SERVER_ARGS)
    result = dict(changed=False, found=False, file=path, options=[], unknown=[], bad_values=[])
    try:
        with open(path, encoding="utf-8") as fh:
            source = fh.read()
    except FileNotFoundError:
        module.exit_json(**result)
    except OSError as exc:
        module.fail_json(msg=f"cannot read {path}: {exc}", **result)
    try:
        options = server_args.option_strings(source)
        specs = server_args.option_specs(source)
    except SyntaxError as exc:
        module.fail_json(msg=f"{path} is not Python this module can parse: {exc}", **result)
    result.update(found=bool(options), options=options)
    if options:
        result["unknown"] = server_args.unknown_flags(p["args"], options)
        result["bad_values"] = server_args.bad_values(p["args"], specs)
    module.exit_json(**result)


if __name__ == "__main__":
    main()
