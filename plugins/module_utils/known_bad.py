# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Combinations of component versions, server options and compute capability that must not serve.

One table, read by the sglang_service role's preflight (a refusal before any change, naming the row) and by verify
(a failing check on a host that runs one), through the filter ``blackwell.serving.known_bad``; the role README's
table is generated from it (``python3 tools/role_docs.py``). Each row says what it matches, what goes wrong, and the
source that shows it. Pure functions, no Ansible imports.

A row matches when every condition it names holds:

- ``capability``: the GPUs' compute capability starts with this prefix (``"12."``: SM120 and SM121);
- ``options``: {option: [values]}: the server's option (the sglang_service variable without its prefix) is one of them;
- ``packages``: {distribution: "<version"}: the release's distribution is older than that version. A distribution
  whose version is not known (not installed, not pinned) does not match: other checks say it is missing.
"""
from __future__ import annotations

import re

ROWS = (
    {
        "id": "flashinfer-cutlass-moe-sm120-race",
        "what": "MoE runner flashinfer_cutlass with flashinfer-python older than 0.6.8 on compute capability 12.x",
        "when": {"capability": "12.", "options": {"moe_runner_backend": ["flashinfer_cutlass"]},
                 "packages": {"flashinfer-python": "<0.6.8"}},
        "why": "flashinfer builds its SM120 cutlass fused MoE without CUTLASS_ENABLE_GDC while PDL is on for major >= 9 "
               "(sglang passes no enable_pdl): random cudaErrorIllegalInstruction in NVFP4 MoE under load, then "
               "systemd's start limit",
        "source": "flashinfer PR #2913 (commit b12d344, merged 2026-04-01; first release after it 0.6.8, the 0.6.7 "
                  "post releases not checked); flashinfer 0.6.3 jit/fused_moe.py, utils.py device_support_pdl",
        "instead": "sglang_service_moe_runner_backend: cutlass (sgl-kernel's FP4 grouped GEMM, built for sm_120)",
    },
    {
        "id": "cudnn-fp4-gemm-below-9.15",
        "what": "FP4 GEMM backend flashinfer_cudnn with nvidia-cudnn-cu12 older than 9.15 on compute capability 12.x",
        "when": {"capability": "12.", "options": {"fp4_gemm_backend": ["flashinfer_cudnn"]},
                 "packages": {"nvidia-cudnn-cu12": "<9.15"}},
        "why": "cuDNN below 9.15 has no execution plans for NVFP4 GEMMs on the RTX PRO 6000 (flashinfer accepts 9.10.2 "
               "but the graph does not build); torch 2.9.1 pulls 9.10.2.21",
        "source": "sglang 0.5.9 server_args.py --fp4-gemm-backend help ('optimal on CUDA 13+ with cuDNN 9.15+'); "
                  "flashinfer issue #2577 ('No execution plans support the graph', 0.6.3, RTX PRO 6000)",
        "instead": "sglang_cudnn_version 9.15 or newer (the default pins 9.19.0.56 over torch's)",
    },
    {
        "id": "fp8-kv-cache-sm120",
        "what": "an fp8 KV cache (kv_cache_dtype fp8_e4m3, fp8_e5m2 or auto) on compute capability 12.x",
        "when": {"capability": "12.", "options": {"kv_cache_dtype": ["fp8_e4m3", "fp8_e5m2", "auto"]}},
        "why": "sglang defaults DSA models (GLM-5) to an fp8 KV cache on major >= 10 (auto), which gives garbled output "
               "on SM120",
        "source": "STACK.md, 'Launching GLM-5-NVFP4 on 8x RTX PRO 6000' (community deployment notes)",
        "instead": "sglang_service_kv_cache_dtype: bf16",
    },
)


def _version(text):
    """A version as a tuple of its leading numbers: '0.6.3' -> (0, 6, 3), '9.19.0.56' -> (9, 19, 0, 56),
    '2.9.1+cu129' -> (2, 9, 1); None when it has none."""
    if text is None:
        return None
    numbers = re.match(r"^\s*v?(\d+(?:\.\d+)*)", str(text))
    return tuple(int(n) for n in numbers.group(1).split(".")) if numbers else None


def older(found, bound):
    """Whether version `found` is older than `bound` (numbers compared as numbers; missing parts count as 0)."""
    a, b = _version(found), _version(bound)
    if a is None or b is None:
        return False
    width = max(len(a), len(b))
    return a + (0,) * (width - len(a)) < b + (0,) * (width - len(b))


def _holds(row, capability, options, packages):
    when = row["when"]
    if "capability" in when and not str(capability or "").startswith(when["capability"]):
        return False
    for name, values in when.get("options", {}).items():
        if str(options.get(name, "")) not in values:
            return False
    for dist, bound in when.get("packages", {}).items():
        if not bound.startswith("<") or not older(packages.get(dist), bound[1:]):
            return False
    return True


def matches(capability, options, packages, rows=ROWS):
    """The rows that hold for a host: its GPUs' compute capability ("12.0"), the server's options ({name: value},
    names as the sglang_service variables without their prefix) and the release's packages ({distribution: version})."""
    return [dict(row) for row in rows if _holds(row, capability, options or {}, packages or {})]


def describe(row):
    """One line that names the row, what it matches, why and where from."""
    return f"{row['id']}: {row['what']}: {row['why']} ({row['source']}); instead: {row['instead']}"


def markdown_table(rows=ROWS):
    """The table as the role README shows it."""
    lines = ["| row | what must not serve | why | source | instead |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        lines.append(f"| `{r['id']}` | {r['what']} | {r['why']} | {r['source']} | {r['instead']} |")
    return "\n".join(lines) + "\n"
