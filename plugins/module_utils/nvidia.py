# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""Pure parsers for what NVIDIA's tools and the kernel say about GPUs and the driver.

No Ansible imports: every function takes text and returns plain data, so that
it is unit-tested on real captures (tests/fixtures/gpu/).
"""

from __future__ import annotations

import fnmatch
import os
import re
import xml.etree.ElementTree as ET

# The fields gpu_facts asks nvidia-smi for, in this order.
QUERY_FIELDS = (
    "index", "name", "uuid", "pci.bus_id", "pci.device_id", "driver_version",
    "compute_cap", "memory.total", "persistence_mode",
)

_UNIT = re.compile(r"^(?P<name>[^\[]+?)\s*\[(?P<unit>[^\]]+)\]$")
_NA = {"", "N/A", "[N/A]", "[Not Supported]", "Not Supported"}


def _value(text):
    text = text.strip()
    return None if text in _NA else text


def _strip_unit(value, unit):
    if value is not None and unit and value.endswith(" " + unit):
        return value[: -len(unit) - 1]
    return value


def parse_query_csv(text, fields=None):
    """Parse ``nvidia-smi --query-gpu=... --format=csv[,noheader][,nounits]``.

    With a header, field names (and units) come from it; without one, pass
    ``fields``. Values lose their units ("143771 MiB" -> "143771"), "N/A"
    becomes None. Returns one dict per GPU, keyed by field name.
    """
    lines = [ln for ln in text.splitlines() if ln.strip()]
    units = {}
    if fields is None:
        if not lines:
            return []
        header, lines = lines[0], lines[1:]
        fields = []
        for col in header.split(","):
            col = col.strip()
            m = _UNIT.match(col)
            if m:
                fields.append(m.group("name"))
                units[m.group("name")] = m.group("unit")
            else:
                fields.append(col)
    fields = list(fields)
    rows = []
    for line in lines:
        cols = [c.strip() for c in line.split(",")]
        if len(cols) != len(fields):
            raise ValueError(f"nvidia-smi CSV row has {len(cols)} columns, expected {len(fields)}: {line!r}")
        row = {}
        for name, raw in zip(fields, cols):
            val = _value(raw)
            val = _strip_unit(val, units.get(name))
            if val is not None and name.startswith("memory.") and val.endswith(" MiB"):
                val = val[:-4]
            row[name] = val
        rows.append(row)
    return rows


def parse_smi_list(text):
    """Parse ``nvidia-smi -L``: [{'index': 0, 'name': ..., 'uuid': ...}]."""
    out = []
    for m in re.finditer(r"^GPU (\d+): (.+?) \(UUID: (\S+)\)\s*$", text, re.M):
        out.append({"index": int(m.group(1)), "name": m.group(2), "uuid": m.group(3)})
    return out


def _kv(line):
    if ":" not in line:
        return None, None
    key, val = line.split(":", 1)
    return key.strip(), val.strip()


def parse_smi_q(text):
    """Parse ``nvidia-smi -q`` (text): driver, CUDA, and per-GPU identity.

    Returns {'driver_version', 'cuda_version', 'attached_gpus', 'gpus': [...]}
    where each GPU has bus_id, name, uuid, persistence_mode, minor_number,
    pci_device_id (e.g. "0x2BB5") and architecture.
    """
    out = {"driver_version": None, "cuda_version": None, "attached_gpus": None, "gpus": []}
    gpu = None
    section = []
    for raw in text.splitlines():
        if not raw.strip() or raw.startswith("="):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        m = re.match(r"^GPU ([0-9A-Fa-f]{4,8}:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-9A-Fa-f])\s*$", raw)
        if m:
            gpu = {"bus_id": m.group(1), "name": None, "uuid": None, "persistence_mode": None,
                   "minor_number": None, "pci_device_id": None, "architecture": None}
            out["gpus"].append(gpu)
            section = []
            continue
        key, val = _kv(raw)
        level = max(0, (indent - 4) // 4) if gpu else 0
        section = section[:level]
        if key is None:  # a section header ("    PCI", "    MIG Mode")
            section.append(raw.strip())
            continue
        if val == "":
            section.append(key)
            continue
        path = "/".join(section + [key])
        if gpu is None:
            if key == "Driver Version":
                out["driver_version"] = _value(val)
            elif key == "CUDA Version":
                out["cuda_version"] = _value(val)
            elif key == "Attached GPUs":
                out["attached_gpus"] = int(val)
            continue
        if path == "Product Name":
            gpu["name"] = _value(val)
        elif path == "Product Architecture":
            gpu["architecture"] = _value(val)
        elif path == "GPU UUID":
            gpu["uuid"] = _value(val)
        elif path == "Persistence Mode":
            gpu["persistence_mode"] = _value(val)
        elif path == "Minor Number":
            gpu["minor_number"] = int(val) if val.isdigit() else None
        elif path == "PCI/Device Id":
            gpu["pci_device_id"] = pci_device_id(val)
    return out


def parse_smi_q_xml(text):
    """Parse ``nvidia-smi -q -x`` into the same shape as parse_smi_q."""
    root = ET.fromstring(text)

    def t(node, path):
        el = node.find(path)
        return _value(el.text or "") if el is not None and el.text is not None else None

    out = {"driver_version": t(root, "driver_version"), "cuda_version": t(root, "cuda_version"),
           "attached_gpus": int(t(root, "attached_gpus") or 0), "gpus": []}
    for g in root.findall("gpu"):
        minor = t(g, "minor_number")
        out["gpus"].append({
            "bus_id": g.get("id"), "name": t(g, "product_name"), "uuid": t(g, "uuid"),
            "persistence_mode": t(g, "persistence_mode"),
            "minor_number": int(minor) if minor and minor.isdigit() else None,
            "pci_device_id": pci_device_id(t(g, "pci/pci_device_id")),
            "architecture": t(g, "product_architecture"),
        })
    return out


def pci_device_id(value):
    """'0x2BB510DE' or '233510DE' (device id then vendor id) -> '0x2BB5'; None stays None."""
    if not value:
        return None
    v = value.strip().lower()
    if v.startswith("0x"):
        v = v[2:]
    if len(v) == 8 and v.endswith("10de"):
        v = v[:4]
    if not re.fullmatch(r"[0-9a-f]{4}", v):
        return None
    return "0x" + v.upper()


def parse_proc_version(text):
    """Parse /proc/driver/nvidia/version: the loaded module's version and flavour.

    Returns {'version': '580.159.04', 'flavour': 'open'|'proprietary'} or None
    when the text holds no NVRM line.
    """
    m = re.search(r"NVRM version:\s+NVIDIA UNIX (Open )?Kernel Module(?: for (\S+))?\s+(\d+\.\d+(?:\.\d+)?)", text)
    if not m:
        # e.g. "NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.104.05  ..." (older proprietary)
        m2 = re.search(r"NVRM version:\s+NVIDIA UNIX (?:\S+ )?(Open )?Kernel Module\s+(\d+\.\d+(?:\.\d+)?)", text)
        if not m2:
            return None
        return {"version": m2.group(2), "flavour": "open" if m2.group(1) else "proprietary"}
    return {"version": m.group(3), "flavour": "open" if m.group(1) else "proprietary"}


def parse_nvcc_version(text):
    """Parse ``nvcc --version``: {'release': '13.0', 'version': '13.0.88'} or None."""
    m = re.search(r"release (\d+\.\d+), V(\d+\.\d+\.\d+)", text)
    if not m:
        return None
    return {"release": m.group(1), "version": m.group(2)}


def gpus_from_query(rows):
    """Normalise parse_query_csv rows of QUERY_FIELDS into gpu_facts' GPU records."""
    gpus = []
    for row in rows:
        cc = row.get("compute_cap")
        mem = row.get("memory.total")
        gpus.append({
            "index": int(row["index"]) if row.get("index") is not None else len(gpus),
            "name": row.get("name"),
            "uuid": row.get("uuid"),
            "pci_bus_id": row.get("pci.bus_id"),
            "pci_device_id": pci_device_id(row.get("pci.device_id")),
            "compute_capability": cc,
            "compute_capability_major": int(cc.split(".")[0]) if cc else None,
            "memory_total_mib": int(mem) if mem and mem.isdigit() else None,
            "driver_version": row.get("driver_version"),
            "persistence_mode": row.get("persistence_mode"),
        })
    return gpus


