"""The lab's one command line: ``python3 -m lab {up,site,test,down,status}``."""
from __future__ import annotations

import argparse
import contextlib
import fcntl
import os
import shutil
import subprocess
import sys
import uuid

from . import aptrepo, engine, hosts, image, paths, serve, sglang_repo, tools, wheels
from .util import LabError, log


def up(with_hosts: list[str] | None = None, fresh: bool = False) -> dict[str, str]:
    """Make this machine ready: engine, image, tools, stand-ins, servers (and hosts)."""
    engine.ensure_host_packages()
    started = engine.Engine().ensure()
    venv = tools.ensure_venv()
    tools.collections_root()
    tag = image.ensure_image()
    www = paths.sub("www")
    aptrepo.build(www)
    wheels.build(www)
    sglang_repo.build(paths.sub("git"))
    addr = engine.bridge_gateway()
    for svc in serve.services(addr):
        svc.ensure()
    for host in with_hosts or []:
        hosts.start(host, tag, fresh=fresh)
    env = tools.tool_env(venv)
    # the lab hosts' key as ansible-core's own setting, not an inventory variable: a variable's lookup would be
    # templated again for every task of every run
    env["ANSIBLE_PRIVATE_KEY_FILE"] = str(hosts.ssh_key())
    env["BLACKWELL_LAB_IMAGE"] = tag
    env["BLACKWELL_LAB_GATEWAY"] = addr
    # the stand-in NVIDIA repository's key is made per lab state: the lab inventory pins its fingerprint from here
    env["BLACKWELL_LAB_NVIDIA_KEY_FINGERPRINT"] = aptrepo.key_fingerprint()
    env["BLACKWELL_LAB_ENGINE_STARTED"] = "1" if started else "0"
    return env


LOCK_HELD = "BLACKWELL_LAB_LOCK_HELD"


@contextlib.contextmanager
def lab_lock():
    """One lab run at a time on a machine: the lab's hosts, ports and served trees are one set.

    Two checkouts (or two users of one state directory) that run the lab at once would rebuild the
    stand-ins and recreate the hosts under each other. A second run waits, saying so; commands started by
    a run that holds the lock (its tests, its playbooks) inherit it.
    """
    if os.environ.get(LOCK_HELD) == str(paths.state_dir()):
        yield
        return
    path = paths.state_dir() / "lab.lock"
    with open(path, "a+") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another run"
            log(f"waiting for the lab: {holder} holds {path}")
            fcntl.flock(fh, fcntl.LOCK_EX)
        fh.seek(0)
        fh.truncate()
        fh.write(f"pid {os.getpid()} ({' '.join(sys.argv[1:2]) or 'lab'} from {paths.REPO})\n")
        fh.flush()
        os.environ[LOCK_HELD] = str(paths.state_dir())
        try:
            yield
        finally:
            os.environ.pop(LOCK_HELD, None)
            fh.seek(0)
            fh.truncate()


def cmd_up(args: argparse.Namespace) -> int:
    up(args.hosts or ["lab-gpu-1"])
    log(f"lab is up; state in {paths.state_dir()}")
    return 0


def cmd_site(args: argparse.Namespace) -> int:
    env = up(["lab-gpu-1"], fresh=args.fresh)
    cmd = ["ansible-playbook", "-i", str(paths.REPO / "inventories" / "lab"),
           str(paths.REPO / "playbooks" / "site.yml"), *args.ansible_args]
    log("running " + " ".join(cmd))
    return subprocess.call(cmd, env=env, cwd=str(paths.REPO))


TEST_WORKERS = "BLACKWELL_LAB_TEST_WORKERS"


