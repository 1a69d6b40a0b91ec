"""te.compute.ops transform family against numpy: transpose, reshape, pad, concatenate,
slice_axis.

Random non-zero inputs, odd sizes, size-1 dims, float32 and int32; padding on every side in
every mode (constant, edge, reflect, wrap; negative pads crop), negative steps; each op
under the default schedule and under split/tile/fuse/vectorize schedules, pad both inlined
and materialized. Imports te, te.compute.ops, numpy, helpers.
"""
import numpy as np
import pytest

import te
from te.compute import ops
from helpers import check_schedule


def check(s, ins, outs, ref):
    exact = not outs[0].dtype.startswith("float")
    check_schedule(s, ins, outs, ref, rtol=0 if exact else 1e-4, atol=0 if exact else 1e-5)


def sched_default(s, t):
    pass


def sched_split_vectorize_tail(s, t):
    _, ji = s[t].split(s[t].op.axis[-1], 4)
    s[t].vectorize(ji)


def sched_fuse_parallel(s, t):
    fo, _ = s[t].split(s[t].fuse(*s[t].op.axis), 5)
    s[t].parallel(fo)


def sched_tile_reorder_unroll(s, t):
    io, jo, ii, ji = s[t].tile(s[t].op.axis[-2], s[t].op.axis[-1], 3, 2)
    s[t].reorder(jo, io, ii, ji)
    s[t].unroll(ji)


SCHEDULES = [sched_default, sched_split_vectorize_tail, sched_fuse_parallel,
             sched_tile_reorder_unroll]
SCHED_IDS = [f.__name__[6:] for f in SCHEDULES]


@pytest.mark.parametrize("shape, axes", [
    ((7, 13), None),
    ((7, 13), (1, 0)),
    ((2, 7, 5), (2, 0, 1)),
    ((3, 1, 5), (1, 2, 0)),
    ((2, 3, 5, 7), (0, 2, 3, -3)),
], ids=str)
def test_transpose(shape, axes):
    A = te.placeholder(shape, name="A")
    B = ops.transpose(A, axes)
    check(te.create_schedule(B.op), [A], [B], lambda a: np.transpose(a, axes))


@pytest.mark.parametrize("sched", SCHEDULES[1:], ids=SCHED_IDS[1:])
def test_transpose_scheduled_int(sched):
    A = te.placeholder((7, 5, 13), "int32", name="A")
    B = ops.transpose(A, (2, 0, 1))
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: np.transpose(a, (2, 0, 1)))


@pytest.mark.parametrize("shape, newshape", [
    ((7, 13), (13, 7)),
    ((7, 13), (91, 1)),
    ((2, 3, 5), (-1, 5, 2)),
    ((1, 31), (31, 1)),
    ((6, 10), (4, 15)),
    ((2, 3, 5, 7), (15, -1)),
], ids=str)
def test_reshape(shape, newshape):
    A = te.placeholder(shape, name="A")
    B = ops.reshape(A, newshape)
    check(te.create_schedule(B.op), [A], [B], lambda a: a.reshape(newshape))


@pytest.mark.parametrize("sched", [sched_split_vectorize_tail, sched_fuse_parallel],
                         ids=["split_vectorize_tail", "fuse_parallel"])
def test_reshape_scheduled(sched):
    A = te.placeholder((6, 10), "int32", name="A")
    B = ops.reshape(A, (4, 15))
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: a.reshape(4, 15))


PADS = [
    ((1, 2), (3, 0)),
    ((0, 0), (0, 5)),
    ((2, 1, 0), (0, 1, 3)),
    ((1, 1, 1, 1), (1, 1, 1, 1)),
]


