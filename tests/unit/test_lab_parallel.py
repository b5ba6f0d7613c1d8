"""`python3 -m lab test` runs five workers by default; a worker count the user gives wins. The longest work units
are handed out first, each keeping its tests' order, and the names the units are made by are files that exist."""
from pathlib import Path

import pytest

from lab import cli
from lab.util import LabError


def test_five_workers_by_default(monkeypatch):
    monkeypatch.delenv(cli.TEST_WORKERS, raising=False)
    assert cli.parallel(["-k", "molecule"]) == ["-n", "5", "-v"]


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
                                      "tests/integration/test_site_lab_control_nodes.py::test_y[a]",
                                      "tests/integration/test_verify_lab.py::test_z")}
    assert units == {"lab-hosts"}
    # the fault tests and the fleet have hosts of their own
    assert work_unit("tests/integration/test_site_lab_faults.py::test_y[a]") == "lab-faults"
    assert work_unit("tests/integration/test_site_lab_fleet.py::test_f") == "lab-fleet"
    # each Molecule scenario has its own container
    assert work_unit("tests/integration/test_molecule.py::test_molecule_scenario[sglang]") == "molecule[sglang]"
    assert work_unit("tests/unit/test_x.py::test_a[b::c]") == "tests/unit/test_x.py"


class Item:
    def __init__(self, nodeid):
        self.nodeid, self.fspath = nodeid, ""

    def add_marker(self, marker):
        pass


