"""The automatic space: every sampled config of many op kinds lowers and gives the answer of
the unscheduled build, on random non-zero inputs (schedule invariance)."""
from __future__ import annotations

import random

import numpy as np
import pytest

import te
from te.autotune import features as F
from te.autotune.auto_space import auto_schedule, default_args, vector_lanes
from te.autotune.space import ConfigSpace
from te.compute import ops
from te.compute.tensor import PlaceholderOp
from te.lower.interp import run_func
from te.schedule import steps as S
from helpers import build_reference, rand_array

N_CONFIGS = 5


def _inputs(args, rng):
    out = []
    for a in args:
        if isinstance(a.op, PlaceholderOp):
            shape = [int(d.value) for d in a.shape]
            sign = rng.choice([-1.0, 1.0], size=shape)
            out.append((sign * rng.uniform(0.5, 1.5, size=shape)).astype(a.dtype))
    return out


def _run(s, args, inputs, build=te.build):
    outs = [np.zeros([int(d.value) for d in a.shape], a.dtype) for a in args
            if not isinstance(a.op, PlaceholderOp)]
    build(s, args)(*inputs, *outs)
    return outs


def _unscheduled(out, args, inputs):
    """The reference result: the unscheduled build of `out`, bounds-checked."""
    return _run(te.create_schedule(out.op), args, inputs, build=build_reference)


def _graphs():
    A = te.placeholder((19, 23), name="A")
    B = te.placeholder((23, 13), name="B")
    X = te.placeholder((17, 33), name="X")
    Y = te.compute((17, 33), lambda i, j: te.exp(X[i, j]) * 2.0, name="Y")
    ew = te.compute((17, 33), lambda i, j: Y[i, j] + X[i, j], name="Z")
    V = te.placeholder((700,), name="V")
    R2 = te.placeholder((9, 40), name="R2")
    BA = te.placeholder((3, 7, 11), name="BA")
    BB = te.placeholder((3, 11, 6), name="BB")
    D = te.placeholder((1, 3, 9, 9), name="D")
    W = te.placeholder((4, 3, 3, 3), name="W")
    P = te.placeholder((1, 2, 8, 8), name="P")
    S = te.placeholder((6, 20), name="S")
    L = te.placeholder((5, 24), name="L")
    G = te.placeholder((24,), name="G")
    Bt = te.placeholder((24,), name="Bt")
    R = te.placeholder((1, 2, 5, 6), name="R")
    T = te.placeholder((3, 29), name="T")
    PR = te.placeholder((2, 9, 21), name="PR")
    return {
        "elementwise": ew,
        "sum_scalar": ops.sum(V, axis=0, keepdims=True),
        "row_sum": ops.sum(R2, axis=1),
        "matmul": ops.matmul(A, B),
        "batch_matmul": ops.batch_matmul(BA, BB),
        "conv2d": ops.conv2d_nchw(D, W, stride=1, padding=1),
        "max_pool": ops.max_pool2d(P, 3, stride=2, padding=1),
        "avg_pool": ops.avg_pool2d(P, 2, stride=2),
        "softmax": ops.softmax(S),
        "layer_norm": ops.layer_norm(L, G, Bt),
        # reads two tables per resized axis (filter taps and weights)
        # a quadratic ranking reduction read by another reduction (k picks)
        "topk_values": ops.topk(T, 5, axis=1)[0],
        # index arithmetic (a reflection, a modulo) read by another stage, or the output
        "pad_reflect_scaled": ops.multiply(ops.pad(PR, (0, 2, 3), (1, -1, 7), mode="reflect"),
                                           2.0),
        "pad_wrap": ops.pad(PR, (1, 0, 25), (0, -3, 2), mode="wrap"),
        "resize_cubic": ops.resize(R, (1, 2, 9, 4), (1, 1, 1.8, 0.7), "cubic",
                                   antialias=True, exclude_outside=True),
    }


GRAPHS = _graphs()


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_every_sampled_config_matches_unscheduled(name):
    out = GRAPHS[name]
    space = ConfigSpace()
    auto_schedule(space, out)
    assert len(space) >= 1
    args = default_args(out)
    rng = np.random.default_rng(0)
    inputs = _inputs(args, rng)
    want = _unscheduled(out, args, inputs)
    picks = random.Random(name).sample(range(len(space)), min(N_CONFIGS, len(space)))
    for idx in [0] + picks:
        cfg = space.get(idx)
        try:
            s, a = auto_schedule(cfg, out)
        except te.ScheduleError:
            continue  # an illegal config is an invalid trial, not a failure
        got = _run(s, a, inputs)
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4,
                                       err_msg=f"{name} config {cfg}")


