"""model_weights' preflight, run by ansible-playbook on this machine: each check refuses its own input with its own
message, in order (the token before the other inputs, the pre-seeded weights last), and the outputs are set where
every check passed."""
import json

import pytest

from conftest import run_local_playbook

PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.include_role:
        name: blackwell.serving.model_weights
        tasks_from: preflight
    - ansible.builtin.copy:
        content: "{{ {'target': model_weights_download_target, 'model': model_weights_model_path} | to_json }}"
        dest: "{{ out }}"
        mode: "0644"
      check_mode: false
"""
REVISION = "0123456789abcdef0123456789abcdef01234567"


def run(tmp_path, **extra):
    args = dict({"model_weights_revision": REVISION, "model_weights_path": str(tmp_path / "model"),
                 "out": str(tmp_path / "out.json")}, **extra)
    return run_local_playbook(tmp_path, PLAYBOOK, args, must_pass=False)


def test_a_download_passes_and_names_its_target(tmp_path):
    proc = run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-3000:]
    out = json.loads((tmp_path / "out.json").read_text())
    assert out == {"target": str(tmp_path / "model"), "model": str(tmp_path / "model")}


def test_pre_seeded_weights_pass_where_they_are_there(tmp_path):
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "config.json").write_text("{}\n")
    proc = run(tmp_path, model_weights_download=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert json.loads((tmp_path / "out.json").read_text())["target"] == ""


@pytest.mark.parametrize("extra, message", [
    ({"model_weights_download": False}, "must already hold the\nweights"),
    ({"model_weights_revision": REVISION.upper()}, "is a full commit id in upper case"),
    ({"model_weights_cache_port": 0}, "a model_weights_cache_port in 1-65535 (found 0)"),
    # the token first: checked before the other inputs, its value never shown
    ({"model_weights_token": "Sekret\nline", "model_weights_revision": "main"}, "control characters"),
], ids=["pre-seeded-missing", "upper-case-revision", "cache-port", "token"])
def test_each_check_refuses_its_input_with_its_message(tmp_path, extra, message):
    proc = run(tmp_path, **extra)
    out = proc.stdout + proc.stderr
    assert proc.returncode != 0 and " ".join(message.split()) in " ".join(out.split()), out[-3000:]
    assert "Nothing was changed" in out and "Sekret" not in out
    assert not (tmp_path / "out.json").exists()
