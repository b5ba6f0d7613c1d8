# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Whether the shared libraries that a Python environment's compiled extensions need resolve on this host.

What the dynamic loader does when the server imports sgl-kernel, flashinfer or torch, without loading anything: each
shared object's ``DT_NEEDED`` entries are read from its ELF dynamic section and looked up, in the loader's order,
in the object's ``DT_RPATH`` (when it has no ``DT_RUNPATH``), ``DT_RUNPATH`` (``$ORIGIN`` expanded), the system's
library cache (``/etc/ld.so.cache``, read through ``ldconfig -p``) and the default directories. A library that
another package's import loads first (``import torch`` loads ``torch/lib/libtorch.so`` and the ``nvidia/*/lib``
libraries before sgl-kernel's extension asks for them) is found by its ``DT_SONAME`` among the environment's own
library directories: ``torch/lib``, ``nvidia/*/lib``, each package's ``<name>.libs`` (auditwheel's), and the
object's own directory (a package's loader opens its neighbours first). A bare
``ldd`` reports such libraries missing though the server finds them; this names only what stays missing.

Pure functions, no Ansible imports; ELF64 little-endian (x86_64 and aarch64 Linux).
"""
from __future__ import annotations

import glob
import os
import struct

DT_NEEDED, DT_RPATH, DT_SONAME, DT_RUNPATH, DT_STRTAB = 1, 15, 14, 29, 5
SHT_DYNAMIC, SHT_STRTAB = 6, 3
DEFAULT_DIRS = ("/lib64", "/usr/lib64", "/lib/x86_64-linux-gnu", "/usr/lib/x86_64-linux-gnu",
                "/lib/aarch64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/lib", "/usr/lib")
# the libraries of the C runtime and the loader itself: always there where Python runs
RUNTIME = frozenset(("libc.so.6", "libm.so.6", "libdl.so.2", "libpthread.so.0", "librt.so.1", "libutil.so.1",
                     "ld-linux-x86-64.so.2", "ld-linux-aarch64.so.1", "libgcc_s.so.1", "libstdc++.so.6"))
# where a library that is missing comes from: {soname: {os family: package}}; "pip" for a wheel of the environment
PROVIDERS = {
    "libnuma.so.1": {"Debian": "libnuma1", "RedHat": "numactl-libs"},
    "libcuda.so.1": {"Debian": "the NVIDIA driver's libnvidia-compute", "RedHat": "the NVIDIA driver's nvidia-driver-cuda-libs"},
    "libnvidia-ml.so.1": {"Debian": "the NVIDIA driver's libnvidia-compute", "RedHat": "the NVIDIA driver's nvidia-driver-cuda-libs"},
    "libcudart.so.12": {"pip": "nvidia-cuda-runtime-cu12"},
    "libcublas.so.12": {"pip": "nvidia-cublas-cu12"},
    "libcublasLt.so.12": {"pip": "nvidia-cublas-cu12"},
    "libnvrtc.so.12": {"pip": "nvidia-cuda-nvrtc-cu12"},
    "libcudnn.so.9": {"pip": "nvidia-cudnn-cu12"},
    "libnccl.so.2": {"pip": "nvidia-nccl-cu12"},
    "libtorch.so": {"pip": "torch"}, "libtorch_cpu.so": {"pip": "torch"}, "libtorch_cuda.so": {"pip": "torch"},
    "libc10.so": {"pip": "torch"}, "libc10_cuda.so": {"pip": "torch"},
}


class NotELF(ValueError):
    pass


def read_dynamic(path):
    """{"needed": [...], "rpath": [...], "runpath": [...], "soname": str or None} of an ELF64 LE shared object."""
    with open(path, "rb") as fh:
        ident = fh.read(64)
        if len(ident) < 64 or ident[:4] != b"\x7fELF":
            raise NotELF(f"{path} is not an ELF file")
        if ident[4] != 2 or ident[5] != 1:
            raise NotELF(f"{path} is not a 64-bit little-endian ELF file")
        shoff, = struct.unpack_from("<Q", ident, 0x28)
        shentsize, shnum = struct.unpack_from("<HH", ident, 0x3A)
        if not shoff or not shnum:
            raise NotELF(f"{path} has no section headers")
        fh.seek(shoff)
        table = fh.read(shentsize * shnum)
        sections = [struct.unpack_from("<IIQQQQIIQQ", table, i * shentsize) for i in range(shnum)]
        out = {"needed": [], "rpath": [], "runpath": [], "soname": None}
        for _name, kind, _flags, _addr, offset, size, link, _info, _align, entsize in sections:
            if kind != SHT_DYNAMIC or link >= len(sections):
                continue
            strtab = sections[link]
            fh.seek(strtab[4])
            strings = fh.read(strtab[5])
            fh.seek(offset)
            data = fh.read(size)
            step = entsize or 16

            def text(at):
                end = strings.find(b"\0", at)
                return strings[at:end if end >= 0 else len(strings)].decode("utf-8", "replace")

            for i in range(0, len(data) - step + 1, step):
                tag, value = struct.unpack_from("<qQ", data, i)
                if tag == 0:
                    break
                if tag == DT_NEEDED:
                    out["needed"].append(text(value))
                elif tag == DT_RPATH:
                    out["rpath"] += [p for p in text(value).split(":") if p]
                elif tag == DT_RUNPATH:
                    out["runpath"] += [p for p in text(value).split(":") if p]
                elif tag == DT_SONAME:
                    out["soname"] = text(value)
        return out


def parse_ldconfig(text):
    """{soname: path} from ``ldconfig -p``'s output (the first entry of a name, as the loader takes it)."""
    found = {}
    for line in (text or "").splitlines():
        line = line.strip()
        if " => " not in line or " (" not in line:
            continue
        name = line.split(" (", 1)[0].strip()
        found.setdefault(name, line.rsplit(" => ", 1)[1].strip())
    return found


def site_packages(python):
    """The site-packages directory of the virtual environment PYTHON belongs to (its prefix holds pyvenv.cfg), or
    None where it is not one, or has not exactly one."""
    prefix = os.path.dirname(os.path.dirname(os.path.abspath(python)))
    if not os.path.isfile(os.path.join(prefix, "pyvenv.cfg")):
        return None
    found = sorted(glob.glob(os.path.join(prefix, "lib", "python3*", "site-packages")))
    return found[0] if len(found) == 1 else None


def environment_dirs(site_packages):
    """The library directories of an environment that its packages' imports put in the process (torch/lib,
    nvidia/*/lib, every <package>.libs), in a stable order."""
    dirs = []
    for pattern in ("torch/lib", "nvidia/*/lib", "*.libs"):
        dirs += sorted(d for d in glob.glob(os.path.join(site_packages, pattern)) if os.path.isdir(d))
    return dirs


def shared_objects(site_packages, packages):
    """Every shared object under the listed top-level packages of site_packages (links left out: the file they
    point at is listed itself)."""
    found = []
    for package in packages:
        root = os.path.join(site_packages, package)
        if not os.path.isdir(root):
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            dirnames.sort()
            for name in sorted(filenames):
                path = os.path.join(dirpath, name)
                if (name.endswith(".so") or ".so." in name) and not os.path.islink(path):
                    found.append(path)
    return found


def _soname_index(dirs):
    """{soname or file name: path} of the shared objects in the directories."""
    index = {}
    for d in dirs:
        try:
            names = sorted(os.listdir(d))
        except OSError:
            continue
        for name in names:
            path = os.path.join(d, name)
            if ".so" not in name or not os.path.isfile(path):
                continue
            index.setdefault(name, path)
            try:
                soname = read_dynamic(path)["soname"]
            except (OSError, NotELF, struct.error):
                continue
            if soname:
                index.setdefault(soname, path)
    return index


def check(site_packages, packages, system=None, default_dirs=DEFAULT_DIRS):
    """The libraries that stay missing for the shared objects of the listed packages.

    ``system`` is {soname: path} of the system's library cache (``parse_ldconfig``). Returns {"objects": N,
    "missing": [{"library", "needed_by": [relative paths]}], "unreadable": [relative paths]}."""
    system = dict(system or {})
    env_index = _soname_index(environment_dirs(site_packages))
    default_index = None
    missing, unreadable = {}, []
    objects = shared_objects(site_packages, packages)
    for path in objects:
        rel = os.path.relpath(path, site_packages)
        try:
            dyn = read_dynamic(path)
        except (OSError, NotELF, struct.error):
            unreadable.append(rel)
            continue
        origin = os.path.dirname(path)
        search = [p.replace("$ORIGIN", origin).replace("${ORIGIN}", origin)
                  for p in (dyn["runpath"] or dyn["rpath"])]
        for lib in dyn["needed"]:
            if lib in RUNTIME or "/" in lib and os.path.exists(lib):
                continue
            if any(os.path.exists(os.path.join(d, lib)) for d in search):
                continue
            if lib in env_index or lib in system or os.path.exists(os.path.join(origin, lib)):
                continue
            if default_index is None:
                default_index = {name for d in default_dirs if os.path.isdir(d) for name in os.listdir(d)}
            if lib in default_index:
                continue
            missing.setdefault(lib, []).append(rel)
    return {"objects": len(objects), "unreadable": unreadable,
            "missing": [{"library": lib, "needed_by": sorted(by)} for lib, by in sorted(missing.items())]}


def provider(library):
    """Where a library comes from, in words, for a message: the system's package on each family, or the wheel."""
    known = PROVIDERS.get(library, {})
    if "pip" in known:
        return f"the wheel {known['pip']} in the release's environment"
    said = [(text if text.startswith("the ") else f"package {text}") + f" ({family} family)"
            for family, text in sorted(known.items())]
    return " or ".join(said) or "no package the collection knows"