def test_tables_are_computed_at_root_by_default():
    """Stages marked attrs['table'] (resize's taps and weights, read by every output
    element) are computed once, not inlined into their reader."""
    out = GRAPHS["resize_cubic"]
    space = ConfigSpace()
    auto_schedule(space, out)
    tables = [op for op in _producers(out) if op.attrs.get("table")]
    assert len(tables) == 4
    for op in tables:
        place = [k for k in space.knobs if k.endswith(".place") and op.name in k]
        assert place and space.knobs[place[0]].options[0] == "root"
    s, args = auto_schedule(space.default(), out)
    assert all(s[op].attach_type != "inline" for op in tables)


def _producers(out):
    found, todo = [], [out.op]
    while todo:
        op = todo.pop()
        if op in found or isinstance(op, PlaceholderOp):
            continue
        found.append(op)
        todo.extend(t.op for t in op.input_tensors)
    return found


def test_space_is_static_and_replays_deterministically():
    out = GRAPHS["matmul"]
    space = ConfigSpace()
    auto_schedule(space, out)
    cfg = space.get(len(space) // 3)
    s1, a1 = auto_schedule(cfg, out)
    s2, a2 = auto_schedule(space.from_json_dict(cfg.to_json_dict()), out)
    assert s1.to_json() == s2.to_json()
    assert str(te.lower(s1, a1)) == str(te.lower(s2, a2))


def test_reduction_output_gets_micro_kernel_knobs():
    space = ConfigSpace()
    auto_schedule(space, GRAPHS["matmul"])
    names = set(space.knobs)
    assert {"T_matmul.nr", "T_matmul.mr", "T_matmul.mc", "T_matmul.kc", "T_matmul.order",
            "T_matmul.parallel", "T_matmul.pack", "T_matmul.cache"} <= names
    # B[k, j] streams as a panel: packing is a choice
    assert set(space.knobs["T_matmul.pack"].options) == {True, False}


def test_default_matmul_is_a_register_blocked_micro_kernel():
    """Option 0 of every knob: B packed into nr-wide panels, an mr x nr local tile with the
    k loop outside it, rows unrolled, nr a multiple of the native vector width, parallel."""
    A = te.placeholder((64, 64), name="A")
    B = te.placeholder((64, 96), name="B")
    out = ops.matmul(A, B)
    space = ConfigSpace()
    auto_schedule(space, out)
    cfg = space.default()
    lanes = vector_lanes("float32")
    nr, mr = cfg["T_matmul.nr"].val, cfg["T_matmul.mr"].val
    assert nr % lanes == 0 and nr <= 4 * lanes and 2 <= mr <= 8
    assert cfg["T_matmul.pack"].val is True and cfg["T_matmul.cache"].val is True
    s, args = auto_schedule(cfg, out)
    text = str(te.lower(s, args))
    assert "T_matmul_pack" not in text and "B_pack" in text
    # a vector of nr lanes is emitted in power-of-two pieces (AVX2's 24 as 16 + 8)
    assert "parallel for" in text and f"ramp(0, 1, {1 << (nr.bit_length() - 1)})" in text
    assert "scope=local" in text
    feats = dict(zip(F.NAMES, F.extract(F.lower_for_features(s, args))))
    assert feats["vec_native_mult"] > 0 and feats["reduce_outside_tile"] > 0
    assert feats["acc_bytes"] > 0 and feats["unroll_body"] > 1


def _long_rows():
    """Rows long enough (>= 1 KiB) for the row kernels' prefetch knobs, and not a
    multiple of the vector width."""
    X = te.placeholder((5, 301), name="X")
    L = te.placeholder((3, 263), name="L")
    G = te.placeholder((263,), name="G")
    Bt = te.placeholder((263,), name="Bt")
    return {"softmax_long": ops.softmax(X), "layer_norm_long": ops.layer_norm(L, G, Bt)}


LONG_ROWS = _long_rows()


def test_row_kernels_offer_prefetch_and_wide_partial_sums():
    space = ConfigSpace()
    auto_schedule(space, LONG_ROWS["softmax_long"])
    # the next row into L2 by default, into every cache level, or not at all
    assert list(space.knobs["T_softmax_exp.prefetch"].options) == ["l2", "l1", "off"]
    # written after the row's reductions: the write prefetch is the default; streaming
    # stores come last for an output this small
    assert list(space.knobs["T_softmax_norm.out_store"].options) == [
        "prefetch", "plain", "stream"]
    s, args = auto_schedule(space.default(), LONG_ROWS["softmax_long"])
    ir = str(te.lower(s, args))
    assert "prefetch(&X[" in ir and ", locality=2)" in ir
    values = dict(space.default().values, **{"T_softmax_exp.prefetch": "l1"})
    s, args = auto_schedule(space.from_json_dict({"knobs": values}), LONG_ROWS["softmax_long"])
    ir = str(te.lower(s, args))
    assert "prefetch(&X[" in ir and "locality=" not in ir
    short = ConfigSpace()
    auto_schedule(short, GRAPHS["softmax"])          # 20-wide rows: nothing to prefetch
    assert list(short.knobs["T_softmax_exp.prefetch"].options) == ["off"]


def test_softmax_exp_shares_the_loop_of_its_sums_partial_results():
    """By default the exp stage is split as wide as the sum's partial results and shares
    their loop (compute_with), as the hand kernel does; `own` keeps a loop of its own, and
    with the sum at root there is nothing to share. Each gives the unscheduled result on
    rows of 301 (not a multiple of the partial sums' width)."""
    out = LONG_ROWS["softmax_long"]
    space = ConfigSpace()
    auto_schedule(space, out)
    assert list(space.knobs["T_softmax_exp.sum_with"].options) == ["fused", "own"]
    lanes = 4 * vector_lanes("float32")
    args = default_args(out)
    inputs = _inputs(args, np.random.default_rng(2))
    want = _unscheduled(out, args, inputs)
    shared = f"T_softmax_exp[ramp(k.outer_1*{lanes}, 1, {lanes})]"
    for change, fused in (({}, True), ({"T_softmax_exp.sum_with": "own"}, False),
                          ({"T_softmax_expsum.at": "root"}, False)):
        values = dict(space.default().values, **change)
        s, a = auto_schedule(space.from_json_dict({"knobs": values}), out)
        assert any(isinstance(step, S.ComputeWith) for step in s.steps) == fused, change
        ir = str(te.lower(s, a))
        assert (f"{shared} = exp(" in ir) == fused, ir
        for g, w in zip(_run(s, a, inputs), want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4, err_msg=str(change))
    short = ConfigSpace()
    auto_schedule(short, GRAPHS["layer_norm"])  # its sums read X, not a stage of its own
    assert not any(k.endswith(".sum_with") and len(v.options) > 1
                   for k, v in short.knobs.items())


def _pipelining_variants(out, knob: str, changes: tuple, seed: int) -> list:
    """Each change of `out`'s default config, with whether its rows should be pipelined:
    checks that `knob` offers "rows" first, that exactly those configs carry a Pipeline
    step, and that each gives the unscheduled result. Returns [(schedule, args, IR)]."""
    space = ConfigSpace()
    auto_schedule(space, out)
    assert list(space.knobs[knob].options) == ["rows", "off"]
    args = default_args(out)
    inputs = _inputs(args, np.random.default_rng(seed))
    want = _unscheduled(out, args, inputs)
    built = []
    for change, piped in changes:
        values = dict(space.default().values, **change)
        s, a = auto_schedule(space.from_json_dict({"knobs": values}), out)
        assert any(isinstance(step, S.Pipeline) for step in s.steps) == piped, change
        for g, w in zip(_run(s, a, inputs), want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4, err_msg=str(change))
        built.append((s, a, str(te.lower(s, a))))
    return built


def test_softmax_rows_are_software_pipelined_by_default():
    """The output's rows run in parallel blocks of 4 (37 rows: at least 8 blocks), each
    block's row loop pipelined: row i - 1 is normalized inside the loop where row i's exps
    are summed. `off`, an exp with a loop of its own, or the sum at root (nothing to
    interleave with) leave the rows unpipelined. Each gives the unscheduled result on 37
    rows of 301."""
    changes = (({}, True), ({"T_softmax_norm.pipeline": "off"}, False),
               ({"T_softmax_exp.sum_with": "own"}, False),
               ({"T_softmax_expsum.at": "root"}, False))
    built = _pipelining_variants(ops.softmax(te.placeholder((37, 301), name="X")),
                                 "T_softmax_norm.pipeline", changes, seed=4)
    for (_, piped), (_, _, ir) in zip(changes, built):
        assert ("floormod(" in ir) == piped, ir  # the alternating copies of the row
    # the cost model sees the pipelined program: its first and last rows are code of
    # their own, beside the steady loop
    features = [dict(zip(F.NAMES, F.extract(F.lower_for_features(s, a))))
                for s, a, _ in built[:2]]
    assert features[0]["n_stores"] > features[1]["n_stores"]
    short = ConfigSpace()
    auto_schedule(short, GRAPHS["elementwise"])   # no row reduction to interleave with
    assert list(short.knobs["Z.pipeline"].options) == ["off"]


def test_layernorm_rows_are_pipelined_with_the_mean_pass_by_default():
    """An output that reads a reduction streaming its input rows (layernorm's mean) is
    pipelined too: row i - 1 is normalized inside the loop of row i's mean partial sums,
    from the other copy of the statistics; with the mean at root, inside the variance
    pass. `off`, or both statistics at root, leave the rows unpipelined; each gives
    numpy's answer on 37 rows of 301."""
    X = te.placeholder((37, 301), name="X")
    G, Bt = te.placeholder((301,), name="G"), te.placeholder((301,), name="Bt")
    changes = (({}, True), ({"T_layer_norm.pipeline": "off"}, False),
               ({"T_layer_norm_mean.at": "root"}, True),
               ({"T_layer_norm_mean.at": "root", "T_layer_norm_var.at": "root"}, False))
    built = _pipelining_variants(ops.layer_norm(X, G, Bt), "T_layer_norm.pipeline", changes,
                                 seed=6)
    for (change, piped), (_, _, ir) in zip(changes, built):
        # the output reads the previous row's variance from its other copy
        assert ("rsqrt(T_layer_norm_var[floormod(i0.inner + 1, 2)] + 1e-05f)" in ir) == \
            piped, (change, ir)


@pytest.mark.parametrize("name", sorted(LONG_ROWS))
def test_wide_partial_sums_fold_to_one_vector_before_the_scalar_step(name):
    """Four vectors of partial results are added into one vector (a second rfactor,
    vectorized), so the serial scalar step to the row's value has one vector's lanes, at
    the reader's row loop and at root; each gives the unscheduled result."""
    out = LONG_ROWS[name]
    space = ConfigSpace()
    auto_schedule(space, out)
    lanes = vector_lanes("float32")
    args = default_args(out)
    inputs = _inputs(args, np.random.default_rng(1))
    want = _unscheduled(out, args, inputs)
    prefix = out.op.name[:-len("_norm")] if name.startswith("softmax") else out.op.name
    reduction = prefix + ("_maxelem" if name.startswith("softmax") else "_mean")
    for at in ("reader", "root"):
        values = dict(space.default().values, **{reduction + ".at": at})
        assert values[reduction + ".lanes"] == 4 * lanes
        s, a = auto_schedule(space.from_json_dict({"knobs": values}), out)
        ir = str(te.lower(s, a))
        assert f"allocate {reduction}.rf_1[float32 * {lanes}]" in ir
        assert f"for (k.inner.v.inner.v, 0, {lanes})" in ir
        for g, w in zip(_run(s, a, inputs), want):
            np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4, err_msg=f"{name} at {at}")


