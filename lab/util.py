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


def fetch_pinned(url: str, want: str, target: Path) -> Path:
    """target, kept where its sha256 is want, else downloaded from url and checked against want first."""
    import urllib.request
    if target.is_file() and hashlib.sha256(target.read_bytes()).hexdigest() == want:
        return target
    log(f"fetching {url}")
    try:
        with urllib.request.urlopen(url, timeout=300) as resp:
            data = resp.read()
    except OSError as exc:
        raise LabError(f"cannot download {url}: {exc}") from None
    got = hashlib.sha256(data).hexdigest()
    if got != want:
        raise LabError(f"{url} has sha256 {got}, pinned {want}: not using it")
    tmp = target.with_suffix(target.suffix + ".part")
    tmp.write_bytes(data)
    tmp.replace(target)
    return target


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
