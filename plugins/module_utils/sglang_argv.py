# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""sglang's server command line, built in one place from the sglang_service role's variables.

The unit template joins what ``server_options`` returns (filter ``blackwell.serving.sglang_server_args``); drift
(``verify.unit_options``) and the tests read a command line back with ``parse_options``. sglang's option names are
exact (``--tp-size``, never the ``--tp`` prefix argparse would also take).
"""
from __future__ import annotations

import json

# (flag, settings key): options that take a value, in the unit's order; an empty value leaves the option out
VALUED = (
    ("--attention-backend", "attention_backend"),
    ("--moe-runner-backend", "moe_runner_backend"),
    ("--quantization", "quantization"),
    ("--kv-cache-dtype", "kv_cache_dtype"),
    ("--fp4-gemm-backend", "fp4_gemm_backend"),
    ("--mem-fraction-static", "mem_fraction_static"),
    ("--cuda-graph-max-bs", "cuda_graph_max_bs"),
    ("--max-running-requests", "max_running_requests"),
    ("--watchdog-timeout", "watchdog_timeout"),
    ("--model-loader-extra-config", "model_loader_extra_config"),
    ("--tool-call-parser", "tool_call_parser"),
    ("--reasoning-parser", "reasoning_parser"),
)
# (flag, settings key): switches, given when the setting is true
SWITCHES = (
    ("--disable-custom-all-reduce", "disable_custom_all_reduce"),
    ("--enable-metrics", "enable_metrics"),
)
# every settings key server_options reads (the role's variable names without sglang_service_), and config: the
# options file sglang reads with --config (it holds the API key, which no command line carries)
KEYS = ("model_path", "served_model_name", "host", "port", "tp_size", "nnodes", "node_rank", "dist_init_addr",
        "trust_remote_code", *(pair[1] for pair in VALUED), *(pair[1] for pair in SWITCHES), "config", "extra_args")

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

    ``settings`` maps each key of ``KEYS`` to the role variable's value. The multi-node options come only for
    ``nnodes`` above 1; the extra arguments come last, as one option of the words given.
    """
    missing = [k for k in KEYS if k not in settings]
    if missing:
        raise ArgvError(f"server_options needs the settings {', '.join(missing)}")
    s = settings
    out = [["--model-path", _word(s["model_path"])], ["--served-model-name", _word(s["served_model_name"])],
           ["--host", _word(s["host"])], ["--port", _word(s["port"])], ["--tp-size", _word(s["tp_size"])]]
    if int(s["nnodes"]) > 1:
        out += [["--nnodes", _word(s["nnodes"])], ["--node-rank", _word(s["node_rank"])],
                ["--dist-init-addr", _word(s["dist_init_addr"])]]
    if _bool("trust_remote_code", s["trust_remote_code"]):
        out.append(["--trust-remote-code"])
    for flag, key in VALUED:
        value = s[key]
        if value is not None and _word(value) != "":
            out.append([flag, _word(value)])
    for flag, key in SWITCHES:
        if _bool(key, s[key]):
            out.append([flag])
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
    keys = dict(VALUED + SWITCHES)
    keys.update({"--model-path": "model_path", "--served-model-name": "served_model_name", "--host": "host",
                 "--port": "port", "--tp-size": "tp_size", "--nnodes": "nnodes", "--node-rank": "node_rank",
                 "--dist-init-addr": "dist_init_addr", "--trust-remote-code": "trust_remote_code"})
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
