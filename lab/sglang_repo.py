"""A git repository shaped like sglang's history, served over git's own protocol.

Each commit carries the real upstream subject (where it was verified, see
UPSTREAM below) and a ``Lab-Stand-In-For:`` trailer naming the upstream
commit it stands for; the content is synthetic, written for the lab: the
extend-attention block-size function before and after the SM120 fix, the
move of its file, the pins in python/pyproject.toml, and a stand-in server.
Dates, authors and content are fixed, so the commit ids are the same on
every machine (tests/unit/test_lab_sglang_repo.py holds them to
inventories/lab).
"""
from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import paths
from .util import digest, log, run

STANDIN = paths.LAB_SRC / "standins" / "sglang"
OLD_PATH = "python/sglang/srt/layers/attention/triton_ops/extend_attention.py"
NEW_PATH = "python/sglang/kernels/ops/attention/extend_attention.py"

_HEADER = '''"""
Memory-efficient attention for prefill (lab stand-in).

Keeps the shape of sglang's extend attention module, a module-level
CUDA_CAPABILITY and the block-size selection; the kernels are not part of
the stand-in.
"""

import torch
import triton

from sglang.srt.utils import is_cuda, is_hip

_is_cuda = is_cuda()
_is_hip = is_hip()

if _is_cuda or _is_hip:
    CUDA_CAPABILITY = torch.cuda.get_device_capability()


def _get_block_sizes_for_extend_attention(Lq: int, Lv: int):
    """Get block sizes and configuration for extend attention kernels."""
    if Lq == 576:
        BLOCK_DMODEL = 512
        BLOCK_DPE = 64
    elif Lq == 288:
        BLOCK_DMODEL = 256
        BLOCK_DPE = 32
    elif Lq == 192:
        BLOCK_DMODEL = 128
        BLOCK_DPE = 64
    else:
        BLOCK_DMODEL = triton.next_power_of_2(Lq)
        BLOCK_DPE = 0
    BLOCK_DV = triton.next_power_of_2(Lv)

'''

_HIP_OLD = '''    if _is_hip:
        BLOCK_M, BLOCK_N = (64, 64)
        num_warps = 4
    else:
'''

_HIP_NEW = '''    if _is_hip:
        if Lq == 576 and Lv == 512:
            # gfx950: smaller N tile for the MLA shape
            BLOCK_M, BLOCK_N = (64, 32)
        else:
            BLOCK_M, BLOCK_N = (64, 64)
        num_warps = 4
    else:
'''

_SM120 = '''        if _is_cuda and CUDA_CAPABILITY[0] == 12:
            # sm120 has 99 KiB of shared memory per block
            if Lq <= 128:
                BLOCK_M, BLOCK_N = (64, 128)
            elif Lq <= 256:
                BLOCK_M, BLOCK_N = (64, 64)
            else:
                BLOCK_M, BLOCK_N = (32, 32)
        elif _is_cuda and CUDA_CAPABILITY[0] >= 9:
'''

_SM100_SM120 = '''        if _is_cuda and CUDA_CAPABILITY[0] == 10:
            if Lq <= 256:
                BLOCK_M, BLOCK_N = (128, 64)
            else:
                BLOCK_M, BLOCK_N = (64, 64)
        elif _is_cuda and CUDA_CAPABILITY[0] == 12:
            # sm120 has 99 KiB of shared memory per block
            if Lq <= 128:
                BLOCK_M, BLOCK_N = (64, 128)
            elif Lq <= 256:
                BLOCK_M, BLOCK_N = (64, 64)
            else:
                BLOCK_M, BLOCK_N = (32, 32)
        elif _is_cuda and CUDA_CAPABILITY[0] >= 9:
'''

_HOPPER_FIRST = '''        if _is_cuda and CUDA_CAPABILITY[0] >= 9:
'''

_REST = '''            if Lq <= 256:
                BLOCK_M, BLOCK_N = (128, 64)
            else:
                BLOCK_M, BLOCK_N = (32, 64)
        elif _is_cuda and CUDA_CAPABILITY[0] >= 8:
            if Lq <= 128:
                BLOCK_M, BLOCK_N = (128, 128)
            elif Lq <= 256:
                BLOCK_M, BLOCK_N = (64, 64)
            else:
                BLOCK_M, BLOCK_N = (32, 64)
        else:
            BLOCK_M, BLOCK_N = (64, 64) if Lq <= 128 else (32, 32)
        num_warps = 4 if Lq <= 64 else 8

    return BLOCK_DMODEL, BLOCK_DPE, BLOCK_DV, BLOCK_M, BLOCK_N, num_warps
'''

PRE_FIX = _HEADER + _HIP_OLD + _HOPPER_FIRST + _REST
FIXED = _HEADER + _HIP_OLD + _SM120 + _REST
MOVED = _HEADER + _HIP_NEW + _SM100_SM120 + _REST

