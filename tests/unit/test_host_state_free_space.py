"""host_state's free_space measures a path as preflight's df did (df -B1 --output=avail,target on the nearest existing
parent): the same mount point, the same available bytes, give or take what other processes wrote in between."""
import os
import subprocess

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import host_state


def df(path):
    out = subprocess.run(["df", "-B1", "--output=avail,target", "--", path], capture_output=True, text=True,
                         check=True).stdout.splitlines()[-1].split(None, 1)
    return int(out[0]), out[1]


@pytest.mark.parametrize("path", ["/", "/tmp", "/proc", "/usr/bin", "/var/lib/does-not-exist-yet/models", "."])
def test_as_df_measures_it(path):
    measured = host_state.free_space(path)
    existing = os.path.abspath(path)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    assert measured["measured"] == existing
    avail, mount = df(existing)
    assert measured["mount"] == mount
    assert abs(measured["avail"] - avail) <= max(64 << 20, avail // 100), (measured, avail)


def test_the_longest_mount_point_holding_the_path_is_its_mount(tmp_path):
    mounts = ("overlay / overlay rw 0 0\n/dev/sda1 /srv ext4 rw 0 0\n/dev/sdb1 /srv/models\\040cache ext4 rw 0 0\n"
              "tmpfs /srv/modelsx tmpfs rw 0 0\n")
    real = os.path.realpath(str(tmp_path))
    assert host_state.free_space(str(tmp_path), mounts)["mount"] == "/"
    assert host_state._mount_points(mounts) == ["/", "/srv", "/srv/models cache", "/srv/modelsx"]
    # a mount point is a whole component: /srv/modelsx does not hold /srv/models
    fake = mounts + f"tmpfs {real} tmpfs rw 0 0\n"
    assert host_state.free_space(str(tmp_path / "not-yet" / "there"), fake)["mount"] == real


def test_the_module_answers_in_the_order_asked_and_expands_home(tmp_path):
    """preflight reads the answers in the order of preflight_min_free_gib's keys: a key with ~ is measured at the
    home directory, in its place."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path
    from conftest import PLAYBOOK_HANG_BOUND, REPO
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible"), "localhost", "-c", "local", "-e",
                           f"ansible_python_interpreter={sys.executable}", "-m", "blackwell.serving.host_state",
                           "-a", json.dumps({"free_space": ["~/not-there-yet", "/"]}), "-o"],
                          capture_output=True, text=True, env=env, timeout=PLAYBOOK_HANG_BOUND, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    result = json.loads(proc.stdout.split("=>", 1)[1])
    home, root = result["free_space"]
    assert home["path"] == os.path.expanduser("~/not-there-yet") and home["measured"] == os.path.expanduser("~")
    assert root["path"] == root["measured"] == root["mount"] == "/" and root["avail"] > 0