def test_a_plain_streaming_output_does_not_write_prefetch_by_default():
    X = te.placeholder((3, 300), name="X")
    Y = te.compute((3, 300), lambda i, j: te.max(X[i, j] * 2.0 + 1.0, 0.0), name="Y")
    space = ConfigSpace()
    auto_schedule(space, Y)
    assert list(space.knobs["Y.out_store"].options) == ["plain", "prefetch", "stream"]


@pytest.mark.parametrize("rows, default", [(4096, "stream"), (4090, "plain")])
def test_a_large_output_streams_past_the_caches_by_default(rows, default):
    """16 MiB and more: non-temporal stores by default (`out_store`), and every option
    gives the unscheduled result, on rows that the vector width does not divide."""
    X = te.placeholder((rows, 1025), name="X")
    Y = te.compute((rows, 1025), lambda i, j: X[i, j] * 2.0 - 1.0, name="Y")
    space = ConfigSpace()
    auto_schedule(space, Y)
    options = list(space.knobs["Y.out_store"].options)
    assert options[0] == default and sorted(options) == ["plain", "prefetch", "stream"]
    x = rand_array((rows, 1025))
    for store in options:
        values = dict(space.default().values, **{"Y.out_store": store})
        s, args = auto_schedule(space.from_json_dict({"knobs": values}), Y)
        assert ("pragma nontemporal_store" in str(te.lower(s, args))) == (store == "stream")
        y = np.full((rows, 1025), np.nan, "float32")
        te.build(s, args)(x, y)
        np.testing.assert_allclose(y, x * 2 - 1, rtol=1e-6)


