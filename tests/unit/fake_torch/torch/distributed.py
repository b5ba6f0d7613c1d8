class ReduceOp:
    SUM, MAX = "sum", "max"


def is_available():
    return True


def is_nccl_available():
    return True


def init_process_group(backend, init_method=None, rank=0, world_size=1):
    pass


def all_gather_object(out, obj):
    for i in range(len(out)):
        out[i] = obj


def all_reduce(tensor, op=ReduceOp.SUM):
    pass


def barrier():
    pass


def destroy_process_group():
    pass
