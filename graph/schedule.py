"""Default schedules of single-op kernels, by the op table's schedule family.

'auto': te.autotune.auto_schedule (the automatic space's default config, or its best
tuning record under apply_history_best). 'conv2d': te.autotune's conv2d strategy (see
schedule_conv2d for why; its default config, or its best record). 'pool':
te.autotune.schedule_pool2d (rows of outputs as vectors over a phase-split padded input),
or for the pools of te.compute.ops.pool_nd (3-d, a max pool's indices) schedule_pool_nd,
else as 'auto'. Takes the kernel's output tensors and
argument list, gives (schedule, args). Imports te's public API only.
"""
from __future__ import annotations

import te
from te.errors import TEError


def schedule(family: str, outs: list, args: list) -> tuple:
    if family == "conv2d":
        return schedule_conv2d(outs[0]), args
    if family == "pool" and len(outs) == 1:
        try:
            return te.autotune.schedule_pool2d(outs[0]), args
        except TEError:
            pass    # a pool of symbolic shape: the plain compute, scheduled as 'auto'
        try:
            return te.autotune.schedule_pool_nd(outs[0]), args
        except TEError:
            pass    # not a pool of te.compute.ops.pool_nd
    try:
        return te.autotune.auto_schedule(outs, args=args)
    except TEError:
        # The automatic space refuses computes it cannot size (symbolic extents); a plain
        # schedule computes the same values, loop by loop.
        return te.create_schedule([o.op for o in outs]), args


def strategy(family: str) -> str:
    """The te.autotune space (strategy) schedule() takes for `family`'s kernels: what
    graph.autotune tunes them in and what their records' workload key names."""
    return "conv2d" if family == "conv2d" else "auto"


def fixed_schedule(family: str, outs: list) -> str | None:
    """Why schedule() gives this kernel a schedule without knobs (nothing to tune), or None
    when it takes te.autotune.auto_schedule or te.autotune.schedule_conv2d's GEMM form,
    whose spaces records can tune."""
    if family == "conv2d":
        if te.autotune.conv2d_space(outs[0]).size <= 1:
            return "the conv2d strategy's direct form (te.autotune.schedule_conv2d) has no knobs"
        return None
    if family == "pool" and len(outs) == 1:
        for pool_schedule in ("schedule_pool2d", "schedule_pool_nd"):
            try:
                getattr(te.autotune, pool_schedule)(outs[0])
                return f"the pooling schedule (te.autotune.{pool_schedule}) has no knobs"
            except TEError:
                pass
    return None


def schedule_conv2d(out: te.Tensor) -> te.Schedule:
    """`out`: the conv2d op's output (te.autotune.conv2d_compute) or one elementwise stage
    over it (bias, relu, residual: a fused epilogue), computed in the conv's final loop.
    The automatic space's micro-kernel default is not used for conv: with odd spatial
    sizes its guarded, unrolled tails make LLVM's compile time far exceed the model's run
    time; the strategy's GEMM form pads its tiles instead."""
    return te.autotune.schedule_conv2d(out)
