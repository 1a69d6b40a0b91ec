"""Schedule invariance, by hypothesis: every random legal schedule gives the unscheduled
result, for matmul, conv2d NCHW with a padding stage, and an elementwise chain.

A random schedule splits axes by factors or nparts in 1..extent+2 (and maybe one of the two
loops again, so that nested splits get factors larger than the loop), reorders all leaf axes,
may fuse two adjacent axes, vectorize the innermost data-parallel axis, parallelize the
outermost one and place the producer (root, inline where legal, or compute_at any leaf of
its consumer). A fourth property splits a reduction's axes into AutoTVM-style chains.
Results are checked against numpy and against the compute definitions evaluated directly
(compute_oracle), which share no code with lowering. The steps JSON is noted so a failure
prints its schedule. Imports te, numpy, hypothesis, compute_oracle and helpers.
"""
import warnings

import numpy as np
from hypothesis import HealthCheck, note, settings
from hypothesis import strategies as st
from hypothesis import given

import te
from compute_oracle import evaluate
from helpers import run_kernel
from te.compute.tensor import DATA_PAR, REDUCE
from te.schedule.dataflow import apply_steps
from te.schedule.steps import from_json

SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def _extent(iv) -> int:
    return int(iv.dom.extent.value)


def random_split(data, stage, iv, again: bool = True) -> None:
    """Split iv by factor or nparts in 1..extent+2, then maybe split one of the two loops
    again (by up to its extent + 2: the split chains of AutoTVM's knobs reach factors
    larger than the loop they split)."""
    value = data.draw(st.integers(1, _extent(iv) + 2), label=f"split {iv.var.name} by")
    if data.draw(st.booleans(), label="nparts"):
        outer, inner = stage.split(iv, nparts=value)
    else:
        outer, inner = stage.split(iv, factor=value)
    if again and data.draw(st.booleans(), label="split again"):
        random_split(data, stage, data.draw(st.sampled_from([outer, inner])), again=False)


def random_loops(data, stage, vectorize=True, parallel=True) -> None:
    """Random split (maybe nested) / reorder / fuse / vectorize / parallel on one stage's
    loops."""
    for iv in list(stage.leaf_iter_vars):
        if data.draw(st.booleans(), label=f"split {iv.var.name}"):
            random_split(data, stage, iv)
    order = data.draw(st.permutations(list(stage.leaf_iter_vars)), label="order")
    stage.reorder(*order)
    leaves = stage.leaf_iter_vars
    pairs = [k for k in range(len(leaves) - 1) if leaves[k].iter_type == leaves[k + 1].iter_type]
    if pairs and data.draw(st.booleans(), label="fuse"):
        k = data.draw(st.sampled_from(pairs), label="fuse at")
        stage.fuse(leaves[k], leaves[k + 1])
    leaves = stage.leaf_iter_vars
    inner, outer = leaves[-1], leaves[0]
    vectorized = False
    if vectorize and inner.iter_type == DATA_PAR and data.draw(st.booleans(), label="vec"):
        stage.vectorize(inner)
        vectorized = True
    if parallel and outer.iter_type == DATA_PAR and not (vectorized and outer is inner) \
            and data.draw(st.booleans(), label="parallel"):
        stage.parallel(outer)


def place_producer(data, s, producer, consumer, inline_ok: bool) -> None:
    """Leave the producer at root, inline it, or compute it at a random consumer loop."""
    choices = ["root", "at"] + (["inline"] if inline_ok else [])
    where = data.draw(st.sampled_from(choices), label="producer placement")
    if where == "inline":
        s[producer].compute_inline()
    elif where == "at":
        scope = data.draw(st.sampled_from(list(s[consumer].leaf_iter_vars)), label="at")
        s[producer].compute_at(s[consumer], scope)


def _check(s, inputs, outputs, ref, rtol=1e-4, atol=1e-4, explain=True):
    if explain:  # hypothesis prints notes with a falsifying example
        note(s.to_json())
    mod = te.build(s, list(inputs) + list(outputs))
    ins, outs = run_kernel(mod, inputs, outputs)
    np.testing.assert_allclose(outs[0], ref(*ins), rtol=rtol, atol=atol)
    want = evaluate(outputs, dict(zip(inputs, ins)))   # the definitions, never lowered
    np.testing.assert_allclose(outs[0], want[0], rtol=rtol, atol=atol)


# -- (a) matmul with a scaled-input producer -----------------------------------------------

