"""The native-library check (plugins/module_utils/native_libs.py, sglang_probe's native_packages, verify's
native_libraries): real ELF objects built here (lab/elfstub.py), looked up as the dynamic loader will."""
import os
import subprocess

import pytest

from ansible_collections.blackwell.serving.plugins.module_utils import native_libs, verify
from lab import elfstub
from modrun import run_module
from test_verify_judge import EXPECTED, by_name, healthy_found

SGL_NEEDED = elfstub.needed_lists()["sgl-kernel 0.3.21"]["sgl_kernel/sm100/common_ops.abi3.so"]


def put(path, data):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


@pytest.fixture
def venv(tmp_path):
    """A virtual environment laid out as a release's: sgl-kernel's extension with the real DT_NEEDED list, torch's
    libraries in torch/lib and the CUDA libraries in nvidia/*/lib (stubs of their sonames)."""
    prefix = tmp_path / "venv"
    (prefix / "bin").mkdir(parents=True)
    (prefix / "pyvenv.cfg").write_text("home = /usr/bin\n")
    (prefix / "bin" / "python").symlink_to("/usr/bin/python3")
    site = prefix / "lib" / "python3.11" / "site-packages"
    put(site / "sgl_kernel/sm100/common_ops.abi3.so", elfstub.build(needed=SGL_NEEDED))
    for dist in ("torch", "nvidia-cuda-runtime-cu12", "nvidia-cuda-nvrtc-cu12", "nvidia-cublas-cu12"):
        for rel, soname in elfstub.sonames()[dist].items():
            put(site / rel, elfstub.build(soname=soname))
    return prefix, site


def test_the_dynamic_section_is_read_as_readelf_reads_it(venv):
    _, site = venv
    ext = site / "sgl_kernel/sm100/common_ops.abi3.so"
    assert native_libs.read_dynamic(ext)["needed"] == SGL_NEEDED
    readelf = subprocess.run(["readelf", "-d", str(ext)], capture_output=True, text=True).stdout
    assert [ln.split("[")[1].split("]")[0] for ln in readelf.splitlines() if "(NEEDED)" in ln] == SGL_NEEDED
    assert native_libs.read_dynamic(site / "torch/lib/libtorch.so")["soname"] == "libtorch.so"
    with pytest.raises(native_libs.NotELF):
        native_libs.read_dynamic(venv[0] / "pyvenv.cfg")


def test_what_the_environment_loads_first_is_found_and_the_hosts_gaps_are_named(venv):
    _, site = venv
    # a host with neither libnuma nor the driver's libcuda: those two stay missing, torch's and CUDA's are found
    r = native_libs.check(str(site), ["sgl_kernel", "torch", "nvidia"], system={}, default_dirs=())
    assert [m["library"] for m in r["missing"]] == ["libcuda.so.1", "libnuma.so.1"]
    assert r["missing"][1]["needed_by"] == ["sgl_kernel/sm100/common_ops.abi3.so"]
    # the loader's cache has them: nothing is missing
    system = {"libnuma.so.1": "/usr/lib/x86_64-linux-gnu/libnuma.so.1", "libcuda.so.1": "/usr/lib/libcuda.so.1"}
    assert native_libs.check(str(site), ["sgl_kernel", "torch", "nvidia"], system, default_dirs=())["missing"] == []


def test_a_run_path_with_origin_is_followed(tmp_path):
    site = tmp_path / "site"
    put(site / "pkg/lib/libdep.so.3", elfstub.build(soname="libdep.so.3"))
    ext = put(site / "pkg/sub/ext.so", elfstub.build(needed=["libdep.so.3"], runpath="$ORIGIN/../lib"))
    assert native_libs.read_dynamic(ext)["runpath"] == ["$ORIGIN/../lib"]
    assert native_libs.check(str(site), ["pkg"], {}, default_dirs=())["missing"] == []
    (site / "pkg/lib/libdep.so.3").rename(site / "pkg/lib/elsewhere.so")
    r = native_libs.check(str(site), ["pkg"], {}, default_dirs=())
    assert r["missing"] == [{"library": "libdep.so.3", "needed_by": ["pkg/sub/ext.so"]}]
    assert ext.exists()


