"""Small real ELF shared objects for the lab's stand-ins, built with the host's C compiler at build time.

The stand-in wheels and driver packages carry the libraries the real ones do (``libcuda.so.1``, torch's
``libtorch.so``, ``libcudart.so.12`` of nvidia-cuda-runtime-cu12, ...), each a stub with the real ``DT_SONAME``, and
sgl-kernel's stand-in carries ``sgl_kernel/sm100/common_ops.abi3.so`` with the ``DT_NEEDED`` list of the real one
(``lab/files/native-needed.json``, read from the real wheels with ``readelf -d``). The dynamic loader then resolves
them on a lab host as it does on a real one: a host without ``libnuma1`` cannot load sgl-kernel, and the server
fails at start naming ``libnuma.so.1``, as the real server does.
"""
from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from pathlib import Path

from .util import LabError

NEEDED = Path(__file__).resolve().parent / "files" / "native-needed.json"


def needed_lists() -> dict:
    """{"<distribution> <version>": {file in the wheel: [DT_NEEDED, ...]}} as recorded from the real wheels."""
    return json.loads(NEEDED.read_text())["wheels"]


def sonames() -> dict:
    """{distribution or package: {path in it: DT_SONAME}} of the libraries the real ones install."""
    return json.loads(NEEDED.read_text())["sonames"]


def _cc() -> str:
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise LabError("the lab builds its stand-in shared libraries with a C compiler: install gcc (Debian: gcc)")
    return cc


def build(soname: str | None = None, needed: list[str] = (), runpath: str | None = None) -> bytes:
    """A shared object with this DT_SONAME (none when None), exactly these DT_NEEDED entries, in order, and a
    DT_RUNPATH where given."""
    with tempfile.TemporaryDirectory(prefix="lab-elf-") as tmp:
        work = Path(tmp)
        (work / "stub.c").write_text("int lab_standin_symbol(void) { return 0; }\n")
        # each needed library as an empty stub of that soname, only to be linked against: the loader on the lab
        # host resolves the real name
        libs = work / "libs"
        libs.mkdir()
        for i, name in enumerate(needed):
            _run([_cc(), "-shared", "-fPIC", "-nostdlib", "-o", str(libs / f"dep{i}.so"), str(work / "stub.c"),
                  f"-Wl,-soname,{name}"])
        out = work / "out.so"
        cmd = [_cc(), "-shared", "-fPIC", "-nostdlib", "-o", str(out), str(work / "stub.c")]
        if soname:
            cmd.append(f"-Wl,-soname,{soname}")
        if runpath:
            cmd += ["-Wl,--enable-new-dtags", f"-Wl,-rpath,{runpath}"]
        cmd += ["-Wl,--no-as-needed"] + [str(libs / f"dep{i}.so") for i in range(len(needed))]
        _run(cmd)
        return out.read_bytes()


def _run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        raise LabError(f"building a stand-in shared object failed: {' '.join(cmd)}: {proc.stderr[-1000:]}")
