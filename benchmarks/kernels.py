"""Hand schedules of the non-GEMM benchmark kernels: conv2d and memory-bound row kernels.

Takes problem sizes; gives functions returning (schedule, argument tensors) for conv2d NCHW
(the library's conv2d strategy), relu(x*a+b), softmax, layer norm and sum along the last
axis, and a plain copy (the bandwidth yardstick). Imports te only.
"""
from __future__ import annotations

import te
from te.compute.ops import nn

LANES = 16  # float32 lanes per vector op in the row kernels (one zmm or two ymm)


def conv2d(cin: int, cout: int, h: int, w: int, r: int, pad: int):
    """conv2d NCHW, batch 1, stride 1: the library's conv2d strategy (te.autotune's
    conv2d_compute and schedule_conv2d, the graph's conv), whose GEMM forms began here: a
    1x1 convolution as a GEMM over packed pixel panels, others over flattened, padded
    rows. Returns (schedule, [X, W, Y]), all NCHW."""
    X = te.placeholder((1, cin, h, w), name="X")
    W = te.placeholder((cout, cin, r, r), name="W")
    Y = te.autotune.conv2d_compute(X, W, 1, pad, name="Y")
    return te.autotune.schedule_conv2d(Y), [X, W, Y]


# The next row is prefetched into L2 (locality 2, x86 prefetcht1), not L1: a 4096-wide row
# is half of a 32 KiB L1, which the row being worked on and layernorm's gamma and beta
# need (Zen 4, one thread, 4096^2, alternating A/B runs: softmax 5.8-6.2 -> 5.0-5.1 ms,
# layernorm 5.7-6.0 -> 4.1-4.3 ms with both sums prefetching; with prefetcht0 a second
# prefetching pass made layernorm slower).
NEXT_ROW = 2


def _row_split(s, stage, axis):
    jo, ji = s[stage].split(axis, factor=LANES)
    s[stage].vectorize(ji)
    return jo, ji


def _stream_out(s, stage, loop):
    """The output, written once and not read back, goes past the caches (non-temporal
    stores): a plain store first reads each line it writes (read-for-ownership), a third
    of the DRAM traffic of a one-input row kernel (Zen 4, 4096^2, one thread: copy 5.2 ->
    3.2 ms, layernorm 9.6 -> 6.5 ms)."""
    s[stage].pragma(loop, "nontemporal_store")


def relu_affine(rows: int, cols: int, row_block: int = 8, steps: int = 4):
    """relu(x * a + b) with per-column a, b: one fused, vectorized, parallel pass over
    blocks of `row_block` rows. Each step loads `steps` vectors of a and b and serves them
    to that many vectors of every row of the block: a and b (2 x 16 KiB at 4096 columns)
    do not stay in a 32 KiB L1 beside the streams of X and Y, so loading them once per
    row costs most of the time, and each row then reads and writes whole 256-byte runs
    rather than one line at a time (Zen 4, 4096^2, alternating, of copy's speed in the
    same rounds: one row at a time 5.4 ms; 4 rows, 1 vector 4.2-4.4 ms, 0.73-0.75 of copy
    at one thread; 4 rows, 4 vectors 0.79-0.82; **8 rows, 4 vectors 3.3-3.7 ms, 0.90-0.93**;
    8 rows with 2 or 8 vectors, or 16 rows, 0.67-0.81. At two threads every variant is at
    0.84-0.98 of copy, 8 x 4 within 1-7% of 4 x 1)."""
    X = te.placeholder((rows, cols), name="X")
    a = te.placeholder((cols,), name="a")
    b = te.placeholder((cols,), name="b")
    Y = te.compute((rows, cols), lambda i, j: te.max(X[i, j] * a[j] + b[j], 0.0), name="Y")
    s = te.create_schedule(Y.op)
    i, j = Y.op.axis
    io, ii = s[Y].split(i, factor=row_block)
    jo, ji = s[Y].split(j, factor=LANES)
    step, vec = s[Y].split(jo, factor=steps)
    s[Y].reorder(io, step, ii, vec, ji)
    s[Y].unroll(ii)
    s[Y].unroll(vec)
    s[Y].vectorize(ji)
    s[Y].parallel(io)
    _stream_out(s, Y, step)
    return s, [X, a, b, Y]


def copy(rows: int, cols: int):
    """Y = X: the bandwidth yardstick, with the non-temporal stores of the row kernels
    (the fastest copy here: numpy's np.copyto, glibc's memcpy, takes 6.3 ms for 64 MiB
    on the Zen 4 machine, this 3.2 ms)."""
    X = te.placeholder((rows, cols), name="X")
    Y = te.compute((rows, cols), lambda i, j: X[i, j], name="Y")
    s = te.create_schedule(Y.op)
    jo, _ = _row_split(s, Y, Y.op.axis[1])
    _stream_out(s, Y, jo)
    s[Y].parallel(Y.op.axis[0])
    return s, [X, Y]


