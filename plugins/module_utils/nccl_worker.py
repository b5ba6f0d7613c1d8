# Copyright: blackwell.serving contributors
# Apache License 2.0 (see galaxy.yml)
"""The all-reduce worker the module ``nccl_allreduce`` runs with the release's own interpreter.

The module writes this file's source to a temporary directory and runs ``PYTHON -I -B nccl_worker.py CONFIG``,
where CONFIG is a JSON file: ``{"gpus": 0 (all visible) or N, "sizes": [bytes, ...], "warmup": 5,
"iterations": 20, "rendezvous": "/tmp/.../rendezvous"}``. One process per GPU (torch.multiprocessing spawn), the
NCCL backend of torch.distributed, float32 buffers; for each size a warm-up, then timed all-reduces (synchronize,
then the wall clock around the loop, as nccl-tests times them), the slowest rank's time kept, and one checked
all-reduce (each rank adds rank + 1; every element must be n(n+1)/2).

Rank 0 prints one line: ``BLACKWELL_NCCL_ALLREDUCE {json}`` with the raw times; the module computes the
bandwidths (module_utils/nccl_allreduce.py). Where it cannot run (no torch, no GPU, fewer GPUs than asked, a rank
that raised) it prints the same marker with ``{"error": ...}`` and exits non-zero. Imports nothing of Ansible.
"""

from __future__ import annotations

import json
import os
import sys
import time

MARKER = "BLACKWELL_NCCL_ALLREDUCE "
ELEMENT_BYTES = 4  # float32, nccl-tests' default type


def emit(payload):
    sys.stdout.write(MARKER + json.dumps(payload, sort_keys=True) + "\n")
    sys.stdout.flush()


def rank_main(rank, world, config):
    import torch
    import torch.distributed as dist

    torch.cuda.set_device(rank)
    device = torch.device("cuda", rank)
    dist.init_process_group("nccl", init_method="file://" + config["rendezvous"], rank=rank, world_size=world)
    names = [None] * world
    dist.all_gather_object(names, torch.cuda.get_device_name(device))
    results = []
    for size in config["sizes"]:
        count = max(1, int(size) // ELEMENT_BYTES)
        buf = torch.zeros(count, dtype=torch.float32, device=device)
        for step in range(int(config["warmup"])):
            dist.all_reduce(buf)
        torch.cuda.synchronize(device)
        dist.barrier()
        torch.cuda.synchronize(device)
        start = time.perf_counter()
        for step in range(int(config["iterations"])):
            dist.all_reduce(buf)
        torch.cuda.synchronize(device)
        seconds = (time.perf_counter() - start) / int(config["iterations"])
        slowest = torch.tensor([seconds], dtype=torch.float64, device=device)
        dist.all_reduce(slowest, op=dist.ReduceOp.MAX)
        buf.fill_(float(rank + 1))
        dist.all_reduce(buf)
        wrong = (buf != float(world * (world + 1) // 2)).sum().to(torch.int64).reshape(1)
        dist.all_reduce(wrong)
        results.append({"bytes": count * ELEMENT_BYTES, "seconds": float(slowest.item()), "wrong": int(wrong.item())})
        del buf
        torch.cuda.empty_cache()
    if rank == 0:
        nccl = torch.cuda.nccl.version()
        emit({"world_size": world, "results": results, "devices": names, "torch": torch.__version__,
              "cuda": torch.version.cuda, "nccl": ".".join(str(v) for v in nccl) if isinstance(nccl, tuple) else str(nccl),
              "nccl_environment": {k: v for k, v in sorted(os.environ.items()) if k.startswith("NCCL_")}})
    dist.destroy_process_group()


def main(argv):
    with open(argv[1], encoding="utf-8") as fh:
        config = json.load(fh)
    try:
        import torch
        import torch.distributed
        import torch.multiprocessing as mp
    except ImportError as exc:
        emit({"error": f"{sys.executable} cannot import torch: {exc}"})
        return 2
    if not torch.cuda.is_available() or not torch.distributed.is_available() or not torch.distributed.is_nccl_available():
        emit({"error": f"torch {torch.__version__} of {sys.executable} has no CUDA, torch.distributed or NCCL here "
                       f"(CUDA available: {torch.cuda.is_available()})"})
        return 2
    visible = torch.cuda.device_count()
    world = int(config.get("gpus") or 0) or visible
    if world < 1 or visible < world:
        emit({"error": f"torch sees {visible} GPU(s); the check asks for {world}"})
        return 2
    try:
        mp.spawn(rank_main, args=(world, config), nprocs=world, join=True)
    except Exception as exc:  # a rank that raised: spawn's message holds the rank's traceback
        emit({"error": f"a rank failed: {exc}"[-3000:]})
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv))
