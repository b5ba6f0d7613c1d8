"""Modules and module_utils on the oldest Python a supported target has (RHEL 9's platform Python, 3.9): the unit
tests marked `target` (tests/conftest.py: they run a module or import module_utils, and need nothing of the
controller) run under Debian bullseye's Python 3.9, unpacked from the Debian mirror by lab/oldpython.py."""
import os
import re
import subprocess
import sys

from helpers import REPO
from lab import oldpython


def test_the_target_tests_pass_under_the_oldest_target_python():
    where = oldpython.ensure()
    argv, env = oldpython.command(where, [str(REPO / ".collections")])
    # the outer run's options (xdist's -n) are not the inner pytest's
    env = {k: v for k, v in dict(os.environ, **env).items() if not k.startswith(("PYTEST_", "PYTHONSAFEPATH"))}
    version = subprocess.run([*argv, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"], env=env,
                             capture_output=True, text=True, check=True).stdout.strip()
    assert version == "3.9"
    proc = subprocess.run([*argv, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "target", "tests/unit"],
                          cwd=REPO, env=dict(env, BLACKWELL_TARGET_TESTS_ONLY="1"), capture_output=True, text=True,
                          timeout=900)
    sys.stdout.write(proc.stdout[-8000:] + proc.stderr[-4000:])
    assert proc.returncode == 0, "a module or module_utils test failed under Python 3.9 (output above)"
    passed = re.search(r"(\d+) passed", proc.stdout)
    # every target test ran: none was left out by an import that 3.9 cannot do
    assert passed and int(passed.group(1)) >= 150 and "error" not in proc.stdout.splitlines()[-1]
