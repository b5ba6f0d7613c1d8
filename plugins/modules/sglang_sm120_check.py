#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: sglang_sm120_check
short_description: Judge an sglang tree for the SM120 shared-memory fix (sglang PR 14311), by the compiler where it can
version_added: 0.1.0
description:
  - Finds C(_get_block_sizes_for_extend_attention) wherever it lives in the sglang package (it moved between
    releases) and judges whether the extend-attention kernel fits the shared memory per block of a compute
    capability (12.0 by default; 101,376 bytes on SM120) at every head dim judged.
  - B(The compiler judge), when O(python) is given and Triton is installed in its environment. A probe run by
    that interpreter loads the kernel file on its own (C(torch), sglang and the rest are stubs answering as a
    CUDA machine of the capability would; no GPU, no torch with CUDA, no import of the sglang package), calls
    the tree's own launcher C(extend_attention_fwd) so that the tree chooses block sizes, warps and stages,
    compiles the launched kernel for C(sm_120) with Triton and compares the compiled kernel's shared memory with
    the limit. This is what decides whether the kernel launches.
  - B(The estimate), without O(python). The block sizes the function chooses,
    worked out without running anything, and the Q, K and V tiles (16-bit, one stage) measured against the
    limit. Fast and available before anything is installed, but blind to stages and to the compiler's layout, and
    off by up to a third, both ways. Head dims whose qk and v differ (576/512) are not judged by it.
  - With O(python), a tree the compiler cannot judge (no Triton there, a launcher the probe cannot call, a kernel file
    it cannot load) is not judged (RV(judged) false, RV(present) false, RV(judge) C(none)), with the compiler's
    reason, unless O(accept_estimate) is set, in which case the estimate's verdict stands and RV(judge) says so.
  - The result says which judge answered (RV(judge)), with the figures per head dim either way.
  - A comment that mentions sm120, or a branch for capability 12 that keeps Hopper's block sizes, is not the
    fix; only what the code computes counts.
  - Where the tree is a git checkout it also reports whether the fix commit is an ancestor of HEAD.
  - Changes nothing on the host but the verdict cache O(cache), when given (not in check mode).
author: blackwell.serving maintainers (!UNKNOWN)
options:
  path:
    description: An sglang checkout, or its C(python/) directory.
    type: path
    required: true
  python:
    description:
      - The interpreter of the release's environment, where Triton is; the compiler judges with it.
      - Without it the estimate answers. With it, the compiler must answer (see O(accept_estimate)).
    type: path
  accept_estimate:
    description:
      - Where O(python) is given and the compiler cannot judge the tree, take the estimate's verdict instead of
        answering not judged. The estimate is blind to pipeline stages and to the compiler's layout, and was wrong
        both ways on real edits of sglang's kernel; the reason the compiler gave is returned as RV(compiler_error).
    type: bool
    default: false
  model_path:
    description:
      - A model directory; the attention head dims in its C(config.json) are judged too (GLM-5, whose attention is
        multi-head latent attention, adds 256/256 and, absorbed, 576/512).
      - A missing directory or C(config.json) is an error; a config that names no head dims adds none.
    type: path
  capability:
    description: The compute capability to judge for, as C(major.minor).
    type: str
    default: "12.0"
  head_sizes:
    description: Head dims at which the kernel must fit, as C(qk) (C(qk) = C(v)) or C(qk/v).
    type: list
    elements: str
    default: ["128", "256"]
  smem_limit:
    description: Shared memory per block, in bytes; by default the known limit of O(capability).
    type: int
  cache:
    description:
      - A file that keeps the compiler's last verdict, keyed by the kernel files' sha256, Triton's version, the
        head dims, the capability, the limit and the probe; a run with the same key answers from it without
        compiling (RV(cached)). Without it the compiler runs every time.
    type: path
  fix_commit:
    description: The commit of the fix, for the ancestry check.
    type: str
    default: 632c7afa8ce20c2a696380ccf5b28337fd9903b7
attributes:
  check_mode:
    description: Can run in check mode and return the same result as without it; the cache is read, not written.
    support: full
  diff_mode:
    description: Returns no diff.
    support: none
seealso:
  - name: sglang PR 14311
    description: The fix, block sizes for SM120's shared memory.
    link: https://github.com/sgl-project/sglang/pull/14311
  - module: blackwell.serving.sglang_server_options
  - module: blackwell.serving.gpu_facts
