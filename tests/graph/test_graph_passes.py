"""The O1 graph passes (graph.passes): per pass a small graph before and after, and the same
results at O0 before and after on seeded random inputs; the pipeline's stop_after, dump and
errors; outputs that become inputs or constants."""
import numpy as np
import pytest

import graph
from graph.passes import (PASS_NAMES, PASSES, eliminate_common_subexpressions,
                          eliminate_dead_code, fold_constants, optimize,
                          remove_identity, simplify_algebra)
from graph.passes.fold import MAX_GROWTH_ELEMENTS

RNG = np.random.default_rng(16)


def _rand(*shape, dtype="float32"):
    x = RNG.standard_normal(shape)
    return np.where(np.abs(x) < 1e-3, 0.5, x).astype(dtype)


def _ops(g) -> list:
    return [n.op for n in g.nodes]


def _lines(g) -> list:
    """The body: constants and nodes, without the header and the return."""
    return str(g).splitlines()[1:-2]


def _same_results(before, after, rtol=1e-6, atol=0.0):
    """Both graphs at O0 on the same seeded random feeds: equal outputs, same order."""
    feeds = {v.name: _rand(*v.shape, dtype=v.dtype) for v in before.inputs}
    want = graph.compile(before, level="O0").run(feeds)
    got = graph.compile(after, level="O0").run(feeds)
    assert len(got) == len(want)
    for g_, w in zip(got, want):
        assert g_.dtype == w.dtype and g_.shape == w.shape
        np.testing.assert_allclose(g_, w, rtol=rtol, atol=atol)
    return got


# ---- the pipeline --------------------------------------------------------------------

def test_pipeline_lists_every_pass_in_order():
    assert PASS_NAMES == ("remove_identity", "fold_constants", "simplify_algebra",
                          "fold_batch_norm", "winograd_rows", "pack_matmul_weights",
                          "pack_conv_weights",
                          "fold_packed_weights",
                          "eliminate_common_subexpressions",
                          "eliminate_dead_code")
    assert PASS_NAMES == tuple(name for name, _ in PASSES)


def _pipeline_graph():
    x = graph.input("x", (2, 3))
    w = graph.constant(_rand(3, 2), name="w")
    y = graph.multiply(graph.identity(x, name="i"), np.ones((2, 3), "float32"), name="y")
    return graph.Graph([graph.add(y, graph.transpose(w, name="wt"), name="z")])


def test_optimize_stop_after_and_unknown_pass_name():
    g = _pipeline_graph()
    assert _ops(optimize(g, stop_after="remove_identity")) == ["multiply", "transpose", "add"]
    assert _ops(optimize(g, stop_after="fold_constants")) == ["multiply", "add"]
    assert _ops(optimize(g)) == ["add"]
    with pytest.raises(graph.GraphError, match=r"graph.optimize: stop_after must be one of "
                       r"\['remove_identity', .*'eliminate_dead_code'\], got 'fold'"):
        optimize(g, stop_after="fold")
    with pytest.raises(graph.GraphError, match="g must be a graph.Graph, got Value"):
        optimize(g.outputs[0])


def test_optimize_dumps_after_each_pass(capfd, monkeypatch):
    g = _pipeline_graph()
    optimize(g, stop_after="fold_constants", dump=True)
    err = capfd.readouterr().err
    assert err.count("// after graph pass") == 2
    assert "// after graph pass fold_constants\ngraph graph(%x: float32[2, 3]) {" in err
    assert "%wt: float32[2, 3] = constant" in err
    monkeypatch.setenv("TE_DUMP_GRAPH", "1")
    optimize(g)
    assert capfd.readouterr().err.count("// after graph pass") == len(PASSES)
    monkeypatch.setenv("TE_DUMP_GRAPH", "0")
    optimize(g)
    assert capfd.readouterr().err == ""


def test_optimize_keeps_the_interface_and_never_mutates_its_input():
    g = _pipeline_graph()
    before = str(g)
    new = optimize(g)
    assert str(g) == before
    assert new.inputs[0] is g.inputs[0]
    assert [(v.name, v.dtype, v.shape) for v in new.outputs] == [("z", "float32", (2, 3))]
    _same_results(g, new)


# ---- remove_identity -----------------------------------------------------------------

def test_remove_identity_drops_identity_and_same_dtype_casts():
    x = graph.input("x", (4, 5))
    a = graph.relu(graph.identity(x, name="id"), name="a")
    b = graph.cast(graph.cast(a, "float32", name="same"), "float64", name="wide")
    g = graph.Graph([graph.exp(b, name="e")])
    new = remove_identity(g)
    assert _lines(new) == ["  %a: float32[4, 5] = relu(%x)",
                           "  %wide: float64[4, 5] = cast(%a; dtype='float64')",
                           "  %e: float64[4, 5] = exp(%wide)"]
    _same_results(g, new)


