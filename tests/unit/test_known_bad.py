"""The known-bad table (plugins/module_utils/known_bad.py): what it matches, the preflight that refuses a row before
anything changes, and verify's check on the unit as systemd runs it."""
import copy

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import known_bad, verify
from conftest import FIXTURES, REPO
from test_verify_judge import EXPECTED, by_name, healthy_found

GOLDEN = (FIXTURES / "golden" / "production-sglang.service").read_text()
PINNED = {"flashinfer-python": "0.6.3", "nvidia-cudnn-cu12": "9.19.0.56"}


@pytest.mark.parametrize("found, bound, older", [
    ("0.6.3", "0.6.8", True), ("0.6.7.post3", "0.6.8", True), ("0.6.8", "0.6.8", False), ("0.7.0", "0.6.8", False),
    ("9.10.2.21", "9.15", True), ("9.19.0.56", "9.15", False), ("2.9.1+cu129", "2.10", True), (None, "1.0", False),
    ("", "1.0", False), ("garbage", "1.0", False),
])
def test_versions_compare_as_numbers(found, bound, older):
    assert known_bad.older(found, bound) is older


def ids(rows):
    return [r["id"] for r in rows]


def test_the_defaults_match_no_row_on_sm120():
    settings = {"moe_runner_backend": "cutlass", "fp4_gemm_backend": "flashinfer_cudnn", "kv_cache_dtype": "bf16"}
    assert known_bad.matches("12.0", settings, PINNED) == []


@pytest.mark.parametrize("change, packages, row", [
    ({"moe_runner_backend": "flashinfer_cutlass"}, PINNED, "flashinfer-cutlass-moe-sm120-race"),
    ({}, dict(PINNED, **{"nvidia-cudnn-cu12": "9.10.2.21"}), "cudnn-fp4-gemm-below-9.15"),
    ({"kv_cache_dtype": "fp8_e4m3"}, PINNED, "fp8-kv-cache-sm120"),
    ({"kv_cache_dtype": "auto"}, PINNED, "fp8-kv-cache-sm120"),
])
def test_each_row_matches_what_it_says(change, packages, row):
    settings = dict({"moe_runner_backend": "cutlass", "fp4_gemm_backend": "flashinfer_cudnn", "kv_cache_dtype": "bf16"},
                    **change)
    assert ids(known_bad.matches("12.0", settings, packages)) == [row]
    # on Hopper or Blackwell data-centre GPUs the rows for SM120 hold no more
    assert known_bad.matches("9.0", settings, packages) == []
    assert known_bad.matches("10.0", settings, packages) == []


def test_a_fixed_flashinfer_or_an_unknown_version_does_not_match():
    settings = {"moe_runner_backend": "flashinfer_cutlass", "kv_cache_dtype": "bf16"}
    assert known_bad.matches("12.0", settings, {"flashinfer-python": "0.6.8"}) == []
    assert known_bad.matches("12.0", settings, {}) == []


def test_every_row_names_its_source_and_what_to_do_instead():
    for row in known_bad.ROWS:
        assert row["source"] and row["instead"] and row["why"] and row["what"]
        assert set(row["when"]) <= {"capability", "options", "packages"}
        for bound in row["when"].get("packages", {}).values():
            assert bound.startswith("<")


def test_the_role_readme_lists_the_table():
    text = (REPO / "roles/sglang_service/README.md").read_text()
    assert known_bad.markdown_table() in text


def unit(**flags):
    text = GOLDEN
    for flag, value in flags.items():
        old = next(line for line in text.splitlines() if line.strip().startswith(flag + " "))
        text = text.replace(old, old.split(flag)[0] + f"{flag} {value} \\", 1)
    return text


def test_verify_passes_the_production_unit_and_names_a_row_the_unit_runs():
    found = dict(healthy_found(), unit_text=GOLDEN)
    checks = by_name(verify.judge(EXPECTED, found, ["service"]))
    assert checks["known_bad"]["ok"], checks["known_bad"]
    found = dict(healthy_found(), unit_text=unit(**{"--moe-runner-backend": "flashinfer_cutlass"}))
    check = by_name(verify.judge(EXPECTED, found, ["service"]))["known_bad"]
    assert not check["ok"] and "flashinfer-cutlass-moe-sm120-race" in check["found"]
    assert "PR #2913" in check["found"]


def test_verify_reads_the_drop_in_that_overrides_the_command_line():
    """systemctl cat prints the unit and then its drop-ins: a drop-in's ExecStart= (after an empty one) wins."""
    exec_line = next(line for line in GOLDEN.splitlines() if line.startswith("ExecStart="))
    drop_in = ("\n# /etc/systemd/system/sglang.service.d/override.conf\n[Service]\nExecStart=\n"
               + GOLDEN[GOLDEN.index(exec_line):].split("\n\n")[0].replace("--kv-cache-dtype bf16", "--kv-cache-dtype auto")
               + "\n")
    found = dict(healthy_found(), unit_text=GOLDEN + drop_in)
    check = by_name(verify.judge(EXPECTED, found, ["service"]))["known_bad"]
    assert not check["ok"] and "fp8-kv-cache-sm120" in check["found"]


def test_without_the_units_text_there_is_no_known_bad_check():
    checks = by_name(verify.judge(EXPECTED, copy.deepcopy(healthy_found()), ["service"]))
    assert "known_bad" not in checks
