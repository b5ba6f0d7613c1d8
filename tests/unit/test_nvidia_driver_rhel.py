"""The RHEL 9 path of nvidia_driver (issue 12, case 3), rendered only: no RHEL host runs in the lab.

What renders is checked: the variables for RHEL, Rocky and Oracle Linux 9, and the order of the install tasks
(EPEL and CRB before dkms, the module stream enabled rather than installed, exact-version compute-only
packages, versionlock, then every NVIDIA package checked at the pinned version)."""
import yaml
from ansible.parsing.dataloader import DataLoader
import pytest

# these tests render the roles' expressions in-process with ansible-core 2.19's templating API (trusted templates);
# under an older ansible-core (tests/integration/test_site_lab_control_nodes.py) the roles run through ansible-playbook instead
try:
    from ansible.template import Templar, trust_as_template
except ImportError:
    pytest.skip("renders with ansible-core 2.19's templating API (trust_as_template); older cores are proven by "
                "running the roles (tests/integration/test_site_lab_control_nodes.py)", allow_module_level=True)

from conftest import REPO

ROLE = REPO / "roles" / "nvidia_driver"


def render(distribution, **over):
    facts = {"os_family": "RedHat", "distribution": distribution, "distribution_major_version": "9",
             "architecture": "x86_64", "kernel": "5.14.0-503.11.1.el9_5.x86_64"}
    loader = DataLoader()
    variables = {**load("defaults/main.yml"), **load("vars/main.yml"), **load("vars/RedHat.yml"), **over,
                 "ansible_facts": facts}
    templar = Templar(loader=loader, variables=variables)
    return lambda name: templar.template(variables[name])


def trusted(value):
    """A role's own files are trusted as templates (ansible-core 2.19 templates nothing else)."""
    if isinstance(value, str):
        return trust_as_template(value)
    if isinstance(value, dict):
        return {k: trusted(v) for k, v in value.items()}
    if isinstance(value, list):
        return [trusted(v) for v in value]
    return value


def load(rel):
    return trusted(yaml.safe_load((ROLE / rel).read_text()))


def tasks():
    return load("tasks/install-redhat.yml")


def test_compute_only_packages_at_the_exact_version_from_the_open_stream():
    r = render("Rocky")
    assert r("__nvidia_driver_module_stream") == "nvidia-driver:580-open"
    assert r("__nvidia_driver_packages")["open"] == ["nvidia-driver-cuda", "kmod-nvidia-open-dkms"]
    install = next(t for t in tasks() if "exactly the pinned version" in t["name"])
    templar = Templar(loader=DataLoader(), variables={
        "__nvidia_driver_packages": r("__nvidia_driver_packages"), "nvidia_driver_kernel_modules": "open",
        "nvidia_driver_version": "580.95.05"})
    assert templar.template(install["ansible.builtin.dnf"]["name"]) == [
        "nvidia-driver-cuda-580.95.05", "kmod-nvidia-open-dkms-580.95.05"]


def test_crb_repository_per_distribution_and_overridable():
    assert render("Rocky")("__nvidia_driver_crb_repo") == "crb"
    assert render("AlmaLinux")("__nvidia_driver_crb_repo") == "crb"
    assert render("RedHat")("__nvidia_driver_crb_repo") == "codeready-builder-for-rhel-9-x86_64-rpms"
    assert render("OracleLinux")("__nvidia_driver_crb_repo") == "ol9_codeready_builder"
    assert render("Rocky", nvidia_driver_crb_repo="mirror-crb")("__nvidia_driver_crb_repo") == "mirror-crb"


def test_epel_is_a_variable_source_with_its_key():
    r = render("Rocky")
    assert r("nvidia_driver_epel_baseurl").startswith("https://dl.fedoraproject.org/pub/epel/")
    assert r("nvidia_driver_epel_gpgkey").endswith("RPM-GPG-KEY-EPEL-9")
    epel = next(t for t in tasks() if "ansible.builtin.yum_repository" in t)
    assert epel["ansible.builtin.yum_repository"]["gpgcheck"] is True


def test_order_epel_crb_dkms_stream_packages_lock_check():
    names = [t["name"] for t in tasks()]
    order = [next(i for i, n in enumerate(names) if key in n) for key in
             ("EPEL, for dkms", "Enable CRB", "DKMS", "Enable the module stream", "exactly the pinned version",
              "Lock the driver packages", "Every NVIDIA driver package is at the pinned version")]
    assert order == sorted(order), names
    dkms = next(t for t in tasks() if "DKMS" in t["name"])["ansible.builtin.dnf"]["name"]
    assert "dkms" in dkms


def test_the_stream_is_enabled_not_installed():
    # "@nvidia-driver:580-open" installs the stream's default profile at its newest release
    for t in tasks():
        dnf = t.get("ansible.builtin.dnf")
        assert not (dnf and str(dnf["name"]).startswith("@")), t["name"]
    enable = next(t for t in tasks() if "Enable the module stream" in t["name"])
    assert enable["ansible.builtin.command"]["argv"][:4] == ["dnf", "-y", "module", "enable"]
