"""The graph builder and IR: shape/dtype inference (constant and symbolic dims), the printed
form, and the errors of building a graph."""
import numpy as np
import pytest

import graph
import te


def _small_cnn():
    rng = np.random.default_rng(1)
    x = graph.input("x", (1, 3, 11, 13))
    w = graph.constant(rng.standard_normal((5, 3, 3, 3)).astype("float32"), name="w")
    b = graph.constant(rng.standard_normal(5).astype("float32"), name="b")
    y = graph.nn.conv2d(x, w, b, strides=2, padding=1, name="conv")
    r = graph.relu(y, name="act")
    p = graph.nn.max_pool2d(r, 2, 2, name="pool")
    f = graph.flatten(p, name="flat")
    return graph.Graph([graph.nn.softmax(f, name="prob")])


def test_print_is_one_line_per_node_with_types_and_attributes():
    text = str(_small_cnn())
    assert text.splitlines() == [
        "graph graph(%x: float32[1, 3, 11, 13]) {",
        "  %w: float32[5, 3, 3, 3] = constant",
        "  %b: float32[5] = constant",
        "  %conv: float32[1, 5, 6, 7] = conv2d(%x, %w, %b; strides=(2, 2), "
        "padding=(1, 1, 1, 1), dilation=(1, 1), groups=1)",
        "  %act: float32[1, 5, 6, 7] = relu(%conv)",
        "  %pool: float32[1, 5, 3, 3] = max_pool2d(%act; kernel=(2, 2), strides=(2, 2), "
        "padding=(0, 0, 0, 0))",
        "  %flat: float32[1, 45] = reshape(%pool; newshape=(1, 45))",
        "  %prob: float32[1, 45] = softmax(%flat; axis=-1)",
        "  return %prob",
        "}"]


def test_nodes_are_in_topological_order_and_leaves_are_sorted_out():
    g = _small_cnn()
    assert [n.name for n in g.nodes] == ["conv", "act", "pool", "flat", "prob"]
    assert [v.name for v in g.inputs] == ["x"]
    assert [v.name for v in g.constants] == ["w", "b"]


def test_symbolic_dims_flow_through_shape_inference():
    n = te.var("n")
    x = graph.input("x", (n, 4, 9, 9))
    w = graph.constant(np.ones((6, 4, 3, 3), "float32"), name="w")
    y = graph.nn.conv2d(x, w, padding=1, name="c")
    z = graph.add(y, graph.input("bias", (6, 1, 1)), name="z")
    assert z.shape[0] is n and z.shape[1:] == (6, 9, 9)
    assert graph.input("t", ("batch", 3)).shape[0].name == "batch"
    assert "%z: float32[n, 6, 9, 9] = add(%c, %bias)" in str(graph.Graph(z))


def test_broadcast_and_dtype_inference():
    a = graph.input("a", (4, 1, 3), "int32")
    b = graph.input("b", (5, 1), "int32")
    assert graph.add(a, b).shape == (4, 5, 3)
    assert graph.less(a, b).dtype == "bool"
    assert graph.cast(a, "float32").dtype == "float32"
    assert graph.reduce_sum(graph.input("c", (2, 3, 4)), axis=1, keepdims=False).shape == (2, 4)


def test_shape_errors_name_the_node_and_the_op():
    x = graph.input("x", (1, 3, 8, 8))
    w = graph.constant(np.ones((4, 5, 3, 3), "float32"), name="w5")
    with pytest.raises(graph.GraphError, match=r"conv2d 'bad_conv': conv2d_nchw: kernel\.shape"
                                               r"\[1\] \(data channels // groups\): expected "
                                               r"3, got 5"):
        graph.nn.conv2d(x, w, name="bad_conv")
    with pytest.raises(graph.GraphError, match=r"add 'sum1': .*do not broadcast"):
        graph.add(x, graph.input("y", (1, 3, 7, 8)), name="sum1")
    with pytest.raises(graph.GraphError, match=r"graph\.nn\.matmul: two 1-d operands give a "
                                               r"0-d result, which is not supported"):
        graph.nn.matmul(graph.input("v1", (5,)), graph.input("v2", (5,)))
    # a 0-d operand was read as a (1,) vector: (1,) @ (1, 5) gave float32[5]
    with pytest.raises(graph.GraphError, match=r"graph\.nn\.matmul: a must have at least 1 "
                                               r"dimension \(numpy\.matmul and ONNX MatMul "
                                               r"take no 0-d operand\), got shape \(\)"):
        graph.nn.matmul(graph.input("s0", ()), graph.input("m15", (1, 5)))
    with pytest.raises(graph.GraphError, match=r"graph\.nn\.matmul: b must have at least 1 "
                                               r"dimension .*got shape \(\)"):
        graph.nn.matmul(graph.input("m51", (5, 1)), 2.0)
    with pytest.raises(graph.GraphError, match=r"graph\.nn\.conv2d: strides must be an int or "
                                               r"2 ints >= 1, got 0"):
        graph.nn.conv2d(x, w, strides=0)


def test_graph_errors():
    x = graph.input("x", (2, 3))
    with pytest.raises(graph.GraphError, match=r"Graph: outputs\[0\] must be a graph Value, "
                                               r"got ndarray"):
        graph.Graph([np.ones(3)])
    with pytest.raises(graph.GraphError, match=r"two values are named 'x'"):
        graph.Graph(graph.add(x, graph.input("x", (2, 3))))
    with pytest.raises(graph.GraphError, match=r"inputs must list every input .* missing "
                                               r"\['x'\]"):
        graph.Graph(graph.relu(x), inputs=[])
    with pytest.raises(graph.GraphError, match=r"graph\.input 'z': shape entries must be "
                                               r"positive ints"):
        graph.input("z", (0, 3))
    with pytest.raises(graph.GraphError, match=r"graph: unknown op 'frobnicate'"):
        graph.apply("frobnicate", [x])


def test_every_op_has_a_pattern_and_a_compute():
    for name, opdef in graph.OPS.items():
        assert opdef.name == name and isinstance(opdef.pattern, graph.Pattern)
        assert callable(opdef.compute) and opdef.schedule in ("auto", "conv2d", "pool")
    assert graph.OPS["conv2d"].pattern == graph.Pattern.OUT_ELEMWISE_FUSABLE
    assert graph.OPS["add"].pattern == graph.Pattern.BROADCAST
    assert graph.OPS["relu"].pattern == graph.Pattern.ELEMWISE
    assert graph.OPS["reshape"].pattern == graph.Pattern.INJECTIVE
    assert graph.OPS["reduce_sum"].pattern == graph.Pattern.COMM_REDUCE


def test_the_readme_shows_the_op_table_as_generated():
    readme = (__import__("pathlib").Path(__file__).parents[2] / "README.md").read_text()
    assert graph.ops.markdown_table() in readme


def test_elementwise_ops_of_0d_values_are_0d_at_every_level():
    x = graph.input("x", ())
    two = graph.constant(np.asarray(2.0, np.float32), name="two")
    y = graph.add(graph.cast(x, "float64", name="x64"), graph.cast(two, "float64"), name="y")
    e = graph.expand(x, (1,), name="e")
    assert (y.shape, e.shape) == ((), (1,))
    for level in ("O0", "O1"):
        out, ex = graph.compile(graph.Graph([y, e]), level=level).run(
            {"x": np.asarray(1.5, np.float32)})
        assert (out.shape, out.dtype, float(out), ex.shape) == ((), np.float64, 3.5, (1,))
