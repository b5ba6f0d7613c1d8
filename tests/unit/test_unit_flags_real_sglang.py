"""The production unit against the real sglang tree the lab pins (sglang 0.5.9's sdist, the lab's stand-in of
the production pin): sglang's own argument parser takes its command line, and every SGLANG_* variable it sets
is one that sglang reads. The lab's stand-in parser (lab/standins/sglang) stays for the stand-in server."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from lab import upstream
from test_service_unit import exec_start, rendered  # noqa: F401 - the rendered production unit (a fixture)

PARSER = Path(__file__).with_name("real_sglang_parser.py")
# the release the lab pins in place of the production commit (both pin flashinfer 0.6.3, torch 2.9.1)
VERSION = "0.5.9"


@pytest.fixture(scope="module")
def tree():
    return upstream.sglang_tree(VERSION)


def real_parse(tree, argv):
    proc = subprocess.run([sys.executable, str(PARSER), str(tree), *argv], capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, (json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr)


def test_sglangs_own_parser_takes_the_production_command_line(tree, rendered):  # noqa: F811
    rc, out = real_parse(tree, exec_start(rendered)[3:])
    assert rc == 0, out
    args = out["parsed"]
    assert args["model_path"] == "/srv/models/GLM-5-NVFP4" and args["served_model_name"] == "glm-5"
    assert (args["tensor_parallel_size"], args["kv_cache_dtype"], args["attention_backend"]) == (8, "bf16", "flashinfer")
    assert args["moe_runner_backend"] == "flashinfer_cutlass" and args["quantization"] == "modelopt_fp4"
    assert args["fp4_gemm_runner_backend"] == "flashinfer_cudnn"
    assert (args["tool_call_parser"], args["reasoning_parser"]) == ("glm47", "glm45")
    assert args["disable_custom_all_reduce"] and args["enable_flashinfer_allreduce_fusion"]
    assert args["trust_remote_code"] and args["mem_fraction_static"] == 0.9
    assert (args["cuda_graph_max_bs"], args["max_running_requests"]) == (8, 8)


def test_every_option_of_the_unit_is_spelled_as_sglang_defines_it(tree, rendered):  # noqa: F811
    # sglang's parser accepts unambiguous prefixes (--tp); the unit must use the exact names
    argv = exec_start(rendered)[3:]
    rc, out = real_parse(tree, argv[:2])
    assert rc == 0, out
    used = [a for a in argv if a.startswith("--")]
    assert used and not set(used) - set(out["options"]), set(used) - set(out["options"])


@pytest.mark.parametrize("argv, says", [
    (["--model-path", "/m", "--kv-cache-dtype", "fp9"], "invalid choice: 'fp9'"),
    (["--model-path", "/m", "--tool-call-parser", "glm99"], "invalid choice: 'glm99'"),
    (["--model-path", "/m", "--no-such-option"], "unrecognized arguments: --no-such-option"),
])
def test_sglangs_own_parser_refuses_what_sglang_refuses(tree, argv, says):
    rc, out = real_parse(tree, argv)
    assert rc == 2 and says in out, out


def sglang_reads(tree):
    """Every SGLANG_* name the tree reads: Envs descriptors (environ.py) and string literals (os.environ[...],
    get_bool_env_var("...")), from the source's syntax tree, so comments and docs do not count."""
    names = set()
    for path in (tree / "sglang").rglob("*.py"):
        try:
            module = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        except SyntaxError:
            continue
        for node in ast.walk(module):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and node.value.startswith("SGLANG_"):
                names.add(node.value)
            elif isinstance(node, ast.ClassDef) and node.name == "Envs":
                names.update(t.id for item in node.body if isinstance(item, (ast.Assign, ast.AnnAssign))
                             for t in (item.targets if isinstance(item, ast.Assign) else [item.target])
                             if isinstance(t, ast.Name))
    return names


def test_every_sglang_variable_the_unit_sets_is_read_by_sglang(tree, rendered):  # noqa: F811
    env = dict(line[len("Environment="):].split("=", 1) for line in rendered.splitlines()
               if line.startswith("Environment="))
    ours = {name for name in env if name.startswith(("SGLANG_", "SGL_"))}
    assert "SGLANG_ENABLE_JIT_DEEPGEMM" in ours
    read = sglang_reads(tree)
    assert {"SGLANG_ENABLE_JIT_DEEPGEMM", "SGLANG_USE_MODELSCOPE"} <= read
    assert not ours - read, f"the unit sets {sorted(ours - read)}, which sglang {VERSION} never reads"
