"""sglang's server options, as this (stand-in) tree defines them.

The names are sglang's own (``--tp-size`` with its alias
``--tensor-parallel-size``); argparse's prefix matching is turned off so that
only exact names are accepted, and an unknown option is an error.
"""
import argparse

# (flag, aliases, kwargs)
OPTIONS = [
    ("--model-path", ["--model"], dict(required=True)),
    ("--host", [], dict(default="127.0.0.1")),
    ("--port", [], dict(type=int, default=30000)),
    ("--tp-size", ["--tensor-parallel-size"], dict(type=int, default=1)),
    ("--nnodes", [], dict(type=int, default=1)),
    ("--node-rank", [], dict(type=int, default=0)),
    ("--dist-init-addr", [], dict(default=None)),
    ("--trust-remote-code", [], dict(action="store_true")),
    ("--attention-backend", [], dict(choices=["flashinfer", "triton", "torch_native", "fa3", "flashmla", "trtllm_mla"])),
    ("--moe-runner-backend", [], dict(default="auto")),
    ("--quantization", [], dict(default=None)),
    ("--kv-cache-dtype", [], dict(default="auto", choices=["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"])),
    ("--fp4-gemm-backend", [], dict(default="flashinfer_cutlass")),
    ("--disable-custom-all-reduce", [], dict(action="store_true")),
    ("--enable-flashinfer-allreduce-fusion", [], dict(action="store_true")),
    ("--mem-fraction-static", [], dict(type=float, default=None)),
    ("--cuda-graph-max-bs", [], dict(type=int, default=None)),
    ("--max-running-requests", [], dict(type=int, default=None)),
    ("--tool-call-parser", [], dict(default=None)),
    ("--reasoning-parser", [], dict(default=None)),
    ("--served-model-name", [], dict(default=None)),
    ("--api-key", [], dict(default=None)),
    ("--enable-metrics", [], dict(action="store_true")),
    ("--context-length", [], dict(type=int, default=None)),
    ("--chunked-prefill-size", [], dict(type=int, default=None)),
    ("--log-level", [], dict(default="info")),
    ("--speculative-algorithm", [], dict(default=None)),
]


def make_parser():
    parser = argparse.ArgumentParser(prog="sglang.launch_server", allow_abbrev=False)
    for flag, aliases, kwargs in OPTIONS:
        parser.add_argument(flag, *aliases, **kwargs)
    return parser


def prepare_server_args(argv):
    return make_parser().parse_args(argv)
