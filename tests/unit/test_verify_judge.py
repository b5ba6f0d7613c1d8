"""The verify role's judge (plugins/module_utils/verify.py), on GPU facts parsed from real captures."""
import copy

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import nvidia, verify
from conftest import FIXTURES

GPU = FIXTURES / "gpu"
EXPECTED = {
    "gpu_count": 8, "gpu_name": "RTX PRO 6000", "compute_capability": "12.0", "kernel_module": "open",
    "driver_version": "580.95.05", "cuda_version": "12.9.1", "sglang_commit": "3f9fc8b848365a5797a44856854e3e6f00a60dd0",
    "sm120_fix_commit": "632c7afa8ce20c2a696380ccf5b28337fd9903b7",
    "packages": {"flashinfer-python": "0.6.3", "flashinfer-cubin": "0.6.3", "transformers": "5.2.0",
                 "nvidia-cudnn-cu12": "9.19.0.56"},
    "unit": "sglang.service",
}


def gpu_facts(query_csv, proc_text):
    gpus = nvidia.gpus_from_query(nvidia.parse_query_csv(query_csv, nvidia.QUERY_FIELDS))
    return {"state": "ok", "gpus": gpus, **nvidia.summarise(gpus, nvidia.parse_proc_version(proc_text))}


def rtx_host():
    """The 8x RTX PRO 6000 capture: name, memory, driver and capability come from it; the other query fields
    of gpu_facts (index, uuid, bus id, ...) are filled in, since that capture did not ask for them."""
    rows = (GPU / "rtx-pro-6000-x8-real/query-gpu-name-mem-driver-cc.csv").read_text().strip().splitlines()[1:]
    lines = []
    for i, row in enumerate(rows):
        name, mem, driver, cc = [c.strip() for c in row.split(",")]
        mem = mem.split()[0]
        lines.append(f"{i}, {name}, GPU-{i}, 0000000{i}:01:00.0, 0x2BB510DE, {driver}, {cc}, {mem}, Enabled")
    proc = "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  580.95.05  Release Build  (dvs-builder@U16-I3-B07-4-1)\n"
    return gpu_facts("\n".join(lines) + "\n", proc)


def h200_host():
    return gpu_facts((GPU / "h200-device/query-gpu-facts-fields.csv").read_text(),
                     (GPU / "h200-real/proc-driver-nvidia-version.txt").read_text())


def healthy_found():
    return {
        "gpu": rtx_host(),
        "nvcc": {"release": "12.9", "version": "12.9.86"},
        "sm120": {"present": True, "fix_commit_ancestor": True, "head": EXPECTED["sglang_commit"], "file": "x.py",
                  "line": 3, "tiles": [{"head_size": 128, "BLOCK_M": 64, "BLOCK_N": 128, "smem_bytes": 81920}]},
        "packages": dict(EXPECTED["packages"], sglang="0.5.9"),
        "unit_state": "active", "current_release": "/opt/sglang/releases/a", "deployed_release": "/opt/sglang/releases/a",
        "endpoints": {"/health": 200, "/v1/models": 200},
        "chat": {"status": 200, "content": "The capital of France is Paris.", "finish_reason": "stop"},
    }


def by_name(checks):
    return {c["name"]: c for c in checks}


def test_a_host_on_the_pinned_stack_passes_every_check():
    checks = verify.judge(EXPECTED, healthy_found())
    failed = [c for c in checks if not c["ok"]]
    assert not failed, failed
    assert {"gpu_count", "compute_capability", "sm120_fix", "sglang_commit", "package flashinfer-cubin",
            "chat_completion", "endpoint /health", "cuda_toolkit", "driver_version"} <= set(by_name(checks))


def test_numbers_rendered_as_text_by_older_ansible_cores_judge_the_same():
    """ansible-core before 2.19 renders "{{ verify_gpu_count | int }}" and "{{ probe.status }}" inside a dictionary
    variable as text: a healthy host still passes, and a wrong count still fails."""
    expected = dict(EXPECTED, gpu_count=str(EXPECTED["gpu_count"]))
    found = healthy_found()
    found["endpoints"] = {p: str(s) for p, s in found["endpoints"].items()}
    found["chat"] = dict(found["chat"], status="200")
    assert not [c for c in verify.judge(expected, found) if not c["ok"]]
    wrong = dict(EXPECTED, gpu_count=str(EXPECTED["gpu_count"] + 1))
    assert not by_name(verify.judge(wrong, found))["gpu_count"]["ok"]
    found["chat"]["status"] = "500"
    assert not by_name(verify.judge(expected, found))["chat_completion"]["ok"]


