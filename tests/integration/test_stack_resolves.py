"""The production stack file's Python pins resolve for real, with the roles' own uv arguments: a pin that
cannot be met fails here, in CI, not on a fleet. `uv pip compile` resolves (metadata only, nothing installed),
with the uv version the stack file pins, against the real package index.

sglang's requirements are those of its 0.5.9 sdist (the lab's stand-in of the production commit, which GitHub
holds and CI cannot reach; both pin torch 2.9.1, flashinfer 0.6.3, transformers 4.57.1, sgl-kernel 0.3.21).
The PyTorch index (sglang_torch_index_url) is out of CI's reach as well: where it does not answer, torch is
resolved from PyPI (its Linux build is CUDA 12.8, the production index's cu129), and the test says so.
"""
import re
import subprocess
import sys
import urllib.request
import warnings

import pytest
import yaml

from conftest import REPO
from lab import upstream, wheels

PROD = yaml.safe_load((REPO / "inventories/production/group_vars/all/stack.yml").read_text())
BUILD = REPO / "roles/sglang/tasks/build.yml"
# the fleet: x86_64 Linux with glibc 2.35 (Ubuntu 22.04) or newer
PLATFORM = "x86_64-manylinux_2_35"


@pytest.fixture(scope="module")
def uv(tmp_path_factory):
    """uv at the stack file's version (uv_venv installs the same on the hosts)."""
    target = tmp_path_factory.mktemp("uv")
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--target", str(target),
                    f"uv=={PROD['uv_venv_uv_version']}"], check=True, timeout=300)
    return target / "bin" / "uv"


def role_install_options():
    """The options of the sglang role's install command (roles/sglang/tasks/build.yml), in order."""
    def every(tasks):
        for t in tasks:
            yield t
            yield from every(t.get("block", []))
    task = next(t for t in every(yaml.safe_load(BUILD.read_text())) if "Install sglang editable" in t.get("name", ""))
    words = re.findall(r"'([^']*)'", task["ansible.builtin.command"]["argv"])
    return [w for w in words if w.startswith("-") and w != "--python"]


# options of the install that decide how files are written, not what resolves (uv pip compile has none of them)
INSTALL_ONLY = {"-e", "--compile-bytecode"}


def compile_cmd(uv, pyproject, overrides, torch_index, package_index, options, python="3.12"):
    """`uv pip compile` with the install's options: each option the role passes, with its value."""
    values = {"--index": torch_index, "--default-index": package_index, "--override": str(overrides)}
    cmd = [str(uv), "pip", "compile", "--python-version", python, "--python-platform", PLATFORM,
           "--emit-index-annotation", "--no-header", "--quiet"]
    for opt in options:
        if opt in INSTALL_ONLY:
            continue
        cmd += [opt, values[opt]] if opt in values else [opt]
    return cmd + [str(pyproject)]


def resolved(text):
    """{name: (version, index)} from a compile with --emit-index-annotation."""
    out, last = {}, None
    for line in text.splitlines():
        m = re.match(r"^([A-Za-z0-9_.\-]+)==(\S+)", line)
        if m:
            last = wheels.normalise(m.group(1))
            out[last] = (m.group(2), None)
        m = re.match(r"^\s+# from (\S+)", line)
        if m and last:
            out[last] = (out[last][0], m.group(1))
    return out


def reachable(url):
    try:
        with urllib.request.urlopen(url.rstrip("/") + "/", timeout=15):
            return True
    except OSError:
        return False


def overrides_file(tmp_path, flashinfer, transformers, cudnn=PROD["sglang_cudnn_version"]):
    path = tmp_path / "overrides.txt"
    # as build.yml writes it
    path.write_text(f"flashinfer-python=={flashinfer}\nflashinfer-cubin=={flashinfer}\ntransformers=={transformers}\n"
                    f"nvidia-cudnn-cu12=={cudnn}\n")
    return path


def test_the_role_installs_from_the_configured_indexes_only():
    # sglang's pyproject sends torch to its own "pypi" index ([tool.uv.sources]); --no-sources turns that off
    assert "--no-sources" in role_install_options()


