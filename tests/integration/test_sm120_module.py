"""blackwell.serving.sglang_sm120_check called on its own, as `ansible localhost -m ...`."""
import json
import subprocess
import sys
import time

import pytest

from helpers import REPO, run
from lab import sglang_repo as lab
from lab import upstream


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    work = tmp_path_factory.mktemp("hist") / "work"
    return work, lab.build_into(work)


def check(path, fix_commit=None, *, args=None, extra=()):
    a = {"path": str(path)}
    if fix_commit:
        a["fix_commit"] = fix_commit
    a.update(args or {})
    proc = run(["ansible", "localhost", "-c", "local", "-m", "blackwell.serving.sglang_sm120_check",
                "-a", json.dumps(a), *extra],
               env={"ANSIBLE_LOAD_CALLBACK_PLUGINS": "1", "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
                    "ANSIBLE_LOCALHOST_WARNING": "0"})
    assert proc.returncode in (0, 2), proc.stderr
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.mark.parametrize("step,present,ancestor", [
    ("v0_5_8_post1", False, False),   # before the fix
    ("last_flashinfer_063", True, True),  # the pin
    ("revert_sm120", False, True),   # descends from the fix, but the code is not fixed
    ("kernels_moved", True, True),   # the file moved
])
def test_judgement_and_ancestry(history, tmp_path, step, present, ancestor):
    work, ids = history
    wt = tmp_path / "wt"
    subprocess.run(["git", "worktree", "add", "-q", "--detach", str(wt), ids[step]], cwd=work, check=True)
    r = check(wt / "python", ids["sm120_fix"])
    assert r["changed"] is False
    assert r["present"] is present, r["reason"]
    assert r["fix_commit_ancestor"] is ancestor
    assert r["head"] == ids[step]
    assert {t["head_size"] for t in r["tiles"]} == {128, 256}


def test_a_plain_directory_has_no_ancestry(tmp_path):
    (tmp_path / "python/sglang/srt/layers/attention/triton_ops").mkdir(parents=True)
    (tmp_path / lab.OLD_PATH).write_text(lab.FIXED)
    r = check(tmp_path, "632c7afa8ce20c2a696380ccf5b28337fd9903b7")
    assert r["present"] is True and r["fix_commit_ancestor"] is None and r["head"] is None


# -- the compiler judge, on the real sglang trees, with an interpreter where Triton 3.5.1 is (this one: the
#    lab's tool venv installs it, as a release's environment has it through torch)

GLM5 = {"architectures": ["GlmMoeDsaForCausalLM"], "model_type": "glm_moe_dsa", "qk_nope_head_dim": 192,
        "qk_rope_head_dim": 64, "v_head_dim": 256, "kv_lora_rank": 512, "num_attention_heads": 64}


@pytest.fixture(scope="module")
def real(tmp_path_factory):
    base = tmp_path_factory.mktemp("sdists")
    return {v: upstream.extract_sdist(upstream.sglang_sdist(v), base / v) for v in ("0.5.8.post1", "0.5.9")}


@pytest.fixture
def glm5(tmp_path):
    model = tmp_path / "GLM-5-NVFP4"
    model.mkdir()
    (model / "config.json").write_text(json.dumps(GLM5))
    return model


def smem(r):
    return {t["head_dim"]: t["smem_bytes"] for t in r["tiles"]}


def test_the_compiler_condemns_0_5_8_post1_for_glm5(real, glm5):
    r = check(real["0.5.8.post1"], args={"python": sys.executable, "model_path": str(glm5)})
    assert r["judge"] == "compiler" and r["triton"] == "3.5.1" and r["cached"] is False
    assert r["present"] is False and r["head_dims"] == ["128/128", "256/256", "576/512"]
    assert smem(r) == {"128/128": 49152, "256/256": 114688, "576/512": 106496}
    assert "head dim 256/256" in r["reason"] and "114688 bytes" in r["reason"] and "over the 101376" in r["reason"]
    # the estimate's own figures come along
    assert [t["smem_bytes"] for t in r["estimate"]["tiles"]] == [65536, 131072]


def test_the_compiler_passes_0_5_9_and_a_converged_host_answers_from_the_cache(real, glm5, tmp_path):
    cache = tmp_path / "verdict.json"
    args = {"python": sys.executable, "model_path": str(glm5), "cache": str(cache)}
    # check mode: the same verdict, nothing written
    r = check(real["0.5.9"], args=args, extra=["--check"])
    assert r["present"] is True and r["judge"] == "compiler" and not cache.exists()
    r = check(real["0.5.9"], args=args)
    assert r["present"] is True and r["changed"] is False and r["cached"] is False and cache.exists()
    assert smem(r) == {"128/128": 65536, "256/256": 73728, "576/512": 71680}
    start = time.monotonic()
    again = check(real["0.5.9"], args=args)
    assert again["cached"] is True and again["changed"] is False and smem(again) == smem(r)
    print(f"cached verdict in {time.monotonic() - start:.1f} s")
    # other head dims, or another kernel file: compiled again
    assert check(real["0.5.9"], args=dict(args, model_path=None, head_sizes=["128"]))["cached"] is False
    kernel = next(real["0.5.9"].rglob("extend_attention.py"))
    kernel.write_text(kernel.read_text() + "\n# changed\n")
    assert check(real["0.5.9"], args=args)["cached"] is False


def test_without_triton_the_compiler_does_not_judge_unless_the_estimate_is_accepted(real):
    r = check(real["0.5.9"], args={"python": "/usr/bin/python3"})  # the system's Python has no Triton
    assert r["judge"] == "none" and r["present"] is False and r["judged"] is False
    assert r["reason"].startswith("not judged by the compiler") and "triton" in r["compiler_error"].lower()
    r = check(real["0.5.9"], args={"python": "/usr/bin/python3", "accept_estimate": True})
    assert r["judge"] == "estimate" and r["present"] is True and r["triton"] is None
    assert "triton" in r["compiler_error"].lower()
    assert smem(r) == {"128/128": 81920, "256/256": 98304}


def test_a_model_path_without_config_is_an_error(real, tmp_path):
    r = check(real["0.5.9"], args={"model_path": str(tmp_path)})
    assert r.get("failed") is True and "config.json" in r["msg"]
