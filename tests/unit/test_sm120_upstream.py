"""The SM120 judge on real sglang trees of 2026, and on edits of the newest: the compiler judges every one.

The trees and the edits, with the verdicts and compiled figures expected, are data: tests/fixtures/sm120/
upstream-trees.json (one release a month from the last without the fix to the newest on PyPI, and the releases
where the kernel file moved or its launcher's signature changed). tools/sm120_trees.py runs the same list on the
lent GPU machine; its output is kept and read here too.
"""
import json
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import sm120
from conftest import FIXTURES
from lab import upstream
from modrun import run_module
from tools import sm120_trees

LISTING = sm120_trees.listing()
TREES = {t["version"]: t for t in LISTING["trees"]}
EDITS = {e["name"]: e for e in LISTING["edits"]}
HEAD_DIMS = LISTING["head_dims"]


@pytest.fixture(scope="module")
def trees():
    """{version: the release's python/ tree}, fetched (pinned by sha256) and unpacked once by the lab."""
    return {v: upstream.sglang_tree(v) for v in TREES}


def judged(tree, head_dims, tmp_path, **args):
    """The module's result for a tree, with this interpreter (the lab's tool venv: Triton 3.5.1) as the release's."""
    return run_module("sglang_sm120_check", dict({"path": str(tree), "python": sys.executable,
                                                  "head_sizes": head_dims}, **args),
                      env={"TMPDIR": str(tmp_path)})


@pytest.mark.parametrize("version", list(TREES))
def test_each_release_of_2026_is_judged_by_the_compiler(trees, version, tmp_path):
    want = TREES[version]
    r = judged(trees[version], HEAD_DIMS, tmp_path)
    got = {t["head_dim"]: [t["BLOCK_M"], t["BLOCK_N"], t["num_warps"], t["num_stages"], t["smem_bytes"]]
           for t in r["tiles"]}
    print(f"sglang {version} ({want['date']}, {want['why']}): {r['file'].split('/sglang/', 1)[-1]}: "
          + "; ".join(f"{d}: {m}x{n}, {w} warps, {s} stage(s), {b} B" for d, (m, n, w, s, b) in got.items()))
    assert r["judge"] == "compiler", r.get("compiler_error")
    assert r["judged"] is True and "compiler_error" not in r
    assert r["present"] is want["present"], r["reason"]
    assert got == want["figures"]


@pytest.mark.parametrize("name", list(EDITS))
def test_the_judge_follows_the_compiler_on_edits_of_the_newest_tree(trees, name, tmp_path):
    edit = EDITS[name]
    base = sm120_trees.kernel_file(trees[edit["base"]])
    file = sm120_trees.edited(base, edit, tmp_path / "tree")
    estimate = sm120.judge_tree(str(tmp_path / "tree"), head_sizes=edit["head_dims"])
    assert estimate["present"] is edit["estimate"], estimate["reason"]
    r = judged(tmp_path / "tree", edit["head_dims"], tmp_path)
    assert r["judge"] == "compiler" and r["present"] is edit["compiler"], r["reason"]
    assert r["estimate"]["present"] is edit["estimate"]
    assert {t["head_dim"]: [t["BLOCK_M"], t["BLOCK_N"], t["num_warps"], t["num_stages"], t["smem_bytes"]]
            for t in r["tiles"]} == edit["figures"]
    assert r["file"] == str(file)
    if not edit["compiler"]:
        assert "over the 101376" in r["reason"]


def test_the_listing_spans_2026_a_release_a_month():
    months = {t["date"][:7] for t in LISTING["trees"]}
    assert {f"2026-{m:02d}" for m in range(2, 11)} <= months
    assert LISTING["trees"][0]["present"] is False and all(t["present"] for t in LISTING["trees"][1:])
    for edit in LISTING["edits"]:
        assert edit["base"] == LISTING["trees"][-1]["version"]
    # both directions of disagreement between the judges are among the edits
    assert {(e["compiler"], e["estimate"]) for e in LISTING["edits"]} >= {(False, True), (True, False)}


# -- the run on the lent GPU machine (tools/sm120_trees.py judge, a newer Triton), kept as a fixture

DEVICE_RUNS = sorted((FIXTURES / "gpu").glob("*-device/sm120-upstream-*.json"))


def test_the_gpu_machines_run_was_kept():
    assert DEVICE_RUNS, "no run of tools/sm120_trees.py on the lent GPU machine is kept under tests/fixtures/gpu"


