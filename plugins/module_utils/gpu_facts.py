# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""What M(blackwell.serving.gpu_facts) reads of a host - the GPUs and driver, the NVIDIA modules built for the running
kernel, nvcc's release, the fabric - for that module and for verify's one probe (M(blackwell.serving.sglang_probe)
with its gpu option). MODULE is something with run_command (an AnsibleModule); P the options as SPEC describes."""
from __future__ import annotations

import os
import shutil

from ansible_collections.blackwell.serving.plugins.module_utils import fabric, nvidia

# the options, as gpu_facts' argument spec and as what sglang_probe's gpu option is validated against
SPEC = dict(
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
)


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


def gather(module, p):
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


def gather_fabric(module, p, facts, smi):
    """What the fabric checks read (option fabric); nothing is written anywhere."""
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


def read(module, p):
    """What gpu_facts returns: ansible_facts (nvidia_gpu) and, as asked, kernel, kernel_module_files, nvcc, fabric."""
    extra = {}
    if p["kernel_modules"]:
        kernel = os.uname().release
        extra = {"kernel": kernel, "kernel_module_files": nvidia.kernel_module_files(p["kernel_modules_root"], kernel)}
    if p["nvcc"]:
        out = module.run_command([p["nvcc"], "--version"])[1] if os.path.exists(p["nvcc"]) else ""
        extra["nvcc"] = nvidia.parse_nvcc_version(out)
    facts = gather(module, p)
    if p["fabric"]:
        smi = p["nvidia_smi"] or shutil.which("nvidia-smi") or "/usr/bin/nvidia-smi"
        extra["fabric"] = gather_fabric(module, p, facts, smi)
    return dict(extra, ansible_facts={"nvidia_gpu": facts})
