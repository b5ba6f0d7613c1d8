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

import os
import shutil

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import fabric, nvidia

# at most this many Xid lines are returned (the first ones and the last ones): a card that keeps failing logs
# thousands, and the report needs which and where, not each
MAX_XIDS = 100


def read_pci(path):
    entries = []
    try:
        names = sorted(os.listdir(path))
    except OSError:
        return []
    for addr in names:
        vals = []
        for f in ("vendor", "device", "class"):
            try:
                with open(os.path.join(path, addr, f), encoding="ascii") as fh:
                    vals.append(fh.read().strip())
            except OSError:
                vals.append("")
        entries.append((addr, *vals))
    return nvidia.nvidia_pci_devices(entries)


def gather(module):
    p = module.params
    proc = None
    try:
        with open(p["proc_version_path"], encoding="utf-8") as fh:
            proc = nvidia.parse_proc_version(fh.read())
    except OSError:
        proc = None
    facts = {"state": "ok", "message": "", "gpus": [], "pci_devices": read_pci(p["sysfs_pci_path"])}
    smi = p["nvidia_smi"] or shutil.which("nvidia-smi") or "/usr/bin/nvidia-smi"
    if not os.path.exists(smi):
        facts.update(state="no_nvidia_smi", message=f"{smi} not found")
    else:
        rc, out, err = module.run_command(
            [smi, f"--query-gpu={','.join(nvidia.QUERY_FIELDS)}", "--format=csv,noheader,nounits"])
        text = (out + err).strip()
        if rc == 0:
            try:
                facts["gpus"] = nvidia.gpus_from_query(nvidia.parse_query_csv(out, nvidia.QUERY_FIELDS))
            except ValueError as exc:
                facts.update(state="error", message=str(exc))
        elif "version mismatch" in text:
            facts.update(state="version_mismatch", message=text)
        elif "couldn't communicate with the NVIDIA driver" in text or rc == 9:
            facts.update(state="driver_not_loaded", message=text)
        else:
            facts.update(state="error", message=f"rc={rc}: {text}")
    facts.update(nvidia.summarise(facts["gpus"], proc))
    return facts


