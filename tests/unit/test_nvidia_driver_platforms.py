"""nvidia_driver installs the compute-only set (no X server, no GL) on every platform it knows (issue 12).

The desktop metapackages pull the X driver and the GL libraries at exact versions (Debian's nvidia-driver,
Ubuntu's nvidia-driver-<branch>[-open]); a server gets the headless set, with the open kernel modules when asked.
Ubuntu and the RHEL family are rendered only (no such host runs in the lab)."""
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

from conftest import REPO

ROLE = REPO / "roles" / "nvidia_driver"
# what each platform's packaging calls its desktop (X/GL) packages
DESKTOP = {
    "Debian_12.yml": {"nvidia-driver", "xserver-xorg-video-nvidia", "nvidia-driver-libs", "libgl1-nvidia-glvnd-glx"},
    "Ubuntu.yml": {"nvidia-driver-580", "nvidia-driver-580-open", "xserver-xorg-video-nvidia-580",
                   "libnvidia-gl-580"},
    "RedHat.yml": {"nvidia-driver", "nvidia-xconfig", "nvidia-driver-libs"},
}


def rendered(platform):
    data = yaml.safe_load((ROLE / "vars" / platform).read_text())
    variables = {"nvidia_driver_branch": "580", "nvidia_driver_version": "580.95.05",
                 "__nvidia_driver_packages": trust_as_template(yaml.safe_dump(data["__nvidia_driver_packages"]))}
    return yaml.safe_load(Templar(loader=DataLoader(), variables=variables).template(
        variables["__nvidia_driver_packages"]))


@pytest.mark.parametrize("platform", sorted(DESKTOP))
def test_no_desktop_package_on_any_platform(platform):
    for modules, packages in rendered(platform).items():
        assert not DESKTOP[platform] & set(packages), (platform, modules, packages)


def test_ubuntu_headless_set_with_the_open_modules_and_nvidia_smi():
    sets = rendered("Ubuntu.yml")
    assert "nvidia-headless-580-open" in sets["open"] and "nvidia-headless-580" not in sets["open"]
    assert "nvidia-headless-580" in sets["proprietary"]
    # gpu_facts and the devices unit need nvidia-smi, which Ubuntu ships in nvidia-utils-<branch>
    assert all("nvidia-utils-580" in packages for packages in sets.values())
