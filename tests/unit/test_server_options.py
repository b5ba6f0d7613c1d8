"""The options of sglang's server read from its source (plugins/module_utils/server_args.py), on the real
server_args.py of sglang 0.5.9's source distribution (fetched by the lab, pinned by sha256)."""
import tarfile

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import server_args
from lab import upstream
from modrun import run_module


@pytest.fixture(scope="module")
def real_source():
    try:
        sdist = upstream.sglang_sdist("0.5.9")
    except Exception as exc:  # no package index in reach
        pytest.skip(f"sglang 0.5.9's sdist is out of reach: {exc}")
    with tarfile.open(sdist) as tf:
        return tf.extractfile("sglang-0.5.9/sglang/srt/server_args.py").read().decode()


def test_the_real_parser_s_options_are_read_without_importing_it(real_source):
    options = server_args.option_strings(real_source)
    assert len(options) > 300
    # the unit's own flags (STACK.md) and the aliases
    for flag in ("--model-path", "--tp-size", "--tensor-parallel-size", "--mem-fraction-static", "--api-key",
                 "--kv-cache-dtype", "--fp4-gemm-backend", "--config", "--enable-metrics"):
        assert flag in options
    # --tp works only by argparse's prefix matching: not an option of its own
    assert "--tp" not in options


def test_unknown_flags_are_named(real_source):
    options = server_args.option_strings(real_source)
    args = ["--context-length", "65536", "--enable-torch-compiel", "--log-level=debug", "--tp", "8",
            "--chunked-prefill-size", "-1"]
    assert server_args.unknown_flags(args, options) == ["--enable-torch-compiel", "--tp"]


def test_the_module_reads_a_tree(real_source, tmp_path):
    target = tmp_path / server_args.SERVER_ARGS
    target.parent.mkdir(parents=True)
    target.write_text(real_source)
    r = run_module("sglang_server_options", {"path": str(tmp_path), "args": ["--max-total-tokens", "4", "--bogus"]})
    assert r["found"] is True and r["unknown"] == ["--bogus"], r
    missing = run_module("sglang_server_options", {"path": str(tmp_path / "nothing"), "args": ["--bogus"]})
    assert missing["found"] is False and missing["unknown"] == [] and not missing.get("failed")


def test_the_real_parsers_choices_and_types_are_read(real_source):
    specs = server_args.option_specs(real_source)
    assert "flashinfer" in specs["--attention-backend"]["choices"]
    assert "cutlass" in specs["--moe-runner-backend"]["choices"]
    assert specs["--kv-cache-dtype"]["choices"][:2] == ["auto", "fp8_e5m2"]
    assert specs["--watchdog-timeout"]["type"] == "float" and specs["--tp-size"]["type"] == "int"
    # computed at run time (a registry's keys): not checked here
    assert specs["--tool-call-parser"]["choices"] is None


def test_values_the_server_would_refuse_are_named_with_the_variable(real_source):
    from ansible_collections.blackwell.serving.plugins.filter.sglang_argv import sglang_option_refusals
    specs = server_args.option_specs(real_source)
    args = ["--attention-backend", "flashinfer2", "--moe-runner-backend", "cutlass", "--tp-size", "eight",
            "--mem-fraction-static=0.9", "--watchdog-timeout", "600", "--context-length", "x"]
    bad = server_args.bad_values(args, specs)
    assert [(b["flag"], b["value"]) for b in bad] == [("--attention-backend", "flashinfer2"), ("--tp-size", "eight"),
                                                       ("--context-length", "x")]
    said = sglang_option_refusals(bad)
    assert said[0].startswith("sglang_service_attention_backend=flashinfer2 (--attention-backend: not one of")
    assert said[1].startswith("sglang_service_tp_size=eight") and said[2].startswith("sglang_service_extra_args=x")
