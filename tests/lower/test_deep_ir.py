"""Deep IR: a chain of thousands of stages (at root, or inlined into one expression) and an
expression thousands of nodes deep in one lambda lower, print, build (LLVM, and CUDA through
its emulator) and match numpy with Python's default recursion limit (the walks keep their
own stacks), in seconds (no walk is quadratic in the chain's length). Where a walk still
recurses per level, te.lower, te.build and the interpreter say the program nests too deep.

Imports te, numpy, pytest and sys.
"""
import sys

import numpy as np
import pytest

import te

DEPTH = 2000


def _chain(n_stages: int, length: int):
    """C0 = A + 1, C_k = C_{k-1} * 1.0001: every stage a compute of its own."""
    A = te.placeholder((length,), name="A")
    stages = [te.compute((length,), lambda i: A[i] + 1.0, name="C0")]
    for k in range(1, n_stages):
        stages.append(_scaled(stages[-1], f"C{k}"))
    return A, stages


def _scaled(prev, name: str):
    return te.compute(prev.shape, lambda i: prev[i] * 1.0001, name=name)


def _chain_ref(a: np.ndarray, n_stages: int) -> np.ndarray:
    out = a + np.float32(1.0)
    for _ in range(n_stages - 1):
        out = out * np.float32(1.0001)
    return out


def _run(s, A, C, length: int) -> tuple:
    """(input, output, printed lowered function) of one build."""
    a = np.random.default_rng(0).uniform(0.5, 1.5, length).astype("float32")
    c = np.full(length, np.nan, "float32")
    mod = te.build(s, [A, C])
    mod(a, c)
    return a, c, str(mod.lowered)


@pytest.fixture(autouse=True)
def default_recursion_limit():
    """The walks must not lean on a raised limit (a deep recursion in C would crash)."""
    assert sys.getrecursionlimit() <= 1000 + 100
    yield


@pytest.mark.parametrize("inline", [False, True], ids=["root", "inlined"])
def test_a_2000_stage_chain_lowers_builds_and_matches_numpy(inline):
    length = 7 if not inline else 37
    A, stages = _chain(DEPTH, length)
    C = stages[-1]
    s = te.create_schedule(C.op)
    if inline:
        for st in stages[:-1]:
            s[st].compute_inline()
    a, c, text = _run(s, A, C, length)
    assert ("allocate C1998" in text) != inline
    np.testing.assert_allclose(c, _chain_ref(a, DEPTH), rtol=1e-5)


def _deep(A):
    def fcompute(i):
        x = A[i]
        for _ in range(DEPTH):
            x = x * 1.001 + 1.0
        return x
    return fcompute


def _deep_ref(a: np.ndarray) -> np.ndarray:
    x = a.astype("float64")
    for _ in range(DEPTH):
        x = x * 1.001 + 1.0
    return x


@pytest.mark.parametrize("vectorize", [False, True], ids=["serial", "vectorized"])
def test_an_expression_4000_nodes_deep_lowers_builds_and_matches_numpy(vectorize):
    A = te.placeholder((37,), name="A")
    C = te.compute((37,), _deep(A), name="C")
    s = te.create_schedule(C.op)
    if vectorize:
        _, inner = s[C].split(C.op.axis[0], 8)
        s[C].vectorize(inner)
    a, c, text = _run(s, A, C, 37)
    assert text.count("*broadcast(1.001f, 8))" if vectorize else "*1.001f)") == DEPTH
    # float32 steps (fused multiply-adds or not) against float64: 2000 roundings
    np.testing.assert_allclose(c, _deep_ref(a), rtol=1e-4)


def _deep_schedule(length: int = 64):
    A = te.placeholder((length,), name="A")
    C = te.compute((length,), _deep(A), name="C")
    return te.create_schedule(C.op), A, C


