"""The stack file is the one place a site pins; role defaults carry the same public values."""
import pytest
import yaml

from conftest import REPO

PROD = yaml.safe_load((REPO / "inventories/production/group_vars/all/stack.yml").read_text())
LAB = yaml.safe_load((REPO / "inventories/lab/group_vars/all/stack.yml").read_text())
ROLE_DEFAULTS = {}
for f in sorted((REPO / "roles").glob("*/defaults/main.yml")):
    ROLE_DEFAULTS.update({k: (f.parent.parent.name, v) for k, v in (yaml.safe_load(f.read_text()) or {}).items()})

# Where the lab may differ from production: sources, never versions or behaviour.
SOURCES = {"nvidia_driver_repo_base_url", "cuda_toolkit_repo_base_url", "uv_venv_package_index_url",
           "sglang_repo_url", "sglang_torch_index_url", "sglang_package_index_url", "model_weights_endpoint",
           # the lab's sglang history has its own commit ids, standing in for the upstream ones
           "sglang_commit", "sglang_sm120_fix_commit",
           # uv's managed Python downloads are out of the lab's reach (LAB_NOTES): the lab uses the host's
           # Python 3.11 where production has a uv-managed 3.12
           "uv_venv_python", "uv_venv_python_version",
           # the Hub stand-in serves its own synthetic model, with its own revision
           "model_weights_revision", "sglang_router_package_index_url"}
# Pins with no public default: each site sets its own (production leaves a comment where it goes).
SITE_CHOSEN = {"model_weights_revision"}


@pytest.mark.parametrize("name", sorted(k for k in PROD if k in ROLE_DEFAULTS))
def test_production_pins_equal_role_defaults(name):
    role, default = ROLE_DEFAULTS[name]
    assert PROD[name] == default, f"stack.yml {name}={PROD[name]!r} but roles/{role} defaults to {default!r}"


def test_both_inventories_pin_the_same_things():
    assert set(PROD) == set(LAB) - SITE_CHOSEN


def test_production_says_where_the_site_chosen_pins_go():
    text = (REPO / "inventories/production/group_vars/all/stack.yml").read_text()
    for name in SITE_CHOSEN:
        assert f"# {name}: REQUIRED" in text


@pytest.mark.parametrize("name", sorted((set(PROD) | set(LAB)) - SOURCES))
def test_lab_differs_from_production_only_in_sources(name):
    assert LAB[name] == PROD[name], f"the lab inventory changes {name}, which is not a source"


def test_driver_and_toolkit_share_one_repository():
    for inv in (PROD, LAB):
        assert inv["nvidia_driver_repo_base_url"] == inv["cuda_toolkit_repo_base_url"]


@pytest.mark.parametrize("inventory", sorted(p.name for p in (REPO / "inventories").glob("lab*")))
def test_lab_hosts_match_the_lab(inventory):
    from lab import hosts
    inv = yaml.safe_load((REPO / "inventories" / inventory / "hosts.yml").read_text())
    listed = {}
    for group in inv["all"]["children"].values():
        # a host in a second group (the fleet's cache, lab-router-1) is named there without its variables
        listed.update({name: hv for name, hv in group["hosts"].items() if hv})
    assert listed
    for name, hv in listed.items():
        assert hosts.LAB_HOSTS[name] == hv["ansible_port"]
