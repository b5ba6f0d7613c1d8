"""A PEP 503 package index holding stand-ins for GPU-only wheels too heavy for CI.

torch's CUDA build, sgl-kernel (535 MB), flashinfer-cubin (150 MB) and the
NVIDIA packages that flashinfer-python pulls in are replaced by small wheels
with the same names and versions. Everything else (flashinfer-python and
transformers at the stack's pins, torchvision, xgrammar, ...) comes from the real PyPI: the
roles put this index where production has the PyTorch index, which is searched
before PyPI.

Each stand-in declares the dependencies of the real wheel (Requires-Dist, read
from the real wheel's metadata), so that the resolution around it is the real
one: torch's stand-in pulls the real Triton 3.5.1, sympy, networkx, ... from
PyPI. Left out, and said so in the stand-in's metadata: torch's nvidia-*-cu12
CUDA libraries (several GB, useless without a GPU), except those sgl-kernel's
extension needs (cuBLAS, the CUDA runtime, NVRTC) and cuDNN: torch pins
nvidia-cudnn-cu12==9.10.2.21 exactly and the sglang role overrides it
(sglang_cudnn_version), so both cuDNN versions stand in here, each requiring
nvidia-cublas-cu12 as the real wheels do.

The shared objects the server's import loads are real ELF files with the real
names (lab/elfstub.py, lab/files/native-needed.json): torch's stand-in preloads
its torch/lib libraries and the nvidia/*/lib ones as torch does, and
sgl-kernel's loads ``sm100/common_ops.abi3.so``, which needs what the real one
needs (libnuma.so.1 and libcuda.so.1 from the host among them), so that a host
without them fails at the import as a real one does.
"""
from __future__ import annotations

import base64
import hashlib
import html
import io
from html.parser import HTMLParser
import re
import shutil
import zipfile
from pathlib import Path

from . import elfstub, stack
from .util import digest, log

# torch 2.9.1's own Requires-Dist (its wheels on PyPI and on the PyTorch index), without the nvidia-*-cu12 libraries
TORCH_REQUIRES = [
    "filelock", "typing-extensions>=4.10.0", 'setuptools; python_version >= "3.12"', "sympy>=1.13.3",
    "networkx>=2.5.1", "jinja2", "fsspec>=0.8.5",
    'triton==3.5.1; platform_system == "Linux" and platform_machine == "x86_64"',
]
# torch 2.9.1's pins of the CUDA libraries that stand in here (PyPI's wheel; the rest of its nvidia-*-cu12 are left out)
_LINUX_X86 = 'platform_system == "Linux" and platform_machine == "x86_64"'
TORCH_REQUIRES += [f"nvidia-cudnn-cu12==9.10.2.21; {_LINUX_X86}", f"nvidia-cublas-cu12==12.8.4.1; {_LINUX_X86}",
                   f"nvidia-cuda-runtime-cu12==12.8.90; {_LINUX_X86}", f"nvidia-cuda-nvrtc-cu12==12.8.93; {_LINUX_X86}"]
# distribution -> the real wheel's Requires-Dist that the stand-in keeps
REQUIRES = {"torch": TORCH_REQUIRES,
            # nvidia-cudnn-cu12 9.10.2.21 and 9.19.0.56 both declare it, unpinned (their wheels' METADATA on PyPI)
            "nvidia-cudnn-cu12": ["nvidia-cublas-cu12"]}

# as torch's __init__ does (_load_global_deps): its own libraries and the CUDA libraries of the nvidia-*-cu12 wheels
# into the process, globally, before any extension asks for them
TORCH_SOURCE = '''__version__ = "2.9.1+cu129"

import ctypes as _ctypes
import glob as _glob
import os as _os

_here = _os.path.dirname(__file__)
for _lib in sorted(_glob.glob(_os.path.join(_here, "..", "nvidia", "*", "lib", "*.so*"))) + [
        _os.path.join(_here, "lib", _n) for _n in ("libc10.so", "libc10_cuda.so", "libtorch_cpu.so",
                                                    "libtorch_cuda.so", "libtorch.so")]:
    _ctypes.CDLL(_lib, mode=_ctypes.RTLD_GLOBAL)


class version:
    cuda = "12.9"


class cuda:
    @staticmethod
    def is_available():
        return False
'''
# as sgl-kernel 0.3.21's load_utils does: torch first, then the architecture's common_ops (sm100 for any capability
# but 9.x), with its message when it cannot be loaded
SGL_KERNEL_SOURCE = '''__version__ = "0.3.21"

import ctypes as _ctypes
import os as _os

import torch  # noqa: F401  (the real package imports it first: its libraries are in the process then)

_ops = _os.path.join(_os.path.dirname(__file__), "sm100", "common_ops.abi3.so")
try:
    common_ops = _ctypes.CDLL(_ops)
except OSError as _exc:
    raise ImportError("[sgl_kernel] CRITICAL: Could not load any common_ops library!\\n"
                      f"Error details from previous import attempts:\\n- ImportError: {_exc}") from None
'''
FLASHINFER = stack.pin("sglang_flashinfer_version")
# (distribution, version, top-level module, module source)
STANDINS = [
    ("torch", "2.9.1+cu129", "torch", TORCH_SOURCE),
    ("sgl-kernel", "0.3.21", "sgl_kernel", SGL_KERNEL_SOURCE),
    # flashinfer at the stack's pin (the sglang role puts it over sglang's own)
    ("flashinfer-cubin", FLASHINFER, "flashinfer_cubin", f'__version__ = "{FLASHINFER}"\n'),
    ("flashinfer-jit-cache", f"{FLASHINFER}+cu129", "flashinfer_jit_cache", f'__version__ = "{FLASHINFER}+cu129"\n'),
    ("nvidia-cutlass-dsl", "4.3.4", "nvidia_cutlass_dsl", '__version__ = "4.3.4"\n'),
    ("nvidia-cudnn-frontend", "1.13.0", "cudnn", '__version__ = "1.13.0"\n'),
    # torch's pin, and the one the sglang role puts over it (sglang_cudnn_version)
    ("nvidia-cudnn-cu12", "9.10.2.21", "nvidia_cudnn_standin", '__version__ = "9.10.2.21"\n'),
    ("nvidia-cudnn-cu12", "9.19.0.56", "nvidia_cudnn_standin", '__version__ = "9.19.0.56"\n'),
    ("nvidia-cublas-cu12", "12.8.4.1", "nvidia_cublas_standin", '__version__ = "12.8.4.1"\n'),
    ("nvidia-cuda-runtime-cu12", "12.8.90", "nvidia_cuda_runtime_standin", '__version__ = "12.8.90"\n'),
    ("nvidia-cuda-nvrtc-cu12", "12.8.93", "nvidia_cuda_nvrtc_standin", '__version__ = "12.8.93"\n'),
]


