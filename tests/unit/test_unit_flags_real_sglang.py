"""The production unit against the real sglang tree the lab pins (sglang 0.5.9's sdist, the lab's stand-in of
the production pin): sglang's own argument parser takes its command line, and every SGLANG_* variable it sets
is one that sglang reads. The lab's stand-in parser (lab/standins/sglang) stays for the stand-in server."""
import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import PLAYBOOK_HANG_BOUND, REPO
from lab import upstream
from test_service_unit import exec_start

PARSER = Path(__file__).with_name("real_sglang_parser.py")
# the release the lab pins in place of the production commit (both pin flashinfer 0.6.3, torch 2.9.1)
VERSION = "0.5.9"


@pytest.fixture(scope="module")
def tree():
    return upstream.sglang_tree(VERSION)


def render(out, extra=None):
    """The production unit and sglang options file, as the role's render entry point writes them."""
    import os  # noqa: PLC0415
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i",
                           str(REPO / "inventories" / "production"), str(REPO / "tests" / "render" / "render_unit.yml"),
                           "-e", f"render_dir={out}", "-e", json.dumps(extra or {})],
                          cwd=str(REPO), capture_output=True, text=True, timeout=PLAYBOOK_HANG_BOUND, env={**os.environ})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc, (out / "gpu-node-01.service").read_text(), out / "gpu-node-01.yaml"


def server_argv(unit, options):
    """launch_server's arguments in the unit, its --config pointed at the rendered options file."""
    argv = exec_start(unit)[3:]
    argv[argv.index("--config") + 1] = str(options)
    return argv


@pytest.fixture(scope="module")
def production(tmp_path_factory):
    _, unit, options = render(tmp_path_factory.mktemp("render"))
    return unit, options


def real_parse(tree, argv):
    proc = subprocess.run([sys.executable, str(PARSER), str(tree), *argv], capture_output=True, text=True,
                          timeout=120)
    return proc.returncode, (json.loads(proc.stdout) if proc.returncode == 0 else proc.stderr)


def test_sglangs_own_parser_takes_the_production_command_line(tree, production):
    rc, out = real_parse(tree, server_argv(*production))
    assert rc == 0, out
    args = out["parsed"]
    assert args["model_path"] == "/srv/models/GLM-5-NVFP4" and args["served_model_name"] == "glm-5"
    assert (args["tensor_parallel_size"], args["kv_cache_dtype"], args["attention_backend"]) == (8, "bf16", "flashinfer")
    assert args["moe_runner_backend"] == "cutlass" and args["quantization"] == "modelopt_fp4"
    assert args["fp4_gemm_runner_backend"] == "flashinfer_cudnn"
    assert (args["tool_call_parser"], args["reasoning_parser"]) == ("glm47", "glm45")
    # sglang applies the flashinfer allreduce fusion only on SM90 and SM100 (layers/communicator.py): not set
    assert args["disable_custom_all_reduce"] and not args["enable_flashinfer_allreduce_fusion"]
    assert args["watchdog_timeout"] == 600
    assert json.loads(args["model_loader_extra_config"]) == {"enable_multithread_load": True, "num_threads": 8}
    assert args["trust_remote_code"] and args["mem_fraction_static"] == 0.9
    assert (args["cuda_graph_max_bs"], args["max_running_requests"]) == (8, 8)


def test_sglangs_own_parser_takes_the_multi_node_command_line(tree, tmp_path):
    _, unit, options = render(tmp_path, {"sglang_service_nnodes": 2, "sglang_service_node_rank": 1,
                                         "sglang_service_dist_init_addr": "10.0.0.11:5000",
                                         "sglang_service_tp_size": 16})
    rc, out = real_parse(tree, server_argv(unit, options))
    assert rc == 0, out
    args = out["parsed"]
    assert (args["nnodes"], args["node_rank"], args["dist_init_addr"]) == (2, 1, "10.0.0.11:5000")
    assert args["tensor_parallel_size"] == 16


def test_every_option_of_the_unit_is_spelled_as_sglang_defines_it(tree, production):
    # sglang's parser accepts unambiguous prefixes (--tp); the unit must use the exact names
    argv = exec_start(production[0])[3:]
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


