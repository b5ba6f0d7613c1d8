#!/usr/bin/python3
"""Lab stand-in for nvidia-smi: replays real captures of an 8x RTX PRO 6000 host.

Installed by the lab's stand-in ``nvidia-smi`` package. It answers the forms
of nvidia-smi that were captured (``-L``, ``-q``, ``--query-gpu``, ``topo -m``,
``--version``) from the files under DATA, substituting only what depends on
the installed packages: the driver version (taken from the "loaded" kernel
module at /proc/driver/nvidia/version) and the CUDA version of its branch.
Like the real tool it fails when no module is loaded, or when the loaded
module and this library differ ("Driver/library version mismatch").

The captures hold per-GPU UUIDs and bus ids of GPU 0 only; those of GPUs 1-7
are derived from GPU 0's (marked in the data as synthesized).

The capture of ``-q`` ends in its "Clocks Event Reasons" section: the sections
after it (memory and BAR1, ECC, retired pages and remapped rows, ...) come from
a complete capture of the same card model (COMPLETION: the community's 8x RTX
PRO 6000 host, GPU 0), aligned to the first capture's columns. ``topo -p2p r``
is the matrix of the captured format (one GPU's, the lent H100's) for the eight
GPUs, every pair OK, as a host without ACS redirection shows it.
"""
import json
import os
import re
import subprocess
import sys

DATA = os.environ.get("LAB_NVIDIA_SMI_DATA", "/usr/share/lab-standin/nvidia-smi")
COMPLETION = os.environ.get("LAB_NVIDIA_SMI_COMPLETION", os.path.join(DATA, "completion-nvidia-smi-q.txt"))
P2P_FORMAT = os.environ.get("LAB_NVIDIA_SMI_P2P_FORMAT", os.path.join(DATA, "format-topo-p2p-r.txt"))
LIB_VERSION = "@LIB_VERSION@"  # replaced when the package is built
CAPTURED_DRIVER = "580.95.05"
CUDA_BY_BRANCH = {"570": "12.8", "575": "12.9", "580": "13.0", "590": "13.1"}
PROC_VERSION = os.environ.get("LAB_NVIDIA_PROC_VERSION", "/proc/driver/nvidia/version")
MODPROBE = os.environ.get("LAB_NVIDIA_MODPROBE", "/usr/bin/nvidia-modprobe")
DEV = os.environ.get("LAB_NVIDIA_DEV", "/dev")


def read(name):
    with open(os.path.join(DATA, name), encoding="utf-8") as fh:
        return fh.read()


def completed_q(text):
    """The -q capture with the sections it lacks, from COMPLETION's GPU 0 block (from "Clocks Event Reasons" on),
    each line's value moved to the capture's column."""
    mark = "\n    Clocks Event Reasons\n"
    if "BAR1 Memory Usage" in text or mark not in text or not os.path.exists(COMPLETION):
        return text
    with open(COMPLETION, encoding="utf-8") as fh:
        other = fh.read()
    block = other[other.index("\nGPU "):]
    nxt = block.find("\nGPU ", 1)
    block = block[:nxt if nxt > 0 else None]
    tail = block[block.index(mark):]
    column = len(re.search(r"^([ \t]*Product Name[ \t]*):", text, re.M).group(1))
    lines = []
    for line in tail.strip("\n").splitlines():
        m = re.match(r"^([ \t]*)(\S.*?)[ \t]*: (.*)$", line)
        lines.append(f"{m.group(1)}{m.group(2)}".ljust(column) + ": " + m.group(3) if m else line.rstrip())
    return text[:text.index(mark)] + "\n" + "\n".join(lines) + "\n"


def p2p_matrix(records):
    """nvidia-smi topo -p2p r for these GPUs in the captured format, every pair OK."""
    with open(P2P_FORMAT, encoding="utf-8") as fh:
        legend = fh.read()
    legend = legend[legend.index("\nLegend:"):]
    names = [f"GPU{r['index']}" for r in records]
    out = [" \t\x1b[4m" + "\t".join(names) + "\t\x1b[0m"]
    for a in names:
        out.append(f" {a}\t" + "\t".join("X" if a == b else "OK" for b in names) + "\t")
    return "\n".join(out) + "\n" + legend


def loaded_version():
    try:
        text = open(PROC_VERSION, encoding="utf-8").read()
    except OSError:
        return None
    m = re.search(r"Kernel Module(?: for \S+)?\s+(\d+\.\d+(?:\.\d+)?)", text)
    return m.group(1) if m else None


def persistenced_running():
    pid_file = os.environ.get("LAB_NVIDIA_PERSISTENCED_PID", "/var/run/nvidia-persistenced/nvidia-persistenced.pid")
    try:
        with open(pid_file, encoding="ascii") as fh:
            pid = int(fh.read().strip())
        os.kill(pid, 0)
        return True
    except (OSError, ValueError):
        return False