def test_remove_identity_of_onnx_dropout_and_identity():
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Dropout", ["x"], ["d"], ratio=0.3),
             helper.make_node("Identity", ["d"], ["i"]),
             helper.make_node("Relu", ["i"], ["y"])]
    gp = helper.make_graph(nodes, "m", [helper.make_tensor_value_info("x", TensorProto.FLOAT,
                                                                      (3, 4))],
                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, (3, 4))])
    model = helper.make_model(gp, opset_imports=[helper.make_opsetid("", 13)])
    g = graph.from_onnx(model)
    assert _ops(g) == ["identity", "identity", "relu"]
    new = remove_identity(g)
    assert _lines(new) == ["  %y: float32[3, 4] = relu(%x)"]
    _same_results(g, new)


def test_an_output_that_becomes_an_input_keeps_its_name_as_an_identity():
    x = graph.input("x", (3, 4))
    g = graph.Graph([graph.identity(x, name="y"), graph.relu(x, name="r")])
    new = remove_identity(g)
    assert _lines(new) == ["  %y: float32[3, 4] = identity(%x)",
                           "  %r: float32[3, 4] = relu(%x)"]
    assert [v.name for v in new.outputs] == ["y", "r"]
    _same_results(g, new)


# ---- fold_constants ------------------------------------------------------------------

def test_fold_constants_folds_chains_fed_only_by_weights():
    w = _rand(6, 4)
    x = graph.input("x", (3, 4))
    wc = graph.constant(w, name="w")
    wt = graph.transpose(graph.reshape(wc, (3, 8), name="w38"), name="w83")
    w2 = graph.reshape(graph.exp(wt, name="w_exp"), (4, 6), name="w46")
    g = graph.Graph([graph.nn.matmul(x, w2, name="mm")])
    assert _ops(g) == ["reshape", "transpose", "exp", "reshape", "matmul"]
    new = fold_constants(g)
    assert _lines(new) == ["  %w46: float32[4, 6] = constant",
                           "  %mm: float32[3, 6] = matmul(%x, %w46)"]
    # computed by the O0 exp kernel itself: bit for bit what the unfolded graph computes
    ref = graph.compile(g).run({"x": np.zeros((3, 4), "float32")}, keep=True)["w46"]
    np.testing.assert_array_equal(new.constants[0].data, ref)
    _same_results(g, new)


def test_fold_constants_computes_integer_shape_arithmetic():
    dims = graph.constant(np.array([2, 3], "int64"), name="dims")
    doubled = graph.multiply(dims, graph.constant(np.array(2, "int64")), name="doubled")
    both = graph.concatenate([dims, doubled], name="both")
    x = graph.input("x", (4,), dtype="int64")
    g = graph.Graph([graph.add(x, both, name="y")])
    new = fold_constants(g)
    assert _ops(new) == ["add"]
    np.testing.assert_array_equal(new.constants[0].data, [2, 3, 4, 6])
    assert new.constants[0].name == "both"
    _same_results(g, new)


def test_fold_constants_keeps_a_constant_shared_with_a_live_node():
    c = graph.constant(_rand(3, 3), name="c")
    x = graph.input("x", (3, 3))
    g = graph.Graph([graph.add(graph.add(x, c, name="xc"), graph.negative(c, name="nc"),
                               name="y")])
    new = fold_constants(g)
    assert [v.name for v in new.constants] == ["c", "nc"]
    assert _ops(new) == ["add", "add"]
    _same_results(g, new)


def test_fold_constants_does_not_grow_a_small_constant_into_a_big_one():
    x = graph.input("x", (64, 128))
    scalar = graph.constant(np.array([1.5], "float32"), name="s")
    big = graph.expand(scalar, (64, 128), name="big")
    small = graph.expand(scalar, (2, 3), name="small")
    assert 64 * 128 > MAX_GROWTH_ELEMENTS >= 6
    g = graph.Graph([graph.add(x, big, name="y"), small])
    new = fold_constants(g)
    assert _ops(new) == ["expand", "add"]
    assert [v.name for v in new.constants] == ["s", "small"]
    np.testing.assert_array_equal(new.constants[1].data, np.full((2, 3), 1.5, "float32"))
    _same_results(g, new)