def _matmul(m=11, n=13, k=9):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    As = te.compute((m, k), lambda i, r: A[i, r] * 0.5 + 1.0, name="As")
    r = te.reduce_axis((0, k), "r")
    C = te.compute((m, n), lambda i, j: te.sum(As[i, r] * B[r, j], axis=r), name="C")
    return A, B, As, C


@SETTINGS
@given(st.data())
def test_random_schedule_matmul(data):
    A, B, As, C = _matmul()
    s = te.create_schedule(C.op)
    random_loops(data, s[C])
    place_producer(data, s, As, C, inline_ok=True)
    _check(s, [A, B], [C], lambda a, b: (a * 0.5 + 1.0) @ b)


# -- (b) conv2d NCHW, padding 1, 3x3 kernel ------------------------------------------------

NB, CI, H, W, CO, KS, PAD = 1, 3, 7, 5, 4, 3, 1


def _conv2d():
    X = te.placeholder((NB, CI, H, W), name="X")
    Wt = te.placeholder((CO, CI, KS, KS), name="Wt")
    P = te.compute((NB, CI, H + 2 * PAD, W + 2 * PAD),
                   lambda n, c, y, x: te.if_then_else(
                       te.all(y >= PAD, y < H + PAD, x >= PAD, x < W + PAD),
                       X[n, c, y - PAD, x - PAD], 0.0), name="P")
    rc = te.reduce_axis((0, CI), "rc")
    ry = te.reduce_axis((0, KS), "ry")
    rx = te.reduce_axis((0, KS), "rx")
    Y = te.compute((NB, CO, H, W),
                   lambda n, f, y, x: te.sum(P[n, rc, y + ry, x + rx] * Wt[f, rc, ry, rx],
                                             axis=[rc, ry, rx]), name="Y")
    return X, Wt, P, Y


def _conv_ref(x, w):
    xp = np.pad(x, ((0, 0), (0, 0), (PAD, PAD), (PAD, PAD)))
    out = np.zeros((NB, CO, H, W), "float64")
    for ry in range(KS):
        for rx in range(KS):
            window = xp[:, :, ry:ry + H, rx:rx + W]
            out += np.einsum("nchw,fc->nfhw", window, w[:, :, ry, rx])
    return out


@SETTINGS
@given(st.data())
def test_random_schedule_conv2d(data):
    X, Wt, P, Y = _conv2d()
    s = te.create_schedule(Y.op)
    random_loops(data, s[Y])
    place_producer(data, s, P, Y, inline_ok=True)
    _check(s, [X, Wt], [Y], _conv_ref)


# -- (c) elementwise chain with an intermediate stage ---------------------------------------

def _chain(m=9, n=14):
    A = te.placeholder((m, n), name="A")
    B = te.placeholder((m, n), name="B")
    T = te.compute((m, n), lambda i, j: A[i, j] * B[i, j] + 1.0, name="T")
    D = te.compute((m, n), lambda i, j: T[i, j] * T[i, j] - A[i, j], name="D")
    return A, B, T, D


@SETTINGS
@given(st.data())
def test_random_schedule_elementwise_chain(data):
    A, B, T, D = _chain()
    s = te.create_schedule(D.op)
    random_loops(data, s[D])
    where = data.draw(st.sampled_from(["root", "inline", "at"]), label="T placement")
    if where == "inline":
        s[T].compute_inline()
    else:
        # T's own loops are scheduled too (no parallel: it may sit inside D's parallel loop)
        random_loops(data, s[T], parallel=where == "root")
        if where == "at":
            scope = data.draw(st.sampled_from(list(s[D].leaf_iter_vars)), label="at")
            s[T].compute_at(s[D], scope)

    def ref(a, b):
        t = a * b + 1
        return t * t - a
    _check(s, [A, B], [D], ref)


# -- (d) split chains of a reduction, AutoTVM style ----------------------------------------