def test_production_python_pins_resolve_on_the_real_package_index(uv, tmp_path):
    tree = upstream.sglang_tree("0.5.9")
    overrides = overrides_file(tmp_path, PROD["sglang_flashinfer_version"], PROD["sglang_transformers_version"])
    torch_index = PROD["sglang_torch_index_url"]
    if not reachable(torch_index):
        warnings.warn(f"{torch_index} is out of reach: torch resolved from {PROD['sglang_package_index_url']} "
                      "(PyPI's build) instead", stacklevel=1)
        torch_index = PROD["sglang_package_index_url"]
    proc = subprocess.run(compile_cmd(uv, tree / "pyproject.toml", overrides, torch_index,
                                      PROD["sglang_package_index_url"], role_install_options(),
                                      python=PROD["uv_venv_python_version"]),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = resolved(proc.stdout)
    want = {"torch": "2.9.1", "flashinfer-python": PROD["sglang_flashinfer_version"],
            "flashinfer-cubin": PROD["sglang_flashinfer_version"],
            "transformers": PROD["sglang_transformers_version"], "sgl-kernel": "0.3.21",
            # over torch's exact 9.10.2.21
            "nvidia-cudnn-cu12": PROD["sglang_cudnn_version"]}
    for name, version in want.items():
        assert got.get(name, (None,))[0] is not None, f"{name} is not in the resolution"
        assert got[name][0].split("+")[0] == version, f"{name} resolved to {got[name][0]}, pinned {version}"


@pytest.mark.parametrize("requirement, index_var", [
    (f"huggingface_hub=={PROD['model_weights_hf_hub_version']}", "model_weights_package_index_url"),
    (f"sglang-router=={PROD['sglang_router_version']}", "sglang_router_package_index_url"),
])
def test_production_tool_pins_resolve_on_the_real_package_index(uv, tmp_path, requirement, index_var):
    reqs = tmp_path / "requirements.in"
    reqs.write_text(requirement + "\n")
    proc = subprocess.run([str(uv), "pip", "compile", "--python-version", PROD["uv_venv_python_version"],
                           "--python-platform", PLATFORM, "--index-url", PROD[index_var], "--no-header", "--quiet",
                           str(reqs)], capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert requirement.lower().replace("_", "-") in proc.stdout.lower().replace("_", "-")


def test_a_pin_that_cannot_be_met_fails_the_resolution(uv, tmp_path):
    tree = upstream.sglang_tree("0.5.9")
    overrides = overrides_file(tmp_path, PROD["sglang_flashinfer_version"], "99.0.0")
    proc = subprocess.run(compile_cmd(uv, tree / "pyproject.toml", overrides, PROD["sglang_package_index_url"],
                                      PROD["sglang_package_index_url"], role_install_options()),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode != 0 and "transformers" in proc.stderr


def test_torch_comes_from_the_configured_torch_index_not_sglangs_own(uv, tmp_path):
    # the lab's stand-in of the PyTorch index holds torch 2.9.1+cu129; sglang's pyproject names pypi.org for
    # torch on x86_64: with the role's options the configured index wins, and every other package comes from the
    # configured package index
    simple = wheels.build(tmp_path / "www")
    overrides = overrides_file(tmp_path, PROD["sglang_flashinfer_version"], PROD["sglang_transformers_version"])
    tree = upstream.sglang_tree("0.5.9")
    proc = subprocess.run(compile_cmd(uv, tree / "pyproject.toml", overrides, simple.as_uri(),
                                      PROD["sglang_package_index_url"], role_install_options()),
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    got = resolved(proc.stdout)
    assert got["torch"] == ("2.9.1+cu129", simple.as_uri()), got["torch"]
    assert got["flashinfer-cubin"] == ("0.6.3", simple.as_uri())
    # torch's stand-in pins cuDNN 9.10.2.21 as the real torch does; the override wins
    assert got["nvidia-cudnn-cu12"] == (PROD["sglang_cudnn_version"], simple.as_uri())
    assert got["transformers"][1].rstrip("/") == PROD["sglang_package_index_url"].rstrip("/")
    assert {index.rstrip("/") for _, index in got.values()} <= {simple.as_uri().rstrip("/"),
                                                                 PROD["sglang_package_index_url"].rstrip("/")}