def test_row_reductions_offer_a_prefetch_of_the_next_row():
    # layernorm's mean pass reads the row from memory: it may fetch the next row meanwhile
    out = LONG_ROWS["layer_norm_long"]
    space = ConfigSpace()
    auto_schedule(space, out)
    assert list(space.knobs["T_layer_norm_mean.prefetch"].options) == ["l2", "l1", "off"]
    vl = vector_lanes()
    assert list(space.knobs["T_layer_norm_mean.lanes"].options) == [4 * vl, vl, 1]
    s, args = auto_schedule(space.default(), out)
    assert "prefetch(&L[" in str(te.lower(s, args))
    values = dict(space.default().values, **{"T_layer_norm_mean.prefetch": "off",
                                             "T_layer_norm_var.prefetch": "off"})
    s, args = auto_schedule(space.from_json_dict({"knobs": values}), out)
    assert "prefetch(&L[" not in str(te.lower(s, args))
    short = ConfigSpace()
    auto_schedule(short, GRAPHS["softmax"])          # 20-wide rows: nothing to prefetch
    assert list(short.knobs["T_softmax_maxelem.prefetch"].options) == ["off"]
    # softmax's exp stage prefetches X by default, so its max pass does not
    soft = ConfigSpace()
    auto_schedule(soft, LONG_ROWS["softmax_long"])
    assert list(soft.knobs["T_softmax_maxelem.prefetch"].options) == ["off", "l2", "l1"]


