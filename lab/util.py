"""Small helpers shared by the lab: logging, running commands, waiting."""
from __future__ import annotations

import hashlib
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Iterable, Mapping, Sequence

_T0 = time.monotonic()


class LabError(RuntimeError):
    """A failure the lab explains to its user (no traceback needed)."""


def log(msg: str) -> None:
    print(f"[lab {time.monotonic() - _T0:6.1f}s] {msg}", file=sys.stderr, flush=True)


def run(
    cmd: Sequence[str],
    *,
    check: bool = True,
    capture: bool = False,
    env: Mapping[str, str] | None = None,
    cwd: str | Path | None = None,
    input: str | bytes | None = None,
    quiet: bool = False,
) -> subprocess.CompletedProcess:
    """Run a command; on failure raise LabError with its output."""
    if not quiet:
        log("$ " + " ".join(shlex.quote(str(c)) for c in cmd))
    full_env = None
    if env is not None:
        full_env = dict(os.environ)
        full_env.update(env)
    text = not isinstance(input, bytes)
    proc = subprocess.run(
        [str(c) for c in cmd],
        check=False,
        capture_output=capture,
        env=full_env,
        cwd=str(cwd) if cwd else None,
        input=input,
        text=text,
    )
    if check and proc.returncode != 0:
        detail = ""
        if capture:
            detail = f"\n--- stdout ---\n{proc.stdout}\n--- stderr ---\n{proc.stderr}"
        raise LabError(f"command failed (rc={proc.returncode}): {' '.join(map(str, cmd))}{detail}")
    return proc


def wait_for(what: str, probe: Callable[[], bool], timeout: float, interval: float = 0.5) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if probe():
            return
        if time.monotonic() > deadline:
            raise LabError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(interval)


def digest(parts: Iterable[bytes | str]) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part.encode() if isinstance(part, str) else part)
        h.update(b"\0")
    return h.hexdigest()[:16]
