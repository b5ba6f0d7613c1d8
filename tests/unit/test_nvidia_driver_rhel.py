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
    """install-redhat.yml's tasks in the order they run, those of its blocks included."""
    def flat(items):
        for t in items:
            yield from flat(t["block"]) if "block" in t else [t]
    return list(flat(load("tasks/install-redhat.yml")))


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
    assert "enable" in enable["ansible.builtin.command"]["argv"]


# dnf -q module list --enabled nvidia-driver, in dnf's layout (issue 32, point 4)
def module_list(*streams):
    rows = "".join(f"nvidia-driver  {s} [e]      default [d], fm, ks, src  Nvidia driver for {s} branch\n" for s in streams)
    return ("cuda-rhel9-x86_64\nName           Stream        Profiles                  Summary\n" + rows
            + "\nHint: [d]efault, [e]nabled, [x]disabled, [i]nstalled\n")


@pytest.mark.parametrize("enabled, argv", [
    ([], ["dnf", "-y", "module", "enable", "nvidia-driver:580-open"]),
    # another branch's or flavour's stream enabled: dnf refuses a second; the guide switches, allowing erasure
    (["575-open"], ["dnf", "-y", "module", "switch-to", "nvidia-driver:580-open", "--allowerasing"]),
    (["580-dkms"], ["dnf", "-y", "module", "switch-to", "nvidia-driver:580-open", "--allowerasing"]),
    (["580-open"], None),
])
def test_the_stream_is_enabled_or_switched_to_as_the_guide_says(enabled, argv):
    r = render("Rocky")
    task = next(t for t in tasks() if "Enable the module stream" in t["name"])
    variables = {"__nvidia_driver_module_stream": r("__nvidia_driver_module_stream"),
                 "__nvidia_driver_enabled_stream_regex": r("__nvidia_driver_enabled_stream_regex"),
                 "__nvidia_driver_streams": {"stdout": module_list(*enabled)}}
    variables.update({k: v for k, v in task["vars"].items()})
    templar = Templar(loader=DataLoader(), variables=variables)
    runs = templar.template(trust_as_template("{{ " + task["when"] + " }}"))
    assert runs == (argv is not None)
    if argv:
        assert templar.template(task["ansible.builtin.command"]["argv"]) == argv


def test_the_running_uek_kernel_gets_its_own_development_files():
    plain = render("OracleLinux")  # the Red Hat compatible kernel, as render() fixes it
    facts = {"os_family": "RedHat", "distribution": "OracleLinux", "distribution_major_version": "9",
             "architecture": "x86_64", "kernel": "5.15.0-302.167.6.el9uek.x86_64"}
    variables = {**load("defaults/main.yml"), **load("vars/main.yml"), **load("vars/RedHat.yml"), "ansible_facts": facts}
    headers = Templar(loader=DataLoader(), variables=variables).template(variables["__nvidia_driver_headers"])
    assert headers == ["kernel-uek-devel", "kernel-headers", "kernel-uek-devel-5.15.0-302.167.6.el9uek.x86_64"]
    assert plain("__nvidia_driver_headers") == ["kernel-devel", "kernel-headers", "kernel-devel-5.14.0-503.11.1.el9_5.x86_64"]


@pytest.mark.parametrize("offers, ok", [(["580.95.05"], True), (["580.105.08"], False), ([], False)])
def test_a_release_the_stream_does_not_offer_stops_naming_what_it_does(offers, ok):
    task = next(t for t in tasks() if "The stream offers the pinned release" in t["name"])
    r = render("Rocky")
    variables = {"nvidia_driver_version": "580.95.05", "nvidia_driver_kernel_modules": "open",
                 "__nvidia_driver_packages": r("__nvidia_driver_packages"), "inventory_hostname": "gpu-1",
                 "__nvidia_driver_module_stream": r("__nvidia_driver_module_stream"),
                 "__nvidia_driver_stream_offers": {"stdout_lines": offers}}
    templar = Templar(loader=DataLoader(), variables=variables)
    assert templar.template(trust_as_template("{{ " + task["ansible.builtin.assert"]["that"] + " }}")) == ok
    msg = templar.template(task["ansible.builtin.assert"]["fail_msg"])
    assert "nvidia_driver_version 580.95.05 is not offered by the module stream nvidia-driver:580-open" in msg
    assert f"it offers {', '.join(offers) or 'nothing'}" in msg
