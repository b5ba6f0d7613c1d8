"""The stand-in sglang server: sglang's command line (exact names only), and its endpoints."""
import json
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from lab import elfstub, sglang_repo, wheels


@pytest.fixture(scope="module")
def tree(tmp_path_factory):
    """The stand-in server where the lab's commit puts it in sglang's tree (python/sglang/...), without the rest
    of sglang (whose package needs its dependencies installed)."""
    root = tmp_path_factory.mktemp("sglang") / "python"
    pkg = root / "sglang"
    (pkg / "lab_standin").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "version.py").write_text('__version__ = "0.5.9"\n')
    (pkg / "launch_server.py").write_text((sglang_repo.STANDIN / "launch_server.py").read_text())
    (pkg / "lab_standin" / "__init__.py").write_text("")
    (pkg / "lab_standin" / "server_args.py").write_text((sglang_repo.STANDIN / "server_args.py").read_text())
    # the stand-ins of torch and sgl-kernel (and the CUDA libraries torch loads), as a release's environment has them
    www = tmp_path_factory.mktemp("www")
    wheels.build(www)
    names = ("torch-", "sgl_kernel-", "nvidia_cublas_cu12-", "nvidia_cuda_runtime_cu12-", "nvidia_cuda_nvrtc_cu12-")
    files = [str(p) for p in sorted((www / "packages").glob("*.whl")) if p.name.startswith(names)]
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(root),
                    *files], check=True, capture_output=True)
    return root


@pytest.fixture(scope="module")
def toolchain(tmp_path_factory):
    """What flashinfer's JIT looks up: ninja and c++ on PATH, CUDA_HOME/bin/nvcc (small scripts here)."""
    root = tmp_path_factory.mktemp("tools")
    (root / "bin").mkdir()
    (root / "cuda" / "bin").mkdir(parents=True)
    for tool in (root / "bin" / "ninja", root / "bin" / "c++", root / "cuda" / "bin" / "nvcc"):
        tool.write_text("#!/bin/sh\necho 'lab tool'\n")
        tool.chmod(0o755)
    (root / "driver").mkdir()
    (root / "driver" / "libcuda.so.1").write_bytes(elfstub.build(soname="libcuda.so.1"))
    return root


def tool_env(toolchain, drop=None):
    """PATH and CUDA_HOME as the unit sets them, less the tool named by drop; the driver's library where the loader
    finds it (the toolchain fixture's sibling), unless drop is libcuda."""
    env = {"PATH": str(toolchain / "bin"), "CUDA_HOME": str(toolchain / "cuda")}
    if drop != "libcuda":
        env["LD_LIBRARY_PATH"] = str(toolchain / "driver")
    if drop == "nvcc":
        env["CUDA_HOME"] = str(toolchain / "no-cuda")
    elif drop:
        bin_dir = toolchain / f"bin-without-{drop}"
        bin_dir.mkdir(exist_ok=True)
        for tool in (toolchain / "bin").iterdir():
            if tool.name != drop and not (bin_dir / tool.name).exists():
                (bin_dir / tool.name).symlink_to(tool)
        env["PATH"] = str(bin_dir)
    return env


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch(tree, *args, env=None):
    return subprocess.Popen([sys.executable, "-m", "sglang.launch_server", *args], cwd=tree,
                            env={"PYTHONPATH": str(tree), "SGLANG_LAB_STARTUP_SECONDS": "0.2", "PATH": "/usr/bin:/bin",
                                 **(env or {})},
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def get(url, data=None, headers=None):
    req = urllib.request.Request(url, data=json.dumps(data).encode() if data is not None else None,
                                 headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(req, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


@pytest.fixture
def server(tree, tmp_path, toolchain):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "glm_moe_dsa", "architectures": ["GlmMoeDsaForCausalLM"]}))
    port = free_port()
    # the key comes from the options file, as the unit passes it (sglang's --config)
    options = tmp_path / "sglang.yaml"
    options.write_text('api-key: "sekret"\nenable-metrics: true\n')
    proc = launch(tree, "--model-path", str(model), "--host", "127.0.0.1", "--port", str(port), "--tp-size", "8",
                  "--attention-backend", "flashinfer", "--kv-cache-dtype", "bf16", "--served-model-name", "glm-5",
                  "--config", str(options), env=tool_env(toolchain))
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if get(base + "/health")[0] == 200:
                break
        except OSError:
            pass
        time.sleep(0.1)
    else:
        proc.kill()
        pytest.fail(f"stand-in server did not come up: {proc.communicate()}")
    yield base
    proc.terminate()
    proc.wait(timeout=10)


