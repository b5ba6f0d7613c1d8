"""verify's fabric group as it ran on the lent H100 (tests/fixtures/gpu/h100-device/verify-fabric/README.txt): the
checks it made are the group's checks today, and what failed there is what the machine lacked."""
import json

from conftest import FIXTURES

RUN = FIXTURES / "gpu" / "h100-device" / "verify-fabric"


def test_the_settings_the_machine_was_never_given_failed_and_nothing_else():
    report = json.loads((RUN / "report-pinned.json").read_text())
    failed = sorted(c["name"] for c in report["checks"] if not c["ok"])
    assert failed == ["iommu_mode", "kernel_arg pcie_aspm", "kernel_arg pcie_port_pm",
                      "module_param nvidia_uvm.uvm_disable_hmm"]
    assert report["passed"] is False


def test_with_those_settings_off_every_check_passed():
    report = json.loads((RUN / "report-asis.json").read_text())
    assert report["passed"] is True and all(c["ok"] for c in report["checks"])
    names = {c["name"] for c in report["checks"]}
    assert {"acs_redirect", "bar1", "pcie_link_width", "pcie_link_generation", "mig_mode", "ecc", "p2p_matrix",
            "xid"} <= names