"""

EXAMPLES = r"""
- name: Estimate, on a clone, before anything is built
  blackwell.serving.sglang_sm120_check:
    path: /opt/sglang/releases/new/src
  register: sm120

- name: Ask the compiler, with the release's interpreter, for the model's head dims too
  blackwell.serving.sglang_sm120_check:
    path: /opt/sglang/current/src
    python: /opt/sglang/current/venv/bin/python
    model_path: /srv/models/GLM-5-NVFP4
    cache: /opt/sglang/current/.sm120-verdict.json
  register: sm120

- name: Stop unless the kernel fits
  ansible.builtin.assert:
    that: sm120.present
    fail_msg: "{{ sm120.reason }}"
"""

RETURN = r"""
present:
  description: Whether the kernel fits the capability's shared memory at every head dim judged.
  returned: always
  type: bool
  sample: true
judge:
  description:
    - Which judge answered, C(compiler) or C(estimate); C(none) where O(python) was given, the compiler could not judge
      and O(accept_estimate) was not set.
  returned: always
  type: str
  sample: compiler
judged:
  description:
    - Whether the tree was judged at all (false when the function is missing, does something the judge does not
      follow, or the compiler could not judge it and O(accept_estimate) was not set).
  returned: always
  type: bool
  sample: true
compiler_error:
  description: Why the compiler did not judge, where O(python) was given; names the launcher's parameter where that was the cause.
  returned: when O(python) was given and the compiler did not judge
  type: str
  sample: "no Triton: the environment of /opt/sglang/current/venv/bin/python has no triton package"
triton:
  description: The version of Triton that compiled, or null.
  returned: always
  type: str
  sample: 3.5.1
cached:
  description: Whether the compiler's verdict came from O(cache).
  returned: always
  type: bool
  sample: false
head_dims:
  description: The head dims judged, as C(qk/v).
  returned: always
  type: list
  elements: str
  sample: ["128/128", "256/256", "576/512"]
file:
  description: The file that defines the function.
  returned: always
  type: str
  sample: /opt/sglang/current/src/python/sglang/srt/layers/attention/triton_ops/extend_attention.py
line:
  description: The line of the definition.
  returned: always
  type: int
  sample: 35
tiles:
  description:
    - Per head dim (and per kernel launched, for the compiler), the block sizes, warps and stages chosen and the
      shared memory asked for, in bytes, with whether it fits.
    - The estimate leaves C(num_stages) null; the compiler's C(smem_bytes) is the compiled kernel's.
  returned: always
  type: list
  elements: dict
  sample:
    - {head_dim: "256/256", head_size: 256, kernel: _fwd_kernel, BLOCK_M: 64, BLOCK_N: 64, BLOCK_DMODEL: 256,
       BLOCK_DPE: 0, BLOCK_DV: 256, num_warps: 8, num_stages: 1, smem_bytes: 73728, fits: true}
estimate:
  description: The estimate's own verdict (present, tiles, reason), also when the compiler answered.
  returned: always
  type: dict
  sample: {present: true, tiles: [], reason: "head dim 256/256: (64, 64) needs 98304 bytes, within 101376"}
smem_limit:
  description: The limit the kernel was measured against.
  returned: always
  type: int
  sample: 101376
reason:
  description: Why, in words; names each head dim over the limit, its bytes and the limit.
  returned: always
  type: str
  sample: "head dim 256/256: (64, 64) needs 73728 bytes, within 101376 (compiled by Triton 3.5.1 for sm_120)"
definitions:
  description: Every definition of the function found in the tree, with its verdict.
  returned: when the function was found
  type: list
  elements: dict
  sample: [{file: /opt/sglang/current/src/python/sglang/srt/layers/attention/triton_ops/extend_attention.py, line: 35, present: true}]
fix_commit_ancestor:
  description: Whether O(fix_commit) is an ancestor of HEAD; null when the tree is not a git checkout or git cannot tell.
  returned: always
  type: bool
  sample: true
head:
  description: The checkout's HEAD commit, or null.
  returned: always
  type: str
  sample: 3f9fc8b848365a5797a44856854e3e6f00a60dd0
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import sm120_check


def main():
    module = AnsibleModule(argument_spec=sm120_check.SPEC, supports_check_mode=True)
    try:
        verdict = sm120_check.check(module, module.params)
    except ValueError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(changed=False, **verdict)


if __name__ == "__main__":
    main()
