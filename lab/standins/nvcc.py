#!/usr/bin/python3
"""Lab stand-in for nvcc: answers --version like the real compiler driver.

Installed by the lab's stand-in cuda-nvcc-X-Y package; the version is
filled in when the package is built. It compiles nothing.
"""
import sys

RELEASE = "@RELEASE@"      # e.g. 12.9
FULL = "@FULL@"            # e.g. 12.9.86

if "--version" in sys.argv[1:] or "-V" in sys.argv[1:]:
    print("nvcc: NVIDIA (R) Cuda compiler driver\nCopyright (c) 2005-2025 NVIDIA Corporation\n"
          "Built on Lab_Stand_In\n"
          f"Cuda compilation tools, release {RELEASE}, V{FULL}\nBuild cuda_{RELEASE}.r{RELEASE}/compiler.lab_0")
    sys.exit(0)
print("nvcc (lab stand-in): this stand-in compiles nothing", file=sys.stderr)
sys.exit(1)