@pytest.mark.parametrize("before, after", PADS, ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int32"])
def test_pad(before, after, dtype):
    shape = (7, 13, 1, 5)[:len(before)]
    A = te.placeholder(shape, dtype, name="A")
    value = 3 if dtype == "int32" else -1.5
    B = ops.pad(A, before, after, value)
    check(te.create_schedule(B.op), [A], [B],
          lambda a: np.pad(a, list(zip(before, after)), constant_values=value))


def test_pad_after_defaults_to_before():
    A = te.placeholder((5, 1), name="A")
    B = ops.pad(A, (2, 1))
    check(te.create_schedule(B.op), [A], [B], lambda a: np.pad(a, ((2, 2), (1, 1))))


def numpy_pad(a, before, after, mode, value=0.0):
    """numpy.pad of `a` cropped first by the negative pads (ONNX Pad's order)."""
    crop = tuple(slice(max(0, -b), n - max(0, -e)) for n, b, e in zip(a.shape, before, after))
    widths = [(max(0, b), max(0, e)) for b, e in zip(before, after)]
    extra = {"constant_values": value} if mode == "constant" else {}
    return np.pad(a[crop], widths, mode, **extra)


# (before, after) on a (7, 13) input; reflect's pads stay below the (cropped) axis sizes
MODE_PADS = {
    "both-sides": ((2, 3), (4, 1)),
    "to-the-limit": ((6, 0), (0, 12)),
    "crop-and-pad": ((-2, 4), (3, -5)),
    "crop-only": ((-1, 0), (0, -3)),
}
MODES = ["constant", "edge", "reflect", "wrap"]


@pytest.mark.parametrize("pads", MODE_PADS, ids=str)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("sched", [sched_default, sched_fuse_parallel], ids=["default", "fuse"])
def test_pad_modes_match_numpy(mode, pads, sched):
    before, after = MODE_PADS[pads]
    A = te.placeholder((7, 13), name="A")
    B = ops.pad(A, before, after, -1.5, mode=mode)
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: numpy_pad(a, before, after, mode, -1.5))


@pytest.mark.parametrize("mode", ["edge", "wrap"])
def test_edge_and_wrap_pad_past_the_axis_size(mode):
    """Edge repeats the end element and wrap goes round again as often as the pads ask
    (numpy's answer); int32, a size-1 axis, a 3-d input, split and vectorized."""
    before, after = (9, 4, 0), (2, 0, 15)
    A = te.placeholder((3, 1, 5), "int32", name="A")
    B = ops.pad(A, before, after, mode=mode)
    s = te.create_schedule(B.op)
    sched_split_vectorize_tail(s, B)
    check(s, [A], [B], lambda a: numpy_pad(a, before, after, mode))


def test_pad_modes_other_than_constant_have_no_select():
    """Clamp, reflection and modulo are index arithmetic: no condition in the body, and
    no 'pad' tag (the conv schedule's mark for its zero padding)."""
    A = te.placeholder((7, 13), name="A")
    for mode in MODES[1:]:
        B = ops.pad(A, (1, 2), (3, 0), mode=mode)
        assert B.op.tag == "injective" and "Select(" not in str(B.op.body[0])
    assert ops.pad(A, (1, 2)).op.tag == "injective,pad"


def _pad_then_scale(mode="constant"):
    A = te.placeholder((7, 13), name="A")
    P = ops.pad(A, (2, 1), (1, 3), 0.5, mode=mode)
    C = ops.multiply(P, 2.0)
    return A, P, C


def place_inline(s, P, C):
    s[P].compute_inline()
    _, ji = s[C].split(C.op.axis[1], 4)
    s[C].vectorize(ji)


def place_root(s, P, C):
    s[P].compute_root()
    s[C].parallel(C.op.axis[0])


def place_at_row(s, P, C):
    io, _ = s[C].split(C.op.axis[0], 3)
    s[P].compute_at(s[C], io)


def place_at_inner(s, P, C):
    io, jo, _, _ = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 5)
    s[P].compute_at(s[C], jo)
    _, pj = s[P].split(P.op.axis[1], 2)
    s[P].vectorize(pj)


@pytest.mark.parametrize("place", [place_inline, place_root, place_at_row, place_at_inner],
                         ids=lambda f: f.__name__[6:])
