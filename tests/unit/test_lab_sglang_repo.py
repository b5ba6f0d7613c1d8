"""The lab's sglang-shaped history: deterministic, shaped like upstream, pinned by the lab inventory."""
import subprocess

import pytest
import yaml

from conftest import REPO
from lab import sglang_repo


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    work = tmp_path_factory.mktemp("sglang") / "work"
    return work, sglang_repo.build_into(work)


def git(work, *args):
    return subprocess.run(["git", *args], cwd=work, capture_output=True, text=True, check=True).stdout.strip()


def test_commit_ids_do_not_depend_on_the_machine(built, tmp_path):
    _, ids = built
    again = sglang_repo.build_into(tmp_path / "again")
    assert again == ids


def test_lab_inventory_pins_the_stand_ins_of_the_upstream_pins(built):
    _, ids = built
    lab = yaml.safe_load((REPO / "inventories/lab/group_vars/all/stack.yml").read_text())
    prod = yaml.safe_load((REPO / "inventories/production/group_vars/all/stack.yml").read_text())
    by_upstream = {s.upstream: s.key for s in sglang_repo.steps()}
    assert lab["sglang_commit"] == ids[by_upstream[prod["sglang_commit"]]]
    assert lab["sglang_sm120_fix_commit"] == ids[by_upstream[prod["sglang_sm120_fix_commit"]]]


def test_history_has_the_shape_the_checks_need(built):
    work, ids = built
    subject = git(work, "log", "-1", "--format=%s", ids["sm120_fix"])
    assert subject == "[Fix] add block size logic for sm120 smem size (#14311)"
    # the fix is an ancestor of the pin, not of the release before it
    assert subprocess.run(["git", "merge-base", "--is-ancestor", ids["sm120_fix"], ids["last_flashinfer_063"]],
                          cwd=work).returncode == 0
    assert subprocess.run(["git", "merge-base", "--is-ancestor", ids["sm120_fix"], ids["v0_5_8_post1"]],
                          cwd=work).returncode == 1
    # the revert branch descends from the fix but holds the old code
    assert subprocess.run(["git", "merge-base", "--is-ancestor", ids["sm120_fix"], ids["revert_sm120"]],
                          cwd=work).returncode == 0
    assert git(work, "show", f"{ids['revert_sm120']}:{sglang_repo.OLD_PATH}") == sglang_repo.PRE_FIX.strip()
    # the function's file moved in the last commit
    names = git(work, "ls-tree", "-r", "--name-only", ids["kernels_moved"]).splitlines()
    assert sglang_repo.NEW_PATH in names and sglang_repo.OLD_PATH not in names
    # each commit names the upstream commit it stands for
    body = git(work, "log", "-1", "--format=%b", ids["last_flashinfer_063"])
    assert "Lab-Stand-In-For: 3f9fc8b848365a5797a44856854e3e6f00a60dd0" in body


def test_pinned_tree_pins_flashinfer_063(built):
    work, ids = built
    pyproject = git(work, "show", f"{ids['last_flashinfer_063']}:python/pyproject.toml")
    assert '"flashinfer_python==0.6.3"' in pyproject and '"transformers==4.57.1"' in pyproject
    later = git(work, "show", f"{ids['fp4_cudnn_default']}:python/pyproject.toml")
    assert "flashinfer_python==0.6.3" not in later


def test_broken_server_branch_holds_the_fix_and_a_server_that_fails(built):
    work, ids = built
    assert subprocess.run(["git", "merge-base", "--is-ancestor", ids["sm120_fix"], ids["broken_server"]],
                          cwd=work).returncode == 0
    server = git(work, "show", f"{ids['broken_server']}:python/sglang/launch_server.py")
    assert "raise SystemExit(1)" in server
    verify = yaml.safe_load((REPO / "molecule/sglang_service/verify.yml").read_text())
    assert verify[0]["vars"]["__broken_commit"] == ids["broken_server"]