def parallel(pytest_args: list[str]) -> list[str]:
    """Five test workers unless told otherwise (-n/--numprocesses given, or BLACKWELL_LAB_TEST_WORKERS=0).

    Much of a lab test is waiting (apt, uv, a server's start, a health gate), so lab-gpu-1's tests, the fleet's, the
    Molecule scenarios and the rest run side by side even on two cores, the long units first and at a higher CPU
    priority (tests/conftest.py says which test belongs to which unit, and in which order they start).
    """
    if any(a == "-n" or a.startswith(("-n=", "--numprocesses")) or a == "no:xdist" for a in pytest_args):
        return []
    workers = os.environ.get(TEST_WORKERS, "5")
    if not workers.isdigit():
        raise LabError(f"{TEST_WORKERS} must be a number of workers (0: no parallel run), found {workers!r}")
    if int(workers) < 2:
        return []
    return ["-n", workers, "-v"]


def cmd_test(args: argparse.Namespace) -> int:
    env = up()
    tools.drop_installed_copies()
    # every test starts its hosts itself: none left by a run cut short (Docker restarts them with the engine, each
    # a server booting beside this run's), and the run's converged server image (lab/hosts.py, converged_image) is
    # its own
    hosts.remove_all()
    hosts.remove_converged_images()
    env[hosts.RUN_ID] = uuid.uuid4().hex
    # every run starts from hosts' facts as they are (lab hosts are recreated under the same names)
    shutil.rmtree(env["ANSIBLE_CACHE_PLUGIN_CONNECTION"], ignore_errors=True)
    cmd = [os.path.join(env["VIRTUAL_ENV"], "bin", "python"), "-m", "pytest", "-p", "no:cacheprovider",
           "-o", "console_output_style=classic", *parallel(args.pytest_args), *args.pytest_args]
    log("running " + " ".join(cmd))
    try:
        return subprocess.call(cmd, env=env, cwd=str(paths.REPO))
    finally:
        hosts.remove_converged_images()
        if env["BLACKWELL_LAB_ENGINE_STARTED"] == "1":
            # leave the machine as it was: stop what this run started, and only that
            cmd_down(args)


def cmd_docs(args: argparse.Namespace) -> int:
    venv = tools.ensure_venv()
    return subprocess.call([str(venv / "bin" / "python"), str(paths.REPO / "tools" / "role_docs.py")], cwd=str(paths.REPO))


def cmd_down(args: argparse.Namespace) -> int:
    if engine.docker_answers():
        hosts.remove_all()
        hosts.remove_converged_images()
        try:
            addr = engine.bridge_gateway()
            for svc in serve.services(addr):
                svc.stop()
        except LabError:
            pass
    engine.Engine().stop()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m lab", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    p = sub.add_parser("up", help="make this machine ready and start lab hosts")
    p.add_argument("hosts", nargs="*", help=f"lab hosts to start (default lab-gpu-1; known: {', '.join(hosts.LAB_HOSTS)})")
    p.set_defaults(func=cmd_up)
    p = sub.add_parser("site", help="run playbooks/site.yml against the lab host lab-gpu-1 over SSH")
    p.add_argument("--fresh", action="store_true", help="start from a new, bare lab host")
    p.add_argument("ansible_args", nargs=argparse.REMAINDER, help="passed to ansible-playbook (after --)")
    p.set_defaults(func=cmd_site)
    p = sub.add_parser("test", help="run every test (unit, lint, sanity, Molecule, lab converge)")
    p.add_argument("pytest_args", nargs=argparse.REMAINDER, help="passed to pytest (after --)")
    p.set_defaults(func=cmd_test)
    p = sub.add_parser("docs", help="regenerate the role README variable tables from the argument specs")
    p.set_defaults(func=cmd_docs)
    p = sub.add_parser("down", help="remove lab hosts and stop what the lab started")
    p.set_defaults(func=cmd_down)
    args = parser.parse_args(argv)
    for attr in ("ansible_args", "pytest_args"):
        val = getattr(args, attr, None)
        if val and val[0] == "--":
            setattr(args, attr, val[1:])
    try:
        if args.func is cmd_docs:
            return args.func(args)
        with lab_lock():
            return args.func(args)
    except LabError as exc:
        print(f"lab: {exc}", file=sys.stderr)
        return 1
