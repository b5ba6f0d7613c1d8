"""Helpers for the tests that drive the lab: run a tool, read a play recap."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

needs_lab = pytest.mark.skipif(not os.environ.get("BLACKWELL_LAB_IMAGE"),
                               reason="needs the lab: run through python3 -m lab test")


def run(cmd, *, cwd=REPO, env=None, timeout=1800):
    full = dict(os.environ)
    full.update(env or {})
    proc = subprocess.run([str(c) for c in cmd], cwd=str(cwd), env=full, capture_output=True, text=True,
                          timeout=timeout)
    # keep the tool's output in the test report when it fails
    sys.stdout.write(proc.stdout[-20000:])
    sys.stderr.write(proc.stderr[-20000:])
    return proc


RECAP = re.compile(r"^(\S+)\s+:\s+ok=(\d+)\s+changed=(\d+)\s+unreachable=(\d+)\s+failed=(\d+)", re.M)


def recap(output: str) -> dict[str, dict[str, int]]:
    """Per host: ok, changed, unreachable, failed from the PLAY RECAP."""
    return {m[1]: {"ok": int(m[2]), "changed": int(m[3]), "unreachable": int(m[4]), "failed": int(m[5])}
            for m in RECAP.finditer(output)}


def playbook(*args, env=None, timeout=1800):
    return run(["ansible-playbook", "-i", REPO / "inventories" / "lab", *args], env=env, timeout=timeout)
