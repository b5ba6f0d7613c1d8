"""nvidia_repo on the Debian family trusts the installed key while its fingerprint is the pinned one: a converged
host's run fetches nothing (one round trip fewer). Any other installed file (another key, garbage, none) is not
trusted: the key is fetched and checked as on a new host, and written again."""
import base64
import json

import pytest

from conftest import REPO, run_local_playbook

ROLE = REPO / "roles" / "nvidia_repo"
KEY_PATH = "/etc/apt/keyrings/nvidia-cuda.asc"
# the role's own expression, rendered by ansible-playbook (it names the collection's filter) for every case at once
PLAYBOOK = """
- hosts: localhost
  gather_facts: false
  vars_files: [{role}/defaults/main.yml, {role}/vars/main.yml]
  tasks:
    - name: Judge each case
      ansible.builtin.debug:
        msg: "{{{{ __nvidia_repo_holds | bool }}}}"
      loop: "{{{{ cases }}}}"
      vars:
        nvidia_repo_key_fingerprint: "{{{{ item.pinned }}}}"
        __nvidia_repo_state: "{{{{ item.state }}}}"
      register: judged
    - name: Write the answers
      ansible.builtin.copy:
        dest: "{{{{ out }}}}"
        content: "{{{{ judged.results | map(attribute='msg') | list | to_json }}}}"
        mode: "0644"
"""


@pytest.fixture(scope="module")
def keys(gpg_keys):
    return gpg_keys


def dearmored(text):
    body = text.split("\n\n", 1)[1].split("-----END", 1)[0]
    return base64.b64decode("".join(line for line in body.splitlines() if not line.startswith("=")))


def armored(data):
    return ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n" + base64.encodebytes(data).decode()
            + "-----END PGP PUBLIC KEY BLOCK-----\n")


def case(state_holds, installed, pinned):
    read = {"exists": installed is not None, "isreg": installed is not None}
    if installed is not None:
        read["content"] = installed
    return {"pinned": pinned, "state": {"holds": state_holds, "paths": {KEY_PATH: read}}}


def judge(tmp_path, cases):
    out = tmp_path / "judged.json"
    run_local_playbook(tmp_path, PLAYBOOK.format(role=ROLE), {"cases": cases, "out": str(out)})
    return json.loads(out.read_text())


def test_only_the_installed_pinned_key_is_trusted(keys, tmp_path):
    (fpr, text), (_, other) = keys
    spaced = " ".join(fpr[i:i + 4] for i in range(0, 40, 4)).lower()
    trusted = [case(True, text, fpr), case(True, text, spaced)]
    both = armored(dearmored(text) + dearmored(other))
    # another key, the pinned key with another beside it (in one block, or in a second block), a page that is no
    # key, a truncated key, an empty file, no file: fetched and checked as on a new host
    refused = [case(True, other, fpr), case(True, both, fpr), case(True, text + other, fpr),
               case(True, "<html>404</html>", fpr), case(True, armored(b"\xc6"), fpr), case(True, "", fpr),
               case(True, None, fpr),
               # a state read that differs is not trusted whatever the key
               case(False, text, fpr)]
    assert judge(tmp_path, trusted + refused) == [True] * len(trusted) + [False] * len(refused)

