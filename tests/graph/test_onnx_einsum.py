"""ONNX Einsum (graph.frontend.onnx_einsum) against numpy.einsum: one-node models on seeded
random data (odd sizes, never zero) compiled at O0 and O1, and the refusals of bad
equations."""
import numpy as np
import pytest

import graph

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

ELEM = {"float32": TensorProto.FLOAT, "float16": TensorProto.FLOAT16,
        "int32": TensorProto.INT32, "int64": TensorProto.INT64}


def model(equation: str, arrays, opset: int = 13):
    names = [f"x{k}" for k in range(len(arrays))]
    elem = ELEM[arrays[0].dtype.name]
    node = helper.make_node("Einsum", names, ["y"], equation=equation)
    g = helper.make_graph([node], "einsum",
                          [helper.make_tensor_value_info(n, elem, a.shape)
                           for n, a in zip(names, arrays)],
                          [helper.make_tensor_value_info("y", elem, None)])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    m.ir_version = 8
    return m, dict(zip(names, arrays))


def data(shapes, dtype="float32", seed=0):
    rng = np.random.default_rng(seed)
    if dtype.startswith("int"):
        return [np.where(x == 0, 3, x).astype(dtype) for x in
                (rng.integers(-9, 10, s) for s in shapes)]
    xs = [rng.standard_normal(s) for s in shapes]
    return [np.where(np.abs(x) < 1e-3, 0.5, x).astype(dtype) for x in xs]


CASES = [
    ("ij,jk->ik", [(3, 5), (5, 7)]),                      # matmul
    ("bij,bjk->bik", [(3, 2, 5), (3, 5, 7)]),             # batch matmul
    ("bn,anm,bm->ba", [(3, 5), (2, 5, 7), (3, 7)]),       # bilinear
    ("ij->ji", [(3, 5)]),                                 # transpose
    ("ij->i", [(3, 5)]),                                  # sum
    ("ijk->", [(3, 5, 2)]),                               # sum of all
    ("i,i", [(7,)]*2),                                    # inner product
    ("i,j->ij", [(5,), (3,)]),                            # outer product
    ("ii", [(5, 5)]),                                     # trace
    ("ii->i", [(5, 5)]),                                  # diagonal
    ("...ii->...i", [(3, 5, 5)]),                         # batch diagonal
    ("iij->j", [(3, 3, 7)]),
    ("iii->i", [(3, 3, 3)]),
    ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 6)]),    # ellipsis, broadcast
    ("a...,a...->...", [(2, 3), (2, 1, 3)]),
    ("...ij->...", [(2, 3, 5)]),
    ("ij,jk", [(3, 5), (5, 7)]),                          # implicit
    ("ba", [(3, 5)]),                                     # implicit: a transpose
    ("...ij,...jk", [(3, 2, 5), (5, 7)]),                 # implicit, ellipsis first
    ("Ab,bA", [(3, 5), (5, 3)]),                          # upper case, implicit trace
    ("->", [()]),                                         # scalar
    (",ij->ij", [(), (3, 5)]),                            # a scalar operand
    ("ij,jk,kl->il", [(3, 5), (5, 7), (7, 2)]),           # three operands
    ("ij,ij,ij->ij", [(3, 5)]*3),                         # elementwise, no sum
    ("ij,jk->ik", [(3, 1), (5, 7)]),                      # size-1 label broadcasts
    ("bi,bi->bi", [(1, 5), (3, 5)]),
    ("bhqd,bhkd->bhqk", [(2, 3, 5, 7), (2, 3, 4, 7)]),    # attention scores
    ("bhqk,bhkd->bqhd", [(2, 3, 5, 4), (2, 3, 4, 7)]),    # attention output
    (" i j , j k -> i k ", [(3, 5), (5, 7)]),             # spaces
]


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("equation,shapes", CASES, ids=[c[0].replace(" ", "_") for c in CASES])
def test_einsum_matches_numpy(equation, shapes, level):
    xs = data(shapes)
    m, feeds = model(equation, xs)
    (out,) = graph.compile(graph.from_onnx(m), level=level).run(feeds)
    ref = np.einsum(equation, *xs)
    assert out.shape == ref.shape and out.dtype == ref.dtype
    scale = max(1.0, float(np.abs(ref).max(initial=0.0)))
    np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-5 * scale)


@pytest.mark.parametrize("level", ["O0", "O1"])
@pytest.mark.parametrize("dtype", ["int32", "int64"])
@pytest.mark.parametrize("equation,shapes", [("ij,jk->ik", [(3, 5), (5, 7)]),
                                             ("ii", [(5, 5)]),
                                             ("bi,bi->b", [(3, 5), (3, 5)])])
def test_einsum_integers_exact(equation, shapes, dtype, level):
    xs = data(shapes, dtype)
    m, feeds = model(equation, xs)
    (out,) = graph.compile(graph.from_onnx(m), level=level).run(feeds)
    ref = np.einsum(equation, *xs)
    assert out.dtype == ref.dtype and out.shape == ref.shape and (out == ref).all()


def test_einsum_float16_transpose_imports_but_sum_is_refused():
    m, feeds = model("ij->ji", data([(3, 5)], "float16"))
    (out,) = graph.compile(graph.from_onnx(m), level="O0").run(feeds)
    assert (out == feeds["x0"].T).all()
    m, _ = model("ij->i", data([(3, 5)], "float16"))
    with pytest.raises(graph.UnsupportedError, match="float16 inputs are not supported"):
        graph.from_onnx(m)


@pytest.mark.parametrize("equation,shapes,message", [
    ("ij,jk->ik", [(3, 5)], r"has 2 operand term\(s\) but the node has 1 input"),
    ("ijk->i", [(3, 5)], r"operand 0 'ijk' has 3 labels but the operand has rank 2"),
    ("ij->k", [(3, 5)], r"output label 'k' is repeated or in no operand"),
    ("ij,jk->ik", [(3, 5), (4, 7)], r"label 'j' has sizes 5 and 4, which do not broadcast"),
    ("ii->i", [(3, 5)], r"label 'i' of operand 0 has sizes 3 and 5"),
    ("...ij->ij", [(2, 3, 5)], r"the operands have '...' dims but the output has no '...'"),
    ("i1->i", [(3, 5)], r"operand 0 'i1' may hold letters and one '...' only"),
])
def test_einsum_bad_equations_are_refused(equation, shapes, message):
    m, _ = model(equation, data(shapes))
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(m)
