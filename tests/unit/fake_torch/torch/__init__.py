"""A stand-in for the few parts of torch the NCCL all-reduce worker (plugins/module_utils/nccl_worker.py) uses, on
the CPU, for one process: torch.multiprocessing.spawn calls each rank in turn in this process, and
torch.distributed's collectives act as they would with one rank. Enough to run the worker's code path where no
GPU and no torch are (tests/unit/test_nccl_allreduce.py); it measures nothing."""
import os

from . import cuda, distributed, multiprocessing, version  # noqa: F401

__version__ = "0.0+fake"
float32, float64, int64 = "float32", "float64", "int64"
FAKE_WRONG = int(os.environ.get("FAKE_TORCH_WRONG", "0"))


class device:  # noqa: N801 (torch's name)
    def __init__(self, kind, index=0):
        self.type, self.index = kind, index


class Tensor:
    def __init__(self, values, dtype):
        self.values, self.dtype = list(values), dtype

    def fill_(self, value):
        self.values = [value] * len(self.values)
        return self

    def __ne__(self, other):
        return Tensor([v != other for v in self.values], "bool")

    def sum(self):
        return Tensor([sum(self.values) + FAKE_WRONG], "int64")

    def to(self, dtype):
        return Tensor(self.values, dtype)

    def reshape(self, *shape):
        return self

    def item(self):
        return self.values[0]


def zeros(count, dtype=None, device=None):
    return Tensor([0.0] * min(count, 4), dtype)


def tensor(values, dtype=None, device=None):
    return Tensor(values, dtype)