def native_files(dist: str, version: str) -> dict[str, bytes]:
    """The shared objects a stand-in carries: stubs of the real wheel's libraries (their sonames) and, for
    sgl-kernel, its extension with the real DT_NEEDED list."""
    files = {path: elfstub.build(soname=soname)
             for path, soname in elfstub.sonames().get(dist, {}).items()}
    for path, needed in elfstub.needed_lists().get(f"{dist} {version}", {}).items():
        files[path] = elfstub.build(needed=needed)
    return files


class _Anchors(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        if tag == "a":
            self.hrefs.append(dict(attrs).get("href") or "")


def hrefs(page: str) -> list[str]:
    """The links of a simple index's page (PEP 503), in order."""
    parser = _Anchors()
    parser.feed(page)
    return parser.hrefs


def normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _record_line(path: str, data: bytes) -> str:
    h = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return f"{path},sha256={h},{len(data)}"


def build_wheel(dist: str, version: str, module: str, source: str,
                native: dict[str, bytes] | None = None) -> tuple[str, bytes]:
    stem = f"{dist.replace('-', '_')}-{version}"
    info = f"{stem}.dist-info"
    files = {
        f"{module}/__init__.py": (f'"""Lab stand-in of {dist} {version}: no GPU code inside."""\n' + source).encode(),
        **(native or {}),
        f"{info}/METADATA": (f"Metadata-Version: 2.1\nName: {dist}\nVersion: {version}\n"
                             f"Summary: Lab stand-in of {dist} (blackwell.serving lab)\n"
                             + "".join(f"Requires-Dist: {r}\n" for r in REQUIRES.get(dist, []))).encode(),
        f"{info}/WHEEL": b"Wheel-Version: 1.0\nGenerator: blackwell-lab\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
    }
    record = "\n".join(_record_line(p, d) for p, d in files.items()) + f"\n{info}/RECORD,,\n"
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for path, data in [*files.items(), (f"{info}/RECORD", record.encode())]:
            zi = zipfile.ZipInfo(path, date_time=(2026, 1, 1, 0, 0, 0))
            zi.external_attr = (0o755 if ".so" in path else 0o644) << 16
            zf.writestr(zi, data)
    return f"{stem}-py3-none-any.whl", buf.getvalue()


def wheel_metadata(data: bytes) -> bytes:
    """The METADATA file of a wheel (what an index serves beside it as <wheel>.metadata, PEP 658)."""
    with zipfile.ZipFile(io.BytesIO(data)) as zf:
        return zf.read(next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA")))


def build(www: Path) -> Path:
    """Write www/simple/<project>/index.html and www/packages/*.whl."""
    simple = www / "simple"
    # the versions come from the stack file too: a re-pin builds the index again
    key = digest([Path(__file__).read_bytes(), Path(elfstub.__file__).read_bytes(), elfstub.NEEDED.read_bytes(),
                  repr(STANDINS)])
    stamp = simple / ".lab-digest"
    if stamp.is_file() and stamp.read_text() == key:
        return simple
    log(f"building the stand-in wheel index ({len(STANDINS)} GPU-only wheels)")
    for d in (simple, www / "packages"):
        if d.exists():
            shutil.rmtree(d)
        d.mkdir(parents=True)
    links: dict[str, list[str]] = {}
    for dist, version, module, source in STANDINS:
        fname, data = build_wheel(dist, version, module, source, native_files(dist, version))
        (www / "packages" / fname).write_bytes(data)
        # the wheel's METADATA beside it, as PyPI and the PyTorch index serve it (PEP 658/714)
        meta = wheel_metadata(data)
        (www / "packages" / f"{fname}.metadata").write_bytes(meta)
        sha = hashlib.sha256(data).hexdigest()
        meta_sha = hashlib.sha256(meta).hexdigest()
        links.setdefault(normalise(dist), []).append(
            f"<a href=\"../../packages/{html.escape(fname)}#sha256={sha}\" "
            f"data-core-metadata=\"sha256={meta_sha}\" data-dist-info-metadata=\"sha256={meta_sha}\">"
            f"{html.escape(fname)}</a>\n")
    projects = sorted(links)
    for proj in projects:
        (simple / proj).mkdir()
        (simple / proj / "index.html").write_text(
            "<!DOCTYPE html>\n<html><body>\n" + "".join(links[proj]) + "</body></html>\n")
    (simple / "index.html").write_text(
        "<!DOCTYPE html>\n<html><body>\n" + "".join(f'<a href="{p}/">{p}</a>\n' for p in projects)
        + "</body></html>\n")
    stamp.write_text(key)
    return simple
