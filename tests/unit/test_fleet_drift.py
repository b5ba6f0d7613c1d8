"""Drift (module_utils/verify.py) and the router module's drain arithmetic, on the golden production unit."""
import pytest

from conftest import FIXTURES
from ansible_collections.blackwell.serving.plugins.module_utils import verify
from ansible_collections.blackwell.serving.plugins.modules import sglang_router_worker as rw

GOLDEN = (FIXTURES / "golden" / "production-sglang.service").read_text()


def test_unit_options_reads_the_golden_unit():
    opts = verify.unit_options(GOLDEN)
    assert opts["exec"][-2:] == ["-m", "sglang.launch_server"]
    assert opts["flags"]["--tp-size"] == "8" and opts["flags"]["--kv-cache-dtype"] == "bf16"
    assert opts["flags"]["--trust-remote-code"] is True
    assert opts["environment"]["NCCL_P2P_LEVEL"] == "SYS"


def test_the_same_unit_has_no_drift():
    assert verify.unit_drift(GOLDEN, GOLDEN) == []


@pytest.mark.parametrize("change, item, expected, found", [
    (("--mem-fraction-static 0.9", "--mem-fraction-static 0.85"), "unit flag --mem-fraction-static", "0.9", "0.85"),
    (("--kv-cache-dtype bf16", "--kv-cache-dtype fp8_e4m3"), "unit flag --kv-cache-dtype", "bf16", "fp8_e4m3"),
    (("    --disable-custom-all-reduce \\\n", ""), "unit flag --disable-custom-all-reduce", True, None),
    (("NCCL_P2P_LEVEL=SYS", "NCCL_P2P_LEVEL=NVL"), "unit environment NCCL_P2P_LEVEL", "SYS", "NVL"),
])
def test_one_hand_change_is_one_difference(change, item, expected, found):
    assert change[0] in GOLDEN
    changed = GOLDEN.replace(change[0], change[1], 1)
    assert verify.unit_drift(GOLDEN, changed) == [{"item": item, "expected": expected, "found": found}]


def test_a_missing_unit_is_one_difference():
    assert verify.unit_drift(GOLDEN, "") == [{"item": "unit", "expected": "installed", "found": None}]


def test_drift_keeps_failed_checks_unit_and_model_only():
    checks = [{"name": "sglang_commit", "ok": False, "expected": "a" * 40, "found": "b" * 40},
              {"name": "driver_version", "ok": True, "expected": "580.95.05", "found": "580.95.05"}]
    unit = [{"item": "unit flag --tp-size", "expected": "8", "found": "4"}]
    out = verify.drift(checks, unit, {"expected": "r1", "found": "r0"})
    assert [d["item"] for d in out] == ["sglang_commit", "unit flag --tp-size", "model revision"]
    assert verify.drift([checks[1]], [], {"expected": "r1", "found": "r1"}) == []


def test_drift_table_names_the_hosts_that_differ():
    lines = verify.drift_table({"a": [], "b": [{"item": "unit flag --x", "expected": "1", "found": "2"}], "c": None})
    assert lines[-1] == "1 of 3 host(s) differ from the stack file: b"
    assert any("NO REPORT" in ln and ln.startswith("c") for ln in lines)
    assert any(ln.startswith("a") and "in sync" in ln for ln in lines)


def test_running_requests_from_sglang_metrics():
    text = ('# HELP sglang:num_running_reqs running\nsglang:num_running_reqs{model_name="glm-5"} 3.0\n'
            'sglang:num_queue_reqs{model_name="glm-5"} 2.0\nsglang:gen_throughput 10\n')
    assert rw.running_requests(text) == 5.0
    assert rw.running_requests("sglang:num_running_reqs 0\nsglang:num_queue_reqs 0\n") == 0
    assert rw.running_requests("other_metric 1\n") is None


def test_worker_urls_match_whatever_the_trailing_slash():
    workers = [{"url": "http://10.0.0.1:30000/", "id": "x", "is_healthy": True}]
    assert rw.find(workers, "http://10.0.0.1:30000") == workers
    assert rw.find(workers, "http://10.0.0.2:30000") == []


def test_a_drop_in_that_changes_the_environment_is_named():
    """systemctl cat: the unit, then each drop-in after its path; systemctl edit writes override.conf."""
    cat = ("# /etc/systemd/system/sglang.service\n" + GOLDEN +
           "\n# /etc/systemd/system/sglang.service.d/override.conf\n[Service]\nEnvironment=NCCL_P2P_LEVEL=NVL\n"
           "\n# /etc/systemd/system/sglang.service.d/limits.conf\n[Service]\nLimitNOFILE=65536\n")
    drift = verify.unit_drift(GOLDEN, cat)
    assert {"item": "unit environment NCCL_P2P_LEVEL", "expected": "SYS", "found": "NVL"} in drift
    assert {"item": "unit drop-ins", "expected": "none that change what the stack file decides",
            "found": ["/etc/systemd/system/sglang.service.d/override.conf"]} in drift
    # a drop-in that changes nothing the stack decides is no drift
    quiet = "# /etc/systemd/system/sglang.service\n" + GOLDEN + \
        "\n# /etc/systemd/system/sglang.service.d/limits.conf\n[Service]\nLimitNOFILE=65536\n"
    assert verify.unit_drift(GOLDEN, quiet) == []
