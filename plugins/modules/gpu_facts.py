#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: gpu_facts
short_description: Gather NVIDIA GPU and driver facts
version_added: 0.1.0
description:
  - Gathers, from C(nvidia-smi) and C(/proc/driver/nvidia/version), the GPU count, names, UUIDs, PCI ids,
    compute capability, memory, driver version, whether the loaded kernel module is the open or the
    proprietary one, and persistence mode.
  - Also lists NVIDIA display devices on the PCI bus (from sysfs), so that GPUs are seen before any driver
    is installed.
  - With no GPU, no driver, or a driver that does not answer, it reports that in RV(ansible_facts.nvidia_gpu.state)
    rather than failing.
author: blackwell.serving maintainers (!UNKNOWN)
options:
  nvidia_smi:
    description: The nvidia-smi to run; by default the one on the PATH (or C(/usr/bin/nvidia-smi)).
    type: path
  proc_version_path:
    description: Where the loaded kernel module reports its version.
    type: path
    default: /proc/driver/nvidia/version
  sysfs_pci_path:
    description: The sysfs directory listing PCI devices.
    type: path
    default: /sys/bus/pci/devices
  kernel_modules:
    description:
      - Also report the running kernel (RV(kernel)) and the NVIDIA kernel modules built for it under
        O(kernel_modules_root) (RV(kernel_module_files)), in the same round trip.
    type: bool
    default: false
  kernel_modules_root:
    description: Where each kernel's modules are, in a directory named for its release.
    type: path
    default: /lib/modules
  nvcc:
    description:
      - Also ask this C(nvcc) its release and build (RV(nvcc)), in the same round trip.
    type: path
    version_added: 0.4.0
  fabric:
    description:
      - Also read, in the same round trip, what the PCIe fabric between the GPUs and their health look like (RV(fabric)),
        the kernel command line (O(proc_cmdline_path)), the module parameters O(module_params), every GPU's
        C(nvidia-smi -q) (BAR1, PCIe link, MIG, ECC, retired pages and remapped rows, recovery action),
        C(nvidia-smi topo -p2p r), the ACS control bits of each PCIe bridge between a GPU and its root port
        (C(lspci -vvv -s BDF) of each bridge on the real path of the GPU's sysfs directory; no other device is
        read), each GPU's IOMMU group type, and the driver's Xids in the kernel log since boot
        (C(journalctl -k -b), else C(dmesg)).
      - Read-only. lspci and the kernel log need root for all they say, and without it RV(fabric) says what could
        not be read.
    type: bool
    default: false
    version_added: 0.5.0
  module_params:
    description: With O(fabric), the kernel module parameters to read, each C(MODULE.PARAMETER).
    type: list
    elements: str
    default: []
    version_added: 0.5.0
  proc_cmdline_path:
    description: With O(fabric), where the kernel's command line is read.
    type: path
    default: /proc/cmdline
    version_added: 0.5.0
  sysfs_module_path:
    description: With O(fabric), where the loaded modules' parameters are (C(MODULE/parameters/PARAMETER)).
    type: path
    default: /sys/module
    version_added: 0.5.0
  lspci:
    description: With O(fabric), the lspci to run; by default the one on the PATH (or C(/usr/bin/lspci)).
    type: path
    version_added: 0.5.0
attributes:
  check_mode:
    description: Can run in check mode and return the same result as without it.
    support: full
  diff_mode:
    description: Returns no diff; it changes nothing.
    support: none
  facts:
    description: Adds C(ansible_facts.nvidia_gpu).
    support: full
seealso:
  - module: blackwell.serving.sglang_sm120_check
  - name: nvidia-smi
    description: NVIDIA's System Management Interface, whose queries this module reads.
    link: https://docs.nvidia.com/deploy/nvidia-smi/index.html
"""

EXAMPLES = r"""
- name: Gather GPU facts
  blackwell.serving.gpu_facts:

- name: Show the compute capabilities
  ansible.builtin.debug:
    var: ansible_facts['nvidia_gpu']['compute_capabilities']