def test_the_real_h200_fails_the_sm120_expectation_and_says_why():
    found = dict(healthy_found(), gpu=h200_host())
    checks = by_name(verify.judge(EXPECTED, found, ("gpu",)))
    cc = checks["compute_capability"]
    assert not cc["ok"] and cc["found"] == ["9.0"]
    assert "12.0 (SM120)" in cc["hint"] and "this host has 9.0" in cc["hint"]
    assert not checks["gpu_count"]["ok"] and not checks["gpu_name"]["ok"] and not checks["driver_version"]["ok"]
    assert checks["kernel_module"]["ok"]  # the H200 runs the open module too


def test_the_real_h200_passes_when_that_is_what_is_expected():
    expected = dict(EXPECTED, gpu_count=1, gpu_name="H200", compute_capability="9.0", driver_version="580.159.04")
    checks = verify.judge(expected, {"gpu": h200_host()}, ("gpu",))
    assert all(c["ok"] for c in checks), [c for c in checks if not c["ok"]]


def test_a_release_without_the_fix_fails_sm120_fix():
    found = healthy_found()
    found["sm120"] = dict(found["sm120"], present=False, fix_commit_ancestor=False,
                          reason="head size 256: (BLOCK_M, BLOCK_N) = (128, 64) needs 131072 bytes")
    c = by_name(verify.judge(EXPECTED, found, ("sglang",)))["sm120_fix"]
    assert not c["ok"] and "131072" in c["hint"] and "pin an sglang_commit that contains it" in c["hint"]


def test_the_sm120_check_says_which_judge_answered_and_names_each_head_dim():
    found = healthy_found()
    found["sm120"] = dict(found["sm120"], judge="compiler", tiles=[
        {"head_size": 576, "head_dim": "576/512", "BLOCK_M": 32, "BLOCK_N": 32, "smem_bytes": 71680}])
    c = by_name(verify.judge(EXPECTED, found, ("sglang",)))["sm120_fix"]
    assert c["ok"] and "judged by the compiler" in c["found"] and "head 576/512: 32x32 = 71680 B" in c["found"]


def test_a_reverted_fix_fails_even_with_the_fix_commit_in_history():
    found = healthy_found()
    found["sm120"] = dict(found["sm120"], present=False, fix_commit_ancestor=True)
    assert not by_name(verify.judge(EXPECTED, found, ("sglang",)))["sm120_fix"]["ok"]


@pytest.mark.parametrize("change, failing", [
    ({"packages": {"flashinfer-python": "0.6.4", "flashinfer-cubin": "0.6.3", "transformers": "5.2.0",
                   "nvidia-cudnn-cu12": "9.19.0.56"}},
     "package flashinfer-python"),
    ({"packages": {"flashinfer-python": "0.6.3", "transformers": "5.2.0", "nvidia-cudnn-cu12": "9.19.0.56"}},
     "package flashinfer-cubin"),
    ({"nvcc": {"release": "12.8", "version": "12.8.93"}}, "cuda_toolkit"),
    ({"nvcc": None}, "cuda_toolkit"),
    ({"unit_state": "failed"}, "unit_active"),
    ({"deployed_release": "/opt/sglang/releases/b"}, "release_in_service"),
    ({"endpoints": {"/health": 503, "/v1/models": 200}}, "endpoint /health"),
    ({"chat": {"status": 200, "content": "!!!!!!!!!!!!!!!!", "finish_reason": "length"}}, "chat_completion"),
    ({"chat": {"status": 200, "content": "", "finish_reason": "stop"}}, "chat_completion"),
    ({"chat": {"status": 401, "content": None, "finish_reason": None}}, "chat_completion"),
])
def test_each_difference_fails_its_own_check_only(change, failing):
    found = healthy_found()
    found.update(copy.deepcopy(change))
    failed = [c["name"] for c in verify.judge(EXPECTED, found) if not c["ok"]]
    assert failed == [failing]


def test_driver_not_answering_fails_every_gpu_check_with_the_reason():
    found = dict(healthy_found(), gpu={"state": "version_mismatch", "message": "Driver/library version mismatch"})
    checks = verify.judge(EXPECTED, found, ("gpu",))
    assert len(checks) == 5 and not any(c["ok"] for c in checks)
    assert all("reboot" in c["hint"] for c in checks)