def test_the_interpreter_says_a_deep_expression_is_too_deep():
    """Its closures call their operands' closures (one Python frame per level): inherent."""
    from te.lower.interp import InterpError, run_func
    s, A, C = _deep_schedule(5)
    a, c = np.ones(5, "float32"), np.zeros(5, "float32")
    with pytest.raises(InterpError, match="interp: the program nests too deep to interpret "
                       r"\(an expression, or loops and allocations nested one per stage, "
                       r"deeper than Python's recursion limit\); split a deep expression into "
                       r"stages of its own \(te.compute\), and compute a long chain of stages "
                       r"at root rather than each at its reader's loop \(compute_at\)"):
        run_func(te.lower(s, [A, C]), [a, c])


def test_an_expression_4000_nodes_deep_builds_for_cuda_and_matches_numpy():
    """The CUDA C writer takes its operands' text from a memo filled deepest first; the
    source runs in the CPU emulator (a C++ build of it)."""
    s, A, C = _deep_schedule()
    bx, tx = s[C].split(C.op.axis[0], 32)
    s[C].bind(bx, te.thread_axis("blockIdx.x"))
    s[C].bind(tx, te.thread_axis("threadIdx.x"))
    mod = te.build(s, [A, C], target="cuda")
    a = np.random.default_rng(1).uniform(0.5, 1.5, 64).astype("float32")
    c = np.full(64, np.nan, "float32")
    mod.emulator()(a, c)
    np.testing.assert_allclose(c, _deep_ref(a), rtol=2e-4)


def _recursing_pass(f):
    def deeper(n):
        return deeper(n + 1) + 1
    return deeper(0)


def test_te_lower_says_a_program_is_too_deep_where_a_walk_still_recurses(monkeypatch):
    """A walk that recurses per level (here a stand-in pass) ends in LoweringError."""
    from te.lower import pipeline
    monkeypatch.setattr(pipeline, "PASSES", pipeline.PASSES + (("deep", _recursing_pass),))
    s, A, C = _deep_schedule(5)
    with pytest.raises(te.LoweringError, match="te.lower: the program nests too deep to "
                       "lower"):
        te.lower(s, [A, C])


def test_te_build_says_a_program_is_too_deep_where_a_walk_still_recurses(monkeypatch):
    build_module = sys.modules["te.build"]

    class DeepGen:
        def __init__(self, *args):
            _recursing_pass(None)
    monkeypatch.setattr(build_module, "ModuleGen", DeepGen)
    s, A, C = _deep_schedule(5)
    with pytest.raises(te.BuildError, match="te.build: the program nests too deep to compile "
                       "for target 'llvm'"):
        te.build(s, [A, C])


def test_the_tuners_features_of_a_2000_stage_chain():
    """The cost model's features walk the lowered chain (2000 nested allocations) too."""
    from te.autotune import features as F
    A, stages = _chain(DEPTH, 7)
    s = te.create_schedule(stages[-1].op)
    f = dict(zip(F.NAMES, F.extract(F.lower_for_features(s, [A, stages[-1]]))))
    assert f["n_stores"] == pytest.approx(np.log2(1 + DEPTH))


def test_an_integer_expression_4000_nodes_deep_matches_numpy():
    """Integer arithmetic goes through the analyzer's linear forms, which also stop
    recursing past a few dozen levels."""
    A = te.placeholder((37,), "int32", name="A")

    def fcompute(i):
        x = A[i]
        for k in range(DEPTH):
            x = x * 3 + k % 7
        return x
    C = te.compute((37,), fcompute, name="C")
    a = np.random.default_rng(2).integers(-1000, 1000, 37).astype("int32")
    c = np.zeros(37, "int32")
    te.build(te.create_schedule(C.op), [A, C])(a, c)
    want = a.astype(np.int64)
    for k in range(DEPTH):
        want = (want * 3 + k % 7) % (1 << 32)  # int32 wraps, as numpy's does
    np.testing.assert_array_equal(c, want.astype(np.uint32).astype(np.int32))