@pytest.mark.parametrize("mode", MODES)
def test_pad_stage_placement(place, mode):
    A, P, C = _pad_then_scale(mode)
    s = te.create_schedule(C.op)
    place(s, P, C)
    check(s, [A], [C], lambda a: numpy_pad(a, (2, 1), (1, 3), mode, 0.5) * 2)


@pytest.mark.parametrize("axis, sizes", [
    (0, (7, 1, 5)),
    (1, (13, 4, 1)),
    (-1, (3, 3, 3)),
], ids=str)
@pytest.mark.parametrize("sched", SCHEDULES, ids=SCHED_IDS)
def test_concatenate(axis, sizes, sched):
    shapes = []
    for n in sizes:
        shape = [5, 6]
        shape[axis] = n
        shapes.append(tuple(shape))
    ins = [te.placeholder(sh, name=f"A{k}") for k, sh in enumerate(shapes)]
    C = ops.concatenate(ins, axis)
    s = te.create_schedule(C.op)
    sched(s, C)
    check(s, ins, [C], lambda *a: np.concatenate(a, axis))


def test_concatenate_int_single():
    A = te.placeholder((7, 3), "int32", name="A")
    C = ops.concatenate([A], 1)
    check(te.create_schedule(C.op), [A], [C], lambda a: a)


@pytest.mark.parametrize("axis, begin, end, step", [
    (1, 1, 12, 3),
    (1, None, None, -2),
    (0, -3, None, 1),
    (0, 2, 100, 2),
    (1, 11, 2, -4),
    (0, 6, 7, 1),
], ids=str)
def test_slice_axis(axis, begin, end, step):
    A = te.placeholder((7, 13), name="A")
    B = ops.slice_axis(A, axis, begin, end, step)
    index = [slice(None)] * 2
    index[axis] = slice(begin, end, step)
    check(te.create_schedule(B.op), [A], [B], lambda a: a[tuple(index)])


@pytest.mark.parametrize("sched", SCHEDULES[1:], ids=SCHED_IDS[1:])
def test_slice_axis_scheduled_int(sched):
    A = te.placeholder((7, 31), "int32", name="A")
    B = ops.slice_axis(A, 1, 1, None, 2)
    s = te.create_schedule(B.op)
    sched(s, B)
    check(s, [A], [B], lambda a: a[:, 1::2])


def test_transform_chain_inlined():
    """slice -> transpose -> pad -> reshape, every stage but the last inlined."""
    A = te.placeholder((7, 13), name="A")
    S = ops.slice_axis(A, 1, 1, None, 2)
    T = ops.transpose(S)
    P = ops.pad(T, (1, 0), (0, 2))
    R = ops.reshape(P, (-1,))
    s = te.create_schedule(R.op)
    for t in (S, T, P):
        s[t].compute_inline()
    _, xi = s[R].split(R.op.axis[0], 8)
    s[R].vectorize(xi)
    check(s, [A], [R], lambda a: np.pad(a[:, 1::2].T, ((1, 0), (0, 2))).reshape(-1))


@pytest.mark.parametrize("axis", [0, 1, -1])
def test_gather_elements_is_take_along_axis(axis):
    rng = np.random.default_rng(3)
    A = te.placeholder((5, 7, 3), "float32", name="A")
    idx_shape = [5, 7, 3]
    idx_shape[axis] = 4
    I = te.placeholder(tuple(idx_shape), "int64", name="I")
    B = ops.gather_elements(A, I, axis)
    a = rng.standard_normal((5, 7, 3)).astype("float32")
    size = a.shape[axis]
    i = rng.integers(-size, size, idx_shape).astype("int64")  # negatives count from the end
    f = te.build(te.create_schedule(B.op), [A, I, B], target="llvm", name="gather_elems")
    out = np.empty(idx_shape, "float32")
    f(a, i, out)
    np.testing.assert_array_equal(out, np.take_along_axis(a, np.where(i < 0, i + size, i),
                                                          axis))