UTILS = '''"""Platform probes (lab stand-in: a CUDA platform without touching a GPU)."""


def is_cuda():
    return True


def is_hip():
    return False
'''

GLM_MODEL = '''"""GlmMoeDsaForCausalLM (lab stand-in: the architecture name only)."""


class GlmMoeDsaForCausalLM:
    fused_shared_experts = {fused}


EntryClass = [GlmMoeDsaForCausalLM]
'''


def pyproject(version: str, flashinfer: str) -> str:
    return f'''[build-system]
requires = ["setuptools>=61.0", "wheel"]
build-backend = "setuptools.build_meta"

[project]
name = "sglang"
version = "{version}"
description = "SGLang (lab stand-in tree)"
requires-python = ">=3.10"
dependencies = [
  "flashinfer_python=={flashinfer}",
  "flashinfer_cubin=={flashinfer}",
  "sgl-kernel==0.3.21",
  "torch==2.9.1",
  "transformers==4.57.1",
  "requests",
]

[tool.setuptools.packages.find]
include = ["sglang*"]
'''


@dataclass
class Step:
    key: str
    subject: str
    upstream: str
    date: str
    files: dict[str, str | None]  # path -> content, None removes
    verified_subject: bool = True


def _version(v: str) -> dict[str, str]:
    return {"python/sglang/version.py": f'__version__ = "{v}"\n'}


def steps() -> list[Step]:
    server = (STANDIN / "launch_server.py").read_text()
    args = (STANDIN / "server_args.py").read_text()
    base = {
        "README.md": "# SGLang (lab stand-in)\n\nA synthetic tree shaped like sglang's, for the blackwell.serving lab.\n",
        "python/pyproject.toml": pyproject("0.5.8.post1", "0.6.2"),
        "python/sglang/__init__.py": "from sglang.version import __version__\n",
        "python/sglang/launch_server.py": server,
        "python/sglang/srt/__init__.py": "",
        "python/sglang/srt/server_args.py": args,
        "python/sglang/srt/utils.py": UTILS,
        "python/sglang/srt/layers/__init__.py": "",
        "python/sglang/srt/layers/attention/__init__.py": "",
        "python/sglang/srt/layers/attention/triton_ops/__init__.py": "",
        OLD_PATH: PRE_FIX,
        **_version("0.5.8.post1"),
    }
    return [
        Step("v0_5_8_post1", "Release v0.5.8.post1", "(tag v0.5.8.post1)", "2026-01-24T10:00:00+00:00", base,
             verified_subject=False),
        Step("sm120_fix", "[Fix] add block size logic for sm120 smem size (#14311)",
             "632c7afa8ce20c2a696380ccf5b28337fd9903b7", "2026-01-29T12:00:00+00:00", {OLD_PATH: FIXED}),
        Step("glm5_support", "Support GlmMoeDsaForCausalLM (#18521)",
             "398b81f78c939469f60f3f54f6526df95f4cab31", "2026-02-10T12:00:00+00:00",
             {"python/sglang/srt/models/__init__.py": "",
              "python/sglang/srt/models/glm_moe_dsa.py": GLM_MODEL.format(fused="False")}),
        Step("glm5_fused_shared_expert", "Fix GLM-5 fused shared expert (#18804)",
             "1b659bcb088fd303ee472c0720eeb1a3797cffa1", "2026-02-17T12:00:00+00:00",
             {"python/sglang/srt/models/glm_moe_dsa.py": GLM_MODEL.format(fused="True"),
              "python/pyproject.toml": pyproject("0.5.9", "0.6.3"), **_version("0.5.9")}),
        Step("last_flashinfer_063", "Last commit that pins flashinfer 0.6.3",
             "3f9fc8b848365a5797a44856854e3e6f00a60dd0", "2026-03-03T12:00:00+00:00",
             {"README.md": "# SGLang (lab stand-in)\n\nA synthetic tree shaped like sglang's, for the "
                           "blackwell.serving lab. Pins flashinfer 0.6.3.\n"}, verified_subject=False),
        Step("fp4_cudnn_default", "fix: default FP4 GEMM backend to flashinfer_cudnn on SM120 (Blackwell) (#20047)",
             "d39ed074cf11ae9247dbcb04170e6921ca727559", "2026-03-09T12:00:00+00:00",
             {"python/pyproject.toml": pyproject("0.5.9", "0.6.4"),
              "python/sglang/srt/server_args.py": args.replace('dict(default="flashinfer_cutlass")',
                                                               'dict(default="auto")')}),
        Step("kernels_moved", "Move attention kernels to sglang/kernels (#30044)",
             "(upstream #30044)", "2026-07-14T12:00:00+00:00",
             {OLD_PATH: None, NEW_PATH: MOVED, "python/sglang/kernels/__init__.py": "",
              "python/sglang/kernels/ops/__init__.py": "", "python/sglang/kernels/ops/attention/__init__.py": "",
              "python/pyproject.toml": pyproject("0.6.1", "0.6.8"), **_version("0.6.1")},
             verified_subject=False),
    ]


