"""The stand-in servers: one HTTP server (apt repository, wheel index, files, the Hub stand-in)
and git's own daemon, both bound to the host's address on Docker's bridge so
that lab hosts reach them, and nothing outside this machine does.

``python3 -m lab.serve http ROOT ADDR PORT`` is the HTTP server's process.
"""
from __future__ import annotations

import functools
import os
import signal
import socket
import subprocess
import sys
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

from . import hub, paths, stack
from .util import LabError, digest, log, wait_for

HTTP_PORT = 8680
GIT_PORT = 9418


def _alive(pidfile: Path) -> int | None:
    try:
        pid = int(pidfile.read_text())
        os.kill(pid, 0)
        return pid
    except (OSError, ValueError):
        return None


def _answers(addr: str, port: int) -> bool:
    try:
        with socket.create_connection((addr, port), timeout=1):
            return True
    except OSError:
        return False


class Service:
    def __init__(self, name: str, addr: str, port: int, argv: list[str], code: list[Path] | None = None) -> None:
        self.name, self.addr, self.port, self.argv = name, addr, port, argv
        self.dir = paths.sub("run")
        self.pidfile = self.dir / f"{name}.pid"
        self.keyfile = self.dir / f"{name}.code"
        # a server runs its code as it was when it started: restart it when that code changed
        self.key = digest([p.read_bytes() for p in code or []] + argv)

    def ensure(self) -> None:
        pid = _alive(self.pidfile)
        current = self.keyfile.read_text() if self.keyfile.is_file() else ""
        if pid and _answers(self.addr, self.port) and current == self.key:
            return
        if pid:
            self.stop()
        if _answers(self.addr, self.port):
            raise LabError(f"{self.addr}:{self.port} is taken by another program; the lab's {self.name} needs it")
        logf = open(self.dir / f"{self.name}.log", "ab")
        proc = subprocess.Popen(self.argv, stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                start_new_session=True, cwd=str(paths.REPO))
        self.pidfile.write_text(str(proc.pid))
        self.keyfile.write_text(self.key)
        wait_for(f"the lab's {self.name} on {self.addr}:{self.port}", lambda: _answers(self.addr, self.port), 20)
        log(f"{self.name} serving on {self.addr}:{self.port} (pid {proc.pid})")

    def stop(self) -> None:
        pid = _alive(self.pidfile)
        if pid:
            os.kill(pid, signal.SIGTERM)
            wait_for(f"the lab's {self.name} to stop", lambda: _alive(self.pidfile) is None, 10, 0.1)
        self.pidfile.unlink(missing_ok=True)


def services(addr: str) -> list[Service]:
    www = paths.sub("www")
    git = paths.sub("git")
    return [
        Service("http", addr, HTTP_PORT, [sys.executable, "-m", "lab.serve", "http", str(www), addr, str(HTTP_PORT)],
                code=[Path(__file__), Path(hub.__file__), stack.STACK]),
        Service("git-daemon", addr, GIT_PORT,
                ["git", "daemon", "--reuseaddr", "--export-all", f"--base-path={git}", f"--listen={addr}",
                 f"--port={GIT_PORT}", str(git)]),
    ]


class QuietHandler(SimpleHTTPRequestHandler):
    """Files under ROOT, and the Hub stand-in under /hub (lab/hub.py)."""

    def log_message(self, fmt, *args):  # one line per request, to the service's log
        sys.stderr.write("%s %s\n" % (self.address_string(), fmt % args))

    def do_GET(self):
        if self.path.startswith(hub.PREFIX + "/"):
            return hub.handle(self)
        return super().do_GET()

    def do_HEAD(self):
        if self.path.startswith(hub.PREFIX + "/"):
            return hub.handle(self, head=True)
        return super().do_HEAD()


def main(argv: list[str]) -> None:
    if len(argv) != 4 or argv[0] != "http":
        raise SystemExit("usage: python3 -m lab.serve http ROOT ADDR PORT")
    root, addr, port = argv[1], argv[2], int(argv[3])
    handler = functools.partial(QuietHandler, directory=root)
    ThreadingHTTPServer((addr, port), handler).serve_forever()


if __name__ == "__main__":
    main(sys.argv[1:])
