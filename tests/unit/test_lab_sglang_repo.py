"""The lab's sglang history: sglang's real releases (their sdists) with the lab's commits on top; deterministic,
pinned by the lab inventory."""
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
    # the release with the fix stands for the fix commit
    assert lab["sglang_commit"] == ids[by_upstream[prod["sglang_commit"]]]
    assert lab["sglang_sm120_fix_commit"] == ids[by_upstream[prod["sglang_sm120_fix_commit"]]]


def test_history_is_sglangs_releases_then_the_labs_commits(built):
    work, ids = built
    # the releases are the sdists' trees, byte for byte, under python/ (less the sdist's build outputs)
    for key, version in (("v0_5_8_post1", "0.5.8.post1"), ("v0_5_9", "0.5.9")):
        files = sglang_repo.release_files(version)
        names = set(git(work, "ls-tree", "-r", "--name-only", ids[key], "python").splitlines())
        assert names == set(files), (key, sorted(names ^ set(files))[:10])
        assert git(work, "describe", "--tags", "--exact-match", ids[key]) == f"v{version}"
    assert "PKG-INFO" not in git(work, "ls-tree", "--name-only", ids["v0_5_9"], "python/")
    # every commit after the releases is the lab's and says so
    subjects = git(work, "log", "--format=%s", f"{ids['v0_5_9']}..{ids['kernels_moved']}").splitlines()
    subjects += [git(work, "log", "-1", "--format=%s", ids[k]) for k in ("revert_sm120", "broken_server")]
    assert subjects and all(s.startswith("lab: ") and s.endswith("(lab only)") for s in subjects), subjects
    # the fix is in 0.5.9 (an ancestor of the pin), not in the release before it
    assert subprocess.run(["git", "merge-base", "--is-ancestor", ids["sm120_fix"], ids["last_flashinfer_063"]],
                          cwd=work).returncode == 0
    assert subprocess.run(["git", "merge-base", "--is-ancestor", ids["sm120_fix"], ids["v0_5_8_post1"]],
                          cwd=work).returncode == 1
    # the revert branch descends from the fix; its function is 0.5.8.post1's again, the rest of the file 0.5.9's
    assert subprocess.run(["git", "merge-base", "--is-ancestor", ids["sm120_fix"], ids["revert_sm120"]],
                          cwd=work).returncode == 0
    diff = git(work, "diff", "--stat", ids["last_flashinfer_063"], ids["revert_sm120"]).splitlines()
    assert len(diff) == 2 and sglang_repo.OLD_PATH.rsplit("/", 1)[1] in diff[0]
    assert "CUDA_CAPABILITY[0] == 12" not in git(work, "show", f"{ids['revert_sm120']}:{sglang_repo.OLD_PATH}")
    assert "CUDA_CAPABILITY[0] == 12" in git(work, "show", f"{ids['v0_5_9']}:{sglang_repo.OLD_PATH}")
    # the function's file moved in the last commit
    names = git(work, "ls-tree", "-r", "--name-only", ids["kernels_moved"]).splitlines()
    assert sglang_repo.NEW_PATH in names and sglang_repo.OLD_PATH not in names
    # each commit names the upstream commit it stands for
    body = git(work, "log", "-1", "--format=%b", ids["last_flashinfer_063"])
    assert "Lab-Stand-In-For: 3f9fc8b848365a5797a44856854e3e6f00a60dd0" in body


def test_the_pin_runs_the_stand_in_server_over_sglangs_own_tree(built):
    work, ids = built
    server = git(work, "show", f"{ids['last_flashinfer_063']}:python/sglang/launch_server.py")
    assert server == (sglang_repo.STANDIN / "launch_server.py").read_text().strip()
    # sglang's own parser stays in the tree (tests/unit/test_unit_flags_real_sglang.py uses it)
    real = git(work, "show", f"{ids['last_flashinfer_063']}:python/sglang/srt/server_args.py")
    assert "class ServerArgs" in real and '"--config"' in real


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


def test_the_molecule_scenarios_name_the_labs_commits(built):
    """Molecule's verify plays name commits of the lab's history; the history's ids follow its content (a change to a
    stand-in changes them): each named id is the one the lab builds now."""
    _, ids = built
    wanted = {"molecule/sglang/verify.yml": {"__later_commit": "fp4_cudnn_default", "__prefix_commit": "v0_5_8_post1",
                                             "__revert_commit": "revert_sm120"}}
    for path, names in wanted.items():
        found = yaml.safe_load((REPO / path).read_text())[0]["vars"]
        for var, step in names.items():
            assert found[var] == ids[step], f"{path}: {var} is {found[var]}, the lab's {step} is {ids[step]}"
