"""Kernels of at most graph.kernels.SMALL_KERNEL_WORK scalar steps compile at LLVM -O0
(compile time is nearly all their cost); larger ones at the default -O3; a target that
names its opt level keeps it; the numbers match numpy either way, at every level."""
import numpy as np
import pytest

import graph
import te
from graph import kernels


def _opt_levels(m) -> dict:
    """{kernel name: LLVM opt level its library was compiled at} of a compiled module."""
    return {s.kernel.name: s.kernel.func.library.opt_level for s in m.steps
            if s.kernel is not None}


def test_kernel_work_counts_every_stage_and_its_reduction():
    A = te.placeholder((4, 8), name="A")
    B = te.compute((4, 8), lambda i, j: A[i, j] * 2.0, name="B")
    k = te.reduce_axis((0, 8), "k")
    C = te.compute((4,), lambda i: te.sum(B[i, k], axis=k), name="C")
    assert kernels.kernel_work([B]) == 32
    assert kernels.kernel_work([C]) == 32 + 4 * 8        # C's 4 x 8 steps, then B's
    n = te.var("n")
    D = te.compute((n,), lambda i: A[0, 0] + 1.0, name="D")
    assert kernels.kernel_work([D]) > kernels.SMALL_KERNEL_WORK  # symbolic: not small


def test_which_targets_a_small_kernel_gets():
    A = te.placeholder((16, 16), name="A")
    small = te.compute((16, 16), lambda i, j: A[i, j] + 1.0, name="small")
    big = te.compute((64, 64), lambda i, j: A[i % 16, j % 16] + 1.0, name="big")
    assert kernels.small_kernel_target("llvm", [small]) == "llvm -opt-level=0"
    assert kernels.small_kernel_target("llvm", [big]) == "llvm"
    assert kernels.small_kernel_target("llvm -mcpu=znver3", [small]) == \
        "llvm -mcpu=znver3 -opt-level=0"
    assert kernels.small_kernel_target("llvm -opt-level=2", [small]) == "llvm -opt-level=2"
    assert kernels.small_kernel_target("cuda", [small]) == "cuda"


@pytest.mark.parametrize("level", ["O0", "O1", "O2"])
def test_small_and_large_kernels_of_one_graph_match_numpy(level):
    rng = np.random.default_rng(4)
    x = graph.input("x", (3, 5))              # 15 elements: small kernels
    y = graph.input("y", (96, 80))            # 7,680: a large one
    w = rng.standard_normal((3, 5)).astype("float32")
    small = graph.nn.softmax(graph.multiply(graph.exp(x, name="e"), graph.constant(w, name="w"),
                                       name="m"), name="sm")
    large = graph.tanh(graph.add(y, y, name="yy"), name="t")
    m = graph.compile(graph.Graph([small, large]), level=level, cache=False)
    xv = rng.standard_normal((3, 5)).astype("float32")
    yv = rng.standard_normal((96, 80)).astype("float32")
    got_small, got_large = m.run({"x": xv, "y": yv})
    z = np.exp(xv.astype(np.float64)) * w
    want = np.exp(z - z.max(-1, keepdims=True))
    np.testing.assert_allclose(got_small, want / want.sum(-1, keepdims=True), rtol=1e-5)
    np.testing.assert_allclose(got_large, np.tanh(2.0 * yv), rtol=1e-5, atol=1e-6)
    levels = set(_opt_levels(m).values())
    assert levels == {0, 3}, _opt_levels(m)
