"""Role READMEs carry variable tables generated from the argument specs, never written by hand; the specs are where
an Ansible user looks for what a variable is and which values it takes."""
import re

import pytest
import yaml
from ansible.module_utils.common.arg_spec import ArgumentSpecValidator

from tools import role_docs as docs

ROLES = docs.roles()


def _specs(role):
    return yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_readme_tables_are_generated_from_the_argument_specs(role):
    assert (role / "README.md").read_text() == docs.expected_readme(role), (
        f"roles/{role.name}/README.md is stale: run python3 -m lab docs")


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_argument_spec_defaults_equal_role_defaults(role):
    specs = _specs(role)["main"]["options"]
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


def test_an_entry_point_that_aliases_main_is_one_line():
    main = {"short_description": "Main.", "options": {"r_a": {"type": "str", "description": "A."}}}
    more = {"short_description": "Render.", "options": {**main["options"], "r_b": {"type": "int", "description": "B."}}}
    text = docs.render({"argument_specs": {"main": main, "check": main, "render": more}})
    check = text.split("### Entry point `check`", 1)[1].split("###", 1)[0]
    assert check.strip() == "Same variables as `main`."
    render = text.split("### Entry point `render`", 1)[1]
    assert "The variables of `main`, and:" in render and "`r_b`" in render and "`r_a`" not in render


def test_sglang_service_readme_lists_each_variable_once():
    role = next(r for r in ROLES if r.name == "sglang_service")
    generated = (role / "README.md").read_text().split(docs.BEGIN, 1)[1].split(docs.END, 1)[0]
    rows = [line for line in generated.splitlines() if line.startswith("| `")]
    names = [line.split("`")[1] for line in rows]
    assert len(names) == len(set(names)), "a variable appears in more than one table"
    assert len(names) == len(set(_specs(role)["main"]["options"]) | set(_specs(role)["render"]["options"]))


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_each_variable_has_its_own_description(role):
    seen = {}
    for name, opt in _specs(role)["main"]["options"].items():
        desc = " ".join(opt["description"]) if isinstance(opt["description"], list) else opt["description"]
        assert desc not in seen, f"{name} and {seen.get(desc)} share one description: say what each one is"
        seen[desc] = name


# enumerations, and values each must refuse, checked where Ansible checks a role's inputs: its argument spec
ENUMERATIONS = {
    "sglang_router": {"sglang_router_policy": ("roundrobin", "round_robin"),
                      "sglang_router_log_level": ("warning", "warn")},
    "verify": {"verify_checks": (["gpu", "gpus"], ["gpu", "model"]), "verify_drift_checks": (["service"], ["cuda"])},
    "nvidia_driver": {"nvidia_driver_kernel_modules": ("closed", "open")},
    "sglang_service": {"sglang_service_kv_cache_dtype": ("fp16", "bf16")},
}


@pytest.mark.parametrize("role,name", [(r, n) for r, d in ENUMERATIONS.items() for n in d])
def test_enumerations_are_choices_that_the_spec_enforces(role, name):
    spec = _specs(next(r for r in ROLES if r.name == role))["main"]["options"]
    assert spec[name].get("choices"), f"{name}: no choices in the argument spec"
    one = {name: {k: v for k, v in spec[name].items() if k not in ("description",)}}
    bad_value, good_value = ENUMERATIONS[role][name]
    bad = ArgumentSpecValidator(one).validate({name: bad_value})
    assert bad.error_messages, f"{name}={bad_value!r} passes the argument spec"
    good = ArgumentSpecValidator(one).validate({name: good_value})
    assert not good.error_messages, good.error_messages


@pytest.mark.parametrize("role", ROLES, ids=[r.name for r in ROLES])
def test_preflight_does_not_repeat_the_choices(role):
    """A value list checked by a task as well as by the spec is written twice; the task keeps cross-variable rules."""
    enumerated = {n for n, o in _specs(role)["main"]["options"].items() if o.get("choices")}
    for task_file in (role / "tasks").glob("*.yml"):
        for line in task_file.read_text().splitlines():
            for name in enumerated:
                assert not re.search(rf"\b{name}\b.*(\bin \[|difference\(\[[^\]]*\]\) \| length == 0)", line), (
                    f"{task_file.relative_to(role.parent.parent)} checks {name} against a list: {line.strip()}")
