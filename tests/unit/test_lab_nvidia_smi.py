"""The stand-in nvidia-smi replays the real RTX PRO 6000 captures, and fails like the real one."""
import os
import re
import subprocess
import sys

import pytest

from conftest import FIXTURES, REPO

SCRIPT = REPO / "lab" / "standins" / "nvidia_smi.py"
DATA = FIXTURES / "gpu" / "rtx-pro-6000-x8-real"
COMPLETION = FIXTURES / "gpu" / "rtx-pro-6000-x8-asus-community" / "nvidia-smi-q.txt"
P2P_FORMAT = FIXTURES / "gpu" / "h100-device" / "captures" / "topo-p2p-r.txt"


def smi(tmp_path, *args, loaded="580.95.05", lib="580.95.05", flavour="Open Kernel Module", persistenced=True):
    script = tmp_path / "nvidia-smi"
    script.write_text(SCRIPT.read_text().replace("@LIB_VERSION@", lib))
    # nvidia-persistenced's pid file: this test process stands for the running daemon
    pid = tmp_path / "persistenced.pid"
    if persistenced:
        pid.write_text(str(os.getpid()))
    elif pid.exists():
        pid.unlink()
    env = dict(os.environ, LAB_NVIDIA_SMI_DATA=str(DATA), LAB_NVIDIA_PROC_VERSION=str(tmp_path / "version"),
               LAB_NVIDIA_PERSISTENCED_PID=str(pid), LAB_NVIDIA_SMI_COMPLETION=str(COMPLETION),
               LAB_NVIDIA_SMI_P2P_FORMAT=str(P2P_FORMAT))
    if loaded:
        (tmp_path / "version").write_text(
            f"NVRM version: NVIDIA UNIX {flavour} for x86_64  {loaded}  Release Build  (lab)  \n")
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, env=env)


def test_query_replays_the_capture_exactly(tmp_path):
    out = smi(tmp_path, "--query-gpu=name,memory.total,driver_version,compute_cap", "--format=csv")
    assert out.returncode == 0
    assert out.stdout == (DATA / "query-gpu-name-mem-driver-cc.csv").read_text()


def test_q_of_gpu0_replays_the_capture_and_completes_it_from_the_same_card_model(tmp_path):
    out = smi(tmp_path, "-q", "-i", "0")
    assert out.returncode == 0
    capture = (DATA / "nvidia-smi-q.txt").read_text()
    head = capture[:capture.index("\n    Clocks Event Reasons\n")]
    assert out.stdout.startswith(head + "\n    Clocks Event Reasons")
    # the sections after it, from the complete capture, at the first capture's column
    bar1 = re.search(r"\n    BAR1 Memory Usage\n(        Total +): 131072 MiB\n", out.stdout)
    assert bar1 and len(bar1.group(1)) == capture.index(":", capture.index("Product Name")) - capture.rindex(
        "\n", 0, capture.index("Product Name")) - 1
    assert "ECC Mode" in out.stdout and "Remapped Rows" in out.stdout
    assert out.stdout.count("\nGPU ") == 1


def test_topo_p2p_is_the_captured_format_for_eight_gpus(tmp_path):
    import importlib.util
    spec = importlib.util.spec_from_file_location("fabric", FIXTURES.parent.parent / "plugins/module_utils/fabric.py")
    fabric = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(fabric)
    out = smi(tmp_path, "topo", "-p2p", "r")
    assert out.returncode == 0
    matrix = fabric.parse_p2p_matrix(out.stdout)
    assert matrix["gpus"] == [f"GPU{i}" for i in range(8)] and {status for _a, _b, status in matrix["pairs"]} == {"OK"}
    assert out.stdout.endswith(P2P_FORMAT.read_text()[P2P_FORMAT.read_text().index("\nLegend:"):])


def test_topo_replays_the_capture(tmp_path):
    assert smi(tmp_path, "topo", "-m").stdout == (DATA / "topo.txt").read_text()


