# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The kernel command line that PCIe peer-to-peer between the GPUs needs: one place that says which argument each
of nvidia_driver's variables puts there, read by the role that sets them and by verify, which checks them."""

from __future__ import annotations


def pcie_kernel_args(iommu_passthrough, pcie_aspm_off, amd=False):
    """{argument: value} for the variables given: IOMMU passthrough (``amd_iommu=pt`` on AMD, ``iommu=pt``
    elsewhere), and ASPM and PCIe port power management off (``pcie_aspm=off pcie_port_pm=off``)."""
    args = {}
    if _bool(iommu_passthrough):
        args["amd_iommu" if _bool(amd) else "iommu"] = "pt"
    if _bool(pcie_aspm_off):
        args["pcie_aspm"] = "off"
        args["pcie_port_pm"] = "off"
    return args


def kernel_args_missing(cmdline, wanted):
    """The ``key=value`` words of ``wanted`` that a kernel command line lacks. ``cmdline`` is the text of
    /proc/cmdline or Ansible's ``proc_cmdline`` fact (a key given twice there is a list)."""
    if isinstance(cmdline, dict):
        seen = {k: [str(x) for x in v] if isinstance(v, list) else [str(v)] for k, v in cmdline.items()}
    else:
        seen = {}
        for word in str(cmdline or "").split():
            key, _sep, value = word.partition("=")
            seen.setdefault(key, []).append(value)
    # the kernel takes the last of a key given twice
    return [f"{k}={v}" for k, v in (wanted or {}).items() if not seen.get(k) or seen[k][-1] != str(v)]


def _bool(value):
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on")
    return bool(value)


class FilterModule:
    def filters(self):
        return {"pcie_kernel_args": pcie_kernel_args, "kernel_args_missing": kernel_args_missing}
