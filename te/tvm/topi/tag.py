"""tvm.topi.tag: the operator tags that schedules dispatch on (our ops use the same)."""
ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"


def is_broadcast(tag: str) -> bool:
    return tag.startswith((ELEMWISE, BROADCAST))


def is_injective(tag: str) -> bool:
    """Elementwise, broadcast and other injective ops: those a schedule may inline."""
    return tag.startswith((ELEMWISE, BROADCAST, INJECTIVE))
