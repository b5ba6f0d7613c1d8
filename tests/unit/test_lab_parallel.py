"""`python3 -m lab test` runs three workers by default; a worker count the user gives wins. The longest work units
are handed out first, each keeping its tests' order, and the names the units are made by are files that exist."""
from pathlib import Path

import pytest

from lab import cli
from lab.util import LabError


def test_three_workers_by_default(monkeypatch):
    monkeypatch.delenv(cli.TEST_WORKERS, raising=False)
    assert cli.parallel(["-k", "molecule"]) == ["-n", "3", "-v"]


@pytest.mark.parametrize("given", [["-n", "4"], ["-n=0"], ["--numprocesses", "3"], ["-p", "no:xdist"]])
def test_the_users_choice_wins(monkeypatch, given):
    monkeypatch.delenv(cli.TEST_WORKERS, raising=False)
    assert cli.parallel(given) == []


def test_environment_sets_the_count_or_turns_it_off(monkeypatch):
    monkeypatch.setenv(cli.TEST_WORKERS, "0")
    assert cli.parallel([]) == []
    monkeypatch.setenv(cli.TEST_WORKERS, "3")
    assert cli.parallel([])[:2] == ["-n", "3"]
    monkeypatch.setenv(cli.TEST_WORKERS, "two")
    with pytest.raises(LabError, match="BLACKWELL_LAB_TEST_WORKERS"):
        cli.parallel([])


def test_work_units_keep_shared_hosts_on_one_worker():
    from conftest import work_unit
    units = {work_unit(n) for n in ("tests/integration/test_site_lab.py::test_x",
                                      "tests/integration/test_site_lab_fleet.py::test_y[a]",
                                      "tests/integration/test_verify_lab.py::test_z")}
    assert units == {"lab-hosts"}
    assert work_unit("tests/integration/test_molecule.py::test_molecule_scenario[sglang]") == "molecule"
    assert work_unit("tests/unit/test_x.py::test_a[b::c]") == "tests/unit/test_x.py"


def test_the_longest_units_come_first_each_in_its_own_order():
    import conftest

    class Item:
        def __init__(self, nodeid):
            self.nodeid, self.fspath = nodeid, ""

        def add_marker(self, marker):
            pass

    ids = ["tests/unit/test_a.py::t1", "tests/integration/test_control_nodes.py::c1",
           "tests/integration/test_molecule.py::m[sglang]", "tests/integration/test_site_lab.py::s1",
           "tests/unit/test_b.py::t2", "tests/integration/test_site_lab_fleet.py::f1",
           "tests/integration/test_molecule.py::m[uv]", "tests/integration/test_site_lab.py::s2"]
    items = [Item(i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [
        "tests/integration/test_site_lab.py::s1", "tests/integration/test_site_lab_fleet.py::f1",
        "tests/integration/test_site_lab.py::s2", "tests/integration/test_molecule.py::m[sglang]",
        "tests/integration/test_molecule.py::m[uv]", "tests/integration/test_control_nodes.py::c1",
        "tests/unit/test_a.py::t1", "tests/unit/test_b.py::t2"]


def test_every_lab_host_test_and_long_unit_names_a_file_that_exists():
    import conftest
    tests = Path(__file__).resolve().parents[1]
    integration = {p.name for p in (tests / "integration").glob("test_*.py")}
    assert conftest.LAB_HOST_TESTS <= integration, conftest.LAB_HOST_TESTS - integration
    units = {conftest.work_unit(f"tests/integration/{name}::t") for name in integration}
    units |= {conftest.work_unit(f"tests/unit/{p.name}::t") for p in (tests / "unit").glob("test_*.py")}
    assert set(conftest.LONGEST_FIRST) <= units, set(conftest.LONGEST_FIRST) - units
