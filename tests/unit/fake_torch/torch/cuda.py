import os

from . import nccl  # noqa: F401


def is_available():
    return True


def device_count():
    return int(os.environ.get("FAKE_TORCH_GPUS", "1"))


def set_device(index):
    pass


def synchronize(device=None):
    pass


def empty_cache():
    pass


def get_device_name(device=None):
    return "Fake GPU"