def _read(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as fh:
            return fh.read()
    except OSError:
        return None


def _kernel_log(module):
    """The kernel's messages since boot: the journal's (which keeps what the ring buffer has dropped), else dmesg."""
    journalctl = shutil.which("journalctl")
    if journalctl:
        rc, out, err = module.run_command([journalctl, "-k", "-b", "--no-pager", "-q"])
        if rc == 0 and out.strip():
            return out, "journalctl -k -b", None
    dmesg = shutil.which("dmesg")
    if not dmesg:
        return "", None, "neither journalctl nor dmesg could be read"
    rc, out, err = module.run_command([dmesg])
    if rc != 0:
        return "", None, f"dmesg: {(err or out).strip()} (rc={rc})"
    return out, "dmesg", None


def gather_fabric(module, facts, smi):
    """What the fabric checks read (gpu_facts' option fabric); nothing is written anywhere."""
    p = module.params
    errors = []
    cmdline = _read(p["proc_cmdline_path"])
    if cmdline is None:
        errors.append(f"{p['proc_cmdline_path']} could not be read")
    params = {}
    for name in p["module_params"]:
        mod, _sep, param = name.partition(".")
        params[name] = fabric.module_param_value(_read(os.path.join(p["sysfs_module_path"], mod, "parameters", param)))
    out = {"cmdline": cmdline.strip() if cmdline else cmdline, "module_params": params, "gpus": [], "paths": {},
           "bridges": {}, "iommu_groups": {}, "p2p": None, "xids": [], "xid_count": 0, "xid_source": None,
           "errors": errors}
    if facts["state"] == "ok":
        rc, text, err = module.run_command([smi, "-q"])
        if rc == 0:
            out["gpus"] = fabric.smi_q_fabric(text)
        else:
            errors.append(f"nvidia-smi -q: {(err or text).strip()} (rc={rc})")
        rc, text, err = module.run_command([smi, "topo", "-p2p", "r"])
        out["p2p"] = fabric.parse_p2p_matrix(text) if rc == 0 else None
        if out["p2p"] is None:
            errors.append(f"nvidia-smi topo -p2p r: {(err or text).strip()[:300]} (rc={rc})")
    # the PCIe path of each NVIDIA display device on the bus (also one the driver lost): the bridges above it, as
    # lspci names them (-PP, the path through each bridge; the driver role's ACS unit reads the same), else from the
    # real path of its sysfs directory; only those bridges are read
    lspci = p["lspci"] or shutil.which("lspci") or "/usr/bin/lspci"
    paths = None
    if os.path.exists(lspci):
        rc, text, err = module.run_command([lspci, "-D", "-PP", "-n", "-d", "10de:"])
        if rc == 0:
            paths = fabric.parse_lspci_paths(text)
        else:
            errors.append(f"lspci -D -PP -n -d 10de: {(err or text).strip()} (rc={rc})")
    if paths is None:
        paths = {dev["pci_bus_id"]: fabric.bridges_on_path(
            os.path.realpath(os.path.join(p["sysfs_pci_path"], dev["pci_bus_id"]))) for dev in facts["pci_devices"]}
    for addr in sorted(paths):
        out["paths"][addr] = paths[addr]
        kind = _read(os.path.join(p["sysfs_pci_path"], addr, "iommu_group", "type"))
        out["iommu_groups"][addr] = kind.strip() if kind else None
        for bdf in out["paths"][addr]:
            if bdf in out["bridges"]:
                continue
            if not os.path.exists(lspci):
                out["bridges"][bdf] = {"bdf": bdf, "error": f"{lspci} not found (package pciutils)"}
                continue
            rc, text, err = module.run_command([lspci, "-vvv", "-s", bdf])
            if rc != 0 or not text.strip():
                out["bridges"][bdf] = {"bdf": bdf, "error": f"lspci -vvv -s {bdf}: {(err or text).strip()} (rc={rc})"}
                continue
            out["bridges"][bdf] = dict(fabric.parse_lspci_acs(text), bdf=bdf)
    log, source, error = _kernel_log(module)
    xids = fabric.parse_xids(log)
    out["xid_count"] = len(xids)
    out["xids"] = xids if len(xids) <= MAX_XIDS else xids[:MAX_XIDS // 2] + xids[-MAX_XIDS // 2:]
    out["xid_source"] = source
    if error:
        errors.append(error)
    return out


def main():
    module = AnsibleModule(
        argument_spec=dict(
            nvidia_smi=dict(type="path"),
            proc_version_path=dict(type="path", default="/proc/driver/nvidia/version"),
            sysfs_pci_path=dict(type="path", default="/sys/bus/pci/devices"),
            kernel_modules=dict(type="bool", default=False),
            kernel_modules_root=dict(type="path", default="/lib/modules"),
            nvcc=dict(type="path"),
            fabric=dict(type="bool", default=False),
            module_params=dict(type="list", elements="str", default=[]),
            proc_cmdline_path=dict(type="path", default="/proc/cmdline"),
            sysfs_module_path=dict(type="path", default="/sys/module"),
            lspci=dict(type="path"),
        ),
        supports_check_mode=True,
    )
    extra = {}
    if module.params["kernel_modules"]:
        kernel = os.uname().release
        extra = {"kernel": kernel,
                 "kernel_module_files": nvidia.kernel_module_files(module.params["kernel_modules_root"], kernel)}
    nvcc = module.params["nvcc"]
    if nvcc:
        out = module.run_command([nvcc, "--version"])[1] if os.path.exists(nvcc) else ""
        extra["nvcc"] = nvidia.parse_nvcc_version(out)
    facts = gather(module)
    if module.params["fabric"]:
        smi = module.params["nvidia_smi"] or shutil.which("nvidia-smi") or "/usr/bin/nvidia-smi"
        extra["fabric"] = gather_fabric(module, facts, smi)
    module.exit_json(changed=False, ansible_facts={"nvidia_gpu": facts}, **extra)


if __name__ == "__main__":
    main()
