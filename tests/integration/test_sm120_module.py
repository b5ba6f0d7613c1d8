"""blackwell.serving.sglang_sm120_check called on its own, as `ansible localhost -m ...`."""
import json
import subprocess

import pytest

from helpers import REPO, run
from lab import sglang_repo as lab


@pytest.fixture(scope="module")
def history(tmp_path_factory):
    work = tmp_path_factory.mktemp("hist") / "work"
    return work, lab.build_into(work)


def check(path, fix_commit):
    proc = run(["ansible", "localhost", "-c", "local", "-m", "blackwell.serving.sglang_sm120_check",
                "-a", f"path={path} fix_commit={fix_commit}"],
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
