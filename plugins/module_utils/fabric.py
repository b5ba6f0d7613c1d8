# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Pure parsers for what the host says about the PCIe fabric between its GPUs and about their health.

No Ansible imports: every function takes text (or a path string) and returns plain data, so that each is
unit-tested on real captures (tests/fixtures/gpu/). gpu_facts gathers with them (option ``fabric``); the
verify role's judge (module_utils/verify.py, group ``fabric``) decides.
"""

from __future__ import annotations

import re

_BDF = re.compile(r"^[0-9a-f]{4,8}:[0-9a-f]{2}:[0-9a-f]{2}\.[0-7]$", re.I)
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_NA = {"", "N/A", "[N/A]", "Not Supported", "[Not Supported]", "None"}


# --- the kernel command line and module parameters

def kernel_args(cmdline):
    """The kernel's own arguments of /proc/cmdline as [(name, value)], in order: what follows `` -- `` is init's,
    and a bare flag has the value None."""
    words = (cmdline or "").split()
    if "--" in words:
        words = words[:words.index("--")]
    out = []
    for word in words:
        name, sep, value = word.partition("=")
        out.append((name, value if sep else None))
    return out


def kernel_arg(cmdline, name):
    """The value of the last ``name=value`` on the kernel's command line (the kernel takes the last), '' for a bare
    flag, None when absent."""
    found = None
    for key, value in kernel_args(cmdline):
        if key == name:
            found = "" if value is None else value
    return found


# the IOMMU's mode, from the arguments that set it (Documentation/admin-guide/kernel-parameters.txt): any of them
# off turns the IOMMU off; else passthrough (identity domains for DMA); else translation asked explicitly
_IOMMU_OFF = {("iommu", "off"), ("intel_iommu", "off"), ("amd_iommu", "off")}
_IOMMU_PT = {("iommu", "pt"), ("amd_iommu", "pt"), ("iommu.passthrough", "1"), ("iommu.passthrough", "y"),
             ("iommu.passthrough", "on")}
_IOMMU_TRANSLATED = {("iommu", "nopt"), ("iommu.passthrough", "0"), ("iommu.passthrough", "n"),
                     ("iommu.passthrough", "off"), ("intel_iommu", "on"), ("amd_iommu", "on"), ("iommu", "force")}


def iommu_mode(cmdline):
    """{'mode': 'off' | 'pt' | 'translated' | 'unset', 'args': ['iommu=pt', ...]} from the kernel's command line;
    'unset' leaves the kernel's built-in default (CONFIG_IOMMU_DEFAULT_*)."""
    args = [(k, (v or "").lower()) for k, v in kernel_args(cmdline)
            if k in ("iommu", "intel_iommu", "amd_iommu", "iommu.passthrough")]
    said = [f"{k}={v}" for k, v in args]
    # intel_iommu= and amd_iommu= take comma-separated options (intel_iommu=on,sm_on)
    parts = [(k, p) for k, v in args for p in (v.split(",") if k in ("intel_iommu", "amd_iommu") else [v])]
    for table, mode in ((_IOMMU_OFF, "off"), (_IOMMU_PT, "pt"), (_IOMMU_TRANSLATED, "translated")):
        if any(part in table for part in parts):
            return {"mode": mode, "args": said}
    return {"mode": "unset", "args": said}


def module_param_value(text):
    """A module parameter as /sys/module/<module>/parameters/<name> holds it (one line), or None when unreadable."""
    return None if text is None else text.strip()


def same_param(expected, found):
    """Whether a module parameter's value is the one expected: booleans compare as booleans (the kernel prints a
    bool parameter as Y or N, a modprobe.d line sets it as 1, y or true)."""
    if found is None:
        return False
    truth = {"y": True, "1": True, "true": True, "yes": True, "on": True,
             "n": False, "0": False, "false": False, "no": False, "off": False}
    e, f = str(expected).strip().lower(), str(found).strip().lower()
    if f in ("y", "n") and e in truth:
        return truth[e] == truth[f]
    return e == f


