"""tvm.autotvm.task.space: the config space classes under AutoTVM's names (ours)."""
from ....autotune.space import ConfigEntity, ConfigSpace, OtherOptionEntity
from ....autotune.split import SplitEntity, apply_split, divisors, powers_of_two

FallbackConfigEntity = ConfigSpace   # untuned: the space itself, defaults settable (is_fallback)


def get_factors(n: int) -> list:
    return divisors(n)


def get_pow2s(n: int) -> list:
    return powers_of_two(n)


__all__ = ["ConfigEntity", "ConfigSpace", "FallbackConfigEntity", "OtherOptionEntity",
           "SplitEntity", "apply_split", "get_factors", "get_pow2s"]
