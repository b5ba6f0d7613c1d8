"""Lab image only: the stand-in PCI topology of a simulated 8x RTX PRO 6000 server, for the stand-in lspci and
setpci (/usr/local/sbin), which a real host's pciutils would be.

Each GPU sits under a root port of its own (the real capture's `nvidia-smi topo -m` shows no PCIe switch: NODE
within a NUMA node, SYS across), at the bus ids the stand-in nvidia-smi gives GPUs 0-7 (tests/unit keeps the two
in step). The root ports have the ACS capability with redirection on, as a root port comes up before anything
clears it (NVIDIA/nccl#2079); what setpci writes is kept under /run, so that a reboot forgets
it, as a real one does; a test narrows a GPU's link by writing its width there.
"""
import json
import os

STATE = os.environ.get("LAB_STANDIN_PCI_STATE", "/run/lab-standin-pci.json")
GPU_BUSES = [0x01 + (0 if i < 4 else 0x80) + 0x10 * (i % 4) for i in range(8)]
GPU_ID = ("10de", "2bb5")  # NVIDIA RTX PRO 6000 Blackwell Server Edition
ROOT_ID = ("1022", "14ab")  # an AMD root port
NIC = ("0000:c0:01.1", "0000:c1:00.0", ("15b3", "1021"))  # a network card under a root port of its own (ConnectX-7)
# ACS control at power-on: source validation, request and completion redirection, upstream forwarding
ACS_POWER_ON = 0x001D
ACS_CAP = 0x005F


def devices():
    """{bdf: {kind, path, ids, acs (control register or None), link ({cap, sta}: (speed GT/s, width))}}."""
    state = _load()
    out = {}
    for bus in GPU_BUSES:
        root = "0000:%02x:01.1" % (bus - 1)
        gpu = "0000:%02x:00.0" % bus
        out[root] = {"kind": "bridge", "class": "0604", "ids": ROOT_ID, "path": [root],
                     "acs": state.get("acs", {}).get(root, ACS_POWER_ON),
                     "link": {"cap": (32.0, 16), "sta": (32.0, 16)}}
        width = state.get("width", {}).get(gpu, 16)
        out[gpu] = {"kind": "gpu", "class": "0302", "ids": GPU_ID, "path": [root, gpu], "acs": None,
                    "link": {"cap": (32.0, 16), "sta": (32.0, width)}}
    # a device outside the GPUs' paths, whose bridge no GPU setting may touch
    root, nic, ids = NIC
    out[root] = {"kind": "bridge", "class": "0604", "ids": ROOT_ID, "path": [root],
                 "acs": state.get("acs", {}).get(root, ACS_POWER_ON), "link": {"cap": (32.0, 16), "sta": (32.0, 16)}}
    out[nic] = {"kind": "nic", "class": "0200", "ids": ids, "path": [root, nic], "acs": None,
                "link": {"cap": (32.0, 16), "sta": (32.0, 16)}}
    return out


def set_acs(bdf, value):
    state = _load()
    state.setdefault("acs", {})[bdf] = value
    tmp = STATE + ".new"
    with open(tmp, "w") as f:
        json.dump(state, f)
    os.replace(tmp, STATE)


def _load():
    try:
        with open(STATE) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def short(bdf):
    return bdf.split(":", 1)[1]
