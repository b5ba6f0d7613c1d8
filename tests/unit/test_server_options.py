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
