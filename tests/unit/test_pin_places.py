"""Every file that holds a pinned value, and why it may.

A re-pin inside the repository touches the stack files and the owning role's defaults (with its argument spec and
the README table generated from it), nothing else. This test lists every tracked file that holds each value the
production stack file pins and fails on one outside the allowed places, so that a new copy of a pin (a fallback in
another role's defaults, a literal in a task, a test dictionary) is seen when it is written. The list of known
exceptions says why each file may hold the value; an entry that no longer applies fails too, so the list stays true.
"""
import re
import subprocess

import pytest
import yaml

from conftest import REPO, run_local_playbook

STACK = yaml.safe_load((REPO / "inventories/production/group_vars/all/stack.yml").read_text())

# the pins whose values are specific enough to find by text (a branch "580" or a Python "3.12" are not)
PINS = ["nvidia_driver_version", "cuda_toolkit_version", "uv_venv_uv_version", "sglang_commit",
        "sglang_sm120_fix_commit", "sglang_flashinfer_version", "sglang_transformers_version",
        "model_weights_repo_id", "model_weights_hf_hub_version", "sglang_router_version"]


def _owner(pin):
    return next(r.name for r in sorted((REPO / "roles").iterdir(), key=lambda p: -len(p.name))
                if pin.startswith(r.name + "_"))


def _allowed(pin, path):
    role = _owner(pin)
    return (
        path.startswith("inventories/") and path.endswith("/group_vars/all/stack.yml")
        # the owning role: its default, the argument spec that documents it, the README table generated from it
        or path in (f"roles/{role}/defaults/main.yml", f"roles/{role}/meta/argument_specs.yml",
                    f"roles/{role}/README.md")
        # documentation of what the stack is, and the record of past changes
        or path == "README.md" or path.startswith("changelogs/")
        # captured data: real tools' output on real hosts holds the versions those hosts ran
        or path.startswith("tests/fixtures/")
    )


# (pin, file) -> why the file holds the value. Lab: the stand-ins build what the lab serves (an apt repository of
# NVIDIA's packages, an sglang history, a wheel index) and must name versions to build them.
KNOWN = {
    ("nvidia_driver_version", "lab/aptrepo.py"): "the lab's apt repository offers this release (and others)",
    ("nvidia_driver_version", "lab/standins/nvidia_smi.py"): "the nvidia-smi stand-in's default driver",
    ("nvidia_driver_version", "plugins/modules/gpu_facts.py"): "RETURN samples (documentation)",
    ("cuda_toolkit_version", "plugins/modules/host_state.py"): "EXAMPLES and RETURN samples (documentation)",
    ("nvidia_driver_version", "roles/nvidia_driver/tasks/validate.yml"): "an example in an error message",
    ("cuda_toolkit_version", "lab/aptrepo.py"): "the lab's apt repository offers this release",
    ("nvidia_driver_version", "lab/aptrepo_ubuntu.py"): "the lab's ubuntu2404 stand-in offers this release (and others)",
    ("cuda_toolkit_version", "plugins/module_utils/verify.py"): "a comment on nvcc's version string",
    ("cuda_toolkit_version", "roles/cuda_toolkit/tasks/preflight.yml"): "an example in an error message",
    ("uv_venv_uv_version", "roles/uv_venv/tasks/preflight.yml"): "an example in an error message",
    ("sglang_commit", "lab/sglang_repo.py"): "the lab's sglang history names the upstream commit it stands for",
    ("sglang_commit", "plugins/modules/sglang_sm120_check.py"): "a RETURN sample (documentation)",
    ("sglang_sm120_fix_commit", "lab/sglang_repo.py"): "the lab's sglang history names the upstream fix",
    ("sglang_sm120_fix_commit", "plugins/module_utils/sm120.py"): "an upstream fact: the fix's commit (PR 14311)",
    ("sglang_sm120_fix_commit", "plugins/modules/sglang_sm120_check.py"): "the module's default: the upstream fix",
    ("sglang_sm120_fix_commit", "tests/integration/test_sm120_module.py"): "the module against the upstream fix",
    ("sglang_flashinfer_version", "lab/sglang_repo.py"): "the lab's sglang tree pins what upstream's did",
    ("sglang_flashinfer_version", "lab/standins/sglang/launch_server.py"): "the stand-in server checks it",
    ("sglang_flashinfer_version", "roles/sglang_service/README.md"): "the known-bad table and its evidence cite releases",
    ("sglang_flashinfer_version", "plugins/module_utils/known_bad.py"): "a row cites the release its code was read from",
    ("sglang_flashinfer_version", "plugins/filter/known_bad.yml"): "an example of a row that matches",
    ("sglang_flashinfer_version", "tests/integration/test_stack_resolves.py"): "resolves the real packages",
    ("sglang_flashinfer_version", "tests/unit/test_unit_flags_real_sglang.py"): "the real sglang release's pins",
    ("sglang_router_version", "roles/sglang_router/templates/sglang-router.service.j2"): "a comment on 0.3.2's CLI",
    ("sglang_router_version", "tests/unit/test_unit_flags_real_sglang.py"): "the real router's options",
    ("model_weights_repo_id", "plugins/modules/model_snapshot.py"): "EXAMPLES (documentation)",
}
# unit tests that feed captured or literal values to the code they test (a parser, a judge, a stand-in)
TEST_DATA = re.compile(r"^tests/unit/test_[a-z0-9_]+\.py$")