def test_unknown_group_is_refused():
    with pytest.raises(ValueError):
        verify.judge(EXPECTED, {}, ("gpu", "disks"))


def test_text_judgement():
    assert verify.judge_text("Paris.", "stop") == (True, "")
    assert not verify.judge_text("Paris", None)[0]
    assert not verify.judge_text("\x00\x01\x02\x03", "stop")[0]
    assert not verify.judge_text("nan", "stop")[0]


def test_table_has_a_row_per_check_and_says_when_a_host_has_no_report():
    lines = verify.table({"a": verify.judge(EXPECTED, healthy_found(), ("cuda",)), "b": []})
    assert lines[0].split()[:3] == ["host", "check", "result"]
    assert any(ln.startswith("a") and "cuda_toolkit" in ln and "pass" in ln for ln in lines)
    assert any(ln.startswith("b") and "NO REPORT" in ln for ln in lines)


def test_the_report_made_on_the_real_h200_says_it_is_not_sm120():
    """verify.yml ran on the device's H200 (tests/fixtures/gpu/h200-device/README-verify.txt)."""
    import json
    dev = GPU / "h200-device"
    report = json.loads((dev / "verify-report-expect-sm120.json").read_text())
    checks = by_name(report["checks"])
    assert report["passed"] is False
    assert checks["compute_capability"]["found"] == ["9.0"] and not checks["compute_capability"]["ok"]
    assert checks["kernel_module"]["ok"] and checks["kernel_module"]["found"] == "open"
    assert "check compute_capability failed: expected 12.0, found ['9.0']. The stack is pinned and tuned for " \
           "compute capability 12.0 (SM120); this host has 9.0." in (dev / "verify-playbook-expect-sm120.txt").read_text()
    passing = json.loads((dev / "verify-report-expect-h200.json").read_text())
    assert passing["passed"] is True and by_name(passing["checks"])["compute_capability"]["found"] == ["9.0"]
    # the judge, given the same expectations, agrees with what ran there
    again = verify.judge(dict(EXPECTED), {"gpu": h200_host()}, ("gpu",))
    ran = {c["name"] for c in report["checks"]}  # the checks of the collection of that day
    assert [c["ok"] for c in again if c["name"] in ran] == [c["ok"] for c in report["checks"] if c["group"] == "gpu"]
    # persistence, checked since: the H200's capture says Enabled
    assert by_name(again)["persistence_mode"]["ok"]



def test_the_reports_made_on_the_real_h100_agree_with_the_playbooks_verdict():
    """verify.yml ran on the device's H100 (tests/fixtures/gpu/h100-device/README-verify.txt), its report file built
    from the one judgement of its checks: the file, the table the run printed and the run's result say the same."""
    import json
    dev = GPU / "h100-device"
    for expect, passed in (("sm120", False), ("h100", True)):
        report = json.loads((dev / f"verify-report-expect-{expect}.json").read_text())
        said = (dev / f"verify-playbook-expect-{expect}.txt").read_text()
        assert report["host"] == "localhost" and report["passed"] is passed
        assert report["passed"] == all(c["ok"] for c in report["checks"])
        assert said.rstrip().endswith("rc=0" if passed else "rc=2")
        for check in report["checks"]:
            row = f"localhost  {check['name']}"
            assert any(line.strip().strip('",').startswith(row) and ("pass" if check["ok"] else "FAIL") in line
                       for line in said.splitlines()), check["name"]
    failed = [c["name"] for c in json.loads((dev / "verify-report-expect-sm120.json").read_text())["checks"]
              if not c["ok"]]
    assert failed == ["gpu_count", "gpu_name", "compute_capability", "driver_version", "cuda_toolkit"]

