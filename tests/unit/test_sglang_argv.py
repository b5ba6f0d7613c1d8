"""sglang's command line from the role's variables (plugins/module_utils/sglang_argv.py): one function builds it."""
import pytest
import yaml

from ansible_collections.blackwell.serving.plugins.module_utils import sglang_argv
from conftest import REPO

DEFAULTS = yaml.safe_load((REPO / "roles/sglang_service/defaults/main.yml").read_text())


def settings(**changes):
    s = {k: DEFAULTS.get(f"sglang_service_{k}") for k in sglang_argv.KEYS}
    s["config"] = "/etc/sglang/sglang.yaml"
    s.update(changes)
    return s


def test_the_role_variables_are_the_settings():
    """Every settings key is a variable of the role (config aside): no flag without its variable."""
    missing = [k for k in sglang_argv.KEYS if k != "config" and f"sglang_service_{k}" not in DEFAULTS]
    assert not missing
    rendered = (REPO / "roles/sglang_service/vars/main.yml").read_text()
    for key in sglang_argv.KEYS:
        assert f"\n  {key}: " in rendered, f"vars/main.yml does not pass {key} to the builder"


def test_each_option_once_and_the_key_never():
    argv = sglang_argv.flatten(sglang_argv.server_options(settings()))
    flags = [w for w in argv if w.startswith("--")]
    assert len(flags) == len(set(flags))
    assert "--api-key" not in argv
    assert argv[argv.index("--config") + 1] == "/etc/sglang/sglang.yaml"
    # the API key is no setting of the command line: given one, the builder refuses it rather than pass or drop it
    with pytest.raises(sglang_argv.ArgvError, match="does not know the settings api_key"):
        sglang_argv.server_options(settings(api_key="secret"))


def test_a_setting_the_builder_does_not_know_is_an_error_never_dropped():
    """A key in the role's settings but in no table of the builder would be a flag silently lost."""
    with pytest.raises(sglang_argv.ArgvError, match="context_length.*FLAGS"):
        sglang_argv.server_options(settings(context_length=65536))


def test_each_flag_of_the_table_reaches_the_command_line_by_its_name_and_type():
    """FLAGS alone decides a flag: --<name with - for _>, a bool a switch, any other type a value."""
    values = {"str": "x", "path": "/p", "int": 3, "float": 0.5, "dict": {"a": 1}}
    given = {f.name: (True if f.type == "bool" else values[f.type]) for f in sglang_argv.FLAGS}
    flags = sglang_argv.parse_options(sglang_argv.flatten(sglang_argv.server_options(settings(**given))))
    for f in sglang_argv.FLAGS:
        want = {"bool": True, "dict": '{"a":1}'}.get(f.type) or str(values[f.type])
        assert flags[f.flag] == want, f.name
        assert sglang_argv.variable_of(f.flag) == f"sglang_service_{f.name}"
    assert len({f.flag for f in sglang_argv.FLAGS}) == len(sglang_argv.FLAGS)
    assert not {f.name for f in sglang_argv.FLAGS} & {"model_path", "tp_size", "nnodes", "config", "extra_args"}
    assert len(sglang_argv.KEYS) == len(set(sglang_argv.KEYS)), "a FLAGS entry takes the name of a setting of its own"


def test_one_host_has_no_multi_node_options_and_several_have_three():
    one = sglang_argv.parse_options(sglang_argv.flatten(sglang_argv.server_options(settings())))
    assert not {"--nnodes", "--node-rank", "--dist-init-addr"} & set(one)
    two = sglang_argv.parse_options(sglang_argv.flatten(sglang_argv.server_options(
        settings(nnodes="2", node_rank=1, dist_init_addr="10.0.0.11:5000", tp_size=16))))
    assert (two["--nnodes"], two["--node-rank"], two["--dist-init-addr"], two["--tp-size"]) == (
        "2", "1", "10.0.0.11:5000", "16")


def test_switches_read_as_ansible_reads_booleans():
    """A switch given as the string "false" (-e on the command line) is off: Jinja's truth would turn it on."""
    off = sglang_argv.parse_options(sglang_argv.flatten(sglang_argv.server_options(
        settings(trust_remote_code="false", enable_metrics="no", disable_custom_all_reduce=False))))
    assert not {"--trust-remote-code", "--enable-metrics", "--disable-custom-all-reduce"} & set(off)
    on = sglang_argv.parse_options(sglang_argv.flatten(sglang_argv.server_options(settings(enable_metrics="true"))))
    assert on["--enable-metrics"] is True
    with pytest.raises(sglang_argv.ArgvError, match="enable_metrics"):
        sglang_argv.server_options(settings(enable_metrics="maybe"))


def test_an_empty_value_leaves_its_option_out():
    flags = sglang_argv.parse_options(sglang_argv.flatten(sglang_argv.server_options(
        settings(tool_call_parser="", reasoning_parser=None))))
    assert "--tool-call-parser" not in flags and "--reasoning-parser" not in flags


def test_extra_arguments_come_last_as_given():
    options = sglang_argv.server_options(settings(extra_args=["--context-length", "65536", "--enable-foo"]))
    assert options[-1] == ["--context-length", "65536", "--enable-foo"]
    with pytest.raises(sglang_argv.ArgvError, match="list of strings"):
        sglang_argv.server_options(settings(extra_args="--context-length 65536"))


def test_a_missing_setting_is_named():
    s = settings()
    del s["kv_cache_dtype"]
    with pytest.raises(sglang_argv.ArgvError, match="kv_cache_dtype"):
        sglang_argv.server_options(s)


def test_parse_options_keeps_words_of_a_flag_together():
    assert sglang_argv.parse_options(["python", "-m", "x", "--worker-urls", "a", "b", "--flag"]) == {
        "--worker-urls": "a b", "--flag": True}
