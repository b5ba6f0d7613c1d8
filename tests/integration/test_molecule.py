"""Every Molecule scenario, each its full test sequence (check and idempotence included)."""
import pytest

from helpers import REPO, needs_lab, run
from lab import paths

SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


@needs_lab
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario):
    # a bound for a hung run, not a speed test: on a 2-core machine busy with the lab hosts' chains, the longest
    # scenario (nvidia_driver: four driver installs, each DKMS-built) has taken 25 minutes
    # Molecule installs the collection under test into ANSIBLE_HOME before each run: a home of each scenario's own,
    # since the scenarios run side by side (tests/conftest.py)
    home = paths.sub("ansible-home") / f"molecule-{scenario}"
    proc = run(["molecule", "test", "-s", scenario], env={"ANSIBLE_HOME": str(home)}, timeout=3600)
    assert proc.returncode == 0, f"molecule test -s {scenario} failed (output above)"
