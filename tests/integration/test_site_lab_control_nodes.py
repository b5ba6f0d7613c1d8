"""The collection on the control nodes users have: every ansible-core minor version from meta/runtime.yml's floor up
(control_nodes.py; the newest, the tool venv's, runs the whole suite). For each: site.yml on the converged lab host
(no change, every verify check passes) and one input refused before any change. Runs after test_site_lab.py, on the
host that test converged (the controller's unit tests under each, and the version below the floor, need no lab host:
test_control_nodes.py)."""
import os
import subprocess
import sys

import pytest

from control_nodes import SUPPORTED, venv
from helpers import REPO, needs_lab, recap
from lab import hosts, paths

SITE = REPO / "playbooks" / "site.yml"
HOST = "lab-gpu-1"


def playbook(bindir, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=f"{REPO / '.collections'}:{paths.state_dir() / 'collections'}")
    proc = subprocess.run([str(bindir / "ansible-playbook"), "-i", str(REPO / "inventories" / "lab"), *map(str, args)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    sys.stdout.write(proc.stdout[-20000:])
    sys.stderr.write(proc.stderr[-5000:])
    return proc


@needs_lab
@pytest.mark.parametrize("version", SUPPORTED)
def test_site_is_a_no_op_on_the_converged_host_and_bad_input_is_refused(version):
    hosts.start(HOST, os.environ["BLACKWELL_LAB_IMAGE"])
    bindir = venv(version)
    proc = playbook(bindir, SITE)
    assert proc.returncode == 0, f"site.yml failed on ansible-core {version} (output above)"
    assert recap(proc.stdout)[HOST]["changed"] == 0, f"site.yml changed something on ansible-core {version}"
    assert "report | Summary of every host" in proc.stdout
    refused = playbook(bindir, SITE, "-e", "sglang_service_port=22")
    assert refused.returncode != 0 and "sglang_service_port 22 is taken on the host by sshd" in refused.stdout
    assert "Nothing was changed" in refused.stdout and "PLAY [NVIDIA driver" not in refused.stdout
