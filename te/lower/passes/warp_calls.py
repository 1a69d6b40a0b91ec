"""Warp-collective calls in CUDA kernels (tensor cores: the te_wmma_ calls of te/codegen/
cuda/tensor_core.py): a warp's 32 lanes make each such call together, with the same arguments.

Takes a kernel nest and its launch extents (device_split.py); gives the extents with
threadIdx.x of 32 where the kernel calls one and binds no loop to threadIdx.x (every lane
then runs the same code), or refuses a launch on which the call could not be collective.
Imports te.compute.expr, ir, printer, visitor.
"""
from __future__ import annotations

from ...compute import expr as E
from ...errors import BuildError
from .. import ir
from ..printer import print_expr
from ..visitor import walk_down

WARP_CALLS = frozenset({"te_wmma_16x16", "te_wmma_zero_16x16", "te_wmma_update_16x16",
                        "te_wmma_frag_16x16", "te_wmma_fill_16x16", "te_wmma_mma_16x16",
                        "te_wmma_store_16x16"})
WARP = 32


def _warp_call(s: ir.Stmt) -> str | None:
    if isinstance(s, ir.Evaluate) and isinstance(s.value, E.Call) and s.value.extern \
            and s.value.name in WARP_CALLS:
        return s.value.name
    return None


def with_warp_lanes(name: str, nest: ir.Stmt, extents: dict) -> dict:
    """`extents` (tag -> launch extent) of kernel `name`, threadIdx.x added where the
    kernel makes warp-collective calls."""
    calls = []

    def step(s, in_x):
        if isinstance(s, ir.For) and s.thread_tag == "threadIdx.x":
            return s.loop_var.name
        return in_x
    for s, in_x in walk_down(nest, "", step):
        call = _warp_call(s)
        if call is not None:
            if in_x:
                raise BuildError(f"te.build: target 'cuda': kernel '{name}' calls {call} "
                                 f"(warp-collective: a warp's 32 lanes call it together with "
                                 f"the same arguments) inside loop '{in_x}', bound to "
                                 f"threadIdx.x; leave threadIdx.x to the warp's lanes")
            calls.append(call)
    if not calls:
        return extents
    lanes = extents.get("threadIdx.x")
    if lanes is None:
        return {**extents, "threadIdx.x": E.const(WARP)}
    if not (isinstance(lanes, E.Const) and int(lanes.value) == WARP):
        raise BuildError(f"te.build: target 'cuda': kernel '{name}' calls {calls[0]} "
                         f"(warp-collective), so threadIdx.x must have extent {WARP} (one "
                         f"warp's lanes), got {print_expr(lanes)}")
    return extents
