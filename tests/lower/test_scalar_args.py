"""Scalars the caller passes: te.build(s, [A, bias, D]) with bias a te.var (TVM's extern
tutorial adds a bias this way), int and float, mixed with size variables, and the errors
for wrong values, wrong counts and misuse."""
import numpy as np
import pytest

import runtime
import te
from helpers import rand_array


def test_float_and_int_scalars_between_tensors():
    n = te.var("n")
    bias = te.var("bias", dtype="float32")
    scale = te.var("scale", dtype="int32")
    A = te.placeholder((n,), name="A")
    D = te.compute((n,), lambda i: A[i] * scale.astype("float32") + bias, name="D")
    s = te.create_schedule(D.op)
    io, ii = s[D].split(D.op.axis[0], factor=4)
    s[D].vectorize(ii)
    s[D].parallel(io)
    f = te.build(s, [A, bias, D, scale])
    for size in (1, 13):
        a = rand_array((size,))
        d = np.zeros(size, "float32")
        f(a, 10.0, d, 3)
        np.testing.assert_allclose(d, a * 3 + 10, rtol=1e-6)
    d = runtime.array(np.zeros(13, "float32"))
    f(runtime.array(a), np.float32(-1.5), d, np.int64(2))
    np.testing.assert_allclose(d.numpy(), a * 2 - 1.5, rtol=1e-6)
    assert [(x.name, x.position) for x in f.signature.scalars] == \
        [("n", None), ("bias", 1), ("scale", 3)]
    with pytest.raises(runtime.ArgumentError, match="argument 'bias': expected a float32 "
                                                    "number, got str"):
        f(a, "x", d, 3)
    with pytest.raises(runtime.ArgumentError, match="argument 'scale': expected a int32 "
                                                    "number, got float"):
        f(a, 1.0, d, 2.5)
    with pytest.raises(runtime.ArgumentError, match="argument 'scale': 4294967296 does not "
                                                    "fit int32"):
        f(a, 1.0, d, 2 ** 32)
    with pytest.raises(runtime.ArgumentError, match="expected 4 arguments \\(A, bias, D, "
                                                    "scale\\), got 3"):
        f(a, 1.0, d)


def test_scalar_argument_misuse():
    n = te.var("n")
    bias = te.var("bias", dtype="float32")
    A = te.placeholder((n,), name="A")
    D = te.compute((n,), lambda i: A[i] + bias, name="D")
    s = te.create_schedule(D.op)
    with pytest.raises(te.LoweringError, match="args\\[2\\] 'n' is a dimension of an argument "
                                               "tensor"):
        te.lower(s, [A, D, n, bias])
    with pytest.raises(te.LoweringError, match="args\\[3\\] 'bias' appears twice in args"):
        te.lower(s, [A, D, bias, bias])
    with pytest.raises(te.LoweringError, match="size variable\\(s\\) bias are used but"):
        te.lower(s, [A, D])
    with pytest.raises(te.BuildError, match="target 'cuda' takes tensors only in args; scalar "
                                            "argument\\(s\\) bias are supported for target "
                                            "'llvm'"):
        te.build(s, [A, D, bias], "cuda")
