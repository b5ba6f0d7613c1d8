"""sglang's server options, as this (stand-in) tree defines them.

The names are sglang's own (``--tp-size`` with its alias
``--tensor-parallel-size``); argparse's prefix matching is turned off so that
only exact names are accepted, and an unknown option is an error. ``--config FILE.yaml`` is merged as
sglang 0.5.9 merges it (server_args_config_parser.py): each key ``name: value`` becomes ``--name value`` (a
true boolean the bare flag), placed before the command line's own options, which win.
"""
import argparse
import os

import yaml

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
    ("--moe-runner-backend", [], dict(default="auto", choices=[
        "auto", "deep_gemm", "triton", "triton_kernel", "flashinfer_trtllm", "flashinfer_cutlass", "flashinfer_mxfp4",
        "flashinfer_cutedsl", "cutlass"])),
    ("--quantization", [], dict(default=None)),
    ("--kv-cache-dtype", [], dict(default="auto", choices=["auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2"])),
    ("--fp4-gemm-backend", [], dict(default="flashinfer_cutlass", choices=[
        "auto", "flashinfer_cudnn", "flashinfer_cutlass", "flashinfer_trtllm"])),
    ("--disable-custom-all-reduce", [], dict(action="store_true")),
    ("--enable-flashinfer-allreduce-fusion", [], dict(action="store_true")),
    ("--mem-fraction-static", [], dict(type=float, default=None)),
    ("--cuda-graph-max-bs", [], dict(type=int, default=None)),
    ("--max-running-requests", [], dict(type=int, default=None)),
    ("--watchdog-timeout", [], dict(type=float, default=300)),
    ("--model-loader-extra-config", [], dict(default="{}")),
    ("--tool-call-parser", [], dict(default=None)),
    ("--reasoning-parser", [], dict(default=None)),
    ("--served-model-name", [], dict(default=None)),
    ("--api-key", [], dict(default=None)),
    ("--enable-metrics", [], dict(action="store_true")),
    ("--context-length", [], dict(type=int, default=None)),
    ("--chunked-prefill-size", [], dict(type=int, default=None)),
    ("--log-level", [], dict(default="info")),
    ("--speculative-algorithm", [], dict(default=None)),
    ("--config", [], dict(default=None)),
]


def make_parser():
    parser = argparse.ArgumentParser(prog="sglang.launch_server", allow_abbrev=False)
    for flag, aliases, kwargs in OPTIONS:
        parser.add_argument(flag, *aliases, **kwargs)
    return parser


def merge_config(parser, argv):
    if argv.count("--config") > 1:
        raise ValueError("Multiple config files specified! Only one allowed.")
    i = argv.index("--config")
    if i == len(argv) - 1:
        raise ValueError("No config file specified after --config flag!")
    path = argv[i + 1]
    if os.path.splitext(path)[1].lower() not in (".yaml", ".yml"):
        raise ValueError(f"Config file must be YAML format, got: {os.path.splitext(path)[1]}")
    if not os.path.exists(path):
        raise ValueError(f"Config file not found: {path}")
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh) or {}
    if not isinstance(data, dict):
        raise ValueError("Config file must contain a dictionary at root level")
    flags = {a.dest: a for a in parser._actions}  # noqa: SLF001 - as sglang's merger reads them
    merged = []
    for key, value in data.items():
        action = flags.get(key.replace("-", "_"))
        if isinstance(value, bool) and isinstance(action, argparse._StoreTrueAction):  # noqa: SLF001
            merged += [f"--{key}"] if value else []
        elif isinstance(value, list):
            merged += [f"--{key}", *map(str, value)] if value else []
        else:
            merged += [f"--{key}", str(value)]
    return merged + argv[:i] + argv[i + 2:]


def prepare_server_args(argv):
    parser = make_parser()
    if "--config" in argv:
        argv = merge_config(parser, list(argv))
    return parser.parse_args(argv)
