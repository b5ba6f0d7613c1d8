#!/usr/bin/env python3
"""The SM120 compiler judge over real sglang trees of 2026, as tests/fixtures/sm120/upstream-trees.json lists them.

Two commands, so that the same trees and edits are judged here (Triton 3.5.1, the lab's tool venv) and on the
lent GPU machine (a newer Triton, no network):

- ``pack DEST``: fetch each listed release (lab/upstream.py: pinned by sha256) and copy the directory of its
  kernel file (``extend_attention.py``: the file defining ``_get_block_sizes_for_extend_attention``, and the
  helpers beside it that the probe loads) to ``DEST/<version>/``, laid out as the release's package
  (``DEST/0.5.23/sglang/kernels/ops/attention/...``). Needs the network (PyPI).
- ``judge DIR [--python PY] [--out FILE]``: run the probe (plugins/module_utils/sm120_probe.py, as the module
  runs it) with interpreter PY on every tree under DIR and on every edit of the list, and print (or write) one
  JSON document: the Triton version and each tree's and edit's answer. Needs only Python and Triton.

``compare(answers)`` checks such a document against the list: the verdict and the figures expected, per tree and
edit, and returns the differences (empty when all agree); the tests and the run on the GPU machine use it.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TREES = REPO / "tests" / "fixtures" / "sm120" / "upstream-trees.json"
PROBE = REPO / "plugins" / "module_utils" / "sm120_probe.py"
FUNCTION = "_get_block_sizes_for_extend_attention"


def listing() -> dict:
    return json.loads(TREES.read_text())


def head_dim(text: str) -> list:
    qk, _, v = text.partition("/")
    return [int(qk), int(v or qk)]


def kernel_file(tree: Path) -> Path:
    """The one extend_attention.py under tree that defines the block-size function."""
    hits = [p for p in sorted(tree.rglob("extend_attention.py"))
            if f"def {FUNCTION}" in p.read_text(errors="replace")]
    if len(hits) != 1:
        raise LookupError(f"expected one kernel file defining {FUNCTION} under {tree}, found {hits}")
    return hits[0]


def edited(base_file: Path, edit: dict, dest: Path) -> Path:
    """A copy of the kernel file's directory with the edit applied to the kernel file; returns the new file."""
    text = base_file.read_text()
    if text.count(edit["old"]) != 1:
        raise LookupError(f"edit {edit['name']!r}: its text is not found once in {base_file}")
    package = next(p for p in base_file.parents if p.name == "sglang")
    rel = base_file.relative_to(package.parent)
    target = dest / rel
    shutil.copytree(base_file.parent, target.parent, dirs_exist_ok=True)
    target.write_text(text.replace(edit["old"], edit["new"]))
    return target


def probe(python: str, file: Path, head_dims: list, cache_dir: Path) -> dict:
    """The probe's answer for one kernel file, run as the module runs it (isolated interpreter, own Triton cache)."""
    proc = subprocess.run(
        [python, "-I", str(PROBE), json.dumps({"file": str(file), "capability": listing()["capability"],
                                               "head_dims": [head_dim(h) for h in head_dims]})],
        capture_output=True, text=True, timeout=900,
        env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "TRITON_CACHE_DIR": str(cache_dir)})
    if proc.returncode != 0:
        return {"status": "failed", "error": f"exit {proc.returncode}: {proc.stderr[-2000:]}"}
    return json.loads(proc.stdout.strip().splitlines()[-1])


def figures(answer: dict) -> dict:
    """{head dim: [BLOCK_M, BLOCK_N, num_warps, num_stages, shared bytes]} of an answer that judged."""
    return {t["head_dim"]: [t["BLOCK_M"], t["BLOCK_N"], t["num_warps"], t["num_stages"], t["smem_bytes"]]
            for t in answer.get("tiles", [])}


def judge(trees_dir: Path, python: str) -> dict:
    """Every listed tree found under trees_dir, and every edit, judged by the probe with python."""
    data = listing()
    out = {"python": python, "trees": {}, "edits": {}}
    work = Path(tempfile.mkdtemp(prefix="sm120-trees-"))
    try:
        files = {}
        for tree in data["trees"]:
            root = trees_dir / tree["version"]
            if not root.is_dir():
                out["trees"][tree["version"]] = {"status": "missing", "error": f"no tree at {root}"}
                continue
            files[tree["version"]] = kernel_file(root)
            answer = probe(python, files[tree["version"]], data["head_dims"], work / "cache" / tree["version"])
            answer["file"] = str(files[tree["version"]].relative_to(root))
            out["trees"][tree["version"]] = answer
            out.setdefault("triton", answer.get("triton"))
        for i, edit in enumerate(data["edits"]):
            if edit["base"] not in files:
                out["edits"][edit["name"]] = {"status": "missing", "error": f"no tree {edit['base']}"}
                continue
            file = edited(files[edit["base"]], edit, work / f"edit-{i}")
            out["edits"][edit["name"]] = probe(python, file, edit["head_dims"], work / "cache" / f"edit-{i}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return out


def compare(answers: dict) -> list:
    """What differs between answers (as judge returns them) and the listing's expectations: [] when all agree."""
    data = listing()
    wrong = []
    expected = [(t["version"], answers["trees"], t) for t in data["trees"]] + \
               [(e["name"], answers["edits"], e) for e in data["edits"]]
    for name, found, want in expected:
        answer = found.get(name, {"status": "missing"})
        if answer.get("status") != "ok":
            wrong.append(f"{name}: not judged by the compiler: {answer.get('status')}: {answer.get('error')}")
            continue
        got = figures(answer)
        if got != want["figures"]:
            wrong.append(f"{name}: compiled {got}, expected {want['figures']}")
    return wrong


def pack(dest: Path) -> None:
    sys.path.insert(0, str(REPO))
    from lab import upstream  # the lab's pinned downloads; only here, where the network is

    for tree in listing()["trees"]:
        src = kernel_file(upstream.sglang_tree(tree["version"]))
        package = next(p for p in src.parents if p.name == "sglang")
        target = dest / tree["version"] / src.parent.relative_to(package.parent)
        target.mkdir(parents=True, exist_ok=True)
        for f in src.parent.glob("*.py"):
            shutil.copy2(f, target / f.name)
        print(f"{tree['version']}: {target}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("pack", help="copy each listed release's kernel directory to DEST (needs PyPI)")
    p.add_argument("dest", type=Path)
    j = sub.add_parser("judge", help="judge the trees under DIR and the edits; print JSON")
    j.add_argument("dir", type=Path)
    j.add_argument("--python", default=sys.executable, help="the interpreter with Triton (default: this one)")
    j.add_argument("--out", type=Path, help="write the JSON here too")
    args = parser.parse_args(argv)
    if args.command == "pack":
        pack(args.dest)
        return 0
    answers = judge(args.dir, args.python)
    wrong = compare(answers)
    answers["differences"] = wrong
    text = json.dumps(answers, indent=1, sort_keys=True)
    if args.out:
        args.out.write_text(text + "\n")
    print(text)
    for line in wrong:
        print(f"DIFFERS: {line}", file=sys.stderr)
    print(f"{len(answers['trees']) + len(answers['edits']) - len(wrong)} agree, {len(wrong)} differ "
          f"(Triton {answers.get('triton')})", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    raise SystemExit(main())
