"""Shared test set-up: the repository and its collection on sys.path."""
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
# `lab` is imported from the repository; the collection's plugins through .collections
for p in (REPO, REPO / ".collections"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


# `python3 -m lab test` runs the tests in two workers (pytest-xdist, --dist loadgroup). The tests that drive the
# SSH lab hosts share them (lab-gpu-1 is converged once and reused, in file order), so they run as one group on
# one worker; the Molecule scenarios, each in its own container, run as another group beside them; everything
# else (unit tests, lint, sanity, the resolution check) fills in where a worker is free.
LAB_HOST_TESTS = {"test_site_lab.py", "test_site_lab_faults.py", "test_site_lab_fleet.py", "test_sm120_module.py",
                  "test_verify_lab.py"}


def pytest_collection_modifyitems(config, items):
    for item in items:
        if item.path.name == "test_molecule.py":
            item.add_marker(pytest.mark.xdist_group("molecule"))
        elif item.path.name in LAB_HOST_TESTS:
            item.add_marker(pytest.mark.xdist_group("lab-hosts"))