def gpus(driver):
    """Per-GPU records from the captures."""
    qtext = read("nvidia-smi-q.txt")
    uuid0 = re.search(r"GPU UUID\s*:\s*(\S+)", qtext).group(1)
    bus0 = re.search(r"^GPU (\S+)", qtext, re.M).group(1)
    devid = re.search(r"Device Id\s*:\s*(\S+)", qtext).group(1)
    # persistence is the driver's state that nvidia-persistenced holds (the capture's host ran it): Enabled while the
    # stand-in daemon's pid is alive, Disabled otherwise, as a real host without the daemon reports it
    persist = "Enabled" if persistenced_running() else "Disabled"
    vbios = re.search(r"VBIOS Version\s*:\s*(\S+)", qtext).group(1)
    pstate = re.search(r"Performance State\s*:\s*(\S+)", qtext).group(1)
    rows = read("query-gpu-name-mem-driver-cc.csv").strip().splitlines()[1:]
    out = []
    for i, row in enumerate(rows):
        name, mem, _drv, cc = [c.strip() for c in row.split(",")]
        # GPU 0 is captured; GPUs 1-7: synthesized from GPU 0 (last UUID group, bus number)
        uuid = uuid0 if i == 0 else uuid0[:-2] + "%02x" % ((int(uuid0[-2:], 16) + i) % 256)
        bus_num = int(bus0.split(":")[1], 16) + (0 if i < 4 else 0x80) + 0x10 * (i % 4)
        bus = "%s:%02X:%s" % (bus0.split(":")[0], bus_num, bus0.split(":")[2])
        out.append({
            "index": str(i), "name": name, "uuid": uuid, "pci.bus_id": bus,
            "pci.device_id": devid, "driver_version": driver, "compute_cap": cc,
            "memory.total": mem.split()[0], "persistence_mode": persist, "pstate": pstate,
            "vbios_version": vbios, "count": str(len(rows)),
        })
    return out


UNITS = {"memory.total": "MiB", "memory.used": "MiB", "memory.free": "MiB"}


def query(fields, fmt, records):
    opts = [o.strip() for o in fmt.split(",")]
    if "csv" not in opts:
        die("stand-in nvidia-smi: only --format=csv is replayed", 2)
    lines = []
    if "noheader" not in opts:
        lines.append(", ".join(f + (f" [{UNITS[f]}]" if f in UNITS and "nounits" not in opts else "")
                               for f in fields))
    for rec in records:
        vals = []
        for f in fields:
            if f not in rec:
                die(f'Field "{f}" is not a valid field to query.', 2)
            v = rec[f]
            if f in UNITS and "nounits" not in opts:
                v += " " + UNITS[f]
            vals.append(v)
        lines.append(", ".join(vals))
    print("\n".join(lines))


def make_device_nodes(records):
    """As the real library does on first use: missing /dev/nvidia<N> and /dev/nvidiactl are made by the setuid
    nvidia-modprobe (here: only as root, since a stand-in script cannot be setuid). nvidia-uvm is not: that
    is the CUDA library's business, or a boot unit's (nvidia-modprobe -u -c 0)."""
    if os.geteuid() != 0 or not os.path.exists(MODPROBE):
        return
    for rec in records:
        if not os.path.exists(os.path.join(DEV, "nvidia" + rec["index"])):
            subprocess.run([MODPROBE, "-c", rec["index"]], check=False)


# The Server Edition's power limit range (voipmonitor/rtx6kpro, hardware/blackwell-power-limit-sweep.md: 300-600 W)
POWER_LIMITS = (300.0, 600.0)
POWER_LIMIT_STATE = os.environ.get("LAB_NVIDIA_POWER_LIMIT", "/run/lab-nvidia-power-limit")


def set_power_limit(value, records):
    """nvidia-smi -pl: root only, within the card's range, held until the driver is unloaded (a reboot)."""
    if os.geteuid() != 0:
        die("Changing power management limit is not supported for the current user.", 4)
    try:
        watts = float(value)
    except ValueError:
        die(f'Invalid power limit value "{value}".', 2)
    try:
        with open(POWER_LIMIT_STATE) as f:
            before = float(f.read().strip() or POWER_LIMITS[1])
    except OSError:
        before = POWER_LIMITS[1]
    for r in records:
        if not POWER_LIMITS[0] <= watts <= POWER_LIMITS[1]:
            die(f"Provided power limit {watts:.2f} W is not a valid power limit which should be between "
                f"{POWER_LIMITS[0]:.2f} W and {POWER_LIMITS[1]:.2f} W for GPU {r['pci.bus_id']}\n"
                "Terminating early due to previous errors.", 2)
        print(f"Power limit for GPU {r['pci.bus_id']} was set to {watts:.2f} W from {before:.2f} W.")
    with open(POWER_LIMIT_STATE, "w") as f:
        f.write(f"{watts:.2f}\n")
    print("All done.")