@SETTINGS
@given(st.data())
def test_random_split_chains_of_a_reduction(data):
    """Each axis of a two-axis sum split into a chain of up to four loops (AutoTVM's
    [-1, f1, f2, f3]) whose factors may exceed the loop they split, maybe rfactor at one
    of the reduction's loops, then a random order: every element is added once, whatever
    the factors."""
    A = te.placeholder((6, 5, 7), name="A")
    k1, k2 = te.reduce_axis((0, 5), "k1"), te.reduce_axis((0, 7), "k2")
    C = te.compute((6,), lambda i: te.sum(A[i, k1, k2] * A[5 - i, k1, 6 - k2], axis=[k1, k2]),
                   name="C")
    s = te.create_schedule(C.op)

    def split_chains(stage, axes):
        for iv in axes:
            rest = iv
            for _ in range(data.draw(st.integers(0, 3), label=f"splits of {iv.var.name}")):
                _, rest = stage.split(rest, factor=data.draw(st.integers(1, 9), label="by"))
    split_chains(s[C], C.op.reduce_axis)
    last = C
    if data.draw(st.booleans(), label="rfactor"):
        reduce_loops = [iv for iv in s[C].leaf_iter_vars if iv.iter_type == REDUCE]
        last = s.rfactor(C, data.draw(st.sampled_from(reduce_loops), label="at"))
    split_chains(s[last], s[last].op.axis)
    s[last].reorder(*data.draw(st.permutations(list(s[last].leaf_iter_vars)), label="order"))

    def ref(a):
        return np.einsum("ijk,ijk->i", a, a[::-1, :, ::-1])
    _check(s, [A], [C], ref)


# A schedule the conv2d property found while loop partitioning was new: the parallel loop
# f.inner (extent 3) sits inside partitioned loops, and the outlined body used a loop var
# defined outside it ("Instruction does not dominate all uses!" from LLVM).
CONV_PARALLEL_INSIDE_PARTITIONED = (
    '[{"axis": {"index": 0, "name": "n", "type": "AxisRef"}, "factor": 1, "nparts": null, '
    '"stage": {"index": 3, "name": "Y", "type": "StageRef"}, "type": "Split"}, '
    '{"axis": {"index": 1, "name": "f", "type": "AxisRef"}, "factor": 3, "nparts": null, '
    '"stage": {"index": 3, "name": "Y", "type": "StageRef"}, "type": "Split"}, '
    '{"axis": {"index": 6, "name": "rx", "type": "AxisRef"}, "factor": 1, "nparts": null, '
    '"stage": {"index": 3, "name": "Y", "type": "StageRef"}, "type": "Split"}, '
    '{"axes": [{"index": 10, "name": "f.inner", "type": "AxisRef"}, '
    '{"index": 8, "name": "n.inner", "type": "AxisRef"}, '
    '{"index": 9, "name": "f.outer", "type": "AxisRef"}, '
    '{"index": 7, "name": "n.outer", "type": "AxisRef"}, '
    '{"index": 2, "name": "y", "type": "AxisRef"}, {"index": 3, "name": "x", "type": "AxisRef"}, '
    '{"index": 4, "name": "rc", "type": "AxisRef"}, '
    '{"index": 5, "name": "ry", "type": "AxisRef"}, '
    '{"index": 11, "name": "rx.outer", "type": "AxisRef"}, '
    '{"index": 12, "name": "rx.inner", "type": "AxisRef"}], '
    '"stage": {"index": 3, "name": "Y", "type": "StageRef"}, "type": "Reorder"}, '
    '{"axis": {"index": 10, "name": "f.inner", "type": "AxisRef"}, "kind": "parallel", '
    '"stage": {"index": 3, "name": "Y", "type": "StageRef"}, "type": "Annotate"}]')


def test_conv2d_parallel_inside_partitioned_loops():
    X, Wt, P, Y = _conv2d()
    s = apply_steps(te.create_schedule(Y.op), from_json(CONV_PARALLEL_INSIDE_PARTITIONED))
    _check(s, [X, Wt], [Y], _conv_ref, explain=False)


def test_chain_schedule_that_broke_llvms_slp_vectorizer():
    """A schedule the elementwise-chain property found: LLVM 22's SLP vectorizer left the
    function invalid ("Instruction does not dominate all uses!") and MCJIT aborted the
    process. runtime.cpu verifies the optimized module and optimizes again without SLP."""
    A, B, T, D = _chain()
    s = te.create_schedule(D.op)
    i, j = s[D].op.axis
    io, ii = s[D].split(i, factor=7)
    jo, ji = s[D].split(j, nparts=16)
    s[D].reorder(ji, io, ii, jo)
    s[D].vectorize(jo)
    s[D].parallel(ji)
    to, tj = s[T].split(s[T].op.axis[1], factor=5)
    s[T].reorder(s[T].op.axis[0], tj, to)
    s[T].vectorize(to)
    s[T].compute_at(s[D], ji)
    with warnings.catch_warnings():   # the retry without SLP warns while LLVM has the bug
        warnings.simplefilter("ignore", RuntimeWarning)
        _check(s, [A, B], [D], lambda a, b: (a * b + 1) ** 2 - a, explain=False)