# A branch off main where the fix was reverted: the fix commit is an ancestor,
# the code is not fixed. A judge that trusts ancestry alone is fooled by it.
REVERT = Step("revert_sm120", 'Revert "[Fix] add block size logic for sm120 smem size (#14311)"',
              "(lab only)", "2026-03-04T12:00:00+00:00", {OLD_PATH: PRE_FIX})
REVERT_PARENT = "last_flashinfer_063"

# A branch off the pin whose server fails at start, as a broken build does: it holds the fix and installs,
# so only the service's health gate can catch it (molecule/sglang_service rolls back from it).
BROKEN_SERVER = '''"""Lab stand-in of a release that does not come up: it fails at start, as a broken build does."""
import sys

from sglang.srt.server_args import prepare_server_args


def main(argv=None):
    prepare_server_args(sys.argv[1:] if argv is None else argv)
    print("RuntimeError: CUDA error: no kernel image is available for execution on the device "
          "(lab stand-in of a release that does not come up)", file=sys.stderr, flush=True)
    raise SystemExit(1)


if __name__ == "__main__":
    main()
'''
BROKEN = Step("broken_server", "lab: a release whose server fails at start", "(lab only)",
              "2026-03-05T12:00:00+00:00", {"python/sglang/launch_server.py": BROKEN_SERVER})

SERVE_NAME = "sgl-project/sglang.git"


def _git(repo: Path, *args: str, date: str | None = None) -> str:
    env = {"GIT_CONFIG_NOSYSTEM": "1", "GIT_CONFIG_GLOBAL": "/dev/null", "HOME": str(repo),
           "GIT_AUTHOR_NAME": "sglang lab", "GIT_AUTHOR_EMAIL": "lab@localhost",
           "GIT_COMMITTER_NAME": "sglang lab", "GIT_COMMITTER_EMAIL": "lab@localhost"}
    if date:
        env["GIT_AUTHOR_DATE"] = env["GIT_COMMITTER_DATE"] = date
    return run(["git", "-c", "core.autocrlf=false", "-c", "commit.gpgsign=false", "-c", "core.fileMode=true",
                *args], cwd=repo, env=env, capture=True, quiet=True).stdout.strip()


def _apply(work: Path, step: Step) -> str:
    for rel, content in step.files.items():
        target = work / rel
        if content is None:
            target.unlink()
            continue
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(content)
        target.chmod(0o644)
    _git(work, "add", "-A")
    msg = f"{step.subject}\n\nLab-Stand-In-For: {step.upstream}\n"
    _git(work, "commit", "-q", "-m", msg, date=step.date)
    return _git(work, "rev-parse", "HEAD")


def build_into(work: Path) -> dict[str, str]:
    """Build the history in a fresh work tree; return step key -> commit id."""
    work.mkdir(parents=True)
    _git(work, "init", "-q", "-b", "main")
    ids: dict[str, str] = {}
    for step in steps():
        ids[step.key] = _apply(work, step)
        if step.key == "v0_5_8_post1":
            _git(work, "tag", "v0.5.8.post1")
    _git(work, "checkout", "-q", "-b", "lab/revert-sm120", ids[REVERT_PARENT])
    ids[REVERT.key] = _apply(work, REVERT)
    _git(work, "checkout", "-q", "-b", "lab/broken-server", ids[REVERT_PARENT])
    ids[BROKEN.key] = _apply(work, BROKEN)
    _git(work, "checkout", "-q", "main")
    return ids


def build(root: Path) -> dict[str, str]:
    """Build the bare repository under root/SERVE_NAME when its inputs changed."""
    bare = root / SERVE_NAME
    key = digest([Path(__file__).read_bytes(), (STANDIN / "launch_server.py").read_bytes(),
                  (STANDIN / "server_args.py").read_bytes()])
    stamp = root / ".lab-digest"
    ids_file = root / "commits.txt"
    if stamp.is_file() and stamp.read_text() == key and bare.is_dir():
        return dict(line.split() for line in ids_file.read_text().splitlines())
    log("building the sglang-shaped git repository")
    if bare.exists():
        shutil.rmtree(bare)
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp) / "work"
        ids = build_into(work)
        run(["git", "clone", "-q", "--bare", str(work), str(bare)], capture=True, quiet=True)
    (bare / "git-daemon-export-ok").write_text("")
    ids_file.write_text("".join(f"{k} {v}\n" for k, v in ids.items()))
    stamp.write_text(key)
    return ids
