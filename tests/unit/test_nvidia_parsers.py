"""module_utils.nvidia on every real capture in tests/fixtures/gpu/."""
import pytest

from conftest import FIXTURES
from ansible_collections.blackwell.serving.plugins.module_utils import nvidia

H200 = FIXTURES / "gpu" / "h200-real"
RTX = FIXTURES / "gpu" / "rtx-pro-6000-x8-real"


def read(path):
    return path.read_text()


def test_query_with_header_and_units_h200():
    rows = nvidia.parse_query_csv(read(H200 / "query-gpu.csv"))
    assert rows == [{
        "index": "0", "name": "NVIDIA H200", "uuid": "GPU-71997161-f0e8-ff7a-cf50-73b4fe2ff1a2",
        "pci.bus_id": "00000000:00:06.0", "driver_version": "580.159.04", "compute_cap": "9.0",
        "memory.total": "143771", "persistence_mode": "Enabled", "pstate": "P0", "vbios_version": "96.00.A5.00.1A"}]


def test_query_noheader_nounits_h200_is_what_gpu_facts_asks_for():
    gpus = nvidia.gpus_from_query(nvidia.parse_query_csv(read(H200 / "query-gpu-noheader-nounits.csv"),
                                                         nvidia.QUERY_FIELDS))
    assert gpus == [{
        "index": 0, "name": "NVIDIA H200", "uuid": "GPU-71997161-f0e8-ff7a-cf50-73b4fe2ff1a2",
        "pci_bus_id": "00000000:00:06.0", "pci_device_id": "0x2335", "compute_capability": "9.0",
        "compute_capability_major": 9, "memory_total_mib": 143771, "driver_version": "580.159.04",
        "persistence_mode": "Enabled"}]


def test_query_rtx_pro_6000_eight_gpus():
    rows = nvidia.parse_query_csv(read(RTX / "query-gpu-name-mem-driver-cc.csv"))
    assert len(rows) == 8
    assert {r["name"] for r in rows} == {"NVIDIA RTX PRO 6000 Blackwell Server Edition"}
    assert {r["memory.total"] for r in rows} == {"97887"}
    assert {r["compute_cap"] for r in rows} == {"12.0"}
    assert {r["driver_version"] for r in rows} == {"580.95.05"}


def test_query_row_with_wrong_column_count_is_an_error():
    with pytest.raises(ValueError):
        nvidia.parse_query_csv("0, NVIDIA H200\n", nvidia.QUERY_FIELDS)


def test_list_h200():
    assert nvidia.parse_smi_list(read(H200 / "nvidia-smi-L.txt")) == [
        {"index": 0, "name": "NVIDIA H200", "uuid": "GPU-71997161-f0e8-ff7a-cf50-73b4fe2ff1a2"}]


@pytest.mark.parametrize("capture,expect", [
    (H200 / "nvidia-smi-q.txt", {"driver_version": "580.159.04", "cuda_version": "13.0", "attached_gpus": 1,
                                 "gpu0": {"bus_id": "00000000:00:06.0", "name": "NVIDIA H200",
                                          "uuid": "GPU-71997161-f0e8-ff7a-cf50-73b4fe2ff1a2",
                                          "persistence_mode": "Enabled", "minor_number": 0,
                                          "pci_device_id": "0x2335", "architecture": "Hopper"}}),
    (RTX / "nvidia-smi-q.txt", {"driver_version": "580.95.05", "cuda_version": "13.0", "attached_gpus": 8,
                                "gpu0": {"bus_id": "00000000:01:00.0",
                                         "name": "NVIDIA RTX PRO 6000 Blackwell Server Edition",
                                         "uuid": "GPU-99727d6c-c34d-688e-afa9-8b2fa2ba610a",
                                         "persistence_mode": "Enabled", "minor_number": 0,
                                         "pci_device_id": "0x2BB5", "architecture": "Blackwell"}}),
])
def test_q_text(capture, expect):
    q = nvidia.parse_smi_q(read(capture))
    assert {k: q[k] for k in ("driver_version", "cuda_version", "attached_gpus")} == \
        {k: expect[k] for k in ("driver_version", "cuda_version", "attached_gpus")}
    assert q["gpus"][0] == expect["gpu0"]


def test_q_xml_agrees_with_q_text_h200():
    xml = nvidia.parse_smi_q_xml(read(H200 / "nvidia-smi-q.xml"))
    text = nvidia.parse_smi_q(read(H200 / "nvidia-smi-q.txt"))
    assert xml == text


def test_proc_version_open_module_h200():
    assert nvidia.parse_proc_version(read(H200 / "proc-driver-nvidia-version.txt")) == {
        "version": "580.159.04", "flavour": "open"}
    assert read(H200 / "sys-module-nvidia-version.txt").strip() == "580.159.04"


def test_proc_version_proprietary_and_garbage():
    prop = "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  Sat Aug 19 01:15:15 UTC 2023\n"
    assert nvidia.parse_proc_version(prop) == {"version": "535.104.05", "flavour": "proprietary"}
    assert nvidia.parse_proc_version("nothing here") is None


