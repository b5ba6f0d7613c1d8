"""Host prerequisites and the Docker engine.

The lab installs what it needs from Debian's mirror, and starts a Docker
engine only when none answers. It records the PID of the engine it started
and stops exactly that one.
"""
from __future__ import annotations

import os
import shutil
import signal
import subprocess
from pathlib import Path

from . import paths
from .util import LabError, log, run, wait_for

# Debian packages the lab needs on the controller, keyed by a command each provides.
HOST_PACKAGES = {
    "dockerd": "docker.io",
    "debootstrap": "debootstrap",
    "git": "git",
    "gpg": "gnupg",
    "dpkg-deb": "dpkg",
    "ssh": "openssh-client",
    "ssh-keygen": "openssh-client",
}


def ensure_host_packages() -> None:
    missing = sorted({pkg for cmd, pkg in HOST_PACKAGES.items() if shutil.which(cmd) is None})
    if not missing:
        return
    if os.geteuid() != 0:
        raise LabError(f"missing host packages {missing}; install them (as root: apt-get install {' '.join(missing)})")
    log(f"installing host packages: {' '.join(missing)}")
    env = {"DEBIAN_FRONTEND": "noninteractive"}
    run(["apt-get", "update", "-qq"], env=env)
    run(["apt-get", "install", "-y", "-qq", "--no-install-recommends", *missing], env=env)


def docker_answers() -> bool:
    return subprocess.run(["docker", "info"], capture_output=True).returncode == 0


class Engine:
    """A Docker engine: the one that answers, or one the lab starts."""

    def __init__(self) -> None:
        self.dir = paths.sub("engine")
        self.pidfile = self.dir / "dockerd.pid"

    def started_by_lab(self) -> int | None:
        try:
            pid = int(self.pidfile.read_text())
        except (OSError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except OSError:
            return None
        return pid

    def ensure(self) -> bool:
        """Make sure an engine answers. Returns True if this call started it."""
        if shutil.which("docker") and docker_answers():
            return False
        ensure_host_packages()
        if docker_answers():
            return False
        data_root = paths.sub("docker")
        logf = open(self.dir / "dockerd.log", "ab")
        log(f"starting dockerd (data root {data_root})")
        proc = subprocess.Popen(
            ["dockerd", "--storage-driver", "overlay2", "--data-root", str(data_root),
             "--pidfile", str(self.dir / "dockerd.own.pid")],
            stdout=logf, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        self.pidfile.write_text(str(proc.pid))
        try:
            wait_for("the Docker engine", docker_answers, timeout=60)
        except LabError:
            tail = (self.dir / "dockerd.log").read_text(errors="replace")[-2000:]
            raise LabError(f"dockerd did not answer within 60s; its log ends:\n{tail}") from None
        return True

    def stop(self) -> None:
        pid = self.started_by_lab()
        if pid is None:
            return
        log(f"stopping the dockerd the lab started (pid {pid})")
        os.kill(pid, signal.SIGTERM)
        try:
            wait_for("dockerd to stop", lambda: not _alive(pid), timeout=30)
        except LabError:
            os.kill(pid, signal.SIGKILL)
        self.pidfile.unlink(missing_ok=True)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    # a zombie child of ours still answers kill(0); reap it
    try:
        done, _ = os.waitpid(pid, os.WNOHANG)
        return done == 0
    except ChildProcessError:
        return Path(f"/proc/{pid}").exists()


def docker(*args: str, capture: bool = True, check: bool = True, quiet: bool = True) -> subprocess.CompletedProcess:
    return run(["docker", *args], capture=capture, check=check, quiet=quiet)


def bridge_gateway() -> str:
    """The host's address on Docker's default bridge: where containers reach the stand-ins."""
    out = docker("network", "inspect", "bridge", "--format", "{{range .IPAM.Config}}{{.Gateway}}{{end}}").stdout.strip()
    if out:
        return out
    # Older engines leave the gateway out of the network's description: read the bridge interface.
    name = docker("network", "inspect", "bridge", "--format",
                  '{{index .Options "com.docker.network.bridge.name"}}').stdout.strip() or "docker0"
    addr = run(["ip", "-4", "-o", "addr", "show", "dev", name], capture=True, quiet=True, check=False).stdout.split()
    if "inet" in addr:
        return addr[addr.index("inet") + 1].split("/")[0]
    raise LabError(f"cannot find the address of Docker's bridge network (interface {name})")