@pytest.mark.parametrize("name", ["batch_matmul", "matmul_bt", "softmax_long",
                                  "layer_norm_long"])
def test_every_knob_option_is_correct(name):
    """One-knob variations of the default config: options of every knob (pack on and off,
    the smallest and largest other tile sizes, cache, order, parallel mode) build and give
    numpy's answer."""
    out = GRAPHS[name] if name in GRAPHS else LONG_ROWS.get(name) or _matmul_bt()
    space = ConfigSpace()
    auto_schedule(space, out)
    args = default_args(out)
    inputs = _inputs(args, np.random.default_rng(1))
    want = _unscheduled(out, args, inputs)
    base = space.default().values
    for knob_name, knob in space.knobs.items():
        rest = knob.options[1:]
        for opt in rest[:1] + rest[-1:] if len(rest) > 1 else rest:  # first and last
            values = dict(base)
            values[knob_name] = list(opt) if isinstance(opt, tuple) else opt
            cfg = space.from_json_dict({"knobs": values})
            s, a = auto_schedule(cfg, out)
            for g, w in zip(_run(s, a, inputs), want):
                np.testing.assert_allclose(g, w, rtol=2e-4, atol=2e-4,
                                           err_msg=f"{name} config {cfg}")


def _matmul_bt():
    """C = A @ B.T, B read as B[j, k]: strided along j, packing transposes it."""
    A = te.placeholder((10, 21), name="A")
    B = te.placeholder((37, 21), name="B")
    k = te.reduce_axis((0, 21), name="k")
    return te.compute((10, 37), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")


def test_scalar_reduction_gets_rfactor_knob():
    """A 1-element output of a long reduction: vector partial results are a choice (the
    tile of a matmul-like op with too few outputs); along contiguous rows, the only
    form (a row reduction, with no register-tile knobs and no rfactor knob)."""
    k = te.reduce_axis((0, 200), name="k")
    A, B = te.placeholder((2, 200), name="A"), te.placeholder((200, 3), name="B")
    small = te.compute((2, 3), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="P")
    space = ConfigSpace()
    auto_schedule(space, small)
    assert list(space.knobs["P.rfactor"].options) == [False, True]
    # with partial results along k there are no panels to pack, whatever .pack says
    values = dict(space.default().values, **{"P.rfactor": True, "P.pack": True})
    s, args = auto_schedule(space.from_json_dict({"knobs": values}), small)
    assert "B_pack" not in str(te.lower(s, args))
    space = ConfigSpace()
    auto_schedule(space, GRAPHS["sum_scalar"])
    assert not any(k.endswith((".nr", ".mr", ".cache", ".rfactor")) for k in space.knobs)
    s, args = auto_schedule(space.default(), GRAPHS["sum_scalar"])
    assert ".rf[" in str(te.lower(s, args))


def test_symbolic_shapes_are_rejected_with_a_plain_message():
    n = te.var("n")
    X = te.placeholder((n, 4), name="X")
    Y = te.compute((n, 4), lambda i, j: X[i, j] + 1.0, name="Y")
    with pytest.raises(te.ArgumentError, match="symbolic extent"):
        auto_schedule(ConfigSpace(), Y)


def test_default_softmax_is_one_pass_per_row():
    """exp is read by the sum and the normalization: by default it is computed once per
    row at the output's row loop, and both reductions are vector partial sums there."""
    X = te.placeholder((8, 64), name="X")
    out = ops.softmax(X)
    space = ConfigSpace()
    auto_schedule(space, out)
    s, args = auto_schedule(space.default(), out)
    text = str(te.lower(s, args))
    assert text.count("parallel for") == 1
    assert text.count("exp(") == 1 and ".rf[" in text


def test_register_tile_fills_the_axis_the_streamed_operand_does_not_depend_on():
    from te.autotune.micro_kernel import _streamed_operand_axes
    # Y[n, f, y, x] = W[f, ..] * pad[.., y+ry, x+rx]
    conv = GRAPHS["conv2d"].op
    n, f, y, x = (iv.var for iv in conv.axis)
    assert _streamed_operand_axes(conv) == {n, y, x}  # output channels reuse the input row
    bmm = GRAPHS["batch_matmul"].op                  # B[b, k, j] streams; A's rows reuse it
    b, i, j = (iv.var for iv in bmm.axis)
    assert _streamed_operand_axes(bmm) == {b, j}
    # conv 16 -> 16 channels over 56-pixel rows: the default tile spends its accumulators
    # on output channels (fr), one vector load per tile row (mr = 1 when the row is long)
    D = te.placeholder((1, 3, 5, 56), name="D")
    W = te.placeholder((16, 3, 3, 3), name="W")
    out = ops.conv2d_nchw(D, W, stride=1, padding=1)
    space = ConfigSpace()
    auto_schedule(space, out)
    d = space.default().values
    lanes = vector_lanes()
    vec_regs = -(-d["T_conv2d_nchw.nr"] // lanes)
    assert d["T_conv2d_nchw.fr"] * vec_regs >= d["T_conv2d_nchw.mr"] * vec_regs
    assert d["T_conv2d_nchw.fr"] > 1
    args = default_args(out)
    inputs = _inputs(args, np.random.default_rng(1))
    want = _unscheduled(out, args, inputs)
    for nr in space.knobs["T_conv2d_nchw.nr"].options:   # whole rows, halves, tails
        values = dict(d, **{"T_conv2d_nchw.nr": nr})
        s, a = auto_schedule(space.from_json_dict({"knobs": values}), out, args)
        got = _run(s, a, inputs)
        np.testing.assert_allclose(got[0], want[0], rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype", ["float64", "int32"])
def test_row_reduction_partials_in_other_dtypes_match_numpy(dtype):
    """The partial-result stages (one or four vectors, folded) of a row sum in a dtype
    with other lanes than float32 (float64: half as many, int32: integer adds), at the
    reader's row loop and at root: every combination gives numpy's answer."""
    X = te.placeholder((5, 301), name="X", dtype=dtype)
    k = te.reduce_axis((0, 301), name="k")
    S = te.compute((5,), lambda i: te.sum(X[i, k], axis=k), name="S")
    out = te.compute((5, 301), lambda i, j: X[i, j] - S[i], name="D")
    space = ConfigSpace()
    auto_schedule(space, out)
    lanes = vector_lanes(dtype)
    assert list(space.knobs["S.lanes"].options) == [4 * lanes, lanes, 1]
    args = default_args(out)
    inputs = _inputs(args, np.random.default_rng(5))
    want = inputs[0] - inputs[0].sum(axis=1, keepdims=True)
    for width in (4 * lanes, lanes, 1):
        for at in ("reader", "root"):
            values = dict(space.default().values, **{"S.lanes": width, "S.at": at})
            s, a = auto_schedule(space.from_json_dict({"knobs": values}), out)
            assert (f"allocate S.rf_1[{dtype} * {lanes}]" in str(te.lower(s, a))) == \
                (width == 4 * lanes)
            got, = _run(s, a, inputs)
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-9,
                                       err_msg=f"{dtype} lanes {width} at {at}")


def _row_sum(shape, dtype="float32", keepdims=False):
    X = te.placeholder(shape, name="X", dtype=dtype)
    return ops.sum(X, axis=len(shape) - 1, keepdims=keepdims)


def test_row_sum_output_defaults_to_partial_sums_along_its_rows():
    """A reduction output that reads its input rows contiguously is summed as vector
    partial results at its row loop (no packed copy of the input, no tile across rows),
    four vectors of them, prefetching the next row; `.rows` offers reading rows side by
    side. A matmul, whose B is not read along k, keeps its register tile and gets no such
    knobs."""
    out = _row_sum((64, 4096))
    space = ConfigSpace()
    auto_schedule(space, out)
    assert not any(k.endswith((".nr", ".mr", ".cache", ".pack", ".rfactor"))
                   for k in space.knobs), space.knobs
    assert list(space.knobs["T_sum.rows"].options) == [1, 16, 8, 4]
    assert list(space.knobs["T_sum.prefetch"].options) == ["ahead", "off"]
    s, args = auto_schedule(space.default(), out)
    ir = str(te.lower(s, args))
    lanes = vector_lanes()
    assert "X_pack" not in ir and f"allocate T_sum.rf[float32 * {4 * lanes}]" in ir, ir
    line = 64 // 4   # one prefetch per 64-byte cache line, whatever the vector width
    assert f"prefetch(&X[(((i0*4096) + (k.outer*{4 * lanes})) + (k.outer.pf1*{line})) " \
        "+ 4096])" in ir, ir
    side = dict(space.default().values, **{"T_sum.rows": 16, "T_sum.kc": 1})
    s, args = auto_schedule(space.from_json_dict({"knobs": side}), out)
    ir = str(te.lower(s, args))
    assert f"allocate T_sum.rf[float32 * {16 * lanes}]" in ir, ir
    assert ir.count("T_sum.rf[ramp(") >= 2 * 16 + 1, ir   # 16 rows per step, unrolled
    matmul = ConfigSpace()
    auto_schedule(matmul, GRAPHS["matmul"])
    assert "T_matmul.rows" not in matmul.knobs and \
        list(matmul.knobs["T_matmul.rfactor"].options) == [False]


@pytest.mark.parametrize("shape, keepdims", [((37, 1003), False), ((3, 5, 301), False),
                                             ((1, 64), False), ((17, 33), False),
                                             ((37, 101), True)])
def test_row_sum_output_every_rows_and_width_option_matches_numpy(shape, keepdims):
    """Every `.rows` x `.kc` option, and the other parallel and prefetch choices, on rows
    that no block divides and lengths that no vector width divides; a 3-d input sums its
    last axis with the outer axes fused into the parallel loop; with keepdims, the rows
    read side by side are the rows, not the kept axis of extent 1."""
    out = _row_sum(shape, keepdims=keepdims)
    space = ConfigSpace()
    auto_schedule(space, out)
    args = default_args(out)
    x, = _inputs(args, np.random.default_rng(7))
    want = x.sum(axis=-1, keepdims=keepdims)
    if keepdims:
        assert list(space.knobs["T_sum.rows"].options) == [1, 16, 8, 4]
    base = space.default().values
    variants = [{"T_sum.rows": r, "T_sum.kc": kc} for r in space.knobs["T_sum.rows"].options
                for kc in space.knobs["T_sum.kc"].options]
    variants += [{"T_sum.rows": r, "T_sum.parallel": p, "T_sum.prefetch": "off"}
                 for r in space.knobs["T_sum.rows"].options[-1:] for p in ("outer", "none")]
    for v in variants:
        s, a = auto_schedule(space.from_json_dict({"knobs": dict(base, **v)}), out)
        got, = _run(s, a, [x])
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4, err_msg=str(v))
        if x.size < 2000:   # every index, prefetched ones included, checked
            got2 = np.full(want.shape, np.nan, np.float32)
            run_func(te.lower(s, a), [x, got2])
            np.testing.assert_allclose(got2, want, rtol=1e-4, atol=1e-4, err_msg=str(v))


def test_row_sum_output_of_a_computed_stage_places_and_fuses_it_at_the_row():
    """sum(T[i, k]) with T = X * 2 + 1: T inlined, computed at the sum's row loop (sharing
    the loop of its partial sums by default there, compute_with), or at root; every
    placement gives numpy's answer, and the sum prefetches nothing of T (not an input)."""
    X = te.placeholder((23, 301), name="X")
    T = te.compute((23, 301), lambda i, j: X[i, j] * 2.0 + 1.0, name="T")
    k = te.reduce_axis((0, 301), name="k")
    out = te.compute((23,), lambda i: te.sum(T[i, k], axis=k), name="S")
    space = ConfigSpace()
    auto_schedule(space, out)
    assert list(space.knobs["T.sum_with"].options) == ["fused", "own"]
    assert list(space.knobs["S.prefetch"].options) == ["off"]
    args = default_args(out)
    x, = _inputs(args, np.random.default_rng(8))
    want = (x * 2 + 1).sum(axis=1)
    irs = {}
    for place in ("inline", "reader", "root"):
        for sum_with in ("fused", "own"):
            for rows in (1, 8):
                change = {"T.place": place, "T.sum_with": sum_with, "S.rows": rows}
                values = dict(space.default().values, **change)
                s, a = auto_schedule(space.from_json_dict({"knobs": values}), out)
                irs[place, sum_with, rows] = str(te.lower(s, a))
                fused = any(isinstance(step, S.ComputeWith) for step in s.steps)
                assert fused == (place == "reader" and sum_with == "fused" and rows == 1)
                got, = _run(s, a, [x])
                np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3, err_msg=str(change))
    assert irs["reader", "own", 1] != irs["root", "own", 1]


