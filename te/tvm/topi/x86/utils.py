"""tvm.topi.x86.utils: get_fp32_len (float32 lanes of this CPU's vector registers)."""
from ....autotune.micro_kernel import vector_lanes


def get_fp32_len() -> int:
    return vector_lanes("float32")
