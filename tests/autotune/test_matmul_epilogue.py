"""The automatic space's matmul with an elementwise epilogue (bias, GELU, a residual add):
the matmul is computed into the register tile that the output stores, with the epilogue
inlined into that store (epilogue.py); a matmul read any other way keeps its own register
tile at root, packed like an output. Checked against numpy on odd sizes, every knob's
options, and the structure of the schedule."""
from __future__ import annotations

import math

import numpy as np
import pytest

import te
from te.autotune.auto_space import auto_schedule, default_args
from te.autotune.epilogue import is_contraction, matmul_epilogue
from te.autotune.space import ConfigSpace
from te.autotune.stages import consumers
from te.compute import ops
from te.compute.ops.linalg import matmul_nd
from te.compute.tensor import ComputeOp, PlaceholderOp
from te.schedule.schedule import topo_order

ERF = np.vectorize(math.erf)
RNG = np.random.default_rng(11)


def _dense(m, k, n, epilogue, batch=None, transpose_b=False):
    """(output, numpy function of the inputs): matmul_nd of a [1, m, k] input by a [k, n]
    weight (as graph.from_onnx builds a MatMul), or a batched matmul (B transposed or not),
    followed by `epilogue`: "", "bias", "gelu" (bias, then GELU in erf form), "residual"
    (bias, then a residual add), "scale_mask" (divide by 8, add a broadcast row mask)."""
    if batch:
        A = te.placeholder((batch, m, k), name="A")
        B = te.placeholder((batch, n, k) if transpose_b else (batch, k, n), name="B")
        C = ops.batch_matmul(A, B, transpose_b=transpose_b)
    else:
        A, B = te.placeholder((1, m, k), name="A"), te.placeholder((k, n), name="B")
        C = matmul_nd(A, B)
    shape = tuple(int(d.value) for d in C.shape)

    def ref(a, b, *rest):
        return a @ (np.swapaxes(b, -1, -2) if transpose_b else b)
    out, f = C, ref
    if epilogue in ("bias", "gelu", "residual"):
        bias = te.placeholder((n,), name="bias")
        out = te.compute(shape, lambda *i: C(*i) + bias[i[-1]], name="biased")

        def f(a, b, bias_, *rest):
            return ref(a, b) + bias_
    if epilogue == "gelu":
        y = out
        out = te.compute(shape, lambda *i: y(*i) * (te.erf(y(*i) / np.float32(math.sqrt(2)))
                                                    + 1.0) * 0.5, name="gelu")

        def f(a, b, bias_):
            v = ref(a, b) + bias_
            return v * (ERF(v / math.sqrt(2)) + 1) * 0.5
    if epilogue == "residual":
        R = te.placeholder(shape, name="R")
        y = out
        out = te.compute(shape, lambda *i: y(*i) + R(*i), name="res")

        def f(a, b, bias_, r):
            return ref(a, b) + bias_ + r
    if epilogue == "scale_mask":
        mask = te.placeholder((1, 1, n), name="mask")
        out = te.compute(shape, lambda b_, i, j: C[b_, i, j] / np.float32(8) + mask[0, 0, j],
                         name="masked")

        def f(a, b, mask_):
            return ref(a, b) / 8 + mask_
    return out, f


def _check(out, f, cfg=None):
    space = ConfigSpace()
    auto_schedule(space, out)
    s, args = auto_schedule(cfg if cfg is not None else space.default(), out)
    inputs = [RNG.standard_normal([int(d.value) for d in a.shape]).astype(np.float32)
              for a in args if isinstance(a.op, PlaceholderOp)]
    got = np.zeros([int(d.value) for d in out.shape], np.float32)
    te.build(s, args)(*inputs, got)
    np.testing.assert_allclose(got, f(*inputs), rtol=1e-4, atol=1e-4)
    return s, args


CASES = [(37, 29, 45, None, False), (5, 70, 19, None, False), (1, 33, 17, None, False),
         (13, 33, 50, 3, False), (13, 19, 50, 3, True)]


@pytest.mark.parametrize("epilogue", ["", "bias", "gelu", "residual"])
@pytest.mark.parametrize("m, k, n, batch, transpose_b", CASES)
def test_matmul_with_epilogue_matches_numpy(m, k, n, batch, transpose_b, epilogue):
    out, f = _dense(m, k, n, epilogue, batch, transpose_b)
    s, args = _check(out, f)
    if epilogue:
        # the reduction computed at the output's tile loop (the output as rebuilt to read
        # the packed matmul, the last argument): one stage, or where the default takes the
        # rfactor knob (a transposed B, on AVX2 here) its partial sums '.rf' and their
        # total, both there; the epilogue inlined
        out_op = args[-1].op
        mms = [st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.is_reduction]
        assert len(mms) == 1 or sorted(st.op.name.endswith(".rf") for st in mms) == \
            [False, True], [st.op.name for st in mms]
        assert all(mm.attach_type == "scope" and mm.attach_stage is s[out_op] for mm in mms)
        assert all(st.attach_type == "inline" for st in s.stages
                   if isinstance(st.op, ComputeOp) and st not in mms and st is not s[out_op]
                   and not st.op.name.endswith("_pack"))


