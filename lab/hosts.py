"""Lab hosts: systemd containers reached over SSH, like real servers.

Each host publishes its sshd on a loopback port of this machine; Ansible
connects there as root with the lab's key. Hosts reach the stand-in servers
under the name ``lab-mirror``. A host is restarted by Docker when its systemd
exits, so that a reboot from a play comes back as a reboot does.
"""
from __future__ import annotations

import fcntl
import os
import subprocess
import time
from pathlib import Path

from . import paths
from .engine import bridge_gateway, docker
from .util import LabError, log, run, wait_for

# host name -> SSH port on 127.0.0.1 (inventories/lab/hosts.yml and inventories/lab-fleet/hosts.yml list
# the same): eight GPU-server stand-ins (a fleet for the benchmarks) and a router host
LAB_HOSTS = {**{f"lab-gpu-{i}": 22200 + i for i in range(1, 9)}, "lab-router-1": 22211}
PREFIX = "blackwell-lab-"
MIRROR_NAME = "lab-mirror"


def ssh_key() -> Path:
    d = paths.sub("ssh")
    key = d / "id_ed25519"
    if not key.exists():
        run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "blackwell-lab", "-f", str(key)])
    return key


def container(host: str) -> str:
    return PREFIX + host


def running(host: str) -> bool:
    out = docker("inspect", "-f", "{{.State.Running}}", container(host), check=False)
    return out.returncode == 0 and out.stdout.strip() == "true"


def ssh_ok(host: str) -> bool:
    proc = subprocess.run(
        ["ssh", "-q", "-i", str(ssh_key()), "-p", str(LAB_HOSTS[host]), "-o", "BatchMode=yes",
         "-o", "StrictHostKeyChecking=no", "-o", "UserKnownHostsFile=/dev/null", "-o", "ConnectTimeout=2",
         "root@127.0.0.1", "true"], capture_output=True)
    return proc.returncode == 0


def start(host: str, image: str, *, fresh: bool = False) -> None:
    if host not in LAB_HOSTS:
        raise LabError(f"unknown lab host {host!r}; known: {', '.join(LAB_HOSTS)}")
    if fresh:
        remove(host)
    if running(host) and ssh_ok(host):
        return
    if not running(host):
        docker("rm", "-f", container(host), check=False)
        log(f"starting lab host {host} (ssh on 127.0.0.1:{LAB_HOSTS[host]})")
        docker("run", "-d", "--name", container(host), "--hostname", host,
               "--cap-add", "SYS_ADMIN", "--cgroupns=host", "-v", "/sys/fs/cgroup:/sys/fs/cgroup:rw",
               "--tmpfs", "/run", "--tmpfs", "/run/lock", "--tmpfs", "/tmp", "--stop-signal", "RTMIN+3",
               "--restart", "unless-stopped", "--add-host", f"{MIRROR_NAME}:{bridge_gateway()}",
               "-p", f"127.0.0.1:{LAB_HOSTS[host]}:22", "--label", "blackwell-lab=host",
               image, "/lib/systemd/systemd")
    pub = ssh_key().with_suffix(".pub").read_text()
    docker("exec", container(host), "sh", "-c",
           f"mkdir -p -m 700 \"$HOME/.ssh\" && printf '%s\\n' '{pub.strip()}' > \"$HOME/.ssh/authorized_keys\" "
           "&& chmod 600 \"$HOME/.ssh/authorized_keys\"")
    wait_for(f"ssh on {host}", lambda: ssh_ok(host), timeout=60)


def address(host: str) -> str:
    """The host's address on the lab's bridge (where its services answer, as on a server's LAN)."""
    out = docker("inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", container(host))
    return out.stdout.strip()


def snapshot(host: str, tag: str) -> str:
    """Save a host's disk as an image, so that more hosts can start where it is (a fleet in seconds)."""
    log(f"saving {host} as the image {tag}")
    docker("commit", "--pause=true", container(host), tag)
    return tag


def remove(host: str) -> None:
    docker("rm", "-f", container(host), check=False)


def remove_all() -> None:
    out = docker("ps", "-aq", "--filter", "label=blackwell-lab=host", check=False).stdout.split()
    if out:
        docker("rm", "-f", *out, check=False)


# A converged server, saved once a test run: the fault tests' host and the fleet's servers start from it instead of
# converging a host each. Where the run has lab-gpu-1's fresh converge (a test module that names its host in
# PUBLISHES_CONVERGED_IMAGE: tests/conftest.py registers it before any test runs), that converge is the image and the
# others wait for it; else the first chain to ask converges its own host. One tag a run (BLACKWELL_LAB_RUN, set by
# `python3 -m lab test`), removed when the run ends (remove_converged_images).
CONVERGED = "blackwell-lab/converged"
RUN_ID = "BLACKWELL_LAB_RUN"
# how long a chain waits for the registered host's converge before it converges one of its own (a bound on a
# producer that died; its converge takes minutes)
PRODUCER_WAIT = 45 * 60


def _run_key() -> str:
    run_id = os.environ.get(RUN_ID) or os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"pid{os.getpid()}"
    return run_id[:24].lower()


def _tag() -> str:
    return f"{CONVERGED}:{_run_key()}"


def _marker(kind: str) -> Path:
    return paths.sub("run") / f"converged-image.{_run_key()}.{kind}"


def _image_exists(tag: str) -> bool:
    return docker("image", "inspect", tag, check=False).returncode == 0


def register_producer(host: str) -> None:
    """`host`'s own converge, made by a test of this run, is to be the run's converged image (before any test runs)."""
    marker = _marker("producer")
    if not marker.exists():
        marker.write_text(host)


def publish_converged(host: str, converged: bool) -> None:
    """The registered host's converge is done: saved as the run's image, or (it failed) the waiting chains told to
    converge their own."""
    if converged:
        snapshot(host, _tag())
    else:
        _marker("failed").write_text(f"{host}'s converge failed\n")


def converged_image(host: str, converge) -> tuple[str, bool]:
    """(the tag of a converged server's image, whether `host` is that server).

    Where another host's converge is registered as the run's image, it is waited for. Else (or where it failed) the
    first caller starts `host` fresh from the lab's image, has `converge()` run site.yml on it (it raises where the
    run fails) and saves the host as the run's image; a caller that comes while that converge runs waits for it. A
    caller given the image starts its own hosts from it and converges them with its own inventory (a near no-op). A
    converge that fails saves nothing: the next caller converges its own host.
    """
    tag = _tag()
    producer = _marker("producer").read_text() if _marker("producer").exists() else ""
    if producer and producer != host:
        log(f"{host}: waiting for {producer}'s converge, the run's converged image")
        deadline = time.monotonic() + PRODUCER_WAIT
        while not _image_exists(tag) and not _marker("failed").exists() and time.monotonic() < deadline:
            time.sleep(5)
        if _image_exists(tag):
            return tag, False
        log(f"{host}: {producer}'s converge gave no image; converging {host}")
    with open(paths.sub("run") / "converged-image.lock", "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        if _image_exists(tag):
            log(f"{host}: starting from the run's converged image {tag}")
            return tag, False
        start(host, os.environ["BLACKWELL_LAB_IMAGE"], fresh=True)
        converge()
        snapshot(host, tag)
        return tag, True


def remove_converged_images() -> None:
    out = docker("images", "-q", CONVERGED, check=False).stdout.split()
    if out:
        docker("rmi", "-f", *sorted(set(out)), check=False)
    for marker in paths.sub("run").glob("converged-image.*.*"):
        marker.unlink(missing_ok=True)
