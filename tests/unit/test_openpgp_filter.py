"""The openpgp_fingerprints filter: the fingerprint gpg itself prints, from armored and binary key files."""
import base64
import subprocess

import pytest
from ansible.errors import AnsibleFilterError
from ansible_collections.blackwell.serving.plugins.filter.openpgp import openpgp_fingerprints


@pytest.fixture(scope="module")
def gnupg(tmp_path_factory):
    home = tmp_path_factory.mktemp("gnupg")
    home.chmod(0o700)
    g = lambda *a, **kw: subprocess.run(["gpg", "--batch", "--quiet", "--homedir", str(home), *a],
                                        capture_output=True, check=True, **kw).stdout
    g("--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", "t1 <t1@localhost>", "ed25519",
      "sign", "never")
    g("--pinentry-mode", "loopback", "--passphrase", "", "--quick-gen-key", "t2 <t2@localhost>", "rsa2048",
      "sign", "never")
    fprs = [line.split(":")[9] for line in g("--with-colons", "--fingerprint").decode().splitlines()
            if line.startswith("fpr:")]
    return g, fprs


def test_armored_key_gives_what_gpg_prints(gnupg):
    g, fprs = gnupg
    armored = g("--armor", "--export", fprs[0]).decode()
    assert openpgp_fingerprints(armored) == [fprs[0]]


def test_binary_keyring_as_base64_gives_every_primary_key(gnupg):
    g, fprs = gnupg
    binary = g("--export")
    assert openpgp_fingerprints(base64.b64encode(binary).decode()) == fprs


def test_another_key_does_not_match(gnupg):
    g, fprs = gnupg
    assert fprs[0] not in openpgp_fingerprints(g("--armor", "--export", fprs[1]).decode())


def test_garbage_is_an_error():
    with pytest.raises(AnsibleFilterError):
        openpgp_fingerprints("<html>404 Not Found</html>")


@pytest.mark.parametrize("text", ["<html>404 Not Found</html>", "", "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!\n",
                                  # a new-format packet header cut after its tag
                                  base64.b64encode(b"\xc6").decode()])
def test_not_strict_a_file_that_is_no_key_has_no_fingerprint(text):
    assert openpgp_fingerprints(text, strict=False) == []


def test_not_strict_a_key_still_gives_its_fingerprint(gnupg):
    g, fprs = gnupg
    assert openpgp_fingerprints(g("--armor", "--export", fprs[0]).decode(), strict=False) == [fprs[0]]
