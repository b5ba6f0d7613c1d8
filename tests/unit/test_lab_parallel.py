"""`python3 -m lab test` runs two workers by default; a worker count the user gives wins."""
import pytest

from lab import cli
from lab.util import LabError


def test_two_workers_by_default(monkeypatch):
    monkeypatch.delenv(cli.TEST_WORKERS, raising=False)
    assert cli.parallel(["-k", "molecule"]) == ["-n", "2", "-v"]


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