def test_a_dense_layer_over_few_rows_builds_with_the_default_config():
    # matmul(transpose_b) + bias over 3 rows: the sum's rows are reordered, so there is no
    # loop for the output's row loop to interleave with (the default config raised a
    # LoweringError from Stage.pipeline); it falls back to the plain store policy
    A = te.placeholder((3, 2048), name="A")
    B = te.placeholder((1000, 2048), name="B")
    bias = te.placeholder((1000,), name="bias")
    M = ops.matmul(A, B, transpose_b=True)
    C = te.compute(M.shape, lambda i, j: M[i, j] + bias[j], name="C")
    s, args = te.autotune.auto_schedule(C)
    assert [a.name for a in args] == ["A", "B", "bias", "C"]
    inputs = _inputs(args, np.random.default_rng(7))
    a, b, c = inputs
    (out,) = _run(s, args, inputs)
    np.testing.assert_allclose(out, a @ b.T + c, rtol=1e-4, atol=1e-3)


def _dense_bias_relu(batch: int):
    A = te.placeholder((batch, 333), name="A")
    W = te.placeholder((517, 333), name="W")
    B = te.placeholder((517,), name="B")
    k = te.reduce_axis((0, 333), name="k")
    C = te.compute((batch, 517), lambda i, j: te.sum(A[i, k] * W[j, k], axis=k), name="dense")
    out = te.compute((batch, 517), lambda i, j: te.max(C[i, j] + B[j], 0.0), name="bias_relu",
                     tag="broadcast")
    return [A, W, B, out]