def test_attention_scores_with_scale_and_mask():
    out, f = _dense(21, 16, 37, "scale_mask", batch=3)
    _check(out, f)


def test_every_knob_option_of_a_fused_dense_layer_is_correct():
    out, f = _dense(19, 23, 41, "gelu")
    space = ConfigSpace()
    auto_schedule(space, out)
    base = space.default().values
    for name, knob in space.knobs.items():
        rest = knob.options[1:]
        for opt in rest[:1] + rest[-1:] if len(rest) > 1 else rest:
            values = dict(base, **{name: list(opt) if isinstance(opt, tuple) else opt})
            _check(out, f, space.from_json_dict({"knobs": values}))


def test_knob_names_of_a_fused_dense_layer():
    """Tuning logs are keyed by these: the matmul's register-tile knobs, no knob of the
    epilogue stages (inlined) and a `.cache` with one option (the tile is the cache)."""
    out, _ = _dense(16, 24, 40, "residual")
    space = ConfigSpace()
    auto_schedule(space, out)
    tile = ["nr", "mr", "mc", "fr", "kc", "unroll_r", "order", "parallel", "pack", "rfactor",
            "cache"]
    assert list(space.knobs) == [f"T_matmul_nd.{k}" for k in tile]
    assert list(space.knobs["T_matmul_nd.cache"].options) == [True]


def test_a_matmul_that_is_also_an_output_is_computed_once():
    A, B = te.placeholder((21, 30), name="A"), te.placeholder((30, 35), name="B")
    C = ops.matmul(A, B)
    R = te.compute(C.shape, lambda i, j: te.max(C[i, j], 0.0), name="R")
    s, args = auto_schedule(_default([C, R]), [C, R])
    reductions = [st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.is_reduction
                  and st.attach_type != "inline"]
    assert len(reductions) == 1   # (the packed output's; R reads it, not a second matmul)
    a = RNG.standard_normal((21, 30)).astype(np.float32)
    b = RNG.standard_normal((30, 35)).astype(np.float32)
    c, r = np.zeros((21, 35), np.float32), np.zeros((21, 35), np.float32)
    te.build(s, args)(a, b, c, r)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(r, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)


def test_a_matmul_read_transposed_gets_its_own_tile_at_root():
    A, B = te.placeholder((21, 30), name="A"), te.placeholder((30, 35), name="B")
    C = ops.matmul(A, B)
    T = te.compute((35, 21), lambda j, i: C[i, j] * 2.0, name="T")
    assert matmul_epilogue(T.op, [T.op], consumers([T.op, C.op])) is None
    s, args = auto_schedule(_default(T), T)
    (mm,) = [st for st in s.stages if isinstance(st.op, ComputeOp) and st.op.is_reduction
             and st.attach_type != "inline"]
    # its local tile is computed in the matmul's own loops at root, which T reads after
    assert mm.attach_stage.op.name == "T_matmul" and mm.attach_stage.attach_type == "root"
    assert any(st.op.name.endswith("_pack") for st in s.stages)
    a = RNG.standard_normal((21, 30)).astype(np.float32)
    b = RNG.standard_normal((30, 35)).astype(np.float32)
    t = np.zeros((35, 21), np.float32)
    te.build(s, args)(a, b, t)
    np.testing.assert_allclose(t, (a @ b).T * 2, rtol=1e-4, atol=1e-4)


def test_contractions_are_told_from_other_reductions():
    X = te.placeholder((8, 301), name="X")
    assert not any(is_contraction(op) for op in topo_order([ops.softmax(X).op]))
    assert not any(is_contraction(op) for op in topo_order([ops.layer_norm(
        X, te.placeholder((301,), name="g"), te.placeholder((301,), name="b"), axis=-1).op]))
    A, B = te.placeholder((4, 9), name="A"), te.placeholder((9, 5), name="B")
    assert is_contraction(ops.matmul(A, B).op)
    # a dot product over long contiguous rows stays a row reduction (partial sums)
    L = te.placeholder((7, 512), name="L")
    assert not is_contraction(ops.matmul(L, te.placeholder((5, 512), name="M"),
                                         transpose_b=True).op)


def _default(outputs):
    space = ConfigSpace()
    auto_schedule(space, outputs)
    return space.default()


def test_default_args_keep_the_callers_order():
    out, _ = _dense(8, 16, 24, "residual")
    assert [a.name for a in default_args(out)] == ["A", "B", "bias", "R", "res"]
