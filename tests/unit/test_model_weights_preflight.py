"""model_weights' preflight, run by ansible-playbook on this machine: each check refuses its own input with its own
message, in order (the token before the other inputs, the pre-seeded weights last), and the outputs are set where
every check passed."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO

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
    (tmp_path / "pb.yml").write_text(PLAYBOOK)
    (tmp_path / "hosts").write_text("localhost ansible_connection=local\n")
    args = dict({"model_weights_revision": REVISION, "model_weights_path": str(tmp_path / "model"),
                 "out": str(tmp_path / "out.json")}, **extra, ansible_python_interpreter=sys.executable)
    env = dict(os.environ, ANSIBLE_COLLECTIONS_PATH=str(REPO / ".collections"))
    return subprocess.run([str(Path(sys.executable).parent / "ansible-playbook"), "-i", str(tmp_path / "hosts"),
                           "-e", json.dumps(args), str(tmp_path / "pb.yml")],
                          capture_output=True, text=True, env=env, timeout=180, cwd=tmp_path)


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
