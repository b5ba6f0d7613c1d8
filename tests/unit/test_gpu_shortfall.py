"""Preflight believes the host: the GPUs its driver reports, on real captures (issue 15, point 8)."""
from conftest import FIXTURES
from ansible_collections.blackwell.serving.plugins.module_utils import nvidia
from ansible_collections.blackwell.serving.plugins.filter.preflight import gpu_shortfall

H200 = FIXTURES / "gpu" / "h200-real"
RTX = FIXTURES / "gpu" / "rtx-pro-6000-x8-real"


def _facts(gpus, pci):
    return {"state": "ok", "count": len(gpus), "gpus": gpus, "pci_devices": pci}


def _h200():
    gpus = nvidia.gpus_from_query(nvidia.parse_query_csv((H200 / "query-gpu-noheader-nounits.csv").read_text(),
                                                         nvidia.QUERY_FIELDS))
    return _facts(gpus, [{"pci_bus_id": "0000:00:06.0", "pci_device_id": "0x2335"}])


def _rtx8():
    rows = nvidia.parse_query_csv((RTX / "query-gpu-name-mem-driver-cc.csv").read_text())
    gpus = [{"name": r["name"], "pci_bus_id": f"00000000:{0x11 + 0x10 * i:02X}:00.0"} for i, r in enumerate(rows)]
    pci = [{"pci_bus_id": f"0000:{0x11 + 0x10 * i:02x}:00.0", "pci_device_id": "0x2BB5"} for i in range(8)]
    return _facts(gpus, pci)


def test_the_one_gpu_h200_cannot_hold_tp_8():
    msg = nvidia.gpu_shortfall(_h200(), 8)
    assert msg.startswith("the driver sees 1 GPU (NVIDIA H200 at 00000000:00:06.0); the server needs 8")
    assert "0000:00:06.0 (0x2335)" in msg
    assert "not seen by the driver" not in msg  # the same device in both spellings of its address


def test_eight_rtx_pro_6000_hold_tp_8():
    assert nvidia.gpu_shortfall(_rtx8(), 8) is None
    assert gpu_shortfall(_rtx8(), 8) == ""


def test_a_gpu_that_fell_off_the_bus_is_named():
    facts = _rtx8()
    facts["gpus"] = facts["gpus"][:3] + facts["gpus"][4:]
    facts["count"] = 7
    msg = nvidia.gpu_shortfall(facts, 8)
    assert "the driver sees 7 GPUs" in msg
    assert msg.endswith("On the bus but not seen by the driver: 0000:41:00.0 (fallen off the bus, or failed).")


def test_no_driver_answering_leaves_the_configured_count():
    for state in ("no_nvidia_smi", "driver_not_loaded", "version_mismatch", "error"):
        assert nvidia.gpu_shortfall({"state": state, "count": 0, "gpus": []}, 8) is None
    assert nvidia.gpu_shortfall(None, 8) is None


def test_recorded_on_the_real_h200_preflight_stops_tp_8_and_passes_tp_1():
    """tests/fixtures/gpu/h200-device/preflight-service-*.txt: the role's preflight on the real H200 (device)."""
    rec = FIXTURES / "gpu" / "h200-device"
    tp8 = (rec / "preflight-service-tp8.txt").read_text()
    assert tp8.rstrip().endswith("rc=2")
    assert "the driver sees 1 GPU (NVIDIA H200 at 00000000:00:06.0); the server needs 8 on this host" in tp8
    assert "Nothing was changed." in tp8 and "changed=0" in tp8
    tp1 = (rec / "preflight-service-tp1.txt").read_text()
    assert tp1.rstrip().endswith("rc=0") and "failed=0" in tp1
