"""sglang's history for the lab, from the real releases, served over git's own protocol.

The first commits are sglang's own code: the source distributions of sglang 0.5.8.post1 (before the SM120
fix) and 0.5.9 (with it) from PyPI (lab/upstream.py, pinned by sha256), laid out under python/ as sglang's
repository keeps them and tagged as upstream tags them. Lab-only commits go on top, each saying so in its
subject: the stand-in server entry point (no GPU, no model: lab/standins/sglang), and, on branches, a revert of
the fix and a server that fails at start; a later commit and the move of the kernel's file (upstream #30044)
are re-enacted on the real tree. Each commit names what it stands for in a ``Lab-Stand-In-For:`` trailer.
Dates, authors and content are fixed, so the commit ids are the same on every machine
(tests/unit/test_lab_sglang_repo.py holds them to inventories/lab).

PRE_FIX, FIXED and MOVED below are small synthetic versions of the block-size function for the judge's unit
tests; the history does not use them.
"""
from __future__ import annotations

import ast
import shutil
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from . import paths, upstream
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

# Files of an sdist that are build outputs, not kept in sglang's repository.
BUILD_OUTPUTS = ("PKG-INFO", "setup.cfg", "sglang.egg-info/", "sglang/_version.py")
FUNCTION = "_get_block_sizes_for_extend_attention"
STANDIN_ARGS = "python/sglang/lab_standin/server_args.py"
ROOT_README = ("# sglang (lab)\n\nsglang's releases from their source distributions on PyPI, under python/ as in "
               "sglang's repository, with the blackwell.serving lab's own commits on top (each says so).\n")


def release_files(version: str) -> dict[str, bytes | tuple[bytes, int]]:
    """python/<path> -> content (or (content, mode) for an executable) of sglang's sdist at version."""
    sdist = upstream.sglang_sdist(version)
    files: dict[str, bytes | tuple[bytes, int]] = {}
    with tarfile.open(sdist) as tf:
        for m in tf.getmembers():
            if not m.isfile():
                continue
            rel = m.name.split("/", 1)[1]
            if any(rel == b or (b.endswith("/") and rel.startswith(b)) for b in BUILD_OUTPUTS):
                continue
            data = tf.extractfile(m).read()
            files[f"python/{rel}"] = (data, 0o755) if m.mode & 0o111 else data
    return files


def _content(files: dict, path: str) -> str:
    data = files[path]
    return (data[0] if isinstance(data, tuple) else data).decode()


def _function_span(source: str) -> tuple[int, int]:
    for node in ast.parse(source).body:
        if isinstance(node, ast.FunctionDef) and node.name == FUNCTION:
            start = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            return start - 1, node.end_lineno
    raise ValueError(f"no {FUNCTION} in the file")


def reverted(fixed: str, before: str) -> str:
    """fixed's module with the block-size function as it was in before (the revert of the fix, nothing else)."""
    a, b = _function_span(fixed)
    c, d = _function_span(before)
    lines, old = fixed.splitlines(keepends=True), before.splitlines(keepends=True)
    return "".join(lines[:a] + old[c:d] + lines[b:])


def _standin(name: str) -> str:
    return (STANDIN / name).read_text()


BROKEN_SERVER = '''"""Lab stand-in of a release that does not come up: it fails at start, as a broken build does."""
import sys

from sglang.lab_standin.server_args import prepare_server_args


def main(argv=None):
    prepare_server_args(sys.argv[1:] if argv is None else argv)
    print("RuntimeError: CUDA error: no kernel image is available for execution on the device "
          "(lab stand-in of a release that does not come up)", file=sys.stderr, flush=True)
    raise SystemExit(1)


if __name__ == "__main__":
    main()
'''


@dataclass
class Step:
    key: str
    subject: str
    upstream: str  # what the commit stands for (Lab-Stand-In-For)
    date: str
    files: dict[str, str | bytes | tuple[bytes, int] | None]  # path -> content, None removes
    release: bool = False  # files are the whole python/ tree (a release): the rest of python/ goes
    tag: str | None = None
    aliases: tuple[str, ...] = ()  # other step keys that name this commit (upstream commits it contains)


