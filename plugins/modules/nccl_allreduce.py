#!/usr/bin/python
# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)

from __future__ import annotations

DOCUMENTATION = r"""
module: nccl_allreduce
short_description: Measure NCCL all-reduce bus bandwidth over the host's GPUs with the release's own torch
version_added: 0.5.0
description:
  - Runs, with O(python) (the interpreter of the release's virtual environment, so the torch and NCCL the server
    will use), a small worker that starts one process per GPU (C(torch.multiprocessing) spawn), joins them with
    C(torch.distributed)'s NCCL backend and times all-reduces of float32 buffers at each of O(sizes) - a warm-up
    of O(warmup), then O(iterations) timed, the slowest rank's time kept, then one all-reduce whose sum is checked.
  - Reports per size the time, the algorithm bandwidth (bytes over time) and the bus bandwidth (algbw x 2(n-1)/n,
    as nccl-tests defines it, in GB/s of 1e9 bytes), with the torch, CUDA and NCCL versions torch reports and the
    C(NCCL_*) environment the worker saw.
  - Fails where a bus bandwidth is under its floor (O(min_busbw), O(min_busbw_per_size)), naming the size, what
    was measured and the floor; where an element of the checked all-reduce is wrong; where the worker cannot run
    (no torch, no GPU, fewer GPUs than O(gpus)); and where it has not finished within O(timeout) seconds - a hang
    is how a broken PCIe fabric shows itself to NCCL (ACS or IOMMU on the path between GPUs). Then every process
    of the worker is killed (its whole process group) and the message names the timeout.
  - With one GPU the bus bandwidth is 0 by definition; the floors are then not judged, and RV(floor_applies) and
    the message say so (with one rank NCCL moves no data, so the algorithm bandwidth measures the call).
  - It needs the GPUs free (the worker allocates the largest size on each, and a server holding them skews or
    starves the measurement); run it before the service starts, or on a host drained and stopped.
  - Changes nothing on the host; the worker runs in the module's temporary directory.
author: blackwell.serving maintainers (!UNKNOWN)
options:
  python:
    description: The release's interpreter, for example C(/opt/sglang/current/venv/bin/python); its torch is used.
    type: path
    required: true
  gpus:
    description: How many GPUs (ranks 0 to N-1, one process each); V(0) takes every GPU torch sees.
    type: int
    default: 0
  sizes:
    description:
      - Message sizes, each the bytes of one all-reduce's buffer, as a number of bytes or as nccl-tests writes
        them (V(1M), V(32M), V(256M), in binary units).
    type: list
    elements: str
    default: ["1M", "32M", "256M"]
  warmup:
    description: Untimed all-reduces at each size before the timed ones.
    type: int
    default: 5
  iterations:
    description: Timed all-reduces at each size; the time reported is their mean on the slowest rank.
    type: int
    default: 20
  timeout:
    description:
      - Seconds the whole worker may take (the interpreter's start, NCCL's set-up and every size); past it the
        worker's process group is killed and the module fails, naming the timeout.
    type: int
    default: 300
  min_busbw:
    description:
      - The floor, in GB/s of bus bandwidth, at the largest of O(sizes). Leave it out to judge no floor there.
    type: float
  min_busbw_per_size:
    description:
      - Floors for other sizes, keyed by the size as O(sizes) writes it (V(32M)); each must be one of O(sizes).
    type: dict
    default: {}
  environment:
    description:
      - Environment for the worker, added to the module's (the service's C(NCCL_*) settings, so that NCCL takes
        the paths the server will take).
    type: dict
    default: {}
attributes:
  check_mode:
    description:
      - Runs nothing in check mode and says so (RV(measured) false); the measurement occupies every GPU, and in
        check mode nothing has stopped the server that holds them.
    support: partial
    details: In check mode no worker runs; RV(measured) is false and the message says so.
  diff_mode:
    description: Returns no diff; it changes nothing.
    support: none
seealso:
  - name: nccl-tests, PERFORMANCE.md
    description: The definitions of algorithm and bus bandwidth this module reports.
    link: https://github.com/NVIDIA/nccl-tests/blob/master/doc/PERFORMANCE.md
  - name: voipmonitor/rtx6kpro, hardware/pcie-bandwidth.md
    description: The community's all-reduce bus bandwidths on 8x RTX PRO 6000, which the default floor comes from.
    link: https://github.com/voipmonitor/rtx6kpro/blob/main/hardware/pcie-bandwidth.md
  - module: blackwell.serving.gpu_facts
"""

