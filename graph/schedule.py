"""Default schedules of single-op kernels, by the op table's schedule family.

'auto': te.autotune.auto_schedule (the automatic space's default config, or its best
tuning record under apply_history_best). 'conv2d': a direct schedule of its own (see
schedule_conv2d for why). Takes the kernel's output tensors and argument list, gives
(schedule, args). Imports te's public API only.
"""
from __future__ import annotations

import te
from te.errors import TEError

VECTOR = 8  # float32 lanes of an AVX2 register; AVX-512 hosts run two per iteration


def schedule(family: str, outs: list, args: list) -> tuple:
    if family == "conv2d":
        return schedule_conv2d(outs[0]), args
    try:
        return te.autotune.auto_schedule(outs, args=args)
    except TEError:
        # The automatic space refuses computes it cannot size (symbolic extents); a plain
        # schedule computes the same values, loop by loop.
        return te.create_schedule([o.op for o in outs]), args


def schedule_conv2d(out: te.Tensor) -> te.Schedule:
    """Parallel over (batch, channel), the output row's x innermost and vectorized, the
    reduction (channels, kernel rows, kernel columns) around it; the padded input stays a
    stage of its own so the inner loop reads it without bounds selects. The automatic
    space's micro-kernel default is not used for conv: with odd spatial sizes its guarded,
    unrolled tails make LLVM's compile time far exceed the whole model's run time."""
    s = te.create_schedule(out.op)
    conv = out if out.op.reduce_axis else out.op.input_tensors[0]
    n, f, y, x = s[conv].op.axis
    width = conv.shape[3]
    factor = VECTOR if not hasattr(width, "value") else max(1, min(VECTOR, int(width.value)))
    xo, xi = s[conv].split(x, factor=factor)
    s[conv].reorder(n, f, y, xo, *s[conv].op.reduce_axis, xi)
    s[conv].parallel(s[conv].fuse(n, f))
    s[conv].vectorize(xi)
    if conv is not out:  # the bias: parallel over the same rows
        n, f, y, x = s[out].op.axis
        s[out].parallel(s[out].fuse(n, f))
    return s
