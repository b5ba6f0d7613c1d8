# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The NCCL all-reduce check's arithmetic and judgement, free of Ansible: sizes, the worker's output, the
bandwidths as nccl-tests defines them, the floor; and the run of the worker under a timeout that ends its whole
process group (AnsibleModule.run_command has no timeout: a hung all-reduce would hang the play).

nccl-tests (doc/PERFORMANCE.md): the algorithm bandwidth is the bytes of the buffer over the time of one
operation, algbw = S / t; for an all-reduce over n ranks the bus bandwidth is busbw = algbw * 2(n-1)/n, the
figure comparable with the hardware's link speed whatever n is. One GB/s is 1e9 bytes per second there, as here.
With one rank the factor is 0: the bus bandwidth is 0 and no floor on it can be judged.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

MARKER = "BLACKWELL_NCCL_ALLREDUCE "
_UNITS = {"": 1, "B": 1, "K": 1 << 10, "KB": 1 << 10, "KIB": 1 << 10, "M": 1 << 20, "MB": 1 << 20, "MIB": 1 << 20,
          "G": 1 << 30, "GB": 1 << 30, "GIB": 1 << 30}
_SIZE = re.compile(r"^\s*([0-9]+)\s*([A-Za-z]*)\s*$")


def parse_size(value):
    """Bytes of a message size given as a whole number of bytes or as nccl-tests writes it (C(32M), C(1G): binary
    units, so 32M is 32 MiB); a ValueError names a size that is neither."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a message size")
    if isinstance(value, int):
        size = value
    else:
        m = _SIZE.match(str(value))
        if not m or m.group(2).upper() not in _UNITS:
            raise ValueError(f"{value!r} is not a message size (bytes, or a number with K, M or G: 32M, 1G)")
        size = int(m.group(1)) * _UNITS[m.group(2).upper()]
    if size < 4:
        raise ValueError(f"{value!r}: a message must hold at least one float32 element (4 bytes)")
    return size


def human_size(size):
    """256 MiB, 1 GiB, 4 KiB, 12 B."""
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size >= factor and size % factor == 0:
            return f"{size // factor} {unit}"
    return f"{size} B"


def bus_factor(world_size):
    """nccl-tests' all-reduce factor from algorithm to bus bandwidth: 2(n-1)/n."""
    return 2.0 * (world_size - 1) / world_size if world_size > 0 else 0.0


def floors(sizes, min_busbw=None, min_busbw_per_size=None):
    """{bytes: GB/s} of the floors that apply: min_busbw on the largest size, and min_busbw_per_size's sizes
    (written as parse_size reads them) each on its own size, which must be one of sizes."""
    out = {}
    if min_busbw is not None and sizes:
        out[max(sizes)] = float(min_busbw)
    for key, value in (min_busbw_per_size or {}).items():
        size = parse_size(key)
        if size not in sizes:
            raise ValueError(f"a floor is given for {human_size(size)}, which is not among the sizes measured "
                             f"({', '.join(human_size(s) for s in sorted(sizes))})")
        out[size] = float(value)
    return out


def parse_output(stdout):
    """The worker's report: the JSON of its last marker line. ValueError where there is none or it is not JSON."""
    lines = [line for line in (stdout or "").splitlines() if line.startswith(MARKER)]
    if not lines:
        raise ValueError("the worker printed no report")
    try:
        report = json.loads(lines[-1][len(MARKER):])
    except ValueError as exc:
        raise ValueError(f"the worker's report is not JSON: {exc}") from None
    if not isinstance(report, dict):
        raise ValueError("the worker's report is not a JSON object")
    return report


def figures(report, floor_by_size=None):
    """One entry per size measured: bytes, size, time_us, algbw and busbw in GB/s, wrong (elements of the checked
    all-reduce that differ from the expected sum), and the floor on busbw where one applies (None otherwise)."""
    world = int(report["world_size"])
    factor = bus_factor(world)
    out = []
    for r in report["results"]:
        size, seconds = int(r["bytes"]), float(r["seconds"])
        algbw = size / seconds / 1e9 if seconds > 0 else 0.0
        out.append({"bytes": size, "size": human_size(size), "time_us": round(seconds * 1e6, 2),
                    "algbw": round(algbw, 2), "busbw": round(algbw * factor, 2), "wrong": int(r.get("wrong", 0)),
                    "floor": (floor_by_size or {}).get(size) if world > 1 else None})
    return out


def judge(rows, world_size, floor_by_size, host="this host"):
    """(failures, notes): a failure names the size, what was measured and the floor (or the wrong elements);
    with one GPU a note says that the floors do not apply, and why."""
    failures, notes = [], []
    for row in rows:
        if row["wrong"]:
            failures.append(f"{row['size']}: {row['wrong']} element(s) of the checked all-reduce were wrong "
                            f"(expected the sum over {world_size} rank(s))")
    measured = {row["bytes"] for row in rows}
    for size in sorted(floor_by_size or {}):
        if size not in measured:
            failures.append(f"{human_size(size)}: a floor of {floor_by_size[size]:g} GB/s is set but the worker did "
                            "not measure that size")
    if world_size < 2:
        if floor_by_size:
            notes.append(f"{host} ran the all-reduce over one GPU: its bus bandwidth is 0 by definition "
                         "(2(n-1)/n with n = 1), so the floor of "
                         + ", ".join(f"{v:g} GB/s at {human_size(s)}" for s, v in sorted(floor_by_size.items()))
                         + " does not apply and was not judged; only the algorithm bandwidth is reported (with one "
                         "rank NCCL moves no data: it measures the call)")
        return failures, notes
    for row in rows:
        floor = row["floor"]
        if floor is not None and row["busbw"] < floor:
            failures.append(f"{row['size']}: bus bandwidth {row['busbw']:g} GB/s over {world_size} GPUs, under the "
                            f"floor of {floor:g} GB/s (algbw {row['algbw']:g} GB/s, {row['time_us']:g} us per "
                            "all-reduce)")
    return failures, notes


def summary(rows, world_size):
    """One line per size, for the module's message."""
    return "; ".join(f"{r['size']}: busbw {r['busbw']:g} GB/s, algbw {r['algbw']:g} GB/s, {r['time_us']:g} us"
                     + (f" (floor {r['floor']:g})" if r["floor"] is not None else "") for r in rows) \
        + f" over {world_size} GPU(s)"


def kill_group(proc, grace=5):
    """End a process started in its own session and every process it started (they share its process group):
    TERM, then KILL what is left."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:  # no process of the group is left
            break
        try:
            proc.wait(timeout=grace)
        except subprocess.TimeoutExpired:
            pass
    proc.wait()


def run_with_timeout(argv, timeout, env=None, cwd=None, grace=5):
    """Run argv in its own session: (rc, stdout, stderr, seconds, timed_out). Past timeout seconds its process
    group is killed (kill_group) and what it printed until then is returned."""
    start = time.monotonic()
    proc = subprocess.Popen(argv, cwd=cwd, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        timed_out = True
        kill_group(proc, grace)
        try:
            out, err = proc.communicate(timeout=grace)
        except subprocess.TimeoutExpired:  # a process that left the group still holds the pipes
            out, err = "", ""
    return proc.returncode, out or "", err or "", time.monotonic() - start, timed_out
