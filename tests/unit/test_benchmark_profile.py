"""The benchmark's per-role breakdown counts a round trip only for a task that sends something to a host: the
collection's own action plugins that need no connection (they run in the play's process) count none, as
set_fact and assert do."""
import importlib.util
import re

from conftest import REPO


def _profile():
    spec = importlib.util.spec_from_file_location(
        "role_profile", REPO / "benchmarks" / "callback_plugins" / "role_profile.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_actions_without_a_connection_make_no_round_trip():
    local = _profile().LOCAL
    for path in sorted((REPO / "plugins" / "action").glob("*.py")):
        needs = re.search(r"^\s*_requires_connection\s*=\s*(True|False)", path.read_text(), re.M)
        assert needs, f"{path.name} says whether it needs a connection"
        assert (path.stem in local) == (needs.group(1) == "False"), path.name
    assert {"set_fact", "assert", "validate_argument_spec", "include_tasks"} <= local
