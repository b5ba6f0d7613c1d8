"""The kernel command line the PCIe variables ask for, and what a booted kernel lacks of it (issue 34)."""
import importlib.util

from conftest import REPO

spec = importlib.util.spec_from_file_location("kernel_args", REPO / "plugins/filter/kernel_args.py")
kernel_args = importlib.util.module_from_spec(spec)
spec.loader.exec_module(kernel_args)

H100_CMDLINE = (REPO / "tests/fixtures/gpu/h100-device/captures/proc-cmdline.txt").read_text()


def test_each_variable_puts_its_arguments():
    assert kernel_args.pcie_kernel_args(True, True) == {"iommu": "pt", "pcie_aspm": "off", "pcie_port_pm": "off"}
    assert kernel_args.pcie_kernel_args(True, False, amd=True) == {"amd_iommu": "pt"}
    assert kernel_args.pcie_kernel_args("false", False) == {}


def test_a_real_command_line_lacks_what_was_never_set():
    # the lent H100 machine's own command line: none of the arguments
    wanted = kernel_args.pcie_kernel_args(True, True)
    assert kernel_args.kernel_args_missing(H100_CMDLINE, wanted) == ["iommu=pt", "pcie_aspm=off", "pcie_port_pm=off"]


def test_the_last_of_a_key_given_twice_counts_as_the_kernel_reads_it():
    wanted = {"iommu": "pt"}
    assert kernel_args.kernel_args_missing("ro iommu=pt iommu=on", wanted) == ["iommu=pt"]
    assert kernel_args.kernel_args_missing("ro iommu=on iommu=pt", wanted) == []
    # Ansible's proc_cmdline fact gives a key twice as a list
    assert kernel_args.kernel_args_missing({"ro": True, "iommu": ["on", "pt"]}, wanted) == []
    assert kernel_args.kernel_args_missing({"ro": True, "iommu": "on"}, wanted) == ["iommu=pt"]