def _lane_reduce(s, R, out, row, lanes: int = LANES):
    """Reduce along the last axis as `lanes` vector partial results (rfactor), computed at
    `row` of `out`. lanes = 4 * LANES gives four independent accumulator chains; those are
    then folded to LANES partials by vector adds (a second rfactor), so the final
    LANES -> 1 step is a short scalar loop: 64 dependent scalar adds per reduction cost
    3-7% of softmax and layernorm in most alternating A/B runs (Zen 4, one thread,
    4096^2)."""
    jo, ji = s[R].split(R.op.reduce_axis[0], factor=lanes)
    RF = s.rfactor(R, ji, factor_axis=1)
    s[RF].compute_at(s[out], row)
    _lanes_inside(s, RF)
    if lanes > LANES and lanes % LANES == 0:
        _, lane = s[R].split(s[R].leaf_iter_vars[-1], factor=LANES)
        folded = s.rfactor(R, lane, factor_axis=1)
        s[folded].compute_at(s[out], row)
        _lanes_inside(s, folded)
    s[R].compute_at(s[out], row)
    return RF


def _lanes_inside(s, RF):
    """The lane axis of an rfactor stage innermost (below its reduction loop), vectorized:
    each step of the reduction is one vector operation on LANES partial results."""
    lane = RF.op.axis[-1]
    s[RF].reorder(*RF.op.axis[:-1], *RF.op.reduce_axis, lane)
    s[RF].vectorize(lane)