"""

RETURN = r"""
ansible_facts:
  description: Facts added to the host.
  returned: always
  type: dict
  sample: {nvidia_gpu: {state: ok, count: 8}}
  contains:
    nvidia_gpu:
      description: What the host's GPUs and driver report.
      type: dict
      sample: {state: ok, count: 8, driver_version: 580.95.05, kernel_module: open}
      contains:
        state:
          description:
            - C(ok) when nvidia-smi answered; C(no_nvidia_smi) when it is not installed; C(driver_not_loaded)
              when no kernel module answers; C(version_mismatch) when the loaded module and the user-space
              library differ (a reboot is due); C(error) otherwise.
          type: str
          sample: ok
        message:
          description: What nvidia-smi said when it did not answer.
          type: str
          sample: ""
        count:
          description: Number of GPUs nvidia-smi reports (0 when it does not answer).
          type: int
          sample: 8
        gpus:
          description: One entry per GPU.
          type: list
          elements: dict
          sample:
            - index: 0
              name: NVIDIA RTX PRO 6000 Blackwell Server Edition
              uuid: GPU-99727d6c-c34d-688e-afa9-8b2fa2ba610a
              pci_bus_id: "00000000:01:00.0"
              pci_device_id: "0x2BB5"
              compute_capability: "12.0"
              compute_capability_major: 12
              memory_total_mib: 97887
              driver_version: 580.95.05
              persistence_mode: Enabled
        names:
          description: The distinct GPU names.
          type: list
          elements: str
          sample: [NVIDIA RTX PRO 6000 Blackwell Server Edition]
        compute_capabilities:
          description: The distinct compute capabilities, for example V(12.0).
          type: list
          elements: str
          sample: ["12.0"]
        driver_version:
          description: The driver version nvidia-smi reports, or null.
          type: str
          sample: 580.95.05
        kernel_module:
          description: C(open) or C(proprietary) for the loaded kernel module; null when none is loaded.
          type: str
          sample: open
        kernel_module_version:
          description: The version of the loaded kernel module, or null.
          type: str
          sample: 580.95.05
        persistence_mode:
          description: The distinct persistence modes.
          type: list
          elements: str
          sample: [Enabled]
        pci_devices:
          description: NVIDIA display devices on the PCI bus, with or without a driver.
          type: list
          elements: dict
          sample: [{pci_bus_id: "0000:01:00.0", pci_device_id: "0x2BB5"}]
kernel:
  description: The running kernel's release (C(uname -r)), with O(kernel_modules).
  returned: when O(kernel_modules) is true
  type: str
  sample: 6.1.0-41-amd64
kernel_module_files:
  description:
    - The NVIDIA kernel modules (C(nvidia.ko), C(nvidia.ko.xz), ...) built for the running kernel, with O(kernel_modules).
    - Null when the kernel has no module directory on the host (a VM or container that loads its modules from elsewhere).
  returned: when O(kernel_modules) is true
  type: list
  elements: str
  sample: [/lib/modules/6.1.0-41-amd64/updates/dkms/nvidia.ko.xz]
nvcc:
  description: The CUDA release and build O(nvcc) reports, or null where it does not run or answers otherwise.
  returned: when O(nvcc) is given
  type: dict
  sample: {release: "13.0", version: 13.0.88}
fabric:
  description:
    - What the PCIe fabric and the GPUs' health look like, with O(fabric); C(blackwell.serving.stack_checks) judges it
      (group C(fabric)).
    - C(cmdline) the kernel's command line; C(module_params) each asked parameter's value (null where the module is
      not loaded); C(gpus) one record per GPU from C(nvidia-smi -q) (C(bar1_total_mib), C(pcie_gen_max),
      C(pcie_gen_current), C(pcie_gen_device_max), C(pcie_gen_host_max), C(pcie_width_max), C(pcie_width_current),
      C(mig_current), C(ecc_current), retired pages, remapped rows, C(recovery_action)); C(paths) the bridges above
      each NVIDIA display device on the bus, root port first; C(bridges) each such bridge's ACS (C(acs), C(readable),
      C(ctl)); C(iommu_groups) each GPU's IOMMU group type; C(p2p) the C(topo -p2p r) matrix; C(xids) the Xids of
      the kernel log since boot and C(xid_source) where they were read; C(errors) what could not be read.
  returned: when O(fabric) is true
  type: dict
  sample: {cmdline: "BOOT_IMAGE=/vmlinuz ro iommu=pt", module_params: {nvidia_uvm.uvm_disable_hmm: "Y"}, xids: []}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import gpu_facts


def main():
    module = AnsibleModule(argument_spec=gpu_facts.SPEC, supports_check_mode=True)
    module.exit_json(changed=False, **gpu_facts.read(module, module.params))


if __name__ == "__main__":
    main()
