"""te.compute.ops.scatter against numpy's sequential scatter: scatter_elements on every axis
and scatter_nd with rows of rank 0 to 2, under every reduction, with negative, duplicate,
out-of-range and wider-than-int32 indices, built bounds-checked (a dropped index must read
and write nothing outside a tensor); tensor_scatter linear and circular; every sampled
config of the automatic space against the unscheduled build; the argument errors.
Imports te, te.compute.ops, te.autotune.auto_space, numpy and helpers."""
import random

import numpy as np
import pytest

import te
from te.autotune.auto_space import auto_schedule
from te.autotune.space import ConfigSpace
from te.compute import ops
from helpers import build_reference, rand_array

RNG = np.random.default_rng(11)
REDUCTIONS = ["none", "add", "mul", "max", "min"]
COMBINE = {"none": lambda old, new: new, "add": np.add, "mul": np.multiply,
           "max": np.maximum, "min": np.minimum}


def _wrapped(target, shape):
    """The in-range position of a target tuple (negatives from the end), None when out of
    range: its update is dropped."""
    out = tuple(int(t) + n if t < 0 else int(t) for t, n in zip(target, shape))
    return out if all(0 <= t < n for t, n in zip(out, shape)) else None


def np_scatter_elements(data, indices, updates, axis, reduction):
    out = data.copy()
    for p in np.ndindex(indices.shape):
        target = list(p)
        target[axis] = indices[p]
        at = _wrapped(target, data.shape)
        if at is not None:
            out[at] = COMBINE[reduction](out[at], updates[p])
    return out


def np_scatter_nd(data, indices, updates, reduction):
    out = data.copy()
    q = indices.shape[-1]
    for p in np.ndindex(indices.shape[:-1]):
        at = _wrapped(indices[p], data.shape[:q])
        if at is not None:
            out[at] = COMBINE[reduction](out[at], updates[p])
    return out


def _indices(shape, extent, dtype="int64"):
    """Random indices in [-extent, extent), some out of range (extent + 2, -extent - 1) and
    one of 2**32 + 1 (int64), which must not wrap to 1."""
    i = RNG.integers(-extent, extent, shape).astype(dtype)
    flat = i.reshape(-1)
    flat[0] = extent + 2
    if flat.size > 2:
        flat[1] = -extent - 1
        flat[2] = 2**32 + 1 if dtype == "int64" else extent
    return i


def _check(out, args, inputs, want):
    got = np.full([int(d.value) for d in out.shape], 77, out.dtype)
    build_reference(te.create_schedule(out.op), args)(*inputs, got)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("axis", [0, 1, 2])
def test_scatter_elements_is_numpys_sequential_scatter(axis, reduction):
    dshape, ishape = (4, 5, 3), [3, 2, 3]
    ishape[axis] = 7
    D = te.placeholder(dshape, "float32", "D")
    I = te.placeholder(tuple(ishape), "int64", "I")
    U = te.placeholder(tuple(ishape), "float32", "U")
    out = ops.scatter_elements(D, I, U, axis, reduction)
    inputs = [rand_array(dshape, rng=RNG), _indices(ishape, dshape[axis]),
              rand_array(ishape, rng=RNG)]
    _check(out, [D, I, U, out], inputs, np_scatter_elements(*inputs, axis, reduction))


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("ishape", [(9, 1), (2, 3, 2), (3,)])
def test_scatter_nd_is_numpys_sequential_scatter(ishape, reduction):
    dshape = (4, 5, 3)
    q = ishape[-1]
    ushape = ishape[:-1] + dshape[q:]
    D = te.placeholder(dshape, "int32", "D")
    I = te.placeholder(ishape, "int32", "I")
    U = te.placeholder(ushape or (1,), "int32", "U")   # one element: te's 1-element tensor
    out = ops.scatter_nd(D, I, U, reduction)
    indices = np.stack([RNG.integers(-dshape[c], dshape[c], ishape[:-1]) for c in range(q)],
                       -1).astype("int32")
    if indices.ndim > 1:
        indices[0, 0] = 99    # that row is dropped
    inputs = [rand_array(dshape, "int32", RNG), indices, rand_array(ushape or (1,), "int32",
                                                                    RNG)]
    updates = inputs[2].reshape(ushape)
    _check(out, [D, I, U, out], inputs, np_scatter_nd(inputs[0], indices, updates, reduction))


@pytest.mark.parametrize("circular,writes", [(False, [0, 5, 6]), (True, [5, 6, 0])])
def test_tensor_scatter_writes_the_update_from_each_batchs_position(circular, writes):
    """A linear write past the axis' end (batch 2 from position 6) keeps only what fits."""
    P = te.placeholder((3, 2, 7), "float32", "P")
    U = te.placeholder((3, 2, 3), "float32", "U")
    W = te.placeholder((3,), "int64", "W")
    out = ops.tensor_scatter(P, U, W, axis=2, circular=circular)
    past, update = rand_array((3, 2, 7), rng=RNG), rand_array((3, 2, 3), rng=RNG)
    want = past.copy()
    for b, w in enumerate(writes):
        for s in range(3):
            t = (w + s) % 7 if circular else w + s
            if t < 7:
                want[b, :, t] = update[b, :, s]
    _check(out, [P, U, W, out], [past, update, np.array(writes, "int64")], want)


