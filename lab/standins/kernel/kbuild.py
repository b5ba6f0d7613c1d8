#!/usr/bin/python3
"""Lab stand-in of the kernel build system of the lab host's running kernel.

The lab host runs the machine's own kernel, which no Debian package matches, so its headers package is a stand-in
(see lab/image.py) and this script is the build tree's Makefile's only recipe: for ``make -C
/lib/modules/<kernel>/build M=<dir>``, as DKMS runs it, it writes each module that ``<dir>/Kbuild`` names
(``obj-m``) as an ELF relocatable object with the ``.modinfo`` section a real build gives it (name, version,
license, description, parameters, vermagic), read from the module source's ``MODULE_*`` macros; ``modinfo``,
``depmod`` and DKMS's checks read it as they read a real module. Nothing is compiled: the code in the source is
for the real kernels' headers, against which DKMS builds it for real (the Debian kernels the lab installs).
"""
import re
import struct
import sys
from pathlib import Path


def modinfo(source: str, name: str, kernel: str) -> bytes:
    fields = [("license", "LICENSE"), ("description", "DESCRIPTION"), ("version", "VERSION"), ("author", "AUTHOR")]
    entries = []
    for key, macro in fields:
        entries += [f"{key}={v}" for v in re.findall(rf'MODULE_{macro}\("([^"]*)"\)', source)]
    entries += [f"parm={p}:{d}" for p, d in re.findall(r'MODULE_PARM_DESC\((\w+),\s*"([^"]*)"\)', source)]
    entries += [f"name={name.replace('-', '_')}", f"vermagic={kernel} SMP preempt mod_unload modversions "]
    return b"".join(e.encode() + b"\0" for e in entries)


def elf_rel(sections: dict) -> bytes:
    """A minimal x86-64 ELF relocatable object: the given sections, a symbol table and the section names."""
    names = [""] + list(sections) + [".symtab", ".strtab", ".shstrtab"]
    shstrtab = b"\0".join(n.encode() for n in names) + b"\0"
    offsets = {n: shstrtab.index(b"\0" + n.encode() + b"\0") + 1 for n in names[1:]}
    strtab = b"\0"
    symtab = b"\0" * 24  # the null symbol
    body = bytearray()
    headers = [b"\0" * 64]
    data_start = 64
    layout = [(n, 1, 2, sections[n]) for n in sections]  # SHT_PROGBITS, SHF_ALLOC
    layout += [(".symtab", 2, 0, symtab), (".strtab", 3, 0, strtab), (".shstrtab", 3, 0, shstrtab)]
    for index, (name, kind, flags, data) in enumerate(layout, start=1):
        offset = data_start + len(body)
        body += data
        link, info, entsize = (len(sections) + 2, 1, 24) if name == ".symtab" else (0, 0, 0)
        headers.append(struct.pack("<IIQQQQIIQQ", offsets[name], kind, flags, 0, offset, len(data), link, info,
                                   8 if name == ".symtab" else 1, entsize))
    shoff = data_start + len(body) + (-len(body)) % 8
    body += b"\0" * ((-len(body)) % 8)
    header = (b"\x7fELF" + bytes([2, 1, 1, 0]) + b"\0" * 8
              + struct.pack("<HHIQQQIHHHHHH", 1, 62, 1, 0, 0, shoff, 0, 64, 0, 0, 64, len(headers), len(headers) - 1))
    return header + bytes(body) + b"".join(headers)


def main() -> int:
    args = dict(a.split("=", 1) for a in sys.argv[1:] if "=" in a)
    kernel, build_dir = args["KERNELRELEASE"], Path(args["M"])
    kbuild = build_dir / "Kbuild" if (build_dir / "Kbuild").exists() else build_dir / "Makefile"
    objects = re.findall(r"^obj-m\s*[:+]?=\s*(.+)$", kbuild.read_text(), re.M)
    for obj in " ".join(objects).split():
        name = obj[:-2]
        source = build_dir / f"{name}.c"
        if not source.exists():
            print(f"kbuild (lab stand-in): no rule to make {name}.o: {source} is missing", file=sys.stderr)
            return 2
        (build_dir / f"{name}.ko").write_bytes(
            elf_rel({".modinfo": modinfo(source.read_text(), name, kernel), ".gnu.linkonce.this_module": b"\0" * 64}))
        print(f"  LD [M]  {build_dir / name}.ko (lab stand-in kbuild of kernel {kernel})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
