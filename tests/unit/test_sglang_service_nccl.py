"""sglang_service's NCCL all-reduce check (tasks/nccl.yml) as a play runs it: measured only where the unit is not
running, with the release's interpreter (<home>/current/venv/bin/python), the GPUs of the tensor parallel group and
the service's environment; a host under the floor fails. The release's python is a fake that records what it was
given and prints a report of 8 GPUs; systemctl is a fake that answers the unit's state (this machine has no
systemd)."""
import json
import os
import sys

import pytest

from conftest import run_local_playbook

PLAY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The role's NCCL check
      ansible.builtin.include_role:
        name: blackwell.serving.sglang_service
        tasks_from: nccl
"""


def setup(tmp_path, active_state, seconds_256m):
    home = tmp_path / "home"
    python = home / "releases" / "r1" / "venv" / "bin" / "python"
    python.parent.mkdir(parents=True)
    (home / "current").symlink_to(home / "releases" / "r1")
    record = tmp_path / "record.json"
    python.write_text(f"""#!{sys.executable}
import json, os, sys
config = json.load(open(sys.argv[-1]))
json.dump({{"config": config, "env": {{k: v for k, v in os.environ.items() if k.startswith(("NCCL_", "SGLANG_"))}}}},
          open({str(record)!r}, "w"))
times = {{1048576: 80e-6, 33554432: 1.5e-3, 268435456: {seconds_256m}}}
report = {{"world_size": 8, "torch": "2.9.1+cu128", "cuda": "12.8", "nccl": "2.27.3", "devices": ["GPU"] * 8,
          "results": [{{"bytes": s, "seconds": times[s], "wrong": 0}} for s in config["sizes"]]}}
print("BLACKWELL_NCCL_ALLREDUCE " + json.dumps(report))
""")
    python.chmod(0o755)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    systemctl = bin_dir / "systemctl"
    systemctl.write_text(f"#!/bin/sh\nprintf 'Id=sglang.service\\nLoadState=loaded\\nActiveState={active_state}\\n"
                         "UnitFileState=enabled\\nNeedDaemonReload=no\\n'\n")
    systemctl.chmod(0o755)
    return home, bin_dir, record


def play(tmp_path, home, bin_dir, **extra):
    return run_local_playbook(tmp_path, PLAY, dict({"sglang_service_home": str(home)}, **extra),
                              env={"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}"}, must_pass=False)


@pytest.mark.parametrize("state", ["inactive", "failed"])
def test_where_no_server_runs_the_release_measures_with_the_service_environment(tmp_path, state):
    home, bin_dir, record = setup(tmp_path, state, 0.0117)
    proc = play(tmp_path, home, bin_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert "256 MiB: busbw 40.15 GB/s" in proc.stdout
    seen = json.loads(record.read_text())
    # the tensor parallel group's GPUs on this host, the role's sizes, the service's environment
    assert seen["config"]["gpus"] == 8
    assert seen["config"]["sizes"] == [1 << 20, 32 << 20, 256 << 20]
    assert seen["env"]["NCCL_P2P_LEVEL"] == "SYS" and seen["env"]["NCCL_IB_DISABLE"] == "1"


def test_a_host_under_the_floor_fails_naming_it(tmp_path):
    home, bin_dir, record = setup(tmp_path, "inactive", 0.040)
    proc = play(tmp_path, home, bin_dir)
    assert proc.returncode != 0
    assert "256 MiB: bus bandwidth 11.74 GB/s over 8 GPUs, under the floor of 15 GB/s" in proc.stdout


def test_a_running_server_keeps_its_gpus_and_is_not_measured(tmp_path):
    home, bin_dir, record = setup(tmp_path, "active", 0.040)
    proc = play(tmp_path, home, bin_dir)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert not record.exists()


def test_the_floor_and_sizes_come_from_the_variables(tmp_path):
    home, bin_dir, record = setup(tmp_path, "inactive", 0.0117)
    proc = play(tmp_path, home, bin_dir, sglang_service_nccl_check_min_busbw=45,
                sglang_service_nccl_check_sizes=["256M"], sglang_service_tp_size=16, sglang_service_nnodes=2)
    assert proc.returncode != 0
    assert "under the floor of 45 GB/s" in proc.stdout
    assert json.loads(record.read_text())["config"]["gpus"] == 8