def _sampled(name, out, args, inputs, configs=3):
    """Every sampled config of the automatic space gives the unscheduled result."""
    want = np.zeros([int(d.value) for d in out.shape], out.dtype)
    build_reference(te.create_schedule(out.op), args)(*inputs, want)
    space = ConfigSpace()
    auto_schedule(space, out)
    picks = random.Random(name).sample(range(len(space)), min(configs, len(space)))
    for idx in [0] + picks:
        cfg = space.get(idx)
        try:
            s, a = auto_schedule(cfg, out, args)
        except te.ScheduleError:
            continue
        got = np.zeros_like(want)
        te.build(s, a)(*inputs, got)
        np.testing.assert_allclose(got, want, rtol=1e-5, err_msg=f"{name} config {cfg}")


@pytest.mark.parametrize("reduction", ["none", "add"])
def test_scatter_elements_under_the_automatic_space(reduction):
    D = te.placeholder((9, 7), "float32", "D")
    I = te.placeholder((6, 7), "int64", "I")
    U = te.placeholder((6, 7), "float32", "U")
    out = ops.scatter_elements(D, I, U, 0, reduction)
    inputs = [rand_array((9, 7), rng=RNG), _indices((6, 7), 9), rand_array((6, 7), rng=RNG)]
    _sampled(f"scatter_elements_{reduction}", out, [D, I, U, out], inputs)


@pytest.mark.parametrize("reduction", ["none", "max"])
def test_scatter_nd_under_the_automatic_space(reduction):
    D = te.placeholder((6, 5, 7), "float32", "D")
    I = te.placeholder((4, 3, 2), "int64", "I")
    U = te.placeholder((4, 3, 7), "float32", "U")
    out = ops.scatter_nd(D, I, U, reduction)
    indices = np.stack([RNG.integers(-n, n, (4, 3)) for n in (6, 5)], -1).astype("int64")
    inputs = [rand_array((6, 5, 7), rng=RNG), indices, rand_array((4, 3, 7), rng=RNG)]
    _sampled(f"scatter_nd_{reduction}", out, [D, I, U, out], inputs)


def _t(shape, dtype="float32", name="t"):
    return te.placeholder(shape, dtype, name)


@pytest.mark.parametrize("make,error,message", [
    (lambda: ops.scatter_elements(_t((3, 4)), _t((3, 4), "float32"), _t((3, 4))),
     te.DTypeError, r"scatter_elements: indices must have an integer dtype, got float32"),
    (lambda: ops.scatter_elements(_t((3, 4)), _t((3, 4), "int64"), _t((3, 4), "int32")),
     te.DTypeError, r"scatter_elements: updates must have data's dtype float32, got int32"),
    (lambda: ops.scatter_elements(_t((3, 4)), _t((3, 4), "int64"), _t((3, 4)),
                                  reduction="mean"),
     te.ShapeError, r"reduction must be one of \['none', 'add', 'mul', 'max', 'min'\], got "
                    r"'mean'"),
    (lambda: ops.scatter_elements(_t((3, 4), "bool"), _t((3, 4), "int64"), _t((3, 4), "bool"),
                                  reduction="add"),
     te.DTypeError, r"reduction 'add' needs numbers, got bool data"),
    (lambda: ops.scatter_elements(_t((3, 4)), _t((3, 5), "int64"), _t((3, 5))),
     te.ShapeError, r"scatter_elements: indices dim 1 must be at most data's 4, got 5"),
    (lambda: ops.scatter_nd(_t((3, 4)), _t((2, 3), "int64"), _t((2,))),
     te.ShapeError, r"indices' last dim must be a constant from 1 to data's rank 2, got "
                    r"shape \(2, 3\)"),
    (lambda: ops.scatter_nd(_t((3, 4)), _t((2, 1), "int64"), _t((2, 5))),
     te.ShapeError, r"scatter_nd: updates dim 1: expected 4, got 5"),
    (lambda: ops.tensor_scatter(_t((2, 4, 5)), _t((2, 4, 5)), axis=0),
     te.ShapeError, r"tensor_scatter: axis must not be 0 \(the batch axis\), got 0"),
    (lambda: ops.tensor_scatter(_t((2, 4, 5)), _t((2, 6, 5)), axis=1),
     te.ShapeError, r"update's axis length must be at most past's 4, got 6"),
])
def test_argument_errors_name_the_parameter(make, error, message):
    with pytest.raises(error, match=message):
        make()