def steps() -> list[Step]:
    """The main branch, oldest first (reads the sdists: lab/upstream.py fetches them once)."""
    v058, v059 = release_files("0.5.8.post1"), release_files("0.5.9")
    pyproject = _content(v059, "python/pyproject.toml")
    later = pyproject.replace('"flashinfer_python==0.6.3"', '"flashinfer_python==0.6.4"').replace(
        '"flashinfer_cubin==0.6.3"', '"flashinfer_cubin==0.6.4"')
    assert later != pyproject, "sglang 0.5.9's pyproject no longer pins flashinfer 0.6.3"
    args = _standin("server_args.py")
    kernel = v059[OLD_PATH]
    return [
        Step("v0_5_8_post1", "sglang v0.5.8.post1: the release's source distribution from PyPI, under python/",
             "(tag v0.5.8.post1)", "2026-01-24T10:00:00+00:00", {**v058, "README.md": ROOT_README},
             release=True, tag="v0.5.8.post1"),
        Step("v0_5_9", "sglang v0.5.9: the release's source distribution from PyPI, under python/",
             "632c7afa8ce20c2a696380ccf5b28337fd9903b7", "2026-02-20T10:00:00+00:00", v059, release=True,
             tag="v0.5.9", aliases=("sm120_fix", "glm5_support", "glm5_fused_shared_expert")),
        Step("last_flashinfer_063", "lab: the stand-in server as sglang.launch_server, no GPU, no model (lab only)",
             "3f9fc8b848365a5797a44856854e3e6f00a60dd0", "2026-03-03T12:00:00+00:00",
             {"python/sglang/launch_server.py": _standin("launch_server.py"),
              "python/sglang/lab_standin/__init__.py": "",
              STANDIN_ARGS: args}),
        Step("fp4_cudnn_default", "lab: a later commit pinning flashinfer 0.6.4, as upstream's after #20047 does "
             "(lab only)", "d39ed074cf11ae9247dbcb04170e6921ca727559", "2026-03-09T12:00:00+00:00",
             {"python/pyproject.toml": later,
              STANDIN_ARGS: args.replace('dict(default="flashinfer_cutlass")', 'dict(default="auto")')}),
        Step("kernels_moved", "lab: move extend_attention.py to sglang/kernels/ops/attention, as upstream #30044 "
             "did (lab only)", "(upstream #30044)", "2026-07-14T12:00:00+00:00",
             {OLD_PATH: None, NEW_PATH: kernel, "python/sglang/kernels/__init__.py": "",
              "python/sglang/kernels/ops/__init__.py": "", "python/sglang/kernels/ops/attention/__init__.py": ""}),
    ]


def branch_steps() -> list[tuple[str, str, Step]]:
    """(branch, parent step key, step): lab-only branches off the pin."""
    v058, v059 = release_files("0.5.8.post1"), release_files("0.5.9")
    revert = reverted(_content(v059, OLD_PATH), _content(v058, OLD_PATH))
    return [
        # the fix commit is an ancestor, the code is not fixed: a judge that trusts ancestry alone is fooled by it
        ("lab/revert-sm120", "last_flashinfer_063",
         Step("revert_sm120", 'lab: Revert "[Fix] add block size logic for sm120 smem size (#14311)" (lab only)',
              "(lab only)", "2026-03-04T12:00:00+00:00", {OLD_PATH: revert})),
        # holds the fix and installs, so only the service's health gate can catch it (molecule/sglang_service)
        ("lab/broken-server", "last_flashinfer_063",
         Step("broken_server", "lab: a release whose server fails at start (lab only)", "(lab only)",
              "2026-03-05T12:00:00+00:00", {"python/sglang/launch_server.py": BROKEN_SERVER})),
        # starts, answers /health, and computes garbage from the fifth token on: only the fingerprint catches it
        ("lab/garbage-kernels", "last_flashinfer_063",
         Step("garbage_kernels", "lab: a release whose kernels compute garbage from the fifth token on (lab only)",
              "(lab only)", "2026-03-06T12:00:00+00:00",
              {"python/sglang/launch_server.py": _standin("launch_server.py").replace(
                  "DEFAULT_CORRUPT_FROM = -1", "DEFAULT_CORRUPT_FROM = 4")})),
    ]


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
    if step.release and (work / "python").exists():
        shutil.rmtree(work / "python")
    for rel, content in step.files.items():
        target = work / rel
        if content is None:
            target.unlink()
            continue
        mode = 0o644
        if isinstance(content, tuple):
            content, mode = content
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, str):
            content = content.encode()
        target.write_bytes(content)
        target.chmod(mode)
    _git(work, "add", "-A")
    msg = f"{step.subject}\n\nLab-Stand-In-For: {step.upstream}\n"
    _git(work, "commit", "-q", "-m", msg, date=step.date)
    if step.tag:
        _git(work, "tag", step.tag)
    return _git(work, "rev-parse", "HEAD")


def build_into(work: Path) -> dict[str, str]:
    """Build the history in a fresh work tree; return step key -> commit id (aliases included)."""
    work.mkdir(parents=True)
    _git(work, "init", "-q", "-b", "main")
    ids: dict[str, str] = {}
    for step in steps():
        ids[step.key] = _apply(work, step)
        ids.update(dict.fromkeys(step.aliases, ids[step.key]))
    for branch, parent, step in branch_steps():
        _git(work, "checkout", "-q", "-b", branch, ids[parent])
        ids[step.key] = _apply(work, step)
    _git(work, "checkout", "-q", "main")
    return ids


def build(root: Path) -> dict[str, str]:
    """Build the bare repository under root/SERVE_NAME when its inputs changed."""
    bare = root / SERVE_NAME
    key = digest([Path(__file__).read_bytes(), (STANDIN / "launch_server.py").read_bytes(),
                  (STANDIN / "server_args.py").read_bytes(),
                  *(sha.encode() for (project, _), sha in sorted(upstream.PINNED.items()) if project == "sglang")])
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
