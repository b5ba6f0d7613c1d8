# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""sglang's server command line, built in one place from the sglang_service role's variables.

The unit template joins what ``server_options`` returns (filter ``blackwell.serving.sglang_server_args``); drift
(``verify.unit_options``) and the tests read a command line back with ``parse_options``. sglang's option names are
exact (``--tp-size``, never the ``--tp`` prefix argparse would also take).
"""
from __future__ import annotations

import json
from typing import Any, NamedTuple


class Flag(NamedTuple):
    """One of sglang's options given by one role variable, ``sglang_service_<name>``.

    The flag is ``--<name>`` with ``-`` for ``_`` (``mem_fraction_static``: ``--mem-fraction-static``). A ``bool`` is
    a switch, given when the variable is true; any other type takes a value, left out when the value is empty (a
    ``dict`` is given as compact JSON). ``type``, ``default``, ``description`` and ``choices`` are the variable's
    argument spec: ``python3 tools/role_docs.py`` writes them into the role's meta/argument_specs.yml,
    defaults/main.yml and vars/main.yml (roles/sglang_service/README.md, "Adding a server flag").
    """
    name: str
    type: str
    default: Any
    description: str
    choices: tuple = ()

    @property
    def flag(self):
        return "--" + self.name.replace("_", "-")

    @property
    def variable(self):
        return "sglang_service_" + self.name


# The server flags of the role, in the unit's order (after --trust-remote-code, before --config and the extra
# arguments). A new flag is one entry here, then `python3 tools/role_docs.py`.
FLAGS = (
    Flag("attention_backend", "str", "flashinfer", "--attention-backend."),
    Flag("moe_runner_backend", "str", "cutlass",
         "--moe-runner-backend. C(cutlass) runs the NVFP4 experts on sgl-kernel's FP4 grouped GEMM, built for "
         "C(sm_120) (the role README says why, and which combinations are refused)."),
    Flag("quantization", "str", "modelopt_fp4", "--quantization (empty: leave it to the checkpoint)."),
    Flag("kv_cache_dtype", "str", "bf16",
         "--kv-cache-dtype: bf16 on SM120 (sglang's fp8 default for DSA models garbles output there).",
         ("auto", "bf16", "bfloat16", "fp8_e4m3", "fp8_e5m2")),
    Flag("fp4_gemm_backend", "str", "flashinfer_cudnn",
         "--fp4-gemm-backend: flashinfer_cudnn (the pinned commit predates sglang #20047, which made it the SM120 "
         "default)."),
    Flag("mem_fraction_static", "float", 0.9, "--mem-fraction-static."),
    Flag("cuda_graph_max_bs", "int", 8, "--cuda-graph-max-bs."),
    Flag("max_running_requests", "int", 8, "--max-running-requests."),
    Flag("watchdog_timeout", "int", 600,
         "--watchdog-timeout, in seconds: how long sglang lets one batch run before it kills the server as hung; "
         "sglang's own default is 300 (a first start compiles flashinfer's kernels and captures CUDA graphs). The "
         "health gate's timeout follows from it."),
    Flag("model_loader_extra_config", "dict", {"enable_multithread_load": True, "num_threads": 8},
         "--model-loader-extra-config, as JSON; sglang's default loader takes only C(enable_multithread_load) and "
         "C(num_threads) (8 unless given) and refuses any other key. C({}) leaves the option out."),
    Flag("tool_call_parser", "str", "glm47", "--tool-call-parser (empty: none)."),
    Flag("reasoning_parser", "str", "glm45", "--reasoning-parser (empty: none)."),
    Flag("disable_custom_all_reduce", "bool", True, "Pass --disable-custom-all-reduce."),
    Flag("enable_metrics", "bool", False, "Serve Prometheus metrics on /metrics (--enable-metrics)."),
)
# (flag, settings key) of FLAGS: those that take a value, and the switches
VALUED = tuple((f.flag, f.name) for f in FLAGS if f.type != "bool")
SWITCHES = tuple((f.flag, f.name) for f in FLAGS if f.type == "bool")
# the settings keys server_options reads before and after FLAGS' (they have rules of their own: the multi-node
# options come only with several nodes), and config: the options file sglang reads with --config (it holds the API
# key, which no command line carries)
_OWN = {"--model-path": "model_path", "--served-model-name": "served_model_name", "--host": "host", "--port": "port",
        "--tp-size": "tp_size", "--nnodes": "nnodes", "--node-rank": "node_rank", "--dist-init-addr": "dist_init_addr",
        "--trust-remote-code": "trust_remote_code"}
# every settings key server_options reads, and none other: the role's variable names without sglang_service_
KEYS = (*_OWN.values(), *(f.name for f in FLAGS), "config", "extra_args")

_TRUE = {"true", "yes", "on", "1", "y", "t"}
_FALSE = {"false", "no", "off", "0", "n", "f", ""}


class ArgvError(ValueError):
    pass


def _bool(name, value):
    """A setting as Ansible reads a boolean (a string from -e included): "false" is false."""
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower() if value is not None else ""
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    raise ArgvError(f"sglang_service_{name} must be true or false, found {value!r}")


def _word(value):
    """A value as one command-line word: 0.9 as 0.9, 8 as 8, a mapping as compact JSON (sglang parses it so)."""
    if isinstance(value, dict):
        return json.dumps(value, separators=(",", ":"), sort_keys=True) if value else ""
    return value if isinstance(value, str) else str(value)


def server_options(settings):
    """The server's options, in the unit's order, each a list of words: ``[["--model-path", "/srv/..."], ...]``.

    ``settings`` maps each key of ``KEYS``, and no other, to the role variable's value: a key the builder does not
    know is an error, never dropped. The multi-node options come only for ``nnodes`` above 1; the extra arguments
    come last, as one option of the words given.
    """
    missing = [k for k in KEYS if k not in settings]
    if missing:
        raise ArgvError(f"server_options needs the settings {', '.join(missing)}")
    unknown = sorted(str(k) for k in settings if k not in KEYS)
    if unknown:
        raise ArgvError(f"server_options does not know the settings {', '.join(unknown)}: a server flag is an entry "
                        "of FLAGS in plugins/module_utils/sglang_argv.py (roles/sglang_service/README.md, "
                        "\"Adding a server flag\")")
    s = settings
    out = [["--model-path", _word(s["model_path"])], ["--served-model-name", _word(s["served_model_name"])],
           ["--host", _word(s["host"])], ["--port", _word(s["port"])], ["--tp-size", _word(s["tp_size"])]]
    if int(s["nnodes"]) > 1:
        out += [["--nnodes", _word(s["nnodes"])], ["--node-rank", _word(s["node_rank"])],
                ["--dist-init-addr", _word(s["dist_init_addr"])]]
    if _bool("trust_remote_code", s["trust_remote_code"]):
        out.append(["--trust-remote-code"])
    for f in FLAGS:
        value = s[f.name]
        if f.type == "bool":
            if _bool(f.name, value):
                out.append([f.flag])
        elif value is not None and _word(value) != "":
            out.append([f.flag, _word(value)])
    out.append(["--config", _word(s["config"])])
    extra = s["extra_args"] or []
    if isinstance(extra, str) or not all(isinstance(w, str) for w in extra):
        raise ArgvError(f"sglang_service_extra_args must be a list of strings, one word each; found {extra!r}")
    if extra:
        out.append(list(extra))
    return out


def variable_of(flag):
    """The sglang_service variable that gives a flag of the unit's command line (sglang_service_extra_args for any
    flag the builder does not make)."""
    keys = {**_OWN, **dict(VALUED + SWITCHES)}
    return f"sglang_service_{keys[flag]}" if flag in keys else "sglang_service_extra_args"


def flatten(options):
    """The argument list of ``server_options``' result."""
    return [word for option in options for word in option]


def parse_options(words):
    """``{"--flag": value}`` of a command line's words: a flag followed by another flag (or nothing) is a switch
    (True), a flag followed by several words (``--worker-urls A B``) keeps them space-joined. Words before the first
    flag are left out (the program)."""
    flags, current = {}, None
    for word in words:
        if word.startswith("--"):
            current = word
            flags[current] = True
        elif current is None:
            continue
        elif flags[current] is True:
            flags[current] = word
        else:
            flags[current] = f"{flags[current]} {word}"
    return flags
