#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_sm120_check
short_description: Judge an sglang source tree for the SM120 shared-memory fix (sglang PR 14311)
version_added: 0.1.0
description:
  - Finds C(_get_block_sizes_for_extend_attention) wherever it lives in the sglang package (it moved between
    releases) and works out, without a GPU and without importing sglang, which block sizes it chooses for a
    compute capability (12.0 by default) at the given head sizes, and whether the Q, K and V tiles (16-bit,
    one stage) fit that capability's shared memory per block (101,376 bytes on SM120).
  - A comment that mentions sm120, or a branch for capability 12 that keeps Hopper's block sizes, is not the
    fix; only what the function computes counts.
  - Where the tree is a git checkout it also reports whether the fix commit is an ancestor of HEAD.
  - Reads only; never changes anything.
author: blackwell.serving maintainers (!UNKNOWN)
options:
  path:
    description: An sglang checkout, or its C(python/) directory.
    type: path
    required: true
  capability:
    description: The compute capability to judge for, as C(major.minor).
    type: str
    default: "12.0"
  head_sizes:
    description: Head sizes (Lq = Lv) at which every tile must fit.
    type: list
    elements: int
    default: [128, 256]
  smem_limit:
    description: Shared memory per block, in bytes; by default the known limit of O(capability).
    type: int
  fix_commit:
    description: The commit of the fix, for the ancestry check.
    type: str
    default: 632c7afa8ce20c2a696380ccf5b28337fd9903b7
attributes:
  check_mode:
    description: Can run in check mode and return the same result as without it.
    support: full
  diff_mode:
    description: Returns no diff; it changes nothing.
    support: none
"""

EXAMPLES = r"""
- name: Judge the current sglang release
  blackwell.serving.sglang_sm120_check:
    path: /opt/sglang/current/src
  register: sm120

- name: Stop unless the fix is there
  ansible.builtin.assert:
    that: sm120.present
    fail_msg: "{{ sm120.reason }}"
"""

RETURN = r"""
present:
  description: Whether the function's tiles fit the capability's shared memory at every head size.
  returned: always
  type: bool
judged:
  description: Whether the function could be followed at all (false when it is missing or does something the judge does not follow).
  returned: always
  type: bool
file:
  description: The file that defines the function.
  returned: always
  type: str
line:
  description: The line of the definition.
  returned: always
  type: int
tiles:
  description: Per head size, the block sizes chosen and the shared memory they need, in bytes.
  returned: always
  type: list
  elements: dict
  sample:
    - {head_size: 256, BLOCK_M: 64, BLOCK_N: 64, BLOCK_DMODEL: 256, BLOCK_DPE: 0, BLOCK_DV: 256, smem_bytes: 98304}
smem_limit:
  description: The limit the tiles were measured against.
  returned: always
  type: int
reason:
  description: Why, in words.
  returned: always
  type: str
definitions:
  description: Every definition of the function found in the tree, with its verdict.
  returned: when the function was found
  type: list
  elements: dict
fix_commit_ancestor:
  description: Whether O(fix_commit) is an ancestor of HEAD; null when the tree is not a git checkout or git cannot tell.
  returned: always
  type: bool
head:
  description: The checkout's HEAD commit, or null.
  returned: always
  type: str
"""

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import sm120


def git_facts(module, path, fix_commit):
    git = shutil.which("git")
    if git is None:
        return None, None
    # read-only: trust the checkout whoever owns it (a service user's tree, read by root)
    git = [git, "-c", "safe.directory=*"]
    rc, out, err = module.run_command(git + ["-C", path, "rev-parse", "--show-toplevel"])
    if rc != 0:
        return None, None
    top = out.strip()
    rc, head, err = module.run_command(git + ["-C", top, "rev-parse", "HEAD"])
    head = head.strip() if rc == 0 else None
    rc = module.run_command(git + ["-C", top, "merge-base", "--is-ancestor", fix_commit, "HEAD"])[0]
    # 0: ancestor, 1: not an ancestor, other: git cannot tell (e.g. the commit is unknown to a shallow clone)
    return {0: True, 1: False}.get(rc), head


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            capability=dict(type="str", default="12.0"),
            head_sizes=dict(type="list", elements="int", default=[128, 256]),
            smem_limit=dict(type="int"),
            fix_commit=dict(type="str", default=sm120.FIX_COMMIT),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        capability = tuple(int(x) for x in p["capability"].split("."))
        if len(capability) != 2:
            raise ValueError
    except ValueError:
        module.fail_json(msg=f"capability must be major.minor, like 12.0; got {p['capability']!r}")
    if not os.path.isdir(p["path"]):
        module.fail_json(msg=f"{p['path']} is not a directory; path must be an sglang checkout or its python/ directory")
    try:
        verdict = sm120.judge_tree(p["path"], capability, tuple(p["head_sizes"]), p["smem_limit"])
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    ancestor, head = git_facts(module, p["path"], p["fix_commit"])
    verdict.update(fix_commit_ancestor=ancestor, head=head)
    module.exit_json(changed=False, **verdict)


if __name__ == "__main__":
    main()
