"""The collection on the control nodes users have, where no lab host is needed: for every supported ansible-core
(control_nodes.py) the unit tests of the plugins (pytest -m "controller and not playbook"; the unit tests that run the
roles' playbooks run under the newest, with the whole suite: issue 36 asks for the plugins' per version, not a copy of
the suite), and a version below the floor stops in site.yml's first play, naming both versions, before any host is
touched. A work unit of its own, beside the lab hosts' (tests/conftest.py); test_site_lab_control_nodes.py runs
site.yml on the converged lab host with each, the roles' tasks templated by that version."""
import os
import subprocess
import sys

import pytest

from control_nodes import BELOW, SUPPORTED, venv
from helpers import REPO, needs_lab

SITE = REPO / "playbooks" / "site.yml"


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
    proc = subprocess.run([str(bindir / "python"), "-m", "pytest", "-q", "-m", "controller and not playbook",
                           "-p", "no:cacheprovider", str(REPO / "tests" / "unit")], cwd=REPO, capture_output=True,
                          text=True, timeout=1800)
    sys.stdout.write(proc.stdout[-8000:])
    assert proc.returncode == 0, f"the controller's unit tests failed on ansible-core {version} (output above)"


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
