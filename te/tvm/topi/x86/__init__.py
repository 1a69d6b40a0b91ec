"""tvm.topi.x86: the x86 dense templates (dense_pack, dense_nopack) and utils."""
from .dense import dense_nopack, dense_pack, schedule_dense_nopack, schedule_dense_pack
from .utils import get_fp32_len

__all__ = ["dense_nopack", "dense_pack", "get_fp32_len", "schedule_dense_nopack",
           "schedule_dense_pack"]