EXAMPLES = r"""
- name: Measure all-reduce over every GPU with the release's torch, the service's NCCL settings, a 15 GB/s floor
  blackwell.serving.nccl_allreduce:
    python: /opt/sglang/current/venv/bin/python
    environment:
      NCCL_IB_DISABLE: "1"
      NCCL_P2P_LEVEL: SYS
    min_busbw: 15
  register: allreduce

- name: Floors at two sizes, eight GPUs, a shorter timeout
  blackwell.serving.nccl_allreduce:
    python: /opt/sglang/current/venv/bin/python
    gpus: 8
    sizes: ["32M", "256M"]
    min_busbw: 15
    min_busbw_per_size:
      32M: 10
    timeout: 120
"""

RETURN = r"""
measured:
  description: Whether the all-reduces ran (false in check mode).
  returned: always
  type: bool
  sample: true
world_size:
  description: The number of GPUs (ranks) the all-reduce ran over.
  returned: when measured
  type: int
  sample: 8
results:
  description:
    - One entry per size - C(bytes), C(size) (in words), C(time_us) (mean per all-reduce on the slowest rank),
      C(algbw) and C(busbw) in GB/s, C(wrong) (elements of the checked all-reduce that were wrong) and C(floor)
      (the floor on busbw in GB/s, or null where none applies).
  returned: when measured
  type: list
  elements: dict
  sample:
    - {bytes: 268435456, size: 256 MiB, time_us: 11702.4, algbw: 22.94, busbw: 40.14, wrong: 0, floor: 15.0}
floor_applies:
  description: Whether any floor was judged (false with one GPU, where the bus bandwidth is 0 by definition, or where no floor was given).
  returned: when measured
  type: bool
  sample: true
torch_version:
  description: The version of the release's torch.
  returned: when measured
  type: str
  sample: 2.9.1+cu128
cuda_version:
  description: The CUDA version torch was built with.
  returned: when measured
  type: str
  sample: "12.8"
nccl_version:
  description: The NCCL version torch reports (C(torch.cuda.nccl.version())).
  returned: when measured
  type: str
  sample: 2.27.3
devices:
  description: The name of each rank's GPU.
  returned: when measured
  type: list
  elements: str
  sample: [NVIDIA RTX PRO 6000 Blackwell Server Edition]
nccl_environment:
  description: The C(NCCL_*) variables the worker ran with.
  returned: when measured
  type: dict
  sample: {NCCL_IB_DISABLE: "1", NCCL_P2P_LEVEL: SYS}
elapsed:
  description: Seconds the worker ran, its start and NCCL's set-up included.
  returned: when measured
  type: float
  sample: 21.4
"""

import inspect
import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.blackwell.serving.plugins.module_utils import nccl_allreduce as nar
from ansible_collections.blackwell.serving.plugins.module_utils import nccl_worker


def tail(text, limit=2000):
    text = (text or "").strip()
    return text[-limit:]


def run_worker(module, config, timeout, environment):
    """(rc, stdout, stderr, seconds, timed_out)."""
    workdir = os.path.join(module.tmpdir, "nccl")
    os.makedirs(workdir, exist_ok=True)
    script = os.path.join(workdir, "nccl_worker.py")
    with open(script, "w", encoding="utf-8") as fh:
        fh.write(inspect.getsource(nccl_worker))
    config = dict(config, rendezvous=os.path.join(workdir, "rendezvous"))
    config_path = os.path.join(workdir, "config.json")
    with open(config_path, "w", encoding="utf-8") as fh:
        json.dump(config, fh)
    env = dict(os.environ)
    env.update({str(k): str(v) for k, v in environment.items()})
    # its own session, so that a hang is ended with every rank it spawned (module_utils: run_command has no timeout)
    return nar.run_with_timeout([module.params["python"], "-I", "-B", script, config_path], timeout, env=env,
                                cwd=workdir)