def summarise(gpus, proc):
    """Fleet-friendly summary of GPU records and the loaded module."""
    names = sorted({g["name"] for g in gpus if g.get("name")})
    caps = sorted({g["compute_capability"] for g in gpus if g.get("compute_capability")})
    drivers = sorted({g["driver_version"] for g in gpus if g.get("driver_version")})
    return {
        "count": len(gpus),
        "names": names,
        "compute_capabilities": caps,
        "driver_version": drivers[0] if len(drivers) == 1 else (drivers or None),
        "kernel_module": proc["flavour"] if proc else None,
        "kernel_module_version": proc["version"] if proc else None,
        "persistence_mode": sorted({g["persistence_mode"] for g in gpus if g.get("persistence_mode")}),
    }


def nvidia_pci_devices(entries):
    """From (address, vendor, device, class) tuples of /sys/bus/pci/devices, the NVIDIA GPUs.

    Vendor 0x10de and PCI class 0x03xxxx (display controllers). Returns
    [{'pci_bus_id': ..., 'pci_device_id': '0x2BB5'}].
    """
    out = []
    for addr, vendor, device, klass in entries:
        if vendor.strip().lower() != "0x10de" or not klass.strip().lower().startswith("0x03"):
            continue
        out.append({"pci_bus_id": addr, "pci_device_id": pci_device_id(device)})
    return sorted(out, key=lambda d: d["pci_bus_id"])


