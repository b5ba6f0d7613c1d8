"""nvidia_repo on the RHEL family (issue 12): NVIDIA's RPM key is checked against a pinned id before dnf trusts
it, as the Debian key is. Rendered only: no RHEL host runs in the lab."""
import pytest
import yaml
from ansible.parsing.dataloader import DataLoader

# these tests render the roles' expressions in-process with ansible-core 2.19's templating API (trusted templates);
# under an older ansible-core (tests/integration/test_site_lab_control_nodes.py) the roles run through ansible-playbook instead
try:
    from ansible.template import Templar, trust_as_template
except ImportError:
    pytest.skip("renders with ansible-core 2.19's templating API (trust_as_template); older cores are proven by "
                "running the roles (tests/integration/test_site_lab_control_nodes.py)", allow_module_level=True)
from ansible_collections.blackwell.serving.plugins.filter.openpgp import openpgp_fingerprints

from conftest import REPO

ROLE = REPO / "roles" / "nvidia_repo"


def load(rel):
    data = yaml.safe_load((ROLE / rel).read_text())
    return {k: trust_as_template(v) if isinstance(v, str) else v for k, v in data.items()} if isinstance(data, dict) \
        else data


@pytest.fixture(scope="module")
def keys(gpg_keys):
    return gpg_keys


def tasks():
    return yaml.safe_load((ROLE / "tasks" / "repository-redhat.yml").read_text())


def judge(key_text, pinned):
    """The role's own assertion, rendered as ansible would with the fetched key and the pinned id."""
    check = next(t for t in tasks() if "ansible.builtin.assert" in t)
    variables = {**load("defaults/main.yml"), **load("vars/main.yml"), "nvidia_repo_rpm_key_id": pinned,
                 "__nvidia_repo_key_found": openpgp_fingerprints(key_text)}
    templar = Templar(loader=DataLoader(), variables=variables)
    return templar.evaluate_conditional(trust_as_template(check["ansible.builtin.assert"]["that"]))


def test_default_pin_is_nvidias_long_key_id():
    assert load("defaults/main.yml")["nvidia_repo_rpm_key_id"] == "9CD0A493D42D0685"


def test_the_pinned_key_passes_by_long_id_or_whole_fingerprint(keys):
    fpr, text = keys[0]
    assert judge(text, fpr[-16:].lower())
    assert judge(text, " ".join(fpr[i:i + 4] for i in range(0, 40, 4)))


def test_another_key_is_refused(keys):
    (fpr, _), (_, other) = keys
    assert not judge(other, fpr[-16:])


def test_key_checked_and_written_before_the_repository_trusts_it():
    names = [next(k for k in t if k.startswith("ansible.builtin.")) for t in tasks()]
    assert names[:4] == ["ansible.builtin.uri", "ansible.builtin.assert", "ansible.builtin.copy",
                         "ansible.builtin.yum_repository"]
    copy, repo = tasks()[2]["ansible.builtin.copy"], tasks()[3]["ansible.builtin.yum_repository"]
    assert copy["dest"] == "{{ __nvidia_repo_rpm_key_path }}"
    assert repo["gpgkey"] == "file://{{ __nvidia_repo_rpm_key_path }}"
    assert repo["gpgcheck"] is True
