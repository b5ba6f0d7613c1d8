"""Shared test set-up: the repository and its collection on sys.path."""
import importlib.util
import os
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"
# `lab` is imported from the repository; the collection's plugins through .collections
for p in (REPO, REPO / ".collections"):
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))


# `python3 -m lab test` runs the tests in five workers (pytest-xdist). The tests that drive SSH lab hosts share them,
# in file order (a host is converged once and reused), so the tests of one set of hosts are one unit of work for one
# worker: lab-gpu-1's, the fault tests' (lab-gpu-5, inventories/lab-faults) and the fleet's (its own servers and
# router, inventories/lab-fleet), which run beside each other; each Molecule scenario, in its own container and
# ANSIBLE_HOME, is a unit of its own; every other test module (unit tests, lint, sanity, the resolution check) is a
# unit of its own, so that its module-scoped fixtures (a built apt repository, a started stand-in) are made once and
# never by two workers at the same time. (xdist's own --dist loadgroup cannot do it with pytest 9: it renames a test
# by assigning a node id that pytest 9 computes.)
LAB_HOST_UNITS = {
    "lab-hosts": {"test_site_lab.py", "test_verify_lab.py", "test_site_lab_control_nodes.py"},
    "lab-faults": {"test_site_lab_faults.py"},
    "lab-fleet": {"test_site_lab_fleet.py"},
}


def work_unit(nodeid: str) -> str:
    path, _, test = nodeid.partition("::")
    name = path.rsplit("/", 1)[-1]
    if name == "test_molecule.py":
        return "molecule" + test[test.index("["):] if "[" in test else "molecule"
    return next((unit for unit, names in LAB_HOST_UNITS.items() if name in names), path)


# The long units (LONGEST_FIRST, below: the lab hosts' chains of tests, each waiting for the last, and the Molecule
# scenarios) are the suite's critical paths. On a machine with fewer cores than busy workers, the other units' tests
# (and the playbooks they start) yield the CPU to them: they run at this niceness and fill what the long units leave
# idle. Only under xdist (a run with -n 0 changes nothing); a worker that takes up a long unit after another goes
# back to 0 where it may (root), else stays where it is.
BACKGROUND_NICENESS = 10


def is_long(unit: str) -> bool:
    """A unit of LONGEST_FIRST (a Molecule scenario's unit counts as "molecule")."""
    return unit.split("[", 1)[0] in LONGEST_FIRST


def niceness_for(nodeid: str) -> int:
    return 0 if is_long(work_unit(nodeid)) else BACKGROUND_NICENESS


def pytest_runtest_setup(item):
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return
    now = os.nice(0)
    want = niceness_for(item.nodeid)
    if want != now:
        try:
            os.nice(want - now)
        except PermissionError:
            pass


if importlib.util.find_spec("xdist"):
    def pytest_xdist_make_scheduler(config, log):
        from xdist.scheduler import LoadScopeScheduling


        class LabScheduling(LoadScopeScheduling):
            def __init__(self, config, log=None):
                super().__init__(config, log)
                config.option.loadscopereorder = False  # the collection's order is unit_order's

            def _split_scope(self, nodeid):
                return work_unit(nodeid)

            def _assign_work_unit(self, node):
                # xdist gives a worker its next unit before the last two tests of its current one have run (the
                # worker must know its next test to run one): behind a long unit, that next unit would wait for it
                # while other workers are free, so a short one goes there (the long ones go to workers as they free)
                if any(is_long(unit) and not all(done.values())
                       for unit, done in self.assigned_work.get(node, {}).items()):
                    short = next((unit for unit in self.workqueue if not is_long(unit)), None)
                    if short is not None:
                        self.workqueue.move_to_end(short, last=False)
                super()._assign_work_unit(node)

        return LabScheduling(config, log)


# Tests of the collection's controller side - a test module that runs ansible-playbook, imports an action or filter
# plugin, or tests ansible-core's module_utils.urls API that the controller ships to hosts - are marked `controller`:
# tests/integration/test_control_nodes.py runs them under every ansible-core the collection supports (pytest -m
# controller). Read from the test's own source: no list to keep in step.
# Those that run a playbook are also marked `playbook`: the control-node matrix runs the others (see
# test_control_nodes.py).
PLAYBOOK_SIGNS = ("ansible-playbook", "run_local_playbook")
CONTROLLER_SIGNS = PLAYBOOK_SIGNS + ("plugins.action", "plugins.filter", "ansible.module_utils.urls")


# Tests of what runs on a target - a test module that runs a module (run_module) or imports module_utils, and needs
# nothing of the controller (its CLIs, its plugins, the lab's or the tools' code) - are marked `target`:
# tests/integration/test_target_python_oldest.py runs them under the oldest Python a supported target has.
TARGET_SIGNS = ("plugins.module_utils", "run_module(")
NEEDS_CONTROLLER = CONTROLLER_SIGNS + ("ansible-doc", '/ "ansible"', "ansible.errors", "ansible.plugins",
                                      "ansible.template", "ansible.parsing", "from lab", "import lab", "from tools",
                                      "import tools")


_KINDS = {}


def file_kinds(path):
    """(controller, target, playbook) for a test file, read from its own source."""
    path = str(path)
    if path not in _KINDS:
        try:
            text = Path(path).read_text(errors="replace")
        except OSError:
            text = ""
        unit = "/tests/unit/" in path
        _KINDS[path] = (unit and any(sign in text for sign in CONTROLLER_SIGNS),
                        unit and any(sign in text for sign in TARGET_SIGNS)
                        and not any(sign in text for sign in NEEDS_CONTROLLER),
                        unit and any(sign in text for sign in PLAYBOOK_SIGNS))
    return _KINDS[path]


