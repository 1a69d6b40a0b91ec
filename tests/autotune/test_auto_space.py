"""The automatic space: every sampled config of many op kinds lowers and gives the answer of
the unscheduled build, on random non-zero inputs (schedule invariance)."""
from __future__ import annotations

import random

import numpy as np
import pytest

import te
from te.autotune.auto_space import auto_schedule, default_args
from te.autotune.space import ConfigSpace
from te.compute import ops
from te.compute.tensor import PlaceholderOp

N_CONFIGS = 5


def _inputs(args, rng):
    out = []
    for a in args:
        if isinstance(a.op, PlaceholderOp):
            shape = [int(d.value) for d in a.shape]
            sign = rng.choice([-1.0, 1.0], size=shape)
            out.append((sign * rng.uniform(0.5, 1.5, size=shape)).astype(a.dtype))
    return out


def _run(s, args, inputs):
    outs = [np.zeros([int(d.value) for d in a.shape], a.dtype) for a in args
            if not isinstance(a.op, PlaceholderOp)]
    te.build(s, args)(*inputs, *outs)
    return outs


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
    want = _run(te.create_schedule(out.op), args, inputs)
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


def test_space_is_static_and_replays_deterministically():
    out = GRAPHS["matmul"]
    space = ConfigSpace()
    auto_schedule(space, out)
    cfg = space.get(len(space) // 3)
    s1, a1 = auto_schedule(cfg, out)
    s2, a2 = auto_schedule(space.from_json_dict(cfg.to_json_dict()), out)
    assert s1.to_json() == s2.to_json()
    assert str(te.lower(s1, a1)) == str(te.lower(s2, a2))


def test_reduction_output_gets_tiling_knobs():
    space = ConfigSpace()
    auto_schedule(space, GRAPHS["matmul"])
    names = set(space.knobs)
    assert {"T_matmul.tile_i", "T_matmul.tile_j", "T_matmul.tile_k", "T_matmul.order",
            "T_matmul.vec", "T_matmul.unroll", "T_matmul.fuse_parallel",
            "T_matmul.cache"} <= names
    # non-dividing factors are allowed (19 is prime)
    assert any(v[2] not in (1, 19) for v in space.knobs["T_matmul.tile_i"].options)


def test_scalar_reduction_gets_rfactor_knob():
    space = ConfigSpace()
    auto_schedule(space, GRAPHS["sum_scalar"])
    rf = [k for k in space.knobs if k.endswith(".rfactor")]
    assert rf and len(space.knobs[rf[0]].options) == 2


def test_symbolic_shapes_are_rejected_with_a_plain_message():
    n = te.var("n")
    X = te.placeholder((n, 4), name="X")
    Y = te.compute((n, 4), lambda i, j: X[i, j] + 1.0, name="Y")
    with pytest.raises(te.ArgumentError, match="symbolic extent"):
        auto_schedule(ConfigSpace(), Y)
