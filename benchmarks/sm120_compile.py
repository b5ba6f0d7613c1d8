#!/usr/bin/env python3
"""Benchmark: what the SM120 compiler judge costs, per head dim, cold and cached.

For sglang 0.5.8.post1, 0.5.9 (the pin's release) and the newest release of tests/fixtures/sm120/upstream-trees.json
(real files from PyPI, fetched and checked by lab/upstream.py) and each head dim GLM-5 is judged at (128/128, 256/256, 576/512), prints the wall time of one probe run
(plugins/module_utils/sm120_probe.py: interpreter start, Triton import, loading the kernel file, compiling
for sm_120):
- cold: an empty Triton cache (what the module pays: it gives the probe a fresh cache directory each run);
- Triton-cached: the same again with Triton's cache from the cold run;
then, when `ansible` is on PATH, the module itself on 0.5.9 and on the newest tree with the three head dims: the
first run (compiles) and a rerun answered from its verdict cache (what a converged host pays in verify).

Figures, not a pass/fail test. Run from the repository root with an interpreter that has Triton 3.5.1
(the lab's tool venv has it): ~/.cache/blackwell-lab/venv-*/bin/python benchmarks/sm120_compile.py
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(REPO / ".collections"))

from lab import paths, upstream  # noqa: E402
from tools import sm120_trees  # noqa: E402

PROBE = REPO / "plugins" / "module_utils" / "sm120_probe.py"
HEAD_DIMS = [(128, 128), (256, 256), (576, 512)]


def probe(python, file, dims, cache_dir):
    t0 = time.monotonic()
    proc = subprocess.run([python, "-I", str(PROBE), json.dumps(
        {"file": str(file), "capability": [12, 0], "head_dims": [list(d) for d in dims]})],
        capture_output=True, text=True, env={"PATH": os.environ["PATH"], "TRITON_CACHE_DIR": str(cache_dir)})
    dt = time.monotonic() - t0
    answer = json.loads(proc.stdout) if proc.returncode == 0 else {"status": "failed", "error": proc.stderr[-500:]}
    if answer.get("status") != "ok":
        sys.exit(f"the probe did not judge {file}: {answer}")
    return dt, answer


def module(tree, cache, python):
    args = {"path": str(tree), "python": python, "head_sizes": ["128", "256", "576/512"], "cache": str(cache)}
    # this checkout as blackwell.serving, then the lab's bundled collections (the json callback is ansible.posix's)
    env = dict(os.environ, ANSIBLE_LOAD_CALLBACK_PLUGINS="1", ANSIBLE_STDOUT_CALLBACK="ansible.builtin.json",
               ANSIBLE_LOCALHOST_WARNING="0",
               ANSIBLE_COLLECTIONS_PATH=f"{REPO / '.collections'}:{paths.state_dir() / 'collections'}")
    t0 = time.monotonic()
    proc = subprocess.run(["ansible", "localhost", "-c", "local", "-m", "blackwell.serving.sglang_sm120_check",
                           "-a", json.dumps(args)], capture_output=True, text=True, env=env)
    dt = time.monotonic() - t0
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return dt, result


def main():
    python = sys.executable
    work = Path(tempfile.mkdtemp(prefix="sm120-bench-"))
    try:
        newest = sm120_trees.listing()["trees"][-1]["version"]
        trees = {v: upstream.sglang_tree(v) for v in ("0.5.8.post1", "0.5.9", newest)}
        print(f"{'sglang':<12} {'head dim':<9} {'shared B':>9} {'cold s':>7} {'cached s':>9}")
        for version, tree in trees.items():
            file = sm120_trees.kernel_file(tree)
            for dims in HEAD_DIMS:
                cache = work / f"triton-{version}-{dims[0]}"
                cold, answer = probe(python, file, [dims], cache)
                warm, _ = probe(python, file, [dims], cache)
                shared = answer["tiles"][0]["smem_bytes"]
                print(f"{version:<12} {dims[0]}/{dims[1]:<5} {shared:>9} {cold:>7.2f} {warm:>9.2f}")
        if shutil.which("ansible"):
            for version in ("0.5.9", newest):
                cache = work / f"verdict-{version}.json"
                first, r = module(trees[version], cache, python)
                again, r2 = module(trees[version], cache, python)
                print(f"module on {version}, three head dims: first run {first:.2f} s (judge {r['judge']}, cached "
                      f"{r['cached']}); rerun {again:.2f} s (cached {r2['cached']})")
        else:
            print("ansible is not on PATH: the module's own figures are left out")
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