def test_ldconfig_output_is_read_as_the_loaders_cache():
    text = ("1234 libs found in cache `/etc/ld.so.cache'\n"
            "\tlibnuma.so.1 (libc6,x86-64) => /lib/x86_64-linux-gnu/libnuma.so.1\n"
            "\tlibc.so.6 (libc6,x86-64, OS ABI: Linux 3.2.0) => /lib/x86_64-linux-gnu/libc.so.6\n")
    assert native_libs.parse_ldconfig(text) == {"libnuma.so.1": "/lib/x86_64-linux-gnu/libnuma.so.1",
                                                 "libc.so.6": "/lib/x86_64-linux-gnu/libc.so.6"}


def test_the_probe_reads_a_release_environment_and_verify_names_the_package(venv, tmp_path):
    prefix, _ = venv
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    # a host whose loader cache has the driver's libcuda but not libnuma
    (bin_dir / "ldconfig").write_text("#!/bin/sh\nprintf '\\tlibcuda.so.1 (libc6,x86-64) => /usr/lib/libcuda.so.1\\n'\n")
    (bin_dir / "ldconfig").chmod(0o755)
    r = run_module("sglang_probe", {"python": str(prefix / "bin/python"),
                                    "native_packages": ["sgl_kernel", "torch", "nvidia", "not_installed"]},
                   path_prepend=str(bin_dir))
    native = r["native_libraries"]
    if os.path.exists("/lib/x86_64-linux-gnu/libnuma.so.1") or os.path.exists("/usr/lib64/libnuma.so.1"):
        # this machine has libnuma in a default directory: the loader finds it there
        assert native["missing"] == []
    else:
        assert [m["library"] for m in native["missing"]] == ["libnuma.so.1"]
    found = dict(healthy_found(),
                 native_libraries={"objects": 10, "unreadable": [], "missing": [
                     {"library": "libnuma.so.1", "needed_by": ["sgl_kernel/sm100/common_ops.abi3.so"]}]})
    check = by_name(verify.judge(EXPECTED, found, ["sglang"]))["native_libraries"]
    assert not check["ok"] and "libnuma.so.1" in check["found"] and "package libnuma1 (Debian family)" in check["found"]
    assert "common_ops.abi3.so" in check["found"]
    found["native_libraries"] = native | {"missing": []}
    assert by_name(verify.judge(EXPECTED, found, ["sglang"]))["native_libraries"]["ok"]


def test_no_release_environment_is_a_failed_check_not_a_pass():
    found = dict(healthy_found(), native_libraries=None)
    assert not by_name(verify.judge(EXPECTED, found, ["sglang"]))["native_libraries"]["ok"]
    assert run_module("sglang_probe", {"python": "/usr/bin/python3", "native_packages": ["x"]})["native_libraries"] is None


def test_on_a_real_torch_environment_only_optional_extras_stay_missing():
    """The check run on the lent GPU machine (an H100; torch 2.11, 846 shared objects; tests/fixtures/gpu/h100-device/
    native-libs-check.txt): across the whole environment only the optional extras a bare ldd also reports stay
    missing (cupy's cuTENSOR, mpi4py's MPI, numba's TBB), torchvision's and torchaudio's libtorch are found (torch
    loads it first), and the server's packages miss nothing."""
    from conftest import FIXTURES
    text = (FIXTURES / "gpu" / "h100-device" / "native-libs-check.txt").read_text()
    lines = text.splitlines()
    assert "objects 846" in next(ln for ln in lines if ln.startswith("ALL"))
    missing = sorted(ln.split()[1] for ln in lines if ln.strip().startswith("missing "))
    assert missing == ["libcutensor.so.2", "libcutensorMg.so.2", "libmpi.so.12", "libtbb.so.12"]
    owners = " ".join(ln for ln in lines if ln.strip().startswith("missing "))
    assert "torchvision" not in owners and "torchaudio" not in owners
    for ln in lines:
        if ln.startswith("['"):
            assert ln.endswith("missing []"), ln
