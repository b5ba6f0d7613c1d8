"""The SM120 judge on synthetic sglang trees: before and after the fix, moved, and disguised."""
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import sm120, sm120_probe
from lab import sglang_repo as lab
from lab import upstream

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


# -- head dims, and the model's from its config.json

def test_head_dims_parse_and_the_models_are_added_once():
    assert sm120.parse_head_dim("576/512") == (576, 512) and sm120.parse_head_dim(256) == (256, 256)
    with pytest.raises(ValueError, match="576/512"):
        sm120.parse_head_dim("wide")
    glm5 = {"architectures": ["GlmMoeDsaForCausalLM"], "qk_nope_head_dim": 192, "qk_rope_head_dim": 64,
            "v_head_dim": 256, "kv_lora_rank": 512, "num_attention_heads": 64, "hidden_size": 6144}
    assert sm120.model_head_dims(glm5) == [(256, 256), (576, 512)]
    assert sm120.head_dims_for(("128", "256"), glm5) == [(128, 128), (256, 256), (576, 512)]
    assert sm120.model_head_dims({"hidden_size": 4096, "num_attention_heads": 32}) == [(128, 128)]
    assert sm120.model_head_dims({"text_config": {"head_dim": 256}}) == [(256, 256)]
    assert sm120.model_head_dims({"model_type": "glm_moe_dsa"}) == []


# -- the compiler judge (module_utils/sm120_probe.py, run as the module runs it) on real sglang kernels

PROBE = Path(sm120_probe.__file__)
GLM5_DIMS = [(128, 128), (256, 256), (576, 512)]