def test_an_output_that_folds_to_a_constant_is_returned_as_a_copy():
    w = _rand(2, 5)
    x = graph.input("x", (5, 2))
    g = graph.Graph([graph.add(x, 1.0, name="y"), graph.transpose(graph.constant(w),
                                                                   name="wt")])
    new = fold_constants(g)
    assert [v.name for v in new.outputs] == ["y", "wt"] and new.outputs[1].is_constant
    m = graph.compile(new)
    out = m.run({"x": _rand(5, 2)})[1]
    np.testing.assert_array_equal(out, w.T)
    out[...] = 0  # the caller owns the result: the graph's constant is not touched
    np.testing.assert_array_equal(m.run({"x": _rand(5, 2)})[1], w.T)


# ---- eliminate_common_subexpressions --------------------------------------------------

def test_cse_merges_equal_nodes_and_equal_small_constants():
    x = graph.input("x", (4, 6))
    c1 = graph.constant(np.full((6,), 0.5, "float32"), name="c1")
    c2 = graph.constant(np.full((6,), 0.5, "float32"), name="c2")
    c3 = graph.constant(np.full((6,), 0.5, "float64"), name="c3")  # another dtype: kept
    a1 = graph.exp(graph.add(x, c1, name="a1"), name="e1")
    a2 = graph.exp(graph.add(x, c2, name="a2"), name="e2")
    d = graph.add(graph.cast(x, "float64", name="x64"), c3, name="d")
    g = graph.Graph([graph.multiply(a1, a2, name="y"), d])
    new = eliminate_common_subexpressions(g)
    assert _lines(new) == ["  %c1: float32[6] = constant",
                           "  %c3: float64[6] = constant",
                           "  %a1: float32[4, 6] = add(%x, %c1)",
                           "  %e1: float32[4, 6] = exp(%a1)",
                           "  %y: float32[4, 6] = multiply(%e1, %e1)",
                           "  %x64: float64[4, 6] = cast(%x; dtype='float64')",
                           "  %d: float64[4, 6] = add(%x64, %c3)"]
    _same_results(g, new)


def test_cse_keeps_nodes_whose_attributes_differ_and_both_outputs():
    x = graph.input("x", (5, 3))
    s1 = graph.reduce_sum(x, axis=0, name="s1")
    s2 = graph.reduce_sum(x, axis=1, name="s2")
    r1, r2 = graph.relu(x, name="r1"), graph.relu(x, name="r2")
    g = graph.Graph([s1, s2, r1, r2])
    new = eliminate_common_subexpressions(g)
    # r2 merges into r1, and keeps its output name as an identity of it
    assert _ops(new) == ["reduce_sum", "reduce_sum", "relu", "identity"]
    assert [v.name for v in new.outputs] == ["s1", "s2", "r1", "r2"]
    _same_results(g, new)


# ---- eliminate_dead_code -------------------------------------------------------------

def test_dce_turns_a_split_with_unread_pieces_into_slices():
    x = graph.input("x", (4, 9))
    a, b, c = graph.split(x, (2, 3, 4), axis=1, name="sp")
    g = graph.Graph([graph.relu(b, name="rb")])
    assert _ops(g) == ["split", "relu"]
    new = eliminate_dead_code(g)
    assert _lines(new) == [
        "  %sp:1: float32[4, 3] = slice(%x; starts=(2,), ends=(5,), axes=(1,), steps=(1,))",
        "  %rb: float32[4, 3] = relu(%sp:1)"]
    _same_results(g, new)
    full = graph.Graph([a, graph.relu(b, name="rb2"), c])
    assert _ops(eliminate_dead_code(full)) == ["split", "relu"]


def test_dce_drops_what_a_rewrite_left_unread():
    x = graph.input("x", (2, 6))
    r = graph.reshape(x, (3, 4), name="r1")
    g = graph.Graph([graph.reshape(r, (12,), name="r2"), graph.relu(r, name="keep")])
    assert _ops(eliminate_dead_code(g)) == ["reshape", "reshape", "relu"]
    g2 = graph.Graph([graph.reshape(r, (12,), name="r2")])
    new = eliminate_dead_code(simplify_algebra(g2))
    assert _lines(new) == ["  %r2: float32[12] = reshape(%x; newshape=(12,))"]
    _same_results(g2, new)


# ---- the whole pipeline ----------------------------------------------------------------

