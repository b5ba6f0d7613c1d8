"""The modules and module_utils run on the hosts' Python: 3.9 (RHEL 9's platform Python) through 3.12 (Ubuntu 24.04).

No Python 3.9 can be installed on this machine (Debian 12 packages 3.11; uv's Python downloads are out of reach), so
ansible-test's compile and import tests cannot run for it here; vermin reads every file instead and names any syntax,
module, function or keyword a Python older than 3.9 lacks (annotations evaluated as written). The unit tests of the
module_utils run under this machine's 3.11 and, in the lent GPU machine's runs, Ubuntu 24.04's 3.12."""
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

VERMIN = shutil.which("vermin") or str(Path(sys.executable).parent / "vermin")


@pytest.mark.skipif(not Path(VERMIN).exists(), reason="vermin is in the lab's tool venv (lab/requirements.txt)")
def test_modules_and_module_utils_need_no_python_newer_than_3_9():
    proc = subprocess.run([VERMIN, "-t=3.9-", "--violations", "--eval-annotations", "--no-tips", "--no-parse-comments",
                           str(REPO / "plugins" / "modules"), str(REPO / "plugins" / "module_utils")],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_vermin_names_what_3_9_lacks(tmp_path):
    """The check can fail: a match statement (3.10) in a module is named."""
    if not Path(VERMIN).exists():
        pytest.skip("vermin is in the lab's tool venv (lab/requirements.txt)")
    (tmp_path / "m.py").write_text("def f(x):\n    match x:\n        case 1:\n            return 1\n")
    proc = subprocess.run([VERMIN, "-t=3.9-", "--violations", "--no-tips", str(tmp_path)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and "match" in proc.stdout.lower()