def _files_holding(value):
    pattern = r"(^|[^0-9A-Za-z._-])" + re.escape(value) + r"($|[^0-9A-Za-z_]|\.[^0-9])"
    out = subprocess.run(["git", "grep", "-l", "-E", pattern], cwd=REPO, capture_output=True, text=True)
    return sorted(out.stdout.split())


@pytest.mark.parametrize("pin", PINS)
def test_a_pinned_value_lives_only_where_a_repin_expects_it(pin):
    value = str(STACK[pin])
    stray = [f for f in _files_holding(value)
             if not _allowed(pin, f) and (pin, f) not in KNOWN and not TEST_DATA.match(f)]
    assert not stray, (
        f"{pin}={value} is written in {stray}: read the variable (or the owning role's) instead of repeating its "
        "value, or, where a literal is right (captured data, a stand-in), add the file to KNOWN with the reason")


def test_the_known_exceptions_are_still_true():
    stale = [(pin, f) for (pin, f) in KNOWN if f not in _files_holding(str(STACK[pin]))]
    assert not stale, f"KNOWN lists files that no longer hold the value: {stale}"


def test_verify_repeats_no_pin():
    """verify reads the other roles' variables; a literal fallback there is a second copy that a re-pin misses."""
    text = "\n".join((REPO / "roles/verify" / p).read_text() for p in
                     ("defaults/main.yml", "meta/argument_specs.yml", "vars/main.yml"))
    held = [pin for pin in PINS if str(STACK[pin]) in text]
    assert not held, f"roles/verify repeats the values of {held}"


PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: blackwell.serving.verify
        tasks_from: reference
        public: true
    - name: What verify compares with
      ansible.builtin.copy:
        dest: "{{ out }}"
        mode: "0644"
        content: "{{ {'driver': verify_driver_version, 'cuda': verify_cuda_version, 'commit': verify_sglang_commit,
                  'fix': verify_sm120_fix_commit, 'flashinfer': verify_flashinfer_version,
                  'transformers': verify_transformers_version, 'url': verify_url, 'repo': verify_model_repo_id,
                  'revision': verify_model_revision, 'stack': verify_fingerprint_stack} | to_json }}"
      vars:
        role_path: "{{ collection_path }}/roles/verify"  # as inside the role's own tasks
"""


def _verify_reads(tmp_path, extra_vars):
    import json
    out = tmp_path / "verify-reads.json"
    run_local_playbook(tmp_path, PLAYBOOK, {"collection_path": str(REPO), "out": str(out), **extra_vars})
    return json.loads(out.read_text())


def test_verify_alone_compares_with_the_owning_roles_defaults(tmp_path):
    """playbooks/verify.yml with an inventory that pins nothing: the values are the owning roles' defaults."""
    defaults = {}
    for role in ("nvidia_driver", "cuda_toolkit", "sglang", "sglang_service", "model_weights"):
        defaults.update(yaml.safe_load((REPO / "roles" / role / "defaults/main.yml").read_text()))
    got = _verify_reads(tmp_path, {})
    assert got["driver"] == defaults["nvidia_driver_version"]
    assert got["cuda"] == defaults["cuda_toolkit_version"]
    assert got["commit"] == defaults["sglang_commit"] and got["fix"] == defaults["sglang_sm120_fix_commit"]
    assert got["flashinfer"] == defaults["sglang_flashinfer_version"]
    assert got["transformers"] == defaults["sglang_transformers_version"]
    assert got["url"] == f"http://127.0.0.1:{defaults['sglang_service_port']}"
    assert got["repo"] == defaults["model_weights_repo_id"] and got["revision"] == ""


def test_verify_compares_with_the_stack_file(tmp_path):
    """The inventory's pins (the stack file) win over the roles' defaults, and reach the fingerprint's stack too."""
    got = _verify_reads(tmp_path, {"nvidia_driver_version": "590.10.1", "sglang_commit": "a" * 40,
                                   "sglang_service_port": 31000, "model_weights_revision": "b" * 40})
    assert got["driver"] == "590.10.1" and got["commit"] == "a" * 40
    assert got["url"] == "http://127.0.0.1:31000" and got["revision"] == "b" * 40
    assert got["stack"]["nvidia_driver_version"] == "590.10.1" and got["stack"]["model_revision"] == "b" * 40


def test_verify_reads_each_name_from_the_play_else_from_its_owning_role():
    """verify's __verify_stack: one entry per name it reads, the play's value else the owning role's default (an
    entry per name, so that a read templates one value, not the whole stack)."""
    var = yaml.safe_load((REPO / "roles/verify/vars/main.yml").read_text())
    assert list(var["__verify_stack"]) == var["__verify_stack_names"]
    for name, expr in var["__verify_stack"].items():
        assert expr == f"{{{{ {name} | default(__verify_role_defaults['{name}'] | default('')) }}}}"