def test_the_longest_units_come_first_each_in_its_own_order():
    import conftest
    ids = ["tests/unit/test_a.py::t1", "tests/integration/test_control_nodes.py::c1",
           "tests/integration/test_molecule.py::m[sglang]", "tests/integration/test_site_lab.py::s1",
           "tests/unit/test_b.py::t2", "tests/integration/test_site_lab_fleet.py::f1",
           "tests/integration/test_molecule.py::m[uv]", "tests/integration/test_site_lab.py::s2",
           "tests/integration/test_site_lab_faults.py::x1", "tests/unit/test_b.py::t3"]
    items = [Item(i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    assert [i.nodeid for i in items] == [
        "tests/integration/test_site_lab.py::s1", "tests/integration/test_site_lab.py::s2",
        "tests/integration/test_site_lab_faults.py::x1", "tests/integration/test_site_lab_fleet.py::f1",
        "tests/integration/test_molecule.py::m[sglang]", "tests/integration/test_molecule.py::m[uv]",
        "tests/unit/test_b.py::t2", "tests/unit/test_b.py::t3", "tests/unit/test_a.py::t1",
        "tests/integration/test_control_nodes.py::c1"]


class Node:
    """A worker as xdist's scheduler sees it: what it was sent."""

    def __init__(self, name):
        import types
        self.name, self.sent, self.shutting_down = name, [], False
        self.gateway = types.SimpleNamespace(id=name)

    def send_runtest_some(self, indexes):
        self.sent.append(indexes)

    def shutdown(self):
        self.shutting_down = True

    def __repr__(self):
        return self.name


def test_no_unit_waits_behind_a_long_one_while_another_worker_is_free():
    """xdist gives a worker its next unit while it still runs its current one: behind a long unit that next one is a
    short unit, and a long one goes to the next worker that finishes what it was given."""
    import types
    import conftest
    ids = ["tests/integration/test_site_lab.py::s1", "tests/integration/test_site_lab.py::s2",
           "tests/integration/test_molecule.py::m[a]", "tests/integration/test_molecule.py::m[b]",
           "tests/integration/test_molecule.py::m[c]", "tests/unit/test_x.py::t1", "tests/unit/test_y.py::t1",
           "tests/unit/test_z.py::t1"]
    items = [Item(i) for i in ids]
    conftest.pytest_collection_modifyitems(None, items)
    config = types.SimpleNamespace(option=types.SimpleNamespace(), getvalue=lambda name: ["2*popen"])
    sched = conftest.pytest_xdist_make_scheduler(config, None)
    nodes = [Node("gw0"), Node("gw1")]
    for node in nodes:
        sched.add_node(node)
        sched.add_node_collection(node, [i.nodeid for i in items])
    sched.schedule()
    given = {node.name: [unit for unit in sched.assigned_work[node]] for node in nodes}
    # each worker's first unit is a long one; behind it (given early, run after it) only a short one
    assert given == {"gw0": ["lab-hosts", "tests/unit/test_x.py"], "gw1": ["molecule[a]", "tests/unit/test_y.py"]}
    # gw1 ends molecule[a] and its unit test: the next Molecule scenario is its, not queued behind lab-gpu-1's tests
    sched.mark_test_complete(nodes[1], ids.index("tests/integration/test_molecule.py::m[a]"))
    sched.mark_test_complete(nodes[1], ids.index("tests/unit/test_y.py::t1"))
    assert list(sched.assigned_work[nodes[1]])[2:] == ["molecule[b]", "tests/unit/test_z.py"]
    assert list(sched.assigned_work[nodes[0]]) == ["lab-hosts", "tests/unit/test_x.py"]
    assert list(sched.workqueue) == ["molecule[c]"]


def test_every_lab_host_test_and_long_unit_names_a_file_that_exists():
    import conftest
    tests = Path(__file__).resolve().parents[1]
    integration = {p.name for p in (tests / "integration").glob("test_*.py")}
    named = set().union(*conftest.LAB_HOST_UNITS.values())
    assert named <= integration, named - integration
    units = {conftest.work_unit(f"tests/integration/{name}::t") for name in integration}
    units |= {conftest.work_unit(f"tests/unit/{p.name}::t") for p in (tests / "unit").glob("test_*.py")}
    assert set(conftest.LONGEST_FIRST) <= units, set(conftest.LONGEST_FIRST) - units


NICENESS_PROBE = """
import os, subprocess, sys, types
sys.path.insert(0, "tests")
import conftest
for nodeid in sys.argv[1:]:
    conftest.pytest_runtest_setup(types.SimpleNamespace(nodeid=nodeid))
    child = subprocess.run([sys.executable, "-c", "import os; print(os.nice(0))"], capture_output=True, text=True)
    print(os.nice(0), child.stdout.strip())
"""


def probe_niceness(*nodeids, worker="gw0"):
    import os
    import subprocess
    import sys
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_XDIST_WORKER"}
    if worker:
        env["PYTEST_XDIST_WORKER"] = worker
    out = subprocess.run([sys.executable, "-c", NICENESS_PROBE, *nodeids], cwd=Path(__file__).parents[2], env=env,
                         capture_output=True, text=True, check=True).stdout
    return [tuple(map(int, line.split())) for line in out.splitlines()]


def test_short_units_yield_the_cpu_to_the_long_ones_and_their_children_too():
    import os
    import conftest
    base = os.nice(0)  # this test may itself run in a worker that yields (a unit test is a short unit)
    root = os.geteuid() == 0
    lab, other = "tests/integration/test_site_lab.py::test_x", "tests/unit/test_x.py::test_y"
    molecule, fleet = "tests/integration/test_molecule.py::test_m[a]", "tests/integration/test_site_lab_fleet.py::f"
    lab_niceness = 0 if root else base  # back to 0 where the process may, else as it was
    # a worker's lab-host test runs at 0; a short unit's test, and what it starts, run nicer
    assert probe_niceness(lab, other) == [(lab_niceness,) * 2, (conftest.BACKGROUND_NICENESS,) * 2]
    assert probe_niceness(molecule, fleet) == [(lab_niceness,) * 2] * 2
    assert probe_niceness(other, lab) == [(conftest.BACKGROUND_NICENESS,) * 2,
                                          (0 if root else conftest.BACKGROUND_NICENESS,) * 2]
    # without xdist nothing changes
    assert probe_niceness(other, lab, worker=None) == [(base, base)] * 2