# --- the PCIe path of each GPU and ACS on its bridges

def bridges_on_path(device_path):
    """The PCI devices above a device, from the root port down, out of the real path of its sysfs directory
    (/sys/devices/pci0000:00/0000:00:01.1/0000:01:00.0/0000:02:03.0/0000:06:00.0): every BDF but the last."""
    parts = [p for p in str(device_path).split("/") if _BDF.match(p)]
    return parts[:-1]


def parse_lspci_paths(text):
    """``lspci -D -PP -n -d 10de:``: {device BDF: [the bridges above it, from the root port down]} for each display
    device (class 0300 or 0302). lspci names the first hop with its domain (0000:00:01.1/01:00.0/02:03.0/06:00.0),
    the others without; all are given with it here."""
    out = {}
    for line in (text or "").splitlines():
        fields = line.split()
        if len(fields) < 2 or fields[1].rstrip(":") not in ("0300", "0302"):
            continue
        hops = fields[0].split("/")
        domain = hops[0].split(":", 1)[0] if hops[0].count(":") == 2 else "0000"
        full = [h if h.count(":") == 2 else f"{domain}:{h}" for h in hops]
        out[full[-1]] = full[:-1]
    return out


def parse_lspci_acs(text):
    """``lspci -vvv -s BDF`` of one device: its ACS capability and control bits.

    Returns {'bdf', 'acs': bool (has the capability), 'readable': bool, 'cap': {bit: bool}, 'ctl': {bit: bool},
    'ctl_line': str}. lspci run without root cannot read the extended configuration space: it prints
    ``Capabilities: <access denied>``, and then readable is False.
    """
    head = next((ln for ln in (text or "").splitlines() if ln.strip()), "")
    out = {"bdf": head.split()[0] if head else None, "acs": False, "readable": True, "cap": {}, "ctl": {},
           "ctl_line": ""}
    if "<access denied>" in (text or ""):
        out["readable"] = False
    for line in (text or "").splitlines():
        s = line.strip()
        if "Access Control Services" in s:
            out["acs"] = True
        for key, field in (("ACSCap:", "cap"), ("ACSCtl:", "ctl")):
            if s.startswith(key):
                out["acs"] = True
                out[field] = {m.group(1): m.group(2) == "+" for m in re.finditer(r"(\w+)([+-])", s[len(key):])}
                if field == "ctl":
                    out["ctl_line"] = " ".join(s[len(key):].split())
    if out["acs"] and out["ctl"]:
        out["readable"] = True
    return out


# --- nvidia-smi -q: per GPU, the fields of its sections

