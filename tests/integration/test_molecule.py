"""Every Molecule scenario, each its full test sequence (check and idempotence included)."""
import pytest

from helpers import REPO, needs_lab, run

SCENARIOS = sorted(p.parent.name for p in (REPO / "molecule").glob("*/molecule.yml"))


@needs_lab
@pytest.mark.parametrize("scenario", SCENARIOS)
def test_molecule_scenario(scenario):
    proc = run(["molecule", "test", "-s", scenario], timeout=1800)
    assert proc.returncode == 0, f"molecule test -s {scenario} failed (output above)"