def main():
    module = AnsibleModule(
        argument_spec=dict(
            python=dict(type="path", required=True),
            gpus=dict(type="int", default=0),
            sizes=dict(type="list", elements="str", default=["1M", "32M", "256M"]),
            warmup=dict(type="int", default=5),
            iterations=dict(type="int", default=20),
            timeout=dict(type="int", default=300),
            min_busbw=dict(type="float"),
            min_busbw_per_size=dict(type="dict", default={}),
            environment=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    p = module.params
    try:
        sizes = sorted({nar.parse_size(s) for s in p["sizes"]})
        floor_by_size = nar.floors(sizes, p["min_busbw"], p["min_busbw_per_size"])
    except ValueError as exc:
        module.fail_json(msg=f"nccl_allreduce: {exc}. Nothing was run.")
    if not sizes or p["gpus"] < 0 or p["warmup"] < 0 or p["iterations"] < 1 or p["timeout"] < 1:
        module.fail_json(msg="nccl_allreduce: sizes must name at least one size, gpus be 0 (all) or more, warmup 0 or "
                             "more, iterations and timeout 1 or more. Nothing was run.")
    if module.check_mode:
        module.exit_json(changed=False, measured=False,
                         msg="check mode: the NCCL all-reduce check was not run (it occupies every GPU)")
    python = p["python"]
    if not (os.path.isfile(python) and os.access(python, os.X_OK)):
        module.fail_json(msg=f"{python} is not an executable interpreter: the release's virtual environment is "
                             "missing. Nothing was run.", measured=False)

    config = {"gpus": p["gpus"], "sizes": sizes, "warmup": p["warmup"], "iterations": p["iterations"]}
    rc, out, err, seconds, timed_out = run_worker(module, config, p["timeout"], p["environment"])
    if timed_out:
        module.fail_json(
            msg=f"the NCCL all-reduce check did not finish within its timeout of {p['timeout']} s, and its processes "
                f"were killed. A hang in NCCL is how a broken PCIe path between the GPUs shows itself (ACS or the "
                f"IOMMU redirecting peer-to-peer traffic; NVIDIA/nccl#1999): check the fabric, or NCCL_P2P_DISABLE=1 "
                f"to tell a P2P hang from a slow host. Its output: {tail(out + err)}",
            measured=False, timeout=p["timeout"], stdout=tail(out, 8000), stderr=tail(err, 8000))
    try:
        report = nar.parse_output(out)
    except ValueError as exc:
        module.fail_json(msg=f"the NCCL all-reduce worker ({python}) exited {rc}: {exc}. {tail(err or out)}",
                         measured=False, rc=rc, stdout=tail(out, 8000), stderr=tail(err, 8000))
    if "error" in report or rc != 0:
        error = str(report.get("error", "no error reported"))
        hint = (" Is the NVIDIA driver loaded, and are all the GPUs there (nvidia-smi)? A driver installed in this "
                "run is loaded by its reboot." if "GPU" in error or "CUDA" in error else "")
        module.fail_json(msg=f"the NCCL all-reduce check could not run with {python} (exit {rc}): {error}.{hint} "
                             "Nothing was changed.",
                         measured=False, rc=rc, stdout=tail(out, 8000), stderr=tail(err, 8000))

    world = int(report["world_size"])
    rows = nar.figures(report, floor_by_size)
    failures, notes = nar.judge(rows, world, floor_by_size)
    for note in notes:
        module.warn(note)
    result = dict(changed=False, measured=True, world_size=world, results=rows,
                  floor_applies=world > 1 and bool(floor_by_size), torch_version=report.get("torch"),
                  cuda_version=report.get("cuda"), nccl_version=report.get("nccl"), devices=report.get("devices", []),
                  nccl_environment=report.get("nccl_environment", {}), elapsed=round(seconds, 1))
    line = nar.summary(rows, world)
    if failures:
        module.fail_json(msg=f"NCCL all-reduce (torch {report.get('torch')}, NCCL {report.get('nccl')}) failed: "
                             + "; ".join(failures) + f". Measured: {line}. Nothing was changed. Look at the PCIe path "
                             "between the GPUs (link width and generation, ACS, IOMMU, BAR1) before this host serves "
                             "tensor parallel over them.", **result)
    module.exit_json(msg=f"NCCL all-reduce (torch {report.get('torch')}, NCCL {report.get('nccl')}): {line}"
                         + (". " + " ".join(notes) if notes else ""), **result)


if __name__ == "__main__":
    main()