def _bus_key(bus_id):
    """'00000000:01:00.0' (nvidia-smi) and '0000:01:00.0' (sysfs) name one device: compare them as numbers."""
    try:
        domain, bus, devfn = str(bus_id).strip().lower().split(":")
        dev, fn = devfn.split(".")
        return (int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16))
    except ValueError:
        return str(bus_id).strip().lower()


def gpu_shortfall(facts, needed):
    """Why this host cannot give a server the GPUs it needs, or None when it can (or cannot be asked).

    facts: ansible_facts['nvidia_gpu'] as gpu_facts returns it; needed: GPUs the server uses on this host.
    Only a driver that answers is believed: with none (a new host), the configured count stands.
    """
    facts = facts or {}
    if facts.get("state") != "ok":
        return None
    gpus = facts.get("gpus") or []
    count = int(facts.get("count", len(gpus)))
    if count >= int(needed):
        return None
    seen = ", ".join(f"{g.get('name', '?')} at {g.get('pci_bus_id', '?')}" for g in gpus) or "none"
    pci = facts.get("pci_devices") or []
    known = {_bus_key(g.get("pci_bus_id")) for g in gpus}
    lost = [d["pci_bus_id"] for d in pci if _bus_key(d["pci_bus_id"]) not in known]
    pci_text = (", ".join(f"{d['pci_bus_id']} ({d.get('pci_device_id')})" for d in pci)
                if pci else "none listed in sysfs")
    msg = (f"the driver sees {count} GPU{'s' if count != 1 else ''} ({seen}); the server needs {needed} on this "
           f"host. NVIDIA devices on the PCI bus: {pci_text}.")
    if lost:
        msg += f" On the bus but not seen by the driver: {', '.join(lost)} (fallen off the bus, or failed)."
    return msg


def kernel_module_files(modules_root, kernel):
    """The NVIDIA kernel modules (nvidia.ko, nvidia.ko.xz, ...) built for ``kernel`` under ``modules_root``.

    None when the kernel has no module directory there (a VM or container that loads its modules from
    elsewhere: nothing to judge), else the sorted paths, possibly none (DKMS never built for this kernel).
    """
    top = os.path.join(modules_root, kernel)
    if not os.path.isdir(top):
        return None
    found = []
    for dirpath, _dirs, files in os.walk(top):
        found += [os.path.join(dirpath, f) for f in files if f == "nvidia.ko" or fnmatch.fnmatch(f, "nvidia.ko.*")]
    return sorted(found)
