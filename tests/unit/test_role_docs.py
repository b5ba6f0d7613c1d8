"""Role READMEs carry variable tables generated from the argument specs, never written by hand."""
import pytest
import yaml

from lab import docs

ROLES = docs.roles()


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_readme_tables_are_generated_from_the_argument_specs(role):
    assert (role / "README.md").read_text() == docs.expected_readme(role), (
        f"roles/{role.name}/README.md is stale: run python3 -m lab docs")


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_spec_defaults_equal_role_defaults(role):
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    defaults_file = role / "defaults" / "main.yml"
    defaults = yaml.safe_load(defaults_file.read_text()) if defaults_file.exists() else {}
    defaults = defaults or {}
    for name, opt in specs.items():
        assert name.startswith(role.name + "_"), f"{name} lacks the role prefix {role.name}_"
        if "default" in opt:
            assert defaults.get(name) == opt["default"], f"{name}: spec default differs from defaults/main.yml"
        elif not opt.get("required"):
            assert name in defaults, f"{name} is neither required nor given a default"
    for name in defaults:
        assert name in specs, f"defaults/main.yml sets {name}, which the argument spec does not describe"