def test_nvcc_version():
    assert nvidia.parse_nvcc_version(read(H200 / "nvcc.txt")) == {"release": "13.0", "version": "13.0.88"}
    assert nvidia.parse_nvcc_version("bash: nvcc: command not found") is None


def test_compute_cap_capture_matches_query():
    cap = read(H200 / "compute-cap.txt").strip()
    rows = nvidia.parse_query_csv(read(H200 / "query-gpu.csv"))
    assert rows[0]["compute_cap"] == cap


def test_summary_of_eight_blackwell_gpus():
    rows = nvidia.parse_query_csv(read(RTX / "query-gpu-name-mem-driver-cc.csv"))
    rows = [dict(r, index=str(i)) for i, r in enumerate(rows)]
    s = nvidia.summarise(nvidia.gpus_from_query(rows), {"version": "580.95.05", "flavour": "open"})
    assert s["count"] == 8 and s["compute_capabilities"] == ["12.0"]
    assert s["driver_version"] == "580.95.05" and s["kernel_module"] == "open"


def test_pci_scan_picks_nvidia_display_devices_only():
    entries = [("0000:01:00.0", "0x10de", "0x2bb5", "0x030200"),
               ("0000:01:00.1", "0x10de", "0x22e8", "0x040300"),   # its audio function
               ("0000:02:00.0", "0x8086", "0x1572", "0x020000")]
    assert nvidia.nvidia_pci_devices(entries) == [{"pci_bus_id": "0000:01:00.0", "pci_device_id": "0x2BB5"}]


def test_gpu_facts_query_captured_on_the_device_h200():
    """The exact query gpu_facts sends, as a real H200 answered it (tests/fixtures/gpu/h200-device)."""
    text = read(FIXTURES / "gpu" / "h200-device" / "query-gpu-facts-fields.csv")
    gpus = nvidia.gpus_from_query(nvidia.parse_query_csv(text, nvidia.QUERY_FIELDS))
    assert len(gpus) == 1
    assert gpus[0]["compute_capability"] == "9.0" and gpus[0]["pci_device_id"] == "0x2335"
    assert gpus[0]["driver_version"] == "580.159.04"


def test_kernel_module_files_for_the_running_kernel(tmp_path):
    from ansible_collections.blackwell.serving.plugins.module_utils.nvidia import kernel_module_files
    assert kernel_module_files(str(tmp_path), "6.1.0-41-amd64") is None
    dkms = tmp_path / "6.1.0-41-amd64" / "updates" / "dkms"
    dkms.mkdir(parents=True)
    assert kernel_module_files(str(tmp_path), "6.1.0-41-amd64") == []
    for name in ("nvidia.ko.xz", "nvidia-uvm.ko.xz", "nvidia.ko", "nvidia.kox"):
        (dkms / name).write_text("")
    assert kernel_module_files(str(tmp_path), "6.1.0-41-amd64") == [str(dkms / "nvidia.ko"), str(dkms / "nvidia.ko.xz")]


def test_gpu_facts_reports_the_kernel_and_its_modules_when_asked(tmp_path):
    import os
    from modrun import run_module
    kernel = os.uname().release
    (tmp_path / kernel / "kernel").mkdir(parents=True)
    (tmp_path / kernel / "kernel" / "nvidia.ko.zst").write_text("")
    args = {"nvidia_smi": str(tmp_path / "no-smi"), "proc_version_path": str(tmp_path / "no-proc"),
            "sysfs_pci_path": str(tmp_path / "no-pci")}
    got = run_module("gpu_facts", dict(args, kernel_modules=True, kernel_modules_root=str(tmp_path)))
    assert got["kernel"] == kernel
    assert got["kernel_module_files"] == [str(tmp_path / kernel / "kernel" / "nvidia.ko.zst")]
    assert got["ansible_facts"]["nvidia_gpu"]["state"] == "no_nvidia_smi"
    assert "kernel" not in run_module("gpu_facts", args)


def test_gpu_facts_asks_nvcc_its_release_when_given_one(tmp_path):
    """verify's GPU and CUDA facts in one round trip: nvcc --version as the real one answered on the H200."""
    from modrun import run_module
    nvcc = tmp_path / "nvcc"
    nvcc.write_text("#!/bin/sh\n[ \"$1\" = --version ] || exit 2\ncat <<'X'\n"
                    + read(H200 / "nvcc.txt").split("\n", 1)[1] + "X\n")
    nvcc.chmod(0o755)
    args = {"nvidia_smi": str(tmp_path / "no-smi"), "proc_version_path": str(tmp_path / "no-proc"),
            "sysfs_pci_path": str(tmp_path / "no-pci")}
    assert run_module("gpu_facts", dict(args, nvcc=str(nvcc)))["nvcc"] == {"release": "13.0", "version": "13.0.88"}
    assert run_module("gpu_facts", dict(args, nvcc=str(tmp_path / "no-nvcc")))["nvcc"] is None
    assert "nvcc" not in run_module("gpu_facts", args)
