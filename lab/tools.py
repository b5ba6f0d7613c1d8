"""The tool venv (pinned tools from PyPI) and the collections Molecule needs.

Molecule's docker driver needs community.docker and ansible.posix. Galaxy is
out of reach, but both ship inside the ``ansible`` package on PyPI: the lab
takes only those two directories out of its wheel.
"""
from __future__ import annotations

import os
import shutil
import sys
import zipfile
from pathlib import Path

from . import paths
from .util import LabError, digest, log, run

REQUIREMENTS = paths.LAB_SRC / "requirements.txt"
ANSIBLE_BUNDLE = "ansible==12.3.0"  # the release that ships the two collections below
BUNDLED_COLLECTIONS = ["community/docker", "ansible/posix"]
NAMESPACE, NAME = "blackwell", "serving"


def venv_dir() -> Path:
    key = digest([REQUIREMENTS.read_bytes(), sys.version])
    return paths.state_dir() / f"venv-{key}"


def ensure_venv() -> Path:
    venv = venv_dir()
    marker = venv / ".complete"
    if marker.exists():
        return venv
    if venv.exists():
        shutil.rmtree(venv)
    if sys.version_info < (3, 11):
        raise LabError(f"the lab needs Python 3.11 or newer, this is {sys.version.split()[0]}")
    log(f"creating the tool venv {venv.name} from {REQUIREMENTS.name}")
    run([sys.executable, "-m", "venv", str(venv)])
    run([str(venv / "bin/pip"), "install", "-q", "--disable-pip-version-check", "-r", str(REQUIREMENTS)])
    marker.write_text("ok\n")
    return venv


def collections_root() -> Path:
    """A collections path holding the bundled collections and this repository as blackwell.serving."""
    root = paths.sub("collections")
    ac = root / "ansible_collections"
    stamp = root / f".bundle-{ANSIBLE_BUNDLE}"
    if not stamp.exists():
        wheels = paths.sub("wheels")
        found = sorted(wheels.glob("ansible-12.3.0-*.whl"))
        if not found:
            log(f"fetching {ANSIBLE_BUNDLE} from PyPI for {', '.join(BUNDLED_COLLECTIONS)}")
            run([sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
                 "-d", str(wheels), ANSIBLE_BUNDLE])
            found = sorted(wheels.glob("ansible-12.3.0-*.whl"))
        if not found:
            raise LabError(f"pip did not fetch a wheel for {ANSIBLE_BUNDLE}")
        with zipfile.ZipFile(found[0]) as zf:
            for coll in BUNDLED_COLLECTIONS:
                prefix = f"ansible_collections/{coll}/"
                target = ac / coll
                if target.exists():
                    shutil.rmtree(target)
                for member in zf.namelist():
                    if member.startswith(prefix) and not member.endswith("/"):
                        zf.extract(member, root)
        stamp.write_text("ok\n")
    link = ac / NAMESPACE / NAME
    link.parent.mkdir(parents=True, exist_ok=True)
    if link.is_symlink() and Path(os.readlink(link)) != paths.REPO:
        link.unlink()
    if not link.exists():
        link.symlink_to(paths.REPO)
    return root


def drop_installed_copies() -> None:
    """Remove copies of this collection that Molecule installed earlier (in the lab's ANSIBLE_HOME, or a scenario's
    own under it): they would shadow the checkout."""
    home = paths.sub("ansible-home")
    for stale in [home, *home.glob("molecule-*")]:
        stale = stale / "collections" / "ansible_collections" / NAMESPACE / NAME
        if stale.is_symlink():
            stale.unlink()
        elif stale.exists():
            shutil.rmtree(stale)


def tool_env(venv: Path) -> dict[str, str]:
    """Environment for running the tools: the venv first on PATH, collections found."""
    env = dict(os.environ)
    env["PATH"] = f"{venv / 'bin'}:{env.get('PATH', '')}"
    env["VIRTUAL_ENV"] = str(venv)
    env["ANSIBLE_COLLECTIONS_PATH"] = str(collections_root())
    env["ANSIBLE_CONFIG"] = str(paths.REPO / "ansible.cfg")
    # ansible.cfg caches facts on disk, keyed by host name; lab hosts are recreated under the same names, so
    # the lab keeps its own cache (python3 -m lab test starts it empty)
    env["ANSIBLE_CACHE_PLUGIN_CONNECTION"] = str(paths.sub("facts"))
    # Molecule installs the collection under test into ANSIBLE_HOME; keep that inside the lab's state
    env["ANSIBLE_HOME"] = str(paths.sub("ansible-home"))
    # Molecule's Docker calls (community.docker) wait 10 minutes, not 60 s: removing a scenario's container, with the
    # releases of sglang's real dependency graph on its disk, took longer on a busy machine and destroy failed
    env["DOCKER_TIMEOUT"] = "600"
    env["PY_COLORS"] = "0"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    return env