@pytest.mark.parametrize("path", DEVICE_RUNS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_a_newer_triton_on_the_gpu_machine_gives_the_same_verdicts_and_figures(path):
    run = json.loads(path.read_text())
    assert run["triton"] and run["triton"] != "3.5.1"  # a newer Triton than the pin's
    assert sm120_trees.compare(run) == []
    assert set(run["trees"]) == set(TREES) and set(run["edits"]) == set(EDITS)


# -- what the probe derives from the launcher: no parameter is known by its name

KERNEL = '''
import torch
import triton
import triton.language as tl

CUDA_CAPABILITY = torch.cuda.get_device_capability()


def _get_block_sizes_for_extend_attention(Lq: int, Lv: int):
    if CUDA_CAPABILITY[0] == 12:
        return 64, 64
    return 128, 64


@triton.jit
def _kernel(Q, K, O, Starts, Gain, flavour, Lq: tl.constexpr, WIDE: tl.constexpr, BLOCK_M: tl.constexpr,
            BLOCK_N: tl.constexpr):
    start = tl.load(Starts + tl.program_id(0))
    offs_m = start + tl.arange(0, BLOCK_M)
    offs_n = tl.arange(0, BLOCK_N)
    offs_d = tl.arange(0, Lq)
    q = tl.load(Q + offs_m[:, None] * Lq + offs_d[None, :])
    k = tl.load(K + offs_n[:, None] * Lq + offs_d[None, :])
    acc = tl.dot(q, tl.trans(k)) * Gain * flavour
    if WIDE:
        acc = acc * 2
    tl.store(O + offs_m[:, None] * BLOCK_N + offs_n[None, :], acc)


def extend_attention_fwd(q_x, k_x, o_x, starts, gain, flavour, tokens, wide, mystery_mask, shout=False{extra}):
    Lq, Lv = q_x.shape[-1], q_x.shape[-1]
    BLOCK_M, BLOCK_N = _get_block_sizes_for_extend_attention(Lq, Lv)
    USE_MASK = mystery_mask is not None
    grid = (triton.cdiv(tokens, BLOCK_M),)
    _kernel[grid](q_x, k_x, o_x, starts, gain, flavour, Lq=Lq, WIDE=wide, BLOCK_M=BLOCK_M, BLOCK_N=BLOCK_N)
'''


def probe_answer(tmp_path, text):
    file = tmp_path / "python/sglang/srt/layers/attention/triton_ops/extend_attention.py"
    file.parent.mkdir(parents=True, exist_ok=True)
    file.write_text(textwrap.dedent(text))
    return sm120_trees.probe(sys.executable, file, ["128/128"], tmp_path / "cache")


def test_the_probe_derives_every_parameter_from_the_launcher_and_its_kernel(tmp_path):
    # none of these names is one the probe has seen: tensors (read as such, or loaded through by the kernel), an
    # index (its values address the other loads), scalars the kernel multiplies by, a flag it tests, a count the
    # launcher divides, an optional it compares with None, a flag with a default
    answer = probe_answer(tmp_path, KERNEL.replace("{extra}", ""))
    assert answer["status"] == "ok", answer
    assert [(t["BLOCK_M"], t["BLOCK_N"]) for t in answer["tiles"]] == [(64, 64)]


def test_a_parameter_nothing_describes_is_named_with_the_reason(tmp_path):
    answer = probe_answer(tmp_path, KERNEL.replace("{extra}", "").replace(
        "mystery_mask, shout=False):", "mystery_mask, unexplained, shout=False):"))
    assert answer["status"] == "unloadable"
    assert "extend_attention_fwd requires unexplained" in answer["error"]
    assert "nothing in extend_attention_fwd or the kernels it launches says what it is" in answer["error"]


def test_the_old_probe_gave_up_on_the_launchers_after_march(trees, tmp_path):
    """What the issue found: a list of parameter names breaks on the next upstream signature."""
    newest = sm120_trees.kernel_file(trees["0.5.10rc0"])
    text = Path(newest).read_text()
    assert "    k_scale,\n    v_scale,\n" in text  # required, no default: the old probe's list did not know them
    answer = sm120_trees.probe(sys.executable, newest, ["256/256"], tmp_path / "cache")
    assert answer["status"] == "ok", answer


# -- no silent fallback: a tree the compiler cannot judge is not judged, unless the estimate is accepted

def test_without_triton_the_tree_is_not_judged_and_never_passes(trees, tmp_path):
    tree = trees["0.5.23"]
    no_triton = "/usr/bin/python3"  # the system's Python: no Triton
    r = run_module("sglang_sm120_check", {"path": str(tree), "python": no_triton, "head_sizes": ["256"]})
    assert r["present"] is False and r["judged"] is False and r["judge"] == "none"
    assert r["reason"].startswith("not judged by the compiler: ") and "no Triton" in r["reason"]
    assert r["estimate"]["present"] is True  # the estimate would have passed it
    accepted = run_module("sglang_sm120_check", {"path": str(tree), "python": no_triton, "head_sizes": ["256"],
                                                 "accept_estimate": True})
    assert accepted["judge"] == "estimate" and accepted["present"] is True and accepted["judged"] is True
    assert "accepted" in accepted["reason"] and "no Triton" in accepted["compiler_error"]


def test_a_launcher_the_probe_cannot_call_is_not_judged_and_names_the_parameter(tmp_path):
    text = KERNEL.replace("{extra}", "").replace("mystery_mask, shout=False):", "mystery_mask, unexplained, shout=False):")
    file = tmp_path / "python/sglang/srt/layers/attention/triton_ops/extend_attention.py"
    file.parent.mkdir(parents=True)
    file.write_text(text)
    r = run_module("sglang_sm120_check", {"path": str(tmp_path), "python": sys.executable, "head_sizes": ["128"]})
    assert r["judge"] == "none" and r["present"] is False
    assert "the probe could not call the launcher" in r["reason"] and "requires unexplained" in r["reason"]
