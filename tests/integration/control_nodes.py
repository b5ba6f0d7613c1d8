"""The control nodes the collection supports: every ansible-core minor version from meta/runtime.yml's floor up, as
lab/control-nodes.txt lists them, and a version below the floor; a venv of each, made once under the lab's state."""
import fcntl
import subprocess
import sys

from helpers import REPO
from lab import paths

LISTED = [line.strip() for line in (REPO / "lab" / "control-nodes.txt").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
SUPPORTED = [line.split("==")[1] for line in LISTED if line.startswith("ansible-core==")]
BELOW = next(line.split("==")[1] for line in LISTED if line.startswith("below-floor:"))


def venv(version, with_tests=False):
    """A venv of this ansible-core (and pytest for the unit tests), made once under the lab's state directory; two
    test workers asking for the same one at once take turns (a lock beside it)."""
    root = paths.sub("control-nodes") / version
    python = root / "bin" / "python"
    stamp = root / ".installed"
    want = f"ansible-core=={version}" + (" pytest==9.2.0 pytest-xdist==3.8.0 pyyaml" if with_tests else "")
    with open(paths.sub("control-nodes") / f".{version}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not (stamp.is_file() and want in stamp.read_text().splitlines()):
            if not python.exists():
                subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
            subprocess.run([str(python), "-m", "pip", "install", "-q", *want.split()], check=True, timeout=600)
            with stamp.open("a") as fh:
                fh.write(want + "\n")
    return root / "bin"
