"""The NCCL all-reduce check (module nccl_allreduce): the bandwidths as nccl-tests defines them, the floor, one GPU,
a hang, check mode - the module run as Ansible runs it, with a fake interpreter in place of the release's python:
either the real worker over a stand-in torch (tests/unit/fake_torch), or a script that prints a canned report or
hangs. The report the worker printed on a real GPU (tests/fixtures/gpu/h100-device/nccl-allreduce) is read with
the module's own parser."""
import json
import sys
import time
from pathlib import Path

import pytest

from modrun import REPO, run_module
from ansible_collections.blackwell.serving.plugins.module_utils import nccl_allreduce as nar

FAKE_TORCH = REPO / "tests" / "unit" / "fake_torch"
FIXTURE = REPO / "tests" / "fixtures" / "gpu" / "h100-device" / "nccl-allreduce"
MiB = 1 << 20


def fake_python(tmp_path, body):
    """An executable 'python' that runs BODY (Python) with the module's arguments in sys.argv[1:]."""
    path = tmp_path / "bin" / "python"
    path.parent.mkdir(exist_ok=True)
    path.write_text(f"#!{sys.executable}\nimport json, os, sys, time\n{body}\n")
    path.chmod(0o755)
    return str(path)


def worker_python(tmp_path):
    """The release's python as the worker sees it: the real worker, run over the stand-in torch (the module's -I
    would hide PYTHONPATH: the flags are dropped, the script and its config kept)."""
    return fake_python(tmp_path, f"sys.path.insert(0, {str(FAKE_TORCH)!r})\n"
                                 "args = [a for a in sys.argv[1:] if not a.startswith('-')]\n"
                                 "sys.argv = args\n"
                                 "import runpy\n"
                                 "runpy.run_path(args[0], run_name='__main__')")


def canned(tmp_path, world, seconds_by_size, wrong=0):
    """A python that prints the report of WORLD ranks whose all-reduces took seconds_by_size[bytes] each."""
    report = {"world_size": world, "torch": "2.9.1+cu128", "cuda": "12.8", "nccl": "2.27.3",
              "devices": ["NVIDIA RTX PRO 6000 Blackwell Server Edition"] * world,
              "nccl_environment": {"NCCL_P2P_LEVEL": "SYS"}}
    return fake_python(tmp_path, f"report = {json.dumps(report)!r}\n"
                                 "report = json.loads(report)\n"
                                 "config = json.load(open(sys.argv[-1]))\n"
                                 f"times = {json.dumps({str(k): v for k, v in seconds_by_size.items()})}\n"
                                 "report['results'] = [{'bytes': s, 'seconds': times[str(s)], "
                                 f"'wrong': {wrong}}} for s in config['sizes']]\n"
                                 "print('NCCL INFO something NCCL says first')\n"
                                 "print('BLACKWELL_NCCL_ALLREDUCE ' + json.dumps(report))")