def probe(file, head_dims=GLM5_DIMS, python=sys.executable, pythonpath=None):
    env = {"PATH": os.environ["PATH"], "TRITON_CACHE_DIR": str(Path(file).parent / ".triton")}
    if pythonpath:
        env["PYTHONPATH"] = str(pythonpath)
    proc = subprocess.run([python] + ([] if pythonpath else ["-I"]) + [str(PROBE), json.dumps(
        {"file": str(file), "capability": [12, 0], "head_dims": [list(d) for d in head_dims]})],
        capture_output=True, text=True, timeout=600, env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def figures(answer):
    assert answer["status"] == "ok", answer
    return {t["head_dim"]: (t["BLOCK_M"], t["BLOCK_N"], t["num_warps"], t["num_stages"], t["smem_bytes"])
            for t in answer["tiles"]}


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    """sglang 0.5.8.post1 (without the fix) and 0.5.9 (with it), from their sdists: {version: python/ tree}."""
    base = tmp_path_factory.mktemp("sdists")
    return {v: upstream.extract_sdist(upstream.sglang_sdist(v), base / v) for v in ("0.5.8.post1", "0.5.9")}


def kernel(tree):
    (hit,) = sm120.find_function(sm120.package_root(str(tree)))
    return Path(hit[0])


def test_triton_is_the_one_the_release_gets():
    import triton
    assert triton.__version__ == "3.5.1"  # torch 2.9.1 requires it


def test_compiler_condemns_0_5_8_post1_at_256_and_576(real):
    got = figures(probe(kernel(real["0.5.8.post1"])))
    assert got == {"128/128": (128, 64, 8, 1, 49152), "256/256": (128, 64, 8, 1, 114688),
                   "576/512": (32, 64, 8, 1, 106496)}
    answer = probe(kernel(real["0.5.8.post1"]))
    v, why = sm120.judge_compiled([(str(kernel(real["0.5.8.post1"])), 35, answer)])
    assert why is None and v["judge"] == "compiler" and v["present"] is False
    assert "head dim 256/256" in v["reason"] and "114688 bytes" in v["reason"] and "101376" in v["reason"]
    assert "head dim 576/512" in v["reason"] and "106496" in v["reason"]
    assert "128/128" not in v["reason"]


def test_compiler_passes_0_5_9(real):
    answer = probe(kernel(real["0.5.9"]))
    assert figures(answer) == {"128/128": (64, 128, 8, 1, 65536), "256/256": (64, 64, 8, 1, 73728),
                               "576/512": (32, 32, 8, 1, 71680)}
    v, why = sm120.judge_compiled([(str(kernel(real["0.5.9"])), 35, answer)])
    assert v["present"] is True and all(t["fits"] for t in v["tiles"])
    assert answer["triton"] == "3.5.1"


def test_estimate_on_the_real_trees(real):
    old = sm120.judge_tree(str(real["0.5.8.post1"]), head_sizes=GLM5_DIMS)
    new = sm120.judge_tree(str(real["0.5.9"]), head_sizes=GLM5_DIMS)
    assert [t["smem_bytes"] for t in old["tiles"]] == [65536, 131072] and old["present"] is False
    assert [t["smem_bytes"] for t in new["tiles"]] == [81920, 98304] and new["present"] is True
    assert new["not_judged"] == ["576/512"] and old["judge"] == "estimate"


def variant(tmp_path, real, edit, rel=lab.OLD_PATH):
    """A tree holding 0.5.9's real kernel file, edited."""
    text = kernel(real["0.5.9"]).read_text()
    edited = edit(text)
    assert edited != text
    return tree(tmp_path, {rel: edited})


def test_estimate_passes_what_the_compiler_condemns_two_stages(tmp_path, real):
    t = variant(tmp_path, real, lambda s: s.replace("    num_stages = 1\n", "    num_stages = 2\n", 1))
    est = sm120.judge_tree(str(t))
    assert est["present"] is True  # the estimate knows nothing of stages
    got = figures(probe(kernel(t), [(256, 256)]))
    assert got == {"256/256": (64, 64, 8, 2, 106496)}
    v, _ = sm120.judge_compiled([(str(kernel(t)), 35, probe(kernel(t), [(256, 256)]))])
    assert v["present"] is False and "2 stage(s)" in v["reason"]


def test_estimate_condemns_what_the_compiler_passes(tmp_path, real):
    fixed_256 = "            elif Lq <= 256:\n                BLOCK_M, BLOCK_N = (64, 64)\n"
    t = variant(tmp_path, real, lambda s: s.replace(fixed_256, fixed_256.replace("(64, 64)", "(32, 128)"), 1))
    est = sm120.judge_tree(str(t))
    assert est["present"] is False and tile(est, 256)["smem_bytes"] == 147456
    answer = probe(kernel(t), [(256, 256)])
    assert figures(answer) == {"256/256": (32, 128, 8, 1, 90112)}
    assert sm120.judge_compiled([(str(kernel(t)), 35, answer)])[0]["present"] is True


def test_compiler_finds_the_kernel_after_the_move_and_never_imports_sglang(tmp_path, real):
    t = variant(tmp_path, real, lambda s: s + "\n", rel=lab.NEW_PATH)
    # the package itself cannot be imported here: the probe must load the kernel file alone
    (t / "python/sglang/__init__.py").write_text("raise RuntimeError('the probe imported sglang')\n")
    (t / "python/torch").mkdir()
    (t / "python/torch/__init__.py").write_text("raise RuntimeError('the probe imported torch')\n")
    k = kernel(t)
    assert str(k).endswith("kernels/ops/attention/extend_attention.py")
    env_check = subprocess.run([sys.executable, "-c", "import sglang"], capture_output=True, text=True,
                               env={"PYTHONPATH": str(t / "python")})
    assert "the probe imported sglang" in env_check.stderr  # they are importable there, and fail
    answer = probe(k, [(256, 256)], pythonpath=t / "python")  # sglang and torch on sys.path
    assert figures(answer) == {"256/256": (64, 64, 8, 1, 73728)}


def test_without_triton_the_probe_says_so_and_the_compiler_does_not_judge(tmp_path, real):
    answer = probe(kernel(real["0.5.9"]), python="/usr/bin/python3")  # the system's Python: no Triton
    assert answer["status"] == "no_triton", answer
    v, why = sm120.judge_compiled([(str(kernel(real["0.5.9"])), 35, answer)])
    assert v is None and "triton" in why.lower()


def test_a_tree_the_probe_cannot_launch_is_not_judged_by_the_compiler(tmp_path):
    t = tree(tmp_path, {lab.OLD_PATH: lab.FIXED})  # the function, no kernel and no launcher
    answer = probe(kernel(t), [(128, 128)])
    assert answer["status"] == "unloadable" and "extend_attention_fwd" in answer["error"]
    assert sm120.judge_compiled([(str(kernel(t)), 1, answer)])[0] is None


def test_a_kernel_that_does_not_compile_for_sm120_is_condemned(tmp_path, real):
    t = variant(tmp_path, real, lambda s: s.replace("    offs_m = tl.arange(0, BLOCK_M)\n",
                                                    "    offs_m = tl.arange(0, BLOCK_M + 1)\n", 1))
    answer = probe(kernel(t), [(128, 128)])
    assert answer["status"] == "compile_error"
    v, why = sm120.judge_compiled([(str(kernel(t)), 35, answer)])
    assert v["present"] is False and "cannot compile" in v["reason"] and "128/128" in v["reason"]


def test_cache_key_follows_the_kernel_triton_and_head_dims(tmp_path):
    f = tmp_path / "k.py"
    f.write_text("x = 1\n")
    key = sm120.cache_key([str(f)], "3.5.1", GLM5_DIMS, (12, 0), 101376, "probe")
    assert key == sm120.cache_key([str(f)], "3.5.1", GLM5_DIMS, (12, 0), 101376, "probe")
    assert key != sm120.cache_key([str(f)], "3.5.0", GLM5_DIMS, (12, 0), 101376, "probe")
    assert key != sm120.cache_key([str(f)], "3.5.1", GLM5_DIMS[:2], (12, 0), 101376, "probe")
    assert key != sm120.cache_key([str(f)], "3.5.1", GLM5_DIMS, (12, 0), 101376, "probe 2")
    f.write_text("x = 2\n")
    assert key != sm120.cache_key([str(f)], "3.5.1", GLM5_DIMS, (12, 0), 101376, "probe")


def _venv(tmp_path, dists):
    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    sp = prefix / "lib" / "python3.12" / "site-packages"
    for name, version in dists:
        d = sp / f"{name}-{version}.dist-info"
        d.mkdir(parents=True)
        (d / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\nVersion: 0.0 (body)\n")
    # an interpreter that says when it was started
    python = prefix / "bin" / "python"
    python.write_text(f"#!/bin/sh\necho started >> {tmp_path}/started\necho '{{\"triton\": \"9.9.9\"}}'\n")
    python.chmod(0o755)
    return python


class _Module:
    def __init__(self, tmp_path):
        self.tmpdir = str(tmp_path / "tmp")

    def run_command(self, argv, environ_update=None):
        proc = subprocess.run(argv, capture_output=True, text=True, env=dict(os.environ, **(environ_update or {})))
        return proc.returncode, proc.stdout, proc.stderr


def test_the_venvs_triton_is_read_from_its_metadata_without_starting_python(tmp_path):
    from ansible_collections.blackwell.serving.plugins.module_utils import sm120_check as mod
    python = _venv(tmp_path, [("triton", "3.5.1"), ("torch", "2.9.1"), ("triton_kernels", "1.0")])
    assert mod.Probe(_Module(tmp_path), str(python)).triton_version() == "3.5.1"
    assert not (tmp_path / "started").exists()


@pytest.mark.parametrize("dists", [[], [("triton", "3.5.1"), ("Triton", "3.4.0")]], ids=["none", "two"])
def test_without_exactly_one_triton_in_the_venv_the_interpreter_is_asked(tmp_path, dists):
    from ansible_collections.blackwell.serving.plugins.module_utils import sm120_check as mod
    python = _venv(tmp_path, dists)
    assert mod.Probe(_Module(tmp_path), str(python)).triton_version() == "9.9.9"
    assert (tmp_path / "started").read_text() == "started\n"
    # not a virtual environment at all: asked too
    (python.parent.parent / "pyvenv.cfg").unlink()
    assert mod.venv_distribution_version(str(python), "triton") is None
