"""The lab runs one at a time per state directory; what a run starts inherits its lock."""
import fcntl
import os
import subprocess
import sys
import time

import pytest

from conftest import REPO


def _holder(home, release):
    code = ("import pathlib, time\nfrom lab import cli\nwith cli.lab_lock():\n"
            f"    pathlib.Path({str(release)!r}).with_suffix('.held').write_text('x')\n"
            f"    while not pathlib.Path({str(release)!r}).exists(): time.sleep(0.05)\n")
    return subprocess.Popen([sys.executable, "-c", code], cwd=str(REPO),
                            env={**os.environ, "BLACKWELL_LAB_HOME": str(home)})


def test_second_run_cannot_take_the_lock_while_one_holds_it(tmp_path):
    release = tmp_path / "release"
    proc = _holder(tmp_path / "home", release)
    try:
        deadline = time.monotonic() + 30
        while not release.with_suffix(".held").exists():
            assert time.monotonic() < deadline and proc.poll() is None, "the holder never took the lock"
            time.sleep(0.05)
        with open(tmp_path / "home" / "lab.lock", "a+") as fh:
            with pytest.raises(BlockingIOError):
                fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
            fh.seek(0)
            assert f"pid {proc.pid}" in fh.read()
    finally:
        release.write_text("go")
        proc.wait(timeout=30)
    with open(tmp_path / "home" / "lab.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)  # released when the run ends


def test_a_command_started_by_the_run_inherits_the_lock(tmp_path, monkeypatch):
    from lab import cli
    monkeypatch.setenv("BLACKWELL_LAB_HOME", str(tmp_path))
    with open(tmp_path / "lab.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        monkeypatch.setenv(cli.LOCK_HELD, str(tmp_path))
        with cli.lab_lock():  # would wait forever if it did not see the inherited lock
            pass