def pytest_ignore_collect(collection_path, config):
    # under the oldest target Python only the target tests are imported (the others need a newer one)
    if os.environ.get("BLACKWELL_TARGET_TESTS_ONLY") and collection_path.suffix == ".py" \
            and collection_path.name.startswith("test_"):
        return not file_kinds(collection_path)[1]
    return None


# The work units are handed out in this order: the lab hosts' units, then the Molecule scenarios, then every other
# unit by its number of tests (as xdist's own --loadscope-reorder would; LabScheduling turns that off, which would put
# the lab hosts' units after the many-test unit files). Each unit keeps its tests' file order (the lab hosts' tests
# depend on it).
LONGEST_FIRST = ("lab-hosts", "lab-faults", "lab-fleet", "molecule")


def unit_order(nodeids):
    """The work units' order: LONGEST_FIRST, then the most tests first, ties in collection order."""
    counts = {}
    for nodeid in nodeids:
        unit = work_unit(nodeid)
        counts[unit] = counts.get(unit, 0) + 1
    return sorted(counts, key=lambda unit: (LONGEST_FIRST.index(unit.split("[", 1)[0]) if is_long(unit)
                                             else len(LONGEST_FIRST), 0 if is_long(unit) else -counts[unit]))


def pytest_collection_modifyitems(config, items):
    import pytest as _pytest

    # a stable sort: within a unit the tests keep their file order (the lab hosts' tests depend on it)
    rank = {unit: i for i, unit in enumerate(unit_order([item.nodeid for item in items]))}
    items[:] = sorted(items, key=lambda item: rank[work_unit(item.nodeid)])

    # a lab host whose fresh converge a test of this run makes (the test uses its module's `converged` fixture) and
    # whose module offers it as the run's converged server image (PUBLISHES_CONVERGED_IMAGE; lab/hosts.py,
    # converged_image): registered before any test runs, so that no other chain converges one
    producers = {getattr(getattr(item, "module", None), "PUBLISHES_CONVERGED_IMAGE", None) for item in items
                 if "converged" in getattr(item, "fixturenames", ())} - {None}
    if producers and os.environ.get("BLACKWELL_LAB_IMAGE"):
        from lab import hosts
        for host in sorted(producers):
            hosts.register_producer(host)

    for item in items:
        controller, target, playbook = file_kinds(getattr(item, "fspath", ""))
        if controller:
            item.add_marker(_pytest.mark.controller)
        if playbook:
            item.add_marker(_pytest.mark.playbook)
        if target:
            item.add_marker(_pytest.mark.target)


TASK_BLOCK_KEYS = ("block", "rescue", "always", "tasks", "pre_tasks", "post_tasks", "handlers")


def yaml_tasks(node):
    """Every task (and play) mapping under a parsed YAML file, blocks and plays included."""
    if isinstance(node, list):
        for item in node:
            yield from yaml_tasks(item)
    elif isinstance(node, dict):
        yield node
        for key in TASK_BLOCK_KEYS:
            if isinstance(node.get(key), list):
                yield from yaml_tasks(node[key])


def _gpg_keys(home):
    """Two OpenPGP keys made with gpg in a fresh home: [(fingerprint, armored public key), ...]."""
    import subprocess
    home.chmod(0o700)

    def g(*args):
        return subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(home), *args],
                              capture_output=True, check=True).stdout
    for name in ("nvidia", "other"):
        g("--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", f"{name} <{name}@localhost>",
          "ed25519", "sign", "never")
    fprs = [line.split(":")[9] for line in g("--with-colons", "--fingerprint").decode().splitlines()
            if line.startswith("fpr:")]
    return [(fpr, g("--armor", "--export", fpr).decode()) for fpr in fprs]


try:
    import pytest

    @pytest.fixture(scope="session")
    def gpg_keys(tmp_path_factory):
        return _gpg_keys(tmp_path_factory.mktemp("gnupg"))
except ImportError:  # imported outside pytest (the lab's scripts): no fixtures
    pass


# a bound for a hung ansible-playbook run, not a speed test: a playbook that takes seconds alone has taken over two
# minutes in a CI run whose lab hosts and other workers had the machine's two cores
PLAYBOOK_HANG_BOUND = 600


def run_local_playbook(tmp_path, playbook, extra_vars, check=False, collections=None, flags=(), env=None,
                       must_pass=True):
    """Run a playbook's text with ansible-playbook against this machine (the collection from .collections, or from
    the collections path given, this Python as the hosts' interpreter), as a role's tasks run on a host, with more
    command-line flags and environment where given; the finished process, asserted to pass unless must_pass is
    false."""
    import json
    import os
    import subprocess
    (tmp_path / "pb.yml").write_text(playbook)
    (tmp_path / "hosts").write_text("localhost ansible_connection=local\n")
    args = dict(extra_vars, ansible_python_interpreter=sys.executable)
    full_env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(collections or REPO / ".collections"), **(env or {}))
    proc = subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts"),
                           "-e", json.dumps(args), str(tmp_path / "pb.yml"), *flags] + (["--check"] if check else []),
                          capture_output=True, text=True, env=full_env, timeout=PLAYBOOK_HANG_BOUND, cwd=tmp_path)
    if must_pass:
        assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-3000:]
    return proc