def test_endpoints_answer(server):
    auth = {"Authorization": "Bearer sekret"}
    assert get(server + "/health_generate")[0] == 200
    status, body = get(server + "/v1/models", headers=auth)
    assert status == 200 and json.loads(body)["data"][0]["id"] == "glm-5"
    status, body = get(server + "/get_server_info", headers=auth)
    info = json.loads(body)
    assert info["tp_size"] == 8 and info["kv_cache_dtype"] == "bf16" and "api_key" not in info
    assert info["enable_metrics"] is True and "config" not in info
    status, body = get(server + "/v1/chat/completions", {"model": "glm-5", "messages": [{"role": "user", "content": "hi"}]},
                       headers=auth)
    assert status == 200 and json.loads(body)["choices"][0]["message"]["content"].strip()
    assert get(server + "/v1/models")[0] == 401


@pytest.mark.parametrize("bad", [["--tp", "8"], ["--no-such-flag"]])
def test_unknown_or_abbreviated_options_are_refused(tree, tmp_path, bad):
    proc = launch(tree, "--model-path", str(tmp_path), *bad)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 2 and "unrecognized arguments" in err


@pytest.mark.parametrize("drop, says", [("ninja", "ninja is not on PATH"), ("nvcc", "nvcc at "),
                                        ("c++", "no host C++ compiler 'c++'")])
def test_without_a_jit_tool_the_server_fails_at_start(tree, tmp_path, toolchain, drop, says):
    # flashinfer's JIT needs ninja (bare name), $CUDA_HOME/bin/nvcc and c++ at the first warm-up on a real host
    (tmp_path / "config.json").write_text("{}")
    proc = launch(tree, "--model-path", str(tmp_path), "--port", str(free_port()), env=tool_env(toolchain, drop))
    try:
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 1 and "flashinfer JIT compilation cannot run" in err and says in err, err


def test_without_a_library_sgl_kernels_extension_needs_the_server_fails_at_start(tree, tmp_path, toolchain):
    """The stand-in sgl-kernel's extension needs what the real one needs (lab/files/native-needed.json): without
    the driver's libcuda.so.1 the server dies at import, naming it, as sglang does ("Could not load any
    common_ops library")."""
    (tmp_path / "config.json").write_text("{}")
    proc = launch(tree, "--model-path", str(tmp_path), "--port", str(free_port()), env=tool_env(toolchain, "libcuda"))
    try:
        out, err = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 1 and "Could not load any common_ops library" in err and "libcuda.so.1" in err, err



def _serve(tree, model, toolchain, env=None):
    port = free_port()
    proc = launch(tree, "--model-path", str(model), "--host", "127.0.0.1", "--port", str(port),
                  env={**tool_env(toolchain), **(env or {})})
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        try:
            if get(base + "/health")[0] == 200:
                return proc, base
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    pytest.fail(f"stand-in server did not come up: {proc.communicate()}")


def _fingerprint(base, prompts=("The capital of France is", "def f(n):")):
    from ansible_collections.blackwell.serving.plugins.module_utils import fingerprint as fp
    recs = []
    for p in prompts:
        status, body = get(base + "/generate", fp.generate_request(p, 16, 1234))
        assert status == 200, body
        recs.append(fp.parse_generate(p, json.loads(body)))
    return {"format": fp.FORMAT, "prompts": recs}


def test_generate_is_deterministic_from_the_weights_and_corrupts_when_told(tree, tmp_path, toolchain):
    """The fingerprint's stand-in: same weights give the same tokens on every release (the release adds noise of
    thousandths of a nat); other weights, or the lab-only corruption setting, give other tokens."""
    import shutil
    from ansible_collections.blackwell.serving.plugins.module_utils import fingerprint as fp
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "glm_moe_dsa", "vocab_size": 154880}))
    (model / "model-00001-of-00001.safetensors").write_bytes(b"\x01" * 4096)
    other_release = tmp_path / "release-b" / "python"
    shutil.copytree(tree, other_release)
    procs = []
    try:
        pa, a = _serve(tree, model, toolchain)
        procs.append(pa)
        pb, b = _serve(other_release, model, toolchain)
        procs.append(pb)
        pc, c = _serve(tree, model, toolchain, {"SGLANG_LAB_CORRUPT_FROM_TOKEN": "4"})
        procs.append(pc)
        fa, fb, fc = _fingerprint(a), _fingerprint(b), _fingerprint(c)
        assert fa == _fingerprint(a)  # greedy: asked twice, the same answer
        same = fp.compare(fb, fa)
        assert same["ok"] and 0 < same["max_logprob_diff"] < 0.005
        garbage = fp.compare(fc, fa)
        assert not garbage["ok"] and garbage["failure"]["position"] == 4
        (model / "model-00001-of-00001.safetensors").write_bytes(b"\x02" * 4096)  # other weights
        pd, d = _serve(tree, model, toolchain)
        procs.append(pd)
        assert fp.compare(_fingerprint(d), fa)["failure"]["position"] == 0
    finally:
        for p in procs:
            p.terminate()
            p.wait(timeout=10)
