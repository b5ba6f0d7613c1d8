"""Run one of the collection's modules as Ansible runs it on a host: a fresh interpreter, its arguments as JSON
on stdin, its result as JSON on stdout."""
import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def run_module(name, args, *, env=None, path_prepend=None):
    full = dict(os.environ)
    full["PYTHONPATH"] = os.pathsep.join([str(REPO / ".collections"), full.get("PYTHONPATH", "")])
    if path_prepend:
        full["PATH"] = f"{path_prepend}{os.pathsep}{full['PATH']}"
    full.update(env or {})
    proc = subprocess.run([sys.executable, "-m", f"ansible_collections.blackwell.serving.plugins.modules.{name}"],
                          input=json.dumps({"ANSIBLE_MODULE_ARGS": args}), capture_output=True, text=True,
                          env=full, timeout=120)
    try:
        return json.loads(proc.stdout)
    except ValueError as exc:
        raise AssertionError(f"{name} printed no JSON: {proc.stdout!r} {proc.stderr!r}") from exc
