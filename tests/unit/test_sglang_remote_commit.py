"""sglang's preflight asks the remote for the pinned commit before any change (issue 38, point 1): a shallow fetch of
that commit alone into a scratch repository. Git's protocol v2 (GitHub, git daemon) serves a reachable commit by its
id and answers "not our ref" for one it lacks. Run by ansible-playbook on this machine against local bare
repositories served by git's own upload-pack (file://), an older commit than the branch's tip included."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PLAYBOOK_HANG_BOUND, REPO, run_local_playbook

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: blackwell.serving.sglang
        tasks_from: remote_commit
"""


def git(*args, cwd=None):
    return subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True).stdout.strip()


@pytest.fixture
def remote(tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    git("init", "-q", cwd=work)
    for n in ("one", "two"):
        (work / "README").write_text(f"sglang stand-in {n}\n")
        git("add", "README", cwd=work)
        git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", n, cwd=work)
    bare = tmp_path / "sglang.git"
    git("clone", "-q", "--bare", str(work), str(bare))
    # the pinned commit is seldom a branch's tip
    return bare, git("rev-parse", "HEAD~1", cwd=work)


def test_a_commit_the_remote_has_passes(tmp_path, remote):
    bare, sha = remote
    run_local_playbook(tmp_path, PLAYBOOK, {"sglang_repo_url": f"file://{bare}", "sglang_commit": sha})


def test_a_commit_the_remote_lacks_stops_naming_the_variable(tmp_path, remote):
    bare, _ = remote
    with pytest.raises(AssertionError) as failed:
        run_local_playbook(tmp_path, PLAYBOOK, {"sglang_repo_url": f"file://{bare}", "sglang_commit": "ab" * 20})
    said = str(failed.value)
    assert f"sglang_commit {'ab' * 20} is not a commit that file://{bare} has" in said
    assert "Nothing was changed" in said


def test_a_remote_that_cannot_be_reached_stops_too(tmp_path):
    with pytest.raises(AssertionError) as failed:
        run_local_playbook(tmp_path, PLAYBOOK, {"sglang_repo_url": f"file://{tmp_path}/nowhere.git",
                                                "sglang_commit": "ab" * 20})
    assert "(or it cannot be reached:" in str(failed.value)


def test_a_remote_that_answers_no_commit_by_id_is_left_to_the_clone(tmp_path, remote, monkeypatch):
    """Protocol v0 without uploadpack.allowReachableSHA1InWant ("unadvertised object"): it cannot say, so the check
    does not stop."""
    bare, _ = remote
    for key, value in {"GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "protocol.version",
                       "GIT_CONFIG_VALUE_0": "0"}.items():
        monkeypatch.setenv(key, value)
    run_local_playbook(tmp_path, PLAYBOOK, {"sglang_repo_url": f"file://{bare}", "sglang_commit": "ab" * 20})


# A host without git yet: its shell finds no git (a wrapper shell whose PATH has every command of this machine but
# git); the control node, delegated to as `localhost` with its own shell, asks instead.
NO_GIT_PLAYBOOK = """
- hosts: fresh
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: blackwell.serving.sglang
        tasks_from: remote_commit
"""


@pytest.fixture
def fresh_host(tmp_path):
    bin_dir = tmp_path / "bin-without-git"
    bin_dir.mkdir()
    for directory in os.environ["PATH"].split(os.pathsep):
        for tool in Path(directory).glob("*") if Path(directory).is_dir() else ():
            if not tool.name.startswith("git") and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
    shell = tmp_path / "sh-without-git"
    shell.write_text(f'#!/bin/sh\nPATH={bin_dir} exec /bin/sh "$@"\n')
    shell.chmod(0o755)
    return {"ansible_shell_executable": str(shell)}


def run_fresh(tmp_path, host_vars, extra_vars):
    (tmp_path / "pb.yml").write_text(NO_GIT_PLAYBOOK)
    (tmp_path / "hosts").write_text(
        "fresh ansible_connection=local " + " ".join(f"{k}={v}" for k, v in host_vars.items())
        + f"\nlocalhost ansible_connection=local ansible_python_interpreter={sys.executable}\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts"),
                           "-e", json.dumps(dict(extra_vars, ansible_python_interpreter=sys.executable)),
                           str(tmp_path / "pb.yml")], capture_output=True, text=True, env=env,
                          timeout=PLAYBOOK_HANG_BOUND, cwd=tmp_path)


def test_a_host_without_git_has_the_control_node_ask(tmp_path, remote, fresh_host):
    bare, _ = remote
    proc = run_fresh(tmp_path, fresh_host, {"sglang_repo_url": f"file://{bare}", "sglang_commit": "ab" * 20})
    assert proc.returncode == 2, proc.stdout[-3000:]
    assert "the remote answered the control node, as the host has no git yet" in proc.stdout
    assert "Nothing was changed" in proc.stdout


def test_a_host_without_git_passes_a_commit_the_remote_has(tmp_path, remote, fresh_host):
    bare, sha = remote
    proc = run_fresh(tmp_path, fresh_host, {"sglang_repo_url": f"file://{bare}", "sglang_commit": sha})
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_a_remote_the_control_node_cannot_reach_leaves_it_to_the_host(tmp_path, fresh_host):
    # a mirror that only the hosts reach: the control node's failure to reach it refuses nothing
    proc = run_fresh(tmp_path, fresh_host, {"sglang_repo_url": f"file://{tmp_path}/nowhere.git",
                                            "sglang_commit": "ab" * 20})
    assert proc.returncode == 0, proc.stdout[-3000:]