def running(pid):
    """Whether PID runs (a killed process whose parent has not reaped it yet is a zombie: not running)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


# --- arithmetic -----------------------------------------------------------------------------------------------------

def test_sizes_read_as_nccl_tests_writes_them():
    assert nar.parse_size("1M") == MiB
    assert nar.parse_size("256M") == 256 * MiB
    assert nar.parse_size("1G") == 1 << 30
    assert nar.parse_size("4096") == 4096
    assert nar.parse_size(64) == 64
    for bad in ("1T", "fast", "", "2"):
        with pytest.raises(ValueError):
            nar.parse_size(bad)


def test_bus_bandwidth_is_algbw_times_2_n_minus_1_over_n():
    assert nar.bus_factor(8) == 1.75
    assert nar.bus_factor(2) == 1.0
    assert nar.bus_factor(1) == 0.0
    # 256 MiB in 11.7 ms over 8 GPUs: algbw 22.94 GB/s (1e9 bytes), busbw 40.15 GB/s - what the community's
    # ring measurements show at large sizes on 8x RTX PRO 6000 (about 46 GB/s at best)
    rows = nar.figures({"world_size": 8, "results": [{"bytes": 256 * MiB, "seconds": 0.0117, "wrong": 0}]},
                       {256 * MiB: 15.0})
    assert rows == [{"bytes": 256 * MiB, "size": "256 MiB", "time_us": 11700.0, "algbw": 22.94, "busbw": 40.15,
                     "wrong": 0, "floor": 15.0}]


def test_one_floor_applies_to_the_largest_size_and_others_are_named_by_size():
    sizes = [MiB, 32 * MiB, 256 * MiB]
    assert nar.floors(sizes, 15) == {256 * MiB: 15.0}
    assert nar.floors(sizes, 15, {"32M": 10}) == {256 * MiB: 15.0, 32 * MiB: 10.0}
    assert nar.floors(sizes) == {}
    with pytest.raises(ValueError, match="64 MiB, which is not among the sizes"):
        nar.floors(sizes, None, {"64M": 10})


def test_the_report_is_the_last_marker_line_whatever_else_is_printed():
    out = "NCCL WARN x\nBLACKWELL_NCCL_ALLREDUCE {\"world_size\": 1}\nnoise\nBLACKWELL_NCCL_ALLREDUCE {\"world_size\": 2}\n"
    assert nar.parse_output(out) == {"world_size": 2}
    with pytest.raises(ValueError, match="no report"):
        nar.parse_output("Traceback (most recent call last):\n")


# --- the real GPU's report --------------------------------------------------------------------------------------

@pytest.mark.parametrize("run, sizes", [("1gpu", [1, 64, 256]), ("1gpu-role-sizes", [1, 32, 256])])
def test_the_h100_report_reads_with_the_modules_parser_and_one_gpu_judges_no_floor(run, sizes):
    report = nar.parse_output((FIXTURE / f"worker-stdout-{run}.txt").read_text())
    assert report["world_size"] == 1
    assert report["nccl"] == "2.28.9" and report["torch"].startswith("2.11.0")
    assert report["devices"] == ["NVIDIA H100 80GB HBM3"]
    # the service's NCCL environment reached the worker
    assert report["nccl_environment"]["NCCL_P2P_LEVEL"] == "SYS"
    floor = nar.floors([s * MiB for s in sizes], 15)
    rows = nar.figures(report, floor)
    assert [r["bytes"] for r in rows] == [s * MiB for s in sizes]
    assert all(r["wrong"] == 0 and r["busbw"] == 0 and r["algbw"] > 0 and r["floor"] is None for r in rows)
    failures, notes = nar.judge(rows, 1, floor, "h100")
    assert failures == []
    assert len(notes) == 1 and "does not apply" in notes[0] and "15 GB/s at 256 MiB" in notes[0]


def test_the_gpu_runs_were_on_an_h100():
    for name in ("nvidia-smi-L.txt", "nvidia-smi-L-role-sizes.txt"):
        assert (FIXTURE / name).read_text().startswith("GPU 0: NVIDIA H100 80GB HBM3")


# --- the module, with the real worker over a stand-in torch -----------------------------------------------------

def test_one_gpu_passes_and_says_the_floor_does_not_apply(tmp_path):
    result = run_module("nccl_allreduce", {"python": worker_python(tmp_path), "min_busbw": 15,
                                           "environment": {"NCCL_P2P_LEVEL": "SYS", "NCCL_IB_DISABLE": "1"}},
                        env={"FAKE_TORCH_GPUS": "1"})
    assert not result.get("failed"), result
    assert result["measured"] and result["world_size"] == 1 and result["floor_applies"] is False
    assert [r["bytes"] for r in result["results"]] == [MiB, 32 * MiB, 256 * MiB]
    assert all(r["busbw"] == 0 and r["floor"] is None for r in result["results"])
    assert "does not apply" in result["msg"] and "does not apply" in json.dumps(result.get("warnings"))
    assert result["nccl_environment"] == {"NCCL_IB_DISABLE": "1", "NCCL_P2P_LEVEL": "SYS"}
    assert result["nccl_version"] == "2.99.1" and result["changed"] is False


def test_every_gpu_torch_sees_is_taken_unless_told(tmp_path):
    result = run_module("nccl_allreduce", {"python": worker_python(tmp_path), "sizes": ["1M"]},
                        env={"FAKE_TORCH_GPUS": "4"})
    assert result["world_size"] == 4 and len(result["devices"]) == 4 and result["floor_applies"] is False


def test_fewer_gpus_than_asked_fails_naming_both(tmp_path):
    result = run_module("nccl_allreduce", {"python": worker_python(tmp_path), "gpus": 8},
                        env={"FAKE_TORCH_GPUS": "2"})
    assert result["failed"] and "torch sees 2 GPU(s); the check asks for 8" in result["msg"]


def test_a_wrong_sum_fails(tmp_path):
    result = run_module("nccl_allreduce", {"python": worker_python(tmp_path), "sizes": ["1M"]},
                        env={"FAKE_TORCH_GPUS": "1", "FAKE_TORCH_WRONG": "3"})
    assert result["failed"] and "1 MiB: 3 element(s) of the checked all-reduce were wrong" in result["msg"]


def test_no_torch_fails_saying_so(tmp_path):
    # the release's python without torch (the lab's stand-in has none with torch.distributed)
    python = fake_python(tmp_path, "args = [a for a in sys.argv[1:] if not a.startswith('-')]\n"
                                   "sys.argv = args\nimport runpy\nrunpy.run_path(args[0], run_name='__main__')")
    result = run_module("nccl_allreduce", {"python": python})
    assert result["failed"] and "cannot import torch" in result["msg"] and result["measured"] is False


# --- the module, with canned reports -------------------------------------------------------------------------

def test_eight_gpus_over_the_floor_pass(tmp_path):
    python = canned(tmp_path, 8, {MiB: 80e-6, 32 * MiB: 1.5e-3, 256 * MiB: 0.0117})
    result = run_module("nccl_allreduce", {"python": python, "min_busbw": 15})
    assert not result.get("failed"), result
    assert result["floor_applies"] is True
    big = result["results"][-1]
    assert big["size"] == "256 MiB" and big["busbw"] == 40.15 and big["floor"] == 15.0
    assert "256 MiB: busbw 40.15 GB/s" in result["msg"]


def test_under_the_floor_fails_naming_size_measured_and_floor(tmp_path):
    # 256 MiB in 40 ms over 8 GPUs: busbw 11.74 GB/s
    python = canned(tmp_path, 8, {MiB: 80e-6, 32 * MiB: 1.5e-3, 256 * MiB: 0.040})
    result = run_module("nccl_allreduce", {"python": python, "min_busbw": 15, "min_busbw_per_size": {"32M": 10}})
    assert result["failed"]
    assert "256 MiB: bus bandwidth 11.74 GB/s over 8 GPUs, under the floor of 15 GB/s" in result["msg"]
    # the size over its own floor is not named as failing
    assert "32 MiB: bus bandwidth" not in result["msg"]
    assert result["results"][-1]["busbw"] == 11.74


def test_no_floor_judges_nothing(tmp_path):
    python = canned(tmp_path, 8, {MiB: 1.0, 32 * MiB: 1.0, 256 * MiB: 1.0})
    result = run_module("nccl_allreduce", {"python": python})
    assert not result.get("failed") and result["floor_applies"] is False


def test_a_hang_ends_at_the_timeout_with_every_process_of_the_worker_killed(tmp_path):
    pids = tmp_path / "pids"
    # the worker starts a rank (a child that ignores TERM) and both hang, as ranks in an all-reduce that never ends
    python = fake_python(tmp_path, "import signal, subprocess\n"
                                   "child = subprocess.Popen([sys.executable, '-c', "
                                   "'import signal, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                                   "time.sleep(600)'])\n"
                                   f"open({str(pids)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
                                   "print('NCCL INFO Channel 00/02 : 0 1', flush=True)\n"
                                   "time.sleep(600)")
    start = time.monotonic()
    result = run_module("nccl_allreduce", {"python": python, "timeout": 3})
    assert time.monotonic() - start < 60
    assert result["failed"] and "did not finish within its timeout of 3 s" in result["msg"]
    assert result["measured"] is False and "Channel 00/02" in result["stdout"]
    assert not [pid for pid in map(int, pids.read_text().split()) if running(pid)]


def test_check_mode_runs_nothing_and_says_so(tmp_path):
    ran = tmp_path / "ran"
    python = fake_python(tmp_path, f"open({str(ran)!r}, 'w').write('ran')")
    result = run_module("nccl_allreduce", {"python": python, "min_busbw": 15, "_ansible_check_mode": True})
    assert not result.get("failed") and result["measured"] is False and "check mode" in result["msg"]
    assert not ran.exists()


def test_a_missing_interpreter_fails_before_running(tmp_path):
    result = run_module("nccl_allreduce", {"python": str(tmp_path / "nowhere" / "python")})
    assert result["failed"] and "is not an executable interpreter" in result["msg"]


def test_bad_sizes_and_floors_fail_before_running(tmp_path):
    python = canned(tmp_path, 8, {})
    result = run_module("nccl_allreduce", {"python": python, "sizes": ["1T"]})
    assert result["failed"] and "'1T' is not a message size" in result["msg"]
    result = run_module("nccl_allreduce", {"python": python, "min_busbw_per_size": {"64M": 10}})
    assert result["failed"] and "64 MiB, which is not among the sizes" in result["msg"]


def test_the_worker_imports_nothing_of_ansible():
    import ast
    tree = ast.parse((REPO / "plugins" / "module_utils" / "nccl_worker.py").read_text())
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    imported |= {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    assert imported and not any(name.startswith("ansible") for name in imported), imported


def test_the_worker_that_ran_on_the_gpu_is_this_worker_without_docstrings():
    import ast
    source = (REPO / "plugins" / "module_utils" / "nccl_worker.py").read_text()
    tree = ast.parse(source)
    tree.body = [n for n in tree.body if not (isinstance(n, ast.Expr) and isinstance(n.value, ast.Constant))]
    ran = (FIXTURE / "worker-ran-role-sizes.py.txt").read_text()
    if ast.dump(ast.parse(ran)) != ast.dump(tree):
        pytest.skip("the worker changed since it ran on the GPU: run it there again (tests/fixtures/gpu/h100-device/"
                    "nccl-allreduce/README.txt) and keep the new output beside this one")
    assert Path(FIXTURE / "worker-stdout-1gpu-role-sizes.txt").read_text().startswith(nar.MARKER)
