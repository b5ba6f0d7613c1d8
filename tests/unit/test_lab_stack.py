"""lab/stack.py reads the lab's stack file with the standard library: the same scalars a YAML parser reads."""
import yaml

from lab import hub, stack, wheels


def test_every_scalar_reads_as_yaml_reads_it():
    parsed = yaml.safe_load(stack.STACK.read_text())
    # text, numbers and booleans (as written: true stays "true")
    scalars = {k: str(v).lower() if isinstance(v, bool) else str(v)
               for k, v in parsed.items() if not isinstance(v, (dict, list)) and v is not None}
    assert scalars and {k: stack.pins().get(k) for k in scalars} == scalars


def test_the_stand_ins_build_to_the_stack_pins():
    parsed = yaml.safe_load(stack.STACK.read_text())
    versions = {dist: version for dist, version, _module, _source in wheels.STANDINS}
    assert versions["flashinfer-cubin"] == parsed["sglang_flashinfer_version"]
    assert versions["flashinfer-jit-cache"].split("+")[0] == parsed["sglang_flashinfer_version"]
    assert hub.REPO_ID == parsed["model_weights_repo_id"]


def test_an_unknown_name_says_where_it_looked():
    try:
        stack.pin("no_such_pin")
    except KeyError as exc:
        assert "stack.yml has no scalar no_such_pin" in str(exc)
    else:
        raise AssertionError("no error")