def row_sum(rows: int, cols: int, side_by_side: int = 1):
    """LANES vector partial sums per row, rows in parallel.

    side_by_side=1: one row at a time; each vector step also prefetches the same line of
    the next row, which doubles the misses in flight (Zen 5, 4096^2: 1.44 -> 1.20 ms at 1
    thread, 0.90-0.97 -> 0.83-0.85 ms at 2).

    side_by_side=R > 1: blocks of R rows read in lockstep, one vector of each row per step
    (R vector accumulators), prefetching 16 lines ahead in every row. An Intel core's L2
    streamer follows one stream per 4 KiB page and stops at the page's end, so one row
    read at a time keeps few lines in flight; R streams keep R times as many (Ice Lake
    server, one core, 4096^2, 9 alternating rounds: 5.7-6.0 ms one row at a time, 5.0 ms
    with 8 rows, 4.6 ms with 16 rows and the prefetch; two threads 2.96 -> 2.32 ms). On
    Zen 4, two or four rows side by side were slower than one (2.45 and 2.55 vs 2.19 ms),
    so the suite times both forms on the machine it runs on (VARIANTS)."""
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    S = te.compute((rows,), lambda i: te.sum(X[i, k], axis=k), name="S")
    s = te.create_schedule(S.op)
    jo, ji = s[S].split(S.op.reduce_axis[0], factor=LANES)
    RF = s.rfactor(S, ji, factor_axis=1)
    if side_by_side == 1:
        s[RF].compute_at(s[S], S.op.axis[0])
        _lanes_inside(s, RF)
        s[RF].prefetch(X, RF.op.reduce_axis[0], -(-cols // LANES))
        s[S].parallel(S.op.axis[0])
        return s, [X, S]
    block, _ = s[S].split(S.op.axis[0], factor=side_by_side)
    s[RF].compute_at(s[S], block)
    row, lane = RF.op.axis
    step = RF.op.reduce_axis[0]
    s[RF].reorder(step, row, lane)
    s[RF].unroll(row)
    s[RF].vectorize(lane)
    s[RF].prefetch(X, step, 16)
    s[S].parallel(block)
    return s, [X, S]


def softmax(rows: int, cols: int, block: int = 64):
    """Per row: max, exp into a row buffer while summing it, one reciprocal, scale; blocks
    of `block` rows in parallel. The row max uses a compare-and-select max (1 instruction
    instead of 7 for te.max, which propagates NaN): a NaN in a row still makes the whole
    row NaN, through exp(NaN - max) in the sum, as numpy's softmax does.

    - The exp pass shares the loop of the sum's partial-result stage (compute_with):
      each iteration computes 4 vectors of exps and adds them to the 4 partial sums while
      they are still in registers, instead of a second pass over the row buffer (Zen 4,
      4096^2, 21 alternating rounds on a quiet machine: 0.622 -> 0.638 of the copy
      kernel's speed at one thread, 0.876 -> 0.886 at two).
    - While the exp phase of row i runs, it prefetches row i + 1 of X into L2 (one cache
      line per vector), so the DRAM read overlaps the compute; the scale phase writes Y
      with non-temporal stores (Zen 4, one thread: 10.2 -> 8.0 ms; 5.8-6.2 -> 5.0-5.1 ms
      with the prefetch into L2 instead of L1).
    - The row loop is software-pipelined (Stage.pipeline): row i - 1 is scaled and
      written inside the loop that computes row i's exps. Without it the writes came in
      a burst after each row's arithmetic, which nothing overlapped: one thread spent as
      long on a row with the exp replaced by a copy as with it, 1.2 us, where copying a
      row takes 0.85 (Zen 4, 4096^2, alternating: 4.97 -> 4.17 ms at one thread, 0.67 ->
      0.82 of copy; 3.08 -> 2.72 ms at two, 0.85 -> 0.93). Each block of rows starts and
      ends with an unpipelined row; blocks of 32-128 rows time alike. A block has at most
      `block` rows, fewer where the rows would make fewer than 8 blocks to share out."""
    X = te.placeholder((rows, cols), name="X")
    k = te.reduce_axis((0, cols), name="k")
    mx = te.compute((rows,), lambda i: nn.select_max(X[i, k], axis=k), name="Y_maxelem")
    ex = te.compute((rows, cols), lambda i, j: te.exp(X[i, j] - mx[i]), name="Y_exp")
    k2 = te.reduce_axis((0, cols), name="k")
    expsum = te.compute((rows,), lambda i: te.sum(ex[i, k2], axis=k2), name="Y_expsum")
    inv = te.compute((rows,), lambda i: 1.0 / expsum[i], name="Y_inv")
    Y = te.compute((rows, cols), lambda i, j: ex[i, j] * inv[i], name="Y")
    s = te.create_schedule(Y.op)
    i, j = s[Y].op.axis
    io, ii = s[Y].split(i, factor=max(1, min(block, rows // 8)))
    s[Y].parallel(io)
    lanes = 4 * LANES
    jo, _ = _row_split(s, Y, j)
    jo_steps, _ = s[Y].split(jo, factor=lanes // LANES)  # one step per sum step
    _lane_reduce(s, mx, Y, ii, lanes=lanes)
    sum_rf = _lane_reduce(s, expsum, Y, ii, lanes=lanes)
    s[inv].compute_at(s[Y], ii)
    s[ex].compute_at(s[Y], ii)
    eo, ei = s[ex].split(ex.op.axis[1], factor=lanes)
    s[ex].vectorize(ei)
    s[ex].prefetch(X, eo, -(-cols // lanes), locality=NEXT_ROW)  # those lines of row i + 1
    sum_steps = s[sum_rf].op.reduce_axis[0]
    s[ex].compute_with(s[sum_rf], sum_steps)
    s[Y].pipeline(ii, interleave=(s[sum_rf], sum_steps))
    _stream_out(s, Y, jo_steps)
    return s, [X, Y]


def layernorm(rows: int, cols: int, pipelined: bool = False, block: int = 64):
    """Per row: mean, variance, then the affine normalization. The two sums run four
    accumulator chains each; the output pass writes Y with non-temporal stores, as
    softmax does (Zen 4: 9.6 -> 6.5 ms).

    pipelined=False: rows in parallel; both sums prefetch the same line of the next row
    into L2 (Zen 4, one thread, 4096x4096, medians of separate runs: 6.0 ms with the mean
    pass prefetching into L1, 6.1 ms with it prefetching into L2, 6.3 ms with both passes
    into L1, 4.5-4.7 ms with both into L2).

    pipelined=True: rows in parallel blocks of up to `block`, the row loop software-
    pipelined as softmax's is: row i - 1 is normalized and written inside the mean pass of
    row i, so the writes overlap the reads from memory; only the mean pass prefetches
    (Ice Lake server, 4096^2, 9 alternating rounds, of copy's speed in the same rounds:
    0.65 -> 0.78 at one thread, 0.57 -> 0.79 at two; with both passes prefetching 0.76
    and 0.74, with neither 0.72 and 0.65). On Zen 4 the sixth session measured the
    pipelined form slower (0.67 vs 0.72 of copy), so the suite times both (VARIANTS)."""
    X = te.placeholder((rows, cols), name="X")
    g = te.placeholder((cols,), name="g")
    b = te.placeholder((cols,), name="b")
    Y = nn.layer_norm(X, g, b, name="Y")
    s = te.create_schedule(Y.op)
    stages = {st.name: st for st in s.stages}
    i, j = s[Y].op.axis
    if pipelined:
        i_block, i = s[Y].split(i, factor=max(1, min(block, rows // 8)))
        s[Y].parallel(i_block)
    else:
        s[Y].parallel(i)
    jo, _ = _row_split(s, Y, j)
    lanes = 4 * LANES
    partials = {}
    for name in ("Y_var", "Y_mean"):
        rf = _lane_reduce(s, stages[name].op.output(0), Y, i, lanes=lanes)
        if name == "Y_mean" or not pipelined:
            s[rf].prefetch(X, rf.op.reduce_axis[0], -(-cols // lanes), locality=NEXT_ROW)
        partials[name] = rf
    if pipelined:
        steps, _ = s[Y].split(jo, factor=lanes // LANES)  # one step per mean step
        mean_rf = partials["Y_mean"]
        s[Y].pipeline(i, interleave=(s[mean_rf], s[mean_rf].op.reduce_axis[0]))
        _stream_out(s, Y, steps)
    else:
        _stream_out(s, Y, jo)
    return s, [X, g, b, Y]


# Hand schedules whose best form depends on the CPU's prefetchers and caches, as
# {case: [(label, keyword arguments)]}: benchmarks/run.py and tune_rows.py time each form
# on the machine they run on and use the faster one (the first is the form of earlier runs).
VARIANTS = {
    "sum": [("one row", {}), ("16 rows side by side", {"side_by_side": 16})],
    "layernorm": [("rows", {}), ("pipelined rows", {"pipelined": True})],
}
