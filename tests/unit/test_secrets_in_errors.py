"""No secret in an error (issue 38, point 5): a role's argument validation prints its whole specification, with each
default templated, when any input is wrong; a secret must be neither in a default there nor in what is printed."""
import json

import pytest
import yaml

from conftest import REPO, run_local_playbook

SECRET_WORDS = ("api_key", "token", "password", "secret")
ROLES = sorted(p.parent.parent.name for p in (REPO / "roles").glob("*/meta/argument_specs.yml"))


def secret_options():
    for role in ROLES:
        specs = yaml.safe_load((REPO / "roles" / role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
        for entry, spec in specs.items():
            for name, option in (spec.get("options") or {}).items():
                if name.endswith(SECRET_WORDS) and "max_new_tokens" not in name:
                    yield role, entry, name, option


@pytest.mark.parametrize("role, entry, name, option", list(secret_options()),
                         ids=lambda v: v if isinstance(v, str) else "")
def test_every_secret_option_is_no_log_and_has_no_templated_default(role, entry, name, option):
    assert option.get("no_log") is True, f"{role} {entry}: {name} is not no_log"
    assert "{{" not in str(option.get("default", "")), (
        f"{role} {entry}: {name}'s default is templated; a validation error prints it. Set it in defaults/main.yml")


def test_the_secret_options_are_the_ones_the_roles_have():
    names = {name for _, _, name, _ in secret_options()}
    assert {"sglang_service_api_key", "unit_deploy_api_key", "sglang_router_api_key", "verify_api_key",
            "verify_model_token", "model_weights_token"} <= names


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  roles:
    - role: blackwell.serving.{role}
"""
KEY = "Sekret-Key-0123456789"
TOKEN = "hf_Sekret0123456789"
# each role with a secret, given one wrong input: argument validation fails before any task
BAD = {
    "verify": {"verify_checks": ["no-such-group"]},
    "sglang_router": {"sglang_router_port": "not-a-port"},
    "sglang_service": {"sglang_service_port": "not-a-port"},
    "model_weights": {"model_weights_revision": ["a", "list"]},
}


@pytest.mark.parametrize("role", sorted(BAD))
@pytest.mark.parametrize("verbosity", [[], ["-vvv"]], ids=["default", "vvv"])
def test_a_validation_error_prints_no_secret(tmp_path, role, verbosity):
    args = dict(BAD[role], sglang_service_api_key=KEY, model_weights_token=TOKEN)
    proc = run_local_playbook(tmp_path, PLAYBOOK.format(role=role), args, flags=verbosity, must_pass=False)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and "argument" in out.lower(), out[-2000:]
    assert KEY not in out and TOKEN not in out


NEWLINE_KEY = "Sekret-Key-0123456789\nsecond-line"
# each role whose secret goes into an HTTP header, with that secret holding a newline: its preflight refuses it before
# any change (the entry point that runs the preflight first), naming the variable and never the value
NEWLINE = {
    ("sglang_service", "preflight"): {"sglang_service_api_key": NEWLINE_KEY},
    ("sglang_router", "main"): {"sglang_router_api_key": NEWLINE_KEY},
    ("model_weights", "main"): {"model_weights_token": NEWLINE_KEY,
                                "model_weights_revision": "0123456789abcdef0123456789abcdef01234567"},
    ("verify", "main"): {"verify_api_key": NEWLINE_KEY},
}
ENTRY = """
- hosts: localhost
  gather_facts: false
  tasks:
    - name: The role's entry point
      ansible.builtin.include_role:
        name: blackwell.serving.{role}
        tasks_from: {entry}
"""


@pytest.mark.parametrize("role_entry", sorted(NEWLINE), ids=lambda v: "-".join(v))
@pytest.mark.parametrize("verbosity", [[], ["-vvv"]], ids=["default", "vvv"])
def test_a_key_with_a_newline_is_refused_by_name_and_never_shown(tmp_path, role_entry, verbosity):
    role, entry = role_entry
    proc = run_local_playbook(tmp_path, ENTRY.format(role=role, entry=entry), NEWLINE[role_entry], flags=verbosity,
                              must_pass=False)
    out = proc.stdout + proc.stderr
    name = next(iter(NEWLINE[role_entry]))
    assert proc.returncode != 0 and name in out and "control character" in out, out[-3000:]
    assert "Sekret-Key" not in out and "second-line" not in out


@pytest.mark.parametrize("module, args", [
    ("sglang_health", {"url": "http://127.0.0.1:9", "api_key": NEWLINE_KEY}),
    ("sglang_probe", {"url": "http://127.0.0.1:9", "api_key": NEWLINE_KEY, "paths": ["/health"]}),
    ("sglang_fingerprint", {"url": "http://127.0.0.1:9", "api_key": NEWLINE_KEY, "prompts": ["x"]}),
    ("sglang_router_worker", {"router_url": "http://127.0.0.1:9", "api_key": NEWLINE_KEY, "state": "query"}),
    ("model_snapshot", {"path": "/nonexistent", "repo_id": "a/b", "revision": "0" * 40,
                        "endpoint": "http://127.0.0.1:9", "token": NEWLINE_KEY, "state": "checked"}),
])
def test_a_module_refuses_a_key_it_cannot_send_without_showing_it(module, args):
    from modrun import run_module
    r = run_module(module, args)
    assert r.get("failed") and "control character" in r["msg"], r
    assert "Sekret-Key" not in json.dumps({k: v for k, v in r.items() if k != "invocation"})