def test_the_drift_report_made_on_the_real_h200_names_what_differs_from_the_stack():
    """drift.yml ran on the device's H200 (tests/fixtures/gpu/h200-device/README-verify.txt): every GPU and CUDA
    difference from the SM120 stack, the missing unit, and nothing the host has right (the open kernel module)."""
    import json
    dev = GPU / "h200-device"
    report = json.loads((dev / "drift-h200.json").read_text())
    assert report["drifted"] == ["localhost"]
    items = [d["item"] for d in report["hosts"]["localhost"]]
    assert items == ["gpu_count", "gpu_name", "compute_capability", "driver_version", "cuda_toolkit", "unit"]
    assert "kernel_module" not in items
    # the same judgement from the captures of that GPU, through the same functions
    checks = verify.judge(dict(EXPECTED, driver_version="580.95.05", gpu_count=8),
                          {"gpu": h200_host(), "nvcc": {"release": "13.0", "version": "13.0.88"}}, ("gpu", "cuda"))
    again = verify.drift(checks, verify.unit_drift("ExecStart=/x -m sglang.launch_server\n", ""), None)
    assert [d["item"] for d in again] == items
    assert "1 of 1 host(s) differ from the stack file: localhost" in (dev / "drift-h200.txt").read_text()


MODEL_EXPECTED = dict(EXPECTED, model_repo_id="lukealonso/GLM-5-NVFP4", model_revision="a" * 40)
MODEL_OK = {"complete": True, "files": 9, "missing": [], "wrong_size": [], "wrong_hash": [], "hashed": [],
            "marker_matches_manifest": True}


def test_the_model_check_passes_on_recorded_weights():
    (check,) = verify.judge(MODEL_EXPECTED, {"model": MODEL_OK}, groups=["model"])
    assert check["name"] == "model_weights" and check["ok"], check


@pytest.mark.parametrize("found,says", [
    (dict(MODEL_OK, complete=False, wrong_hash=["model-00002-of-00003.safetensors"]),
     "wrong content: model-00002-of-00003.safetensors"),
    (dict(MODEL_OK, complete=False, missing=["config.json"]), "missing: config.json"),
    (dict(MODEL_OK, complete=False, marker_matches_manifest=False), "no snapshot marker of this revision"),
    ({"failed": True, "msg": "could not list lukealonso/GLM-5-NVFP4"}, "could not list"),
    (None, "not checked"),
])
def test_corrupt_or_unrecorded_weights_fail_the_model_check_naming_the_file(found, says):
    (check,) = verify.judge(MODEL_EXPECTED, {"model": found}, groups=["model"])
    assert not check["ok"] and says in str(check["found"]), check
    assert "model_weights" in check["hint"]


def test_the_failures_are_the_lines_the_real_h200_run_printed_one_per_failed_check():
    """verify's report task asserts once for all checks (a loop did once per check): each failed check is the line
    that the looped task printed on the device's H200, and a host whose checks all passed has none."""
    import json
    dev = GPU / "h200-device"
    report = json.loads((dev / "verify-report-expect-sm120.json").read_text())
    lines = verify.failures("localhost", report["checks"])
    assert len(lines) == len([c for c in report["checks"] if not c["ok"]]) > 0
    printed = (dev / "verify-playbook-expect-sm120.txt").read_text()
    for line in lines:
        assert f'"msg": "{line}"' in printed, line
    assert any(ln.startswith("localhost: check compute_capability failed: expected 12.0, found ['9.0'].") for ln in lines)
    assert verify.failures("localhost", json.loads((dev / "verify-report-expect-h200.json").read_text())["checks"]) == []
    missing = {"name": "unit", "ok": False, "expected": "active", "found": None, "hint": ""}
    assert verify.failures("h", [missing]) == ["h: check unit failed: expected active, found nothing."]


def test_a_gpu_without_persistence_fails_naming_it():
    facts = rtx_host()
    facts["gpus"][3]["persistence_mode"] = "Disabled"
    check = by_name(verify.judge(EXPECTED, {"gpu": facts}, ("gpu",)))["persistence_mode"]
    assert not check["ok"] and check["found"] == "GPU 3 (00000003:01:00.0): Disabled"
    assert by_name(verify.judge(EXPECTED, {"gpu": rtx_host()}, ("gpu",)))["persistence_mode"]["ok"]
    # what nvidia-smi -q says of GPU 0 of the real 8x RTX PRO 6000 host: Enabled
    text = (GPU / "rtx-pro-6000-x8-real" / "nvidia-smi-q.txt").read_text()
    assert nvidia.parse_smi_q(text)["gpus"][0]["persistence_mode"] == "Enabled"


def test_persistence_is_not_required_where_the_stack_turns_it_off():
    facts = rtx_host()
    facts["gpus"][0]["persistence_mode"] = "Disabled"
    assert "persistence_mode" not in by_name(verify.judge(dict(EXPECTED, persistence_mode=False), {"gpu": facts},
                                                          ("gpu",)))