@pytest.mark.parametrize("batch, parallel_loop", [(1, "(i.j.fused, 0, 517)"),
                                                  (3, "(i.j.fused, 0, 1551)"), (9, "(i")])
def test_a_dense_layer_on_a_few_rows_runs_its_dot_products_in_parallel(batch, parallel_loop):
    """A dense layer + bias on a batch of 1 (a classifier's head: 8-400 MB of weights read
    once) reads the dot products in one row of the bias: at that row loop they ran on one
    thread. Below MIN_READER_ROWS rows the reduction goes to root, its own loop over the
    dot products parallel; from there on the reader's rows are shared out."""
    args = _dense_bias_relu(batch)
    space = ConfigSpace()
    auto_schedule(space, args[-1], args)
    assert space.default()["dense.at"].val == "reader"
    s, sargs = auto_schedule(space.default(), args[-1], args)
    lowered = str(te.lower(s, sargs))
    first = next(line for line in lowered.splitlines() if "parallel for (" in line)
    assert first.strip().startswith("parallel for " + parallel_loop), lowered
    rng = np.random.default_rng(batch)
    a, w, b = (rand_array(t.shape, rng=rng) for t in args[:3])
    got = np.empty((batch, 517), np.float32)
    te.build(s, sargs)(a, w, b, got)
    np.testing.assert_allclose(got, np.maximum(a @ w.T + b, 0.0), rtol=1e-4, atol=1e-4)