# The stand-in hardware's state (the lab image's PCI stand-in, /usr/lib/lab-standin/pci.py): a link a test narrowed
PCI_STATE = os.environ.get("LAB_STANDIN_PCI_STATE", "/run/lab-standin-pci.json")


def link_widths():
    """{pci bus id (0000:01:00.0): trained width} of the links the stand-in hardware narrowed."""
    try:
        with open(PCI_STATE) as f:
            return {k: int(v) for k, v in json.load(f).get("width", {}).items()}
    except (OSError, ValueError):
        return {}


def die(msg, rc):
    print(msg)
    sys.exit(rc)


def main(argv):
    loaded = loaded_version()
    if loaded is None:
        die("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver. "
            "Make sure that the latest NVIDIA driver is installed and running.", 9)
    if loaded != LIB_VERSION:
        die("Failed to initialize NVML: Driver/library version mismatch\n"
            f"NVML library version: {LIB_VERSION.rsplit('.', 1)[0]}", 18)
    cuda = CUDA_BY_BRANCH.get(loaded.split(".")[0], "13.0")
    records = gpus(loaded)
    make_device_nodes(records)
    sel = None
    if "-i" in argv:
        sel = argv[argv.index("-i") + 1]
        records = [r for r in records if r["index"] == sel or r["uuid"] == sel]
        argv = [a for j, a in enumerate(argv) if a != "-i" and (j == 0 or argv[j - 1] != "-i")]
    subst = lambda s: s.replace(CAPTURED_DRIVER, loaded).replace("CUDA Version                              : 13.0",
                                                                  "CUDA Version                              : " + cuda)
    q = [a for a in argv if a.startswith("--query-gpu=")]
    f = [a for a in argv if a.startswith("--format=")]
    if q:
        query(q[0].split("=", 1)[1].split(","), f[0].split("=", 1)[1] if f else "csv", records)
    elif argv[:1] == ["-L"]:
        for r in records:
            print(f"GPU {r['index']}: {r['name']} (UUID: {r['uuid']})")
    elif argv[:1] == ["-q"] and "-x" not in argv:
        text = subst(completed_q(read("nvidia-smi-q.txt")))
        head, _, gpu0 = text.partition("\nGPU ")
        blocks = []
        for r in records:
            g = gpu0.replace(gpus(loaded)[0]["uuid"], r["uuid"])
            g = g.replace(gpus(loaded)[0]["pci.bus_id"], r["pci.bus_id"], 1)
            g = re.sub(r"(Minor Number\s*:\s*)\d+", r"\g<1>" + r["index"], g)
            g = re.sub(r"(Persistence Mode\s*:\s*)\S+", r"\g<1>" + r["persistence_mode"], g)
            width = link_widths().get("0000:" + r["pci.bus_id"].split(":", 1)[1].lower())
            if width:
                g = re.sub(r"(Link Width\n\s*Max\s*:\s*\S+\n\s*Current\s*:\s*)\d+x", r"\g<1>%dx" % width, g)
            blocks.append("GPU " + r["pci.bus_id"] + g[g.index("\n"):])
        print(head + "\n" + "\n".join(blocks), end="")
    elif argv[:1] == ["-pl"] or argv[:1] and argv[0].startswith("--power-limit="):
        set_power_limit(argv[1] if argv[0] == "-pl" else argv[0].split("=", 1)[1], records)
    elif argv[:3] == ["topo", "-p2p", "r"]:
        print(p2p_matrix(records), end="")
    elif argv[:2] == ["topo", "-m"]:
        print(read("topo.txt"), end="")
    elif argv[:1] == ["--version"]:
        print(f"NVIDIA-SMI version  : {loaded}\nNVML version        : {loaded.rsplit('.', 1)[0]}\n"
              f"DRIVER version      : {loaded}\nCUDA Version        : {cuda}")
    elif not argv:
        print(f"NVIDIA-SMI {loaded}    Driver Version: {loaded}    CUDA Version: {cuda}")
        for r in records:
            print(f"|   {r['index']}  {r['name']:<40} {r['persistence_mode']:<8} |   {r['pci.bus_id']} |"
                  f"  {r['memory.total']}MiB |")
    else:
        die(f"stand-in nvidia-smi: {' '.join(argv)} was not captured; see {DATA}", 2)


if __name__ == "__main__":
    main(sys.argv[1:])