def test_every_sglang_variable_the_unit_sets_is_read_by_sglang(tree, production):
    env = dict(line[len("Environment="):].split("=", 1) for line in production[0].splitlines()
               if line.startswith("Environment="))
    ours = {name for name in env if name.startswith(("SGLANG_", "SGL_"))}
    assert "SGLANG_ENABLE_JIT_DEEPGEMM" in ours
    read = sglang_reads(tree)
    assert {"SGLANG_ENABLE_JIT_DEEPGEMM", "SGLANG_USE_MODELSCOPE"} <= read
    assert not ours - read, f"the unit sets {sorted(ours - read)}, which sglang {VERSION} never reads"


KEY = "sk-test key with \"quotes\" and a $dollar"


@pytest.fixture(scope="module")
def rendered_with_key(tmp_path_factory):
    proc, unit, options = render(tmp_path_factory.mktemp("render-key"), {"sglang_service_api_key": KEY})
    assert KEY not in proc.stdout
    return unit, options


def test_the_api_key_is_in_no_command_line_of_the_unit(rendered_with_key):
    unit, _ = rendered_with_key
    assert KEY not in unit and "--api-key" not in unit and "API_KEY" not in unit
    argv = exec_start(unit)
    assert argv[argv.index("--config") + 1] == "/etc/sglang/sglang.yaml"


def test_sglangs_own_parser_reads_the_api_key_from_the_options_file(tree, rendered_with_key, tmp_path):
    # the unit names the file where the role puts it; here, the rendered copy
    argv = server_argv(*rendered_with_key)
    rc, out = real_parse(tree, argv)
    assert rc == 0, out
    assert out["parsed"]["api_key"] == KEY
    # the command line still wins over the file, as sglang documents
    rc, out = real_parse(tree, [*argv, "--tp-size", "4"])
    assert rc == 0 and out["parsed"]["tensor_parallel_size"] == 4 and out["parsed"]["api_key"] == KEY


def test_the_router_launcher_passes_the_key_from_the_environment_not_argv(tmp_path):
    """roles/sglang_router starts sglang-router 0.3.2's own main() with `python -c LAUNCH ARGS`: the key comes
    from the environment file into the argument list in memory, never into the process's command line."""
    import os  # noqa: PLC0415
    import yaml  # noqa: PLC0415
    launch = yaml.safe_load((REPO / "roles/sglang_router/vars/main.yml").read_text())["__sglang_router_launch"]
    pkg = tmp_path / "sglang_router"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    # a stand-in of sglang_router.launch_router.main: what it received, and what the kernel shows as argv
    (pkg / "launch_router.py").write_text(
        "import json, os, sys\n"
        "def main():\n"
        "    cmdline = open('/proc/self/cmdline', 'rb').read().decode().split('\\0')\n"
        "    print(json.dumps({'argv': sys.argv[1:], 'cmdline': cmdline, 'env': 'SGLANG_ROUTER_API_KEY' in os.environ}))\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "SGLANG_ROUTER_API_KEY": KEY}
    proc = subprocess.run([sys.executable, "-c", launch, "--port", "30000"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 0, proc.stderr
    seen = json.loads(proc.stdout)
    assert seen["argv"] == ["--api-key", KEY, "--port", "30000"]
    assert not any(KEY in word for word in seen["cmdline"]) and not seen["env"]
    env.pop("SGLANG_ROUTER_API_KEY")
    proc = subprocess.run([sys.executable, "-c", launch, "--port", "30000"], env=env, capture_output=True, text=True,
                          timeout=60)
    assert json.loads(proc.stdout)["argv"] == ["--port", "30000"]


def test_the_units_environment_resolves_flashinfers_jit_tools(tree, production):
    """flashinfer 0.6.3 compiles kernels at run time (flashinfer/jit/cpp_ext.py): `ninja` by bare name, nvcc as
    $CUDA_HOME/bin/nvcc, and nvcc's host compiler `c++`. systemd's default PATH lacks the venv's bin, where ninja
    (a dependency of sglang) is installed."""
    env = dict(line[len("Environment="):].split("=", 1) for line in production[0].splitlines()
               if line.startswith("Environment="))
    path = env.get("PATH", "").split(":")
    assert "ninja" in (tree / "pyproject.toml").read_text()  # sglang installs ninja into the release's venv
    assert path[0] == "/opt/sglang/current/venv/bin", path
    assert env.get("CUDA_HOME") == "/usr/local/cuda" and "/usr/local/cuda/bin" in path
    assert "/usr/bin" in path  # c++ (the sglang role installs the compiler)