def smi_q_fields(text):
    """``nvidia-smi -q`` as {bus id: {'Section/Sub/Key': value}} for every GPU, in the order printed."""
    gpus, fields, section = {}, None, []
    for raw in (text or "").splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", raw)
        if m:
            fields, section = {}, []
            gpus[m.group(1)] = fields
            continue
        if fields is None:
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        level = max(0, (indent - 4) // 4)
        section = section[:level]
        if ":" not in raw:
            section.append(raw.strip())
            continue
        key, val = (s.strip() for s in raw.split(":", 1))
        if val == "":
            section.append(key)
            continue
        fields["/".join(section + [key])] = val
    return gpus


def _num(value, suffix=""):
    if value is None:
        return None
    v = value.strip()
    if suffix and v.endswith(suffix):
        v = v[: -len(suffix)].strip()
    return int(v) if v.isdigit() else None


def _val(value):
    return None if value is None or value.strip() in _NA else value.strip()


def smi_q_fabric(text):
    """What the fabric checks read of ``nvidia-smi -q``, one record per GPU in the order printed."""
    out = []
    for bus_id, f in smi_q_fields(text).items():
        link = "PCI/GPU Link Info/"
        out.append({
            "pci_bus_id": bus_id,
            "bar1_total_mib": _num(f.get("BAR1 Memory Usage/Total"), "MiB"),
            "fb_total_mib": _num(f.get("FB Memory Usage/Total"), "MiB"),
            "pcie_gen_max": _num(f.get(link + "PCIe Generation/Max")),
            "pcie_gen_current": _num(f.get(link + "PCIe Generation/Current")),
            "pcie_gen_device_max": _num(f.get(link + "PCIe Generation/Device Max")),
            "pcie_gen_host_max": _num(f.get(link + "PCIe Generation/Host Max")),
            "pcie_width_max": _num(f.get(link + "Link Width/Max"), "x"),
            "pcie_width_current": _num(f.get(link + "Link Width/Current"), "x"),
            "performance_state": _val(f.get("Performance State")),
            "mig_current": _val(f.get("MIG Mode/Current")),
            "mig_pending": _val(f.get("MIG Mode/Pending")),
            "ecc_current": _val(f.get("ECC Mode/Current")),
            "ecc_pending": _val(f.get("ECC Mode/Pending")),
            "retired_sbe": _val(f.get("Retired Pages/Single Bit ECC")),
            "retired_dbe": _val(f.get("Retired Pages/Double Bit ECC")),
            "retired_pending": _val(f.get("Retired Pages/Pending Page Blacklist")),
            "remapped_correctable": _val(f.get("Remapped Rows/Correctable Error")),
            "remapped_uncorrectable": _val(f.get("Remapped Rows/Uncorrectable Error")),
            "remapped_pending": _val(f.get("Remapped Rows/Pending")),
            "remapped_failure": _val(f.get("Remapped Rows/Remapping Failure Occurred")),
            "dram_uncorrectable_volatile": _val(f.get("ECC Errors/Volatile/DRAM Uncorrectable")),
            "recovery_action": _val(f.get("GPU Recovery Action")),
        })
    return out


# --- nvidia-smi topo -p2p r

def parse_p2p_matrix(text):
    """``nvidia-smi topo -p2p r`` (or w, n, a, p): {'gpus': ['GPU0', ...], 'pairs': [['GPU0', 'GPU1', 'OK'], ...]}
    with every off-diagonal pair, as lists (a module's result is JSON); None when no matrix is in the text."""
    lines = [_ANSI.sub("", ln) for ln in (text or "").splitlines()]
    header = None
    rows = {}
    for line in lines:
        cells = [c.strip() for c in line.split("\t") if c.strip()]
        if not cells:
            if header and rows:
                break
            continue
        if cells[0] == "Legend:":
            break
        if header is None and all(re.fullmatch(r"GPU\d+", c) for c in cells):
            header = cells
            continue
        if header and re.fullmatch(r"GPU\d+", cells[0]):
            rows[cells[0]] = cells[1:1 + len(header)]
    if not header:
        return None
    pairs = []
    for src, cells in rows.items():
        for dst, status in zip(header, cells):
            if src != dst:
                pairs.append([src, dst, status])
    return {"gpus": header, "pairs": pairs}


# --- Xids in the kernel log

_XID = re.compile(r"NVRM: Xid \((?:PCI:)?(?P<pci>[0-9a-fA-F]{4,8}:[0-9a-fA-F]{2}:[0-9a-fA-F]{2})\): (?P<xid>\d+),\s*"
                  r"(?P<text>.*)$")


def parse_xids(text):
    """Every Xid the driver logged in ``text`` (dmesg or journalctl -k): [{'pci': '0000:01:00', 'xid': 79,
    'text': 'GPU has fallen off the bus.', 'line': the whole line}] in order."""
    out = []
    for line in (text or "").splitlines():
        m = _XID.search(line)
        if m:
            out.append({"pci": m.group("pci").lower(), "xid": int(m.group("xid")), "text": m.group("text").strip(),
                        "line": line.strip()})
    return out