def test_optimize_is_idempotent_and_works_on_symbolic_shapes():
    x = graph.input("x", ("n", 3, 5, 5))
    conv = graph.nn.conv2d(x, graph.constant(_rand(4, 3, 3, 3), name="w"), name="conv")
    params = [graph.constant(np.abs(_rand(4)) + 0.5, name=f"p{k}") for k in range(4)]
    bn = graph.nn.batch_norm(conv, *params, name="bn")
    y = graph.multiply(graph.identity(graph.relu(bn, name="r"), name="i"), 1.0, name="y")
    g = graph.Graph([y])
    new = optimize(g)
    assert _lines(new)[2:] == [
        "  %bn: float32[n, 4, 3, 3] = conv2d(%x, %w/bn, %bn/bias; strides=(1, 1), "
        "padding=(0, 0, 0, 0), dilation=(1, 1), groups=1)",
        "  %y: float32[n, 4, 3, 3] = relu(%bn)"]
    assert str(optimize(new)) == str(new)


def _random_graph(rng, n_nodes: int):
    """A random DAG over (2, 3, 4) data: elementwise and broadcast ops (with neutral and
    non-neutral constants), transposes, reshapes, identities, casts, batch_norm, chains on
    constants only, and repeated nodes."""
    x = graph.input("x", (2, 3, 4))
    pool = [x]
    for k in range(n_nodes):
        # mostly a chain on the latest value, so that most nodes reach the outputs
        v = pool[-1] if rng.random() < 0.7 else pool[rng.integers(len(pool))]
        kind = rng.integers(8)
        if kind == 0:
            v = graph.UNARY_FUNCTIONS[rng.choice(["tanh", "negative", "abs", "sigmoid"])](v)
        elif kind == 1:
            shape = v.shape[-1:] if rng.integers(2) else v.shape
            c = rng.choice([np.ones(shape), np.zeros(shape), rng.standard_normal(shape)])
            op = rng.choice(["add", "multiply", "subtract", "divide"])
            if op == "divide":
                c = np.where(np.abs(c) < 0.5, 1.0, c)
            args = (v, graph.constant(c.astype("float32")))
            v = graph.BINARY_FUNCTIONS[op](*(args if rng.integers(3) else args[::-1]))
        elif kind == 2:
            v = graph.transpose(v, tuple(rng.permutation(len(v.shape))))
        elif kind == 3:
            v = graph.reshape(v, [(24,), (6, 4), (2, 12), (4, 3, 2), (1, 24, 1)][
                rng.integers(5)])
        elif kind == 4:
            v = graph.identity(graph.cast(v, "float32"))
        elif kind == 5 and len(v.shape) >= 2:
            c = v.shape[1]
            stats = [np.abs(rng.standard_normal(c)) + 0.5, rng.standard_normal(c),
                     rng.standard_normal(c), np.abs(rng.standard_normal(c)) + 0.5]
            v = graph.nn.batch_norm(v, *[graph.constant(s.astype("float32")) for s in stats])
        elif kind == 6:  # a chain fed only by a constant, then used with v
            w = graph.transpose(graph.constant(rng.standard_normal(v.shape[::-1])
                                               .astype("float32")))
            v = graph.add(v, graph.exp(graph.multiply(w, 0.1)))
        else:  # the same node twice (CSE)
            u = pool[rng.integers(len(pool))]
            if u.shape == v.shape:
                v = graph.add(graph.maximum(u, v), graph.maximum(u, v))
        pool.append(v)
    return graph.Graph([pool[-1], pool[len(pool) // 2]], inputs=[x])


@pytest.mark.parametrize("seed", range(10))
def test_random_graphs_compute_the_same_after_optimize(seed):
    g = _random_graph(np.random.default_rng(seed), 20)
    new = optimize(g)
    assert str(new) != str(g)
    assert "batch_norm" not in _ops(new), str(new)
    # an identity is left only to give an output its name (its input is another output)
    outs = {id(v) for v in new.outputs}
    assert all(id(n.outputs[0]) in outs and (id(n.inputs[0]) in outs or n.inputs[0].is_input)
               for n in new.nodes if n.op == "identity"), str(new)
    _same_results(g, new, rtol=1e-5, atol=1e-6)


def test_a_rewrite_that_changes_a_value_type_is_refused_naming_the_node():
    from graph.passes.rewrite import rebuild
    x = graph.input("x", (2, 3))
    g = graph.Graph([graph.relu(graph.exp(x, name="e"), name="r")])

    def widen(rw, node, ins):  # a wrong rewrite: exp(x) -> x broadcast to (4, 2, 3)
        if node.op == "exp":
            return [rw.apply("expand", [ins[0]], {"shape": (4, 2, 3)})]
        return None
    with pytest.raises(graph.GraphError, match=r"graph pass: input 0 of node 'r' \(relu\) "
                       r"changed type from float32\[2, 3\] to float32\[4, 2, 3\]"):
        rebuild(g, widen)