def test_eight_distinct_gpus(tmp_path):
    out = smi(tmp_path, "--query-gpu=index,uuid,pci.bus_id,compute_cap", "--format=csv,noheader")
    rows = [r.split(", ") for r in out.stdout.splitlines()]
    assert len(rows) == 8
    assert len({r[1] for r in rows}) == 8 and len({r[2] for r in rows}) == 8
    assert {r[3] for r in rows} == {"12.0"}


def test_driver_version_follows_the_loaded_module(tmp_path):
    out = smi(tmp_path, "--query-gpu=driver_version", "--format=csv,noheader", loaded="580.105.08", lib="580.105.08")
    assert out.stdout.splitlines() == ["580.105.08"] * 8


def test_mismatch_between_module_and_library_fails_like_nvml(tmp_path):
    out = smi(tmp_path, "-L", loaded="580.82.07", lib="580.95.05")
    assert out.returncode == 18
    assert "Driver/library version mismatch" in out.stdout


def test_no_module_loaded(tmp_path):
    out = smi(tmp_path, "-L", loaded=None)
    assert out.returncode == 9
    assert "couldn't communicate with the NVIDIA driver" in out.stdout


@pytest.mark.parametrize("args", [["--query-gpu=bogus.field", "--format=csv"], ["-q", "-x"]])
def test_what_was_not_captured_is_an_error(tmp_path, args):
    assert smi(tmp_path, *args).returncode != 0


def test_persistence_follows_the_daemon_as_on_a_real_host(tmp_path):
    """The capture's host ran nvidia-persistenced (Persistence Mode: Enabled); without the daemon the driver reports
    Disabled, in the query and in -q."""
    on = smi(tmp_path, "--query-gpu=index,persistence_mode", "--format=csv,noheader")
    assert on.stdout.splitlines()[0] == "0, Enabled"
    off = smi(tmp_path, "--query-gpu=index,persistence_mode", "--format=csv,noheader", persistenced=False)
    assert {line.split(", ")[1] for line in off.stdout.splitlines()} == {"Disabled"}
    q = smi(tmp_path, "-q", persistenced=False).stdout
    assert "Persistence Mode                      : Disabled" in q and ": Enabled\n" not in q.split("Persistence")[1][:60]


def test_power_limit_is_set_within_the_cards_range_and_kept(tmp_path, monkeypatch):
    if os.geteuid() != 0:
        pytest.skip("setting a power limit needs root, as with the real nvidia-smi")
    monkeypatch.setenv("LAB_NVIDIA_POWER_LIMIT", str(tmp_path / "limit"))
    out = smi(tmp_path, "--power-limit=300")
    assert out.returncode == 0, out.stdout
    assert out.stdout.splitlines()[0] == "Power limit for GPU 00000000:01:00.0 was set to 300.00 W from 600.00 W."
    assert len(out.stdout.splitlines()) == 9 and out.stdout.endswith("All done.\n")
    assert (tmp_path / "limit").read_text() == "300.00\n"
    low = smi(tmp_path, "-pl", "200")
    assert low.returncode == 2 and "should be between 300.00 W and 600.00 W" in low.stdout


def test_a_link_the_stand_in_hardware_narrowed_shows_in_q(tmp_path, monkeypatch):
    # the lab's PCI stand-in keeps a narrowed link's width (by bus id); -q shows it for that GPU only
    state = tmp_path / "pci.json"
    state.write_text('{"width": {"0000:11:00.0": 8}}')
    monkeypatch.setenv("LAB_STANDIN_PCI_STATE", str(state))
    out = smi(tmp_path, "-q").stdout
    blocks = {b.split("\n", 1)[0]: b for b in out.split("\nGPU ")[1:]}
    assert re.search(r"Link Width\n\s+Max\s+: 16x\n\s+Current\s+: 8x", blocks["00000000:11:00.0"])
    assert re.search(r"Link Width\n\s+Max\s+: 16x\n\s+Current\s+: 16x", blocks["00000000:01:00.0"])
