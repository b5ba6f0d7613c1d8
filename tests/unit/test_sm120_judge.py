"""The SM120 judge on synthetic sglang trees: before and after the fix, moved, and disguised."""
import subprocess
import textwrap

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import sm120
from lab import sglang_repo as lab

HEADER = lab.PRE_FIX.split("def _get_block_sizes_for_extend_attention")[0]


def tree(tmp_path, files):
    for rel, text in files.items():
        p = tmp_path / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return tmp_path


def tile(verdict, head):
    return next(t for t in verdict["tiles"] if t["head_size"] == head)


def test_before_the_fix_sm120_takes_hoppers_tiles_and_overflows(tmp_path):
    v = sm120.judge_tree(str(tree(tmp_path, {lab.OLD_PATH: lab.PRE_FIX})))
    assert v["present"] is False and v["judged"] is True
    t = tile(v, 256)
    assert (t["BLOCK_M"], t["BLOCK_N"]) == (128, 64) and t["smem_bytes"] == 131072
    assert "over the 101376" in v["reason"]
    assert v["file"].endswith("triton_ops/extend_attention.py") and v["line"] > 1


def test_after_the_fix_both_head_sizes_fit(tmp_path):
    v = sm120.judge_tree(str(tree(tmp_path, {lab.OLD_PATH: lab.FIXED})))
    assert v["present"] is True
    assert (tile(v, 128)["BLOCK_M"], tile(v, 128)["BLOCK_N"], tile(v, 128)["smem_bytes"]) == (64, 128, 81920)
    assert (tile(v, 256)["BLOCK_M"], tile(v, 256)["BLOCK_N"], tile(v, 256)["smem_bytes"]) == (64, 64, 98304)


def test_found_after_the_file_moved_with_branches_around_it(tmp_path):
    v = sm120.judge_tree(str(tree(tmp_path, {lab.NEW_PATH: lab.MOVED})))
    assert v["present"] is True
    assert v["file"].endswith("kernels/ops/attention/extend_attention.py")


def test_python_dir_or_checkout_root_both_work(tmp_path):
    tree(tmp_path, {lab.OLD_PATH: lab.FIXED})
    assert sm120.judge_tree(str(tmp_path))["present"] is True
    assert sm120.judge_tree(str(tmp_path / "python"))["present"] is True


def test_a_comment_is_not_the_fix(tmp_path):
    src = lab.PRE_FIX.replace('    """Get block sizes', '    # sm120: fixed for 99 KiB shared memory (#14311)\n    """Get block sizes')
    assert "sm120" in src
    assert sm120.judge_tree(str(tree(tmp_path, {lab.OLD_PATH: src})))["present"] is False


def test_a_capability_12_branch_with_hoppers_sizes_is_not_the_fix(tmp_path):
    fake = lab.FIXED.replace("BLOCK_M, BLOCK_N = (64, 128)", "BLOCK_M, BLOCK_N = (128, 64)", 1) \
                    .replace("BLOCK_M, BLOCK_N = (64, 64)\n            else:\n                BLOCK_M, BLOCK_N = (32, 32)",
                             "BLOCK_M, BLOCK_N = (128, 64)\n            else:\n                BLOCK_M, BLOCK_N = (32, 64)", 1)
    assert "CUDA_CAPABILITY[0] == 12" in fake
    v = sm120.judge_tree(str(tree(tmp_path, {lab.OLD_PATH: fake})))
    assert v["present"] is False
    assert (tile(v, 256)["BLOCK_M"], tile(v, 256)["BLOCK_N"]) == (128, 64)


def test_an_old_copy_left_behind_fails_the_tree(tmp_path):
    v = sm120.judge_tree(str(tree(tmp_path, {lab.NEW_PATH: lab.MOVED, lab.OLD_PATH: lab.PRE_FIX})))
    assert v["present"] is False
    assert sorted(d["present"] for d in v["definitions"]) == [False, True]


def test_hopper_tiles_fit_hopper(tmp_path):
    v = sm120.judge_tree(str(tree(tmp_path, {lab.OLD_PATH: lab.PRE_FIX})), capability=(9, 0))
    assert v["present"] is True and v["smem_limit"] == 232448


def test_what_the_judge_cannot_follow_is_not_called_fixed(tmp_path):
    src = HEADER + textwrap.dedent('''\
        def _get_block_sizes_for_extend_attention(Lq: int, Lv: int):
            for size in (64, 32):
                BLOCK_M = size
            return BLOCK_M
        ''')
    v = sm120.judge_tree(str(tree(tmp_path, {lab.OLD_PATH: src})))
    assert v["present"] is False and v["judged"] is False
    assert "unsupported statement For" in v["reason"]


def test_missing_function(tmp_path):
    v = sm120.judge_tree(str(tree(tmp_path, {"python/sglang/__init__.py": ""})))
    assert v["present"] is False and "defined nowhere" in v["reason"]


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    work = tmp_path_factory.mktemp("hist") / "work"
    return work, lab.build_into(work)


@pytest.mark.parametrize("step,present", [("v0_5_8_post1", False), ("sm120_fix", True),
                                          ("last_flashinfer_063", True), ("kernels_moved", True),
                                          ("revert_sm120", False)])
def test_every_commit_of_the_lab_history(history, tmp_path, step, present):
    work, ids = history
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(tmp_path / "wt"), ids[step]], cwd=work, check=True)
    assert sm120.judge_tree(str(tmp_path / "wt"))["present"] is present
