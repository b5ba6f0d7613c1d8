"""The collection on the control nodes users have: every ansible-core minor version from meta/runtime.yml's floor up
(lab/control-nodes.txt; the newest, the tool venv's, runs the whole suite). For each: the unit tests of the
controller side (pytest -m controller), site.yml on the converged lab host (no change, every verify check passes) and
one input refused before any change. A version below the floor stops in site.yml's first play, naming both versions,
before any host is touched. Runs after test_site_lab.py, on the host that test converged."""
import os
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import REPO, needs_lab, recap
from lab import hosts, paths

SITE = REPO / "playbooks" / "site.yml"
HOST = "lab-gpu-1"
LISTED = [line.strip() for line in (REPO / "lab" / "control-nodes.txt").read_text().splitlines()
          if line.strip() and not line.startswith("#")]
SUPPORTED = [line.split("==")[1] for line in LISTED if line.startswith("ansible-core==")]
BELOW = next(line.split("==")[1] for line in LISTED if line.startswith("below-floor:"))


def venv(version, with_tests=False):
    """A venv of this ansible-core (and pytest for the unit tests), made once under the lab's state directory."""
    root = paths.sub("control-nodes") / version
    python = root / "bin" / "python"
    stamp = root / ".installed"
    want = f"ansible-core=={version}" + (" pytest==9.2.0 pytest-xdist==3.8.0 pyyaml" if with_tests else "")
    if not (stamp.is_file() and want in stamp.read_text().splitlines()):
        if not python.exists():
            subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", *want.split()], check=True, timeout=600)
        with stamp.open("a") as fh:
            fh.write(want + "\n")
    return root / "bin"


def playbook(bindir, *args):
    env = dict(os.environ, ANSIBLE_CONFIG=str(REPO / "ansible.cfg"),
               ANSIBLE_COLLECTIONS_PATH=f"{REPO / '.collections'}:{paths.state_dir() / 'collections'}")
    proc = subprocess.run([str(bindir / "ansible-playbook"), "-i", str(REPO / "inventories" / "lab"), *map(str, args)],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=1800)
    sys.stdout.write(proc.stdout[-20000:])
    sys.stderr.write(proc.stderr[-5000:])
    return proc


def test_the_listed_versions_start_at_the_floor():
    from ansible_collections.blackwell.serving.plugins.lookup.requires_ansible import requires_ansible
    spec, floor = requires_ansible()
    assert spec == f">={floor}" and SUPPORTED[0].rsplit(".", 1)[0] == floor.rsplit(".", 1)[0]
    minors = [tuple(map(int, v.split(".")[:2])) for v in SUPPORTED]
    assert minors == sorted(minors) and len(set(minors)) == len(minors)
    assert tuple(map(int, BELOW.split(".")[:2])) < minors[0]


@pytest.mark.parametrize("version", SUPPORTED)
def test_the_controller_side_passes_its_unit_tests(version):
    bindir = venv(version, with_tests=True)
    proc = subprocess.run([str(bindir / "python"), "-m", "pytest", "-q", "-m", "controller", "-n", "2",
                           "-p", "no:cacheprovider", str(REPO / "tests" / "unit")], cwd=REPO, capture_output=True,
                          text=True, timeout=1800)
    sys.stdout.write(proc.stdout[-8000:])
    assert proc.returncode == 0, f"the controller's unit tests failed on ansible-core {version} (output above)"


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


@needs_lab
def test_a_control_node_below_the_floor_is_stopped_before_any_host(tmp_path):
    bindir = venv(BELOW)
    inventory = tmp_path / "hosts.yml"
    # a host that cannot be reached: the refusal must come before any connection
    inventory.write_text("gpu_servers:\n  hosts:\n    unreachable-1:\n      ansible_host: 192.0.2.1\n")
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    proc = subprocess.run([str(bindir / "ansible-playbook"), "-i", str(inventory), str(SITE)], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=300)
    from ansible_collections.blackwell.serving.plugins.lookup.requires_ansible import requires_ansible
    floor = requires_ansible()[1]
    assert proc.returncode != 0
    assert f"runs ansible-core {BELOW}; blackwell.serving needs ansible-core {floor} or newer" in proc.stdout
    assert "UNREACHABLE" not in proc.stdout and "Nothing was changed on any host" in proc.stdout
