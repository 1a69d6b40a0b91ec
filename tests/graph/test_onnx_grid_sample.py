"""GridSample (opsets 16, 20, 22) against onnxruntime, or ONNX's reference where
onnxruntime has no kernel or computes otherwise: every mode x padding_mode x align_corners
on 4-d and 5-d inputs of odd sizes, grids reaching past [-1, 1]; float64, float16 and
integer inputs; NaN and huge grid values; fusion at O1 and O2; the refusals' messages."""
import itertools

import numpy as np
import pytest

import graph
from onnx_cases import Const, assert_close, check_levels, make_model, rand, reference_outputs

MODES = ("nearest", "linear", "cubic")
OPSET16 = {"linear": "bilinear", "cubic": "bicubic", "nearest": "nearest"}
PADDINGS = ("zeros", "border", "reflection")
X4 = rand(2, 3, 5, 7)
X5 = rand(2, 2, 3, 5, 4)


def _grid(*shape):
    """Positions in [-1.6, 1.6] (beyond the input on every side, for the padding modes),
    the first ones exact ties of nearest's rounding where align_corners=1 (H = 5, W = 7:
    y 0.25 -> 2.5, x -0.5 -> 1.5) and the corners -1 and 1."""
    grid = rand(*shape, low=-1.6, high=1.6)
    ties = grid.reshape(-1, shape[-1])
    ties[0, :2] = (-0.5, 0.25)
    ties[1, :] = -1.0
    ties[2, :] = 1.0
    return grid


GRID4 = _grid(2, 4, 6, 2)
GRID5 = _grid(2, 2, 3, 5, 3)


def _model(x, grid, mode, padding, align, opset):
    name = OPSET16[mode] if opset < 20 else mode
    return make_model("GridSample", [x, grid], {"mode": name, "padding_mode": padding,
                                                "align_corners": align}, opset)


CASES4 = list(itertools.product(MODES, PADDINGS, (0, 1)))


@pytest.mark.parametrize("mode,padding,align", CASES4,
                         ids=[f"{m}-{p}-ac{a}" for m, p, a in CASES4])
def test_grid_sample_4d_matches_onnxruntime(mode, padding, align):
    """Opsets 16, 20 and 22 in turn. Cubic with border padding: ONNX's reference, which
    clamps a coordinate outside the input into it and then clamps the taps; onnxruntime
    (as torch) clamps only the taps, which differs within two elements of the edge."""
    k = CASES4.index((mode, padding, align))
    reference = mode == "cubic" and padding == "border"
    opset = (20, 22)[k % 2] if reference else (16, 20, 22)[k % 3]
    model, feeds = _model(X4, GRID4, mode, padding, align, opset)
    check_levels(model, feeds, onnx_reference=reference)


# volumetric: nearest and linear in every combination; cubic (64 taps, seconds to compile)
# with two of the paddings (its border case differs from 4-d's in no line of code)
CASES5 = [*itertools.product(("nearest", "linear"), PADDINGS, (0, 1)),
          ("cubic", "zeros", 0), ("cubic", "reflection", 1)]


@pytest.mark.parametrize("mode,padding,align", CASES5,
                         ids=[f"{m}-{p}-ac{a}" for m, p, a in CASES5])
def test_grid_sample_5d_matches_onnxruntime(mode, padding, align):
    """Volumetric sampling, each case at one level (O0 and O1 alternating); cubic
    against ONNX's reference (onnxruntime's cubic is 4-d only)."""
    k = CASES5.index((mode, padding, align))
    model, feeds = _model(X5, GRID5, mode, padding, align, 20)
    check_levels(model, feeds, levels=(("O0", "O1")[k % 2],),
                 onnx_reference=mode == "cubic")


@pytest.mark.parametrize("shape,align", [((1, 2, 1, 2), 0), ((1, 2, 2, 3), 1)])
def test_reflection_of_one_and_two_element_axes(shape, align):
    """Cubic taps up to two elements past an axis of one or two elements, positions up to
    two spans outside: reflected several times over (the reference divides by zero for a
    one-element axis with align_corners, so that case is not compared)."""
    model, feeds = _model(rand(*shape), rand(1, 3, 4, 2, low=-3, high=3), "cubic",
                          "reflection", align, 20)
    check_levels(model, feeds, levels=("O0",))


@pytest.mark.parametrize("dtype,mode,padding,rtol", [(np.float64, "linear", "border", 1e-6),
                                                     (np.float16, "linear", "reflection", 1e-2),
                                                     (np.int32, "nearest", "zeros", 0)])
def test_grid_sample_dtypes(dtype, mode, padding, rtol):
    """float64 throughout; float16 blended in float32 and rounded once (ONNX's reference
    rounds every product, hence the tolerance); integers copied by nearest, 0 outside
    (float16 and int32 against the reference: onnxruntime has float and double kernels
    only)."""
    x = (X4 * 10).astype(dtype)
    grid = GRID4.astype(dtype if dtype != np.int32 else np.float32)
    model, feeds = _model(x, grid, mode, padding, 1, 20)
    check_levels(model, feeds, rtol=rtol, atol=rtol, levels=("O0",))


@pytest.mark.parametrize("padding", PADDINGS)
def test_nan_and_huge_positions_read_inside_the_input(padding):
    """NaN, infinite and huge grid values (an error or undefined in the references) give
    finite values read from inside x, and leave the other positions as they were."""
    grid = GRID4.copy()
    bad = np.zeros(grid.shape[:-1], bool)
    for k, value in enumerate((np.nan, np.inf, -np.inf, 3e9, -1e30)):
        grid[k % 2, k % 4, 1 + k, k % 2] = value
        bad[k % 2, k % 4, 1 + k] = True
    model, feeds = _model(X4, grid, "linear", padding, 0, 20)
    (ours,) = graph.compile(graph.from_onnx(model), level="O0").run(feeds)
    clean = np.where(bad[..., None], 0.0, grid).astype(np.float32)
    (ref,) = reference_outputs(model, {**feeds, "in1": clean})
    assert np.isfinite(ours).all()
    keep = ~np.broadcast_to(bad[:, None], ours.shape)
    np.testing.assert_allclose(ours[keep], ref[keep], rtol=1e-4, atol=1e-5)


def test_fused_with_its_producer_and_consumer_at_o1_and_o2():
    """Grid computed by an Add, the samples through a Relu: one kernel at O1."""
    from onnx import TensorProto, helper
    nodes = [helper.make_node("Add", ["grid", "shift"], ["g2"]),
             helper.make_node("GridSample", ["x", "g2"], ["y"], mode="cubic",
                              padding_mode="reflection"),
             helper.make_node("Relu", ["y"], ["out"])]
    shift = helper.make_tensor("shift", TensorProto.FLOAT, [2], [0.3, -0.2])
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, X4.shape),
              helper.make_tensor_value_info("grid", TensorProto.FLOAT, GRID4.shape)]
    out = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    model = helper.make_model(helper.make_graph(nodes, "g", inputs, [out], [shift]),
                              opset_imports=[helper.make_opsetid("", 20)])
    model.ir_version = 8
    feeds = {"x": X4, "grid": GRID4}
    ref = reference_outputs(model, feeds)
    g = graph.from_onnx(model)
    m1 = graph.compile(g, level="O1")
    assert len(m1.steps) == 1
    assert_close(m1.run(feeds), ref)
    assert_close(graph.compile(g, level="O2").run(feeds), ref)


@pytest.mark.parametrize("mode,padding", [("linear", "zeros"), ("nearest", "reflection")])
def test_sampled_schedules_of_the_automatic_space_agree(mode, padding):
    """Configs of te's automatic space (the tables inlined, at their reader or at root,
    vectorized or not) give the unscheduled build's answer."""
    import random

    import te
    from te.autotune.auto_space import auto_schedule
    from te.autotune.space import ConfigSpace
    from te.compute import ops as topi
    x, grid = te.placeholder(X4.shape, name="x"), te.placeholder(GRID4.shape, name="grid")
    out = topi.grid_sample(x, grid, mode, padding, True)
    want = np.empty([int(d.value) for d in out.shape], np.float32)
    te.build(te.create_schedule(out.op), [x, grid, out])(X4, GRID4, want)
    space = ConfigSpace()
    auto_schedule(space, out)
    for idx in random.Random(mode).sample(range(len(space)), 3):
        s, args = auto_schedule(space.get(idx), out)
        got = np.empty_like(want)
        te.build(s, args)(*[{"x": X4, "grid": GRID4}.get(a.name, got) for a in args])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6,
                                   err_msg=str(space.get(idx)))


REFUSED = [
    ({"mode": "bilinear"}, X4, GRID4, 20,
     r"attribute 'mode', node 'node0': value 'bilinear' not supported \(supported: "
     r"\['linear', 'nearest', 'cubic'\]\)"),
    ({"mode": "linear"}, X4, GRID4, 16,
     r"value 'linear' not supported \(supported: \['bilinear', 'nearest', 'bicubic'\]\)"),
    ({"padding_mode": "wrap"}, X4, GRID4, 20,
     r"attribute 'padding_mode', node 'node0': value 'wrap' not supported"),
    ({"align_corners": 2}, X4, GRID4, 20, r"attribute 'align_corners', node 'node0': value 2"),
    ({"mode": "cubic"}, X4.astype(np.int32), GRID4, 20,
     r"mode 'cubic' needs a float input 'X', got int32 \(only 'nearest' copies other types\)"),
    ({}, X4, GRID5[:, 0], 20,
     r"input 'grid' must have shape \(N, o1, \.\.\., o2, 2\) for an input X of shape "
     r"\[2, 3, 5, 7\], got shape \[2, 3, 5, 3\]"),
    ({}, X4, GRID4[:1], 20,
     r"input 'grid' must have X's batch size 2 as its first dimension, got shape "
     r"\[1, 4, 6, 2\]"),
]


@pytest.mark.parametrize("attrs,x,grid,opset,message", REFUSED,
                         ids=[f"refused-{k}" for k in range(len(REFUSED))])
def test_unsupported_grid_samples_are_refused(attrs, x, grid, opset, message):
    model, _ = make_model("GridSample", [x, grid], attrs, opset)
    with pytest.raises(graph.UnsupportedError, match=message):
        graph.from_onnx(model)


TE_ERRORS = [
    (dict(mode="bilinear"), (2, 3, 5, 7), (2, 4, 6, 2), "float32",
     r"grid_sample: mode must be one of \['nearest', 'linear', 'cubic'\], got 'bilinear'"),
    (dict(padding_mode="wrap"), (2, 3, 5, 7), (2, 4, 6, 2), "float32",
     r"grid_sample: padding_mode must be one of \['zeros', 'border', 'reflection'\], got "
     r"'wrap'"),
    ({}, (2, 3, 5, 7), (2, 4, 6, 3), "float32",
     r"grid_sample: x \(N, C, d1..dr\) with r >= 1 needs grid \(N, o1..or, r\), got x "
     r"\(2, 3, 5, 7\) and grid \(2, 4, 6, 3\)"),
    ({}, (2, 3, 5, 7), (3, 4, 6, 2), "float32",
     r"grid_sample: grid's batch dimension \(x's is N\): expected 2, got 3"),
    ({}, (2, 3, 5, 7), (2, 4, 6, 2), "int32", r"grid_sample: grid must have a float dtype, "
                                              r"got int32"),
]


@pytest.mark.parametrize("kw,xshape,gshape,gdtype,message", TE_ERRORS,
                         ids=[f"te-{k}" for k in range(len(TE_ERRORS))])
def test_te_grid_sample_argument_errors(kw, xshape, gshape, gdtype, message):
    import te
    from te.compute import ops as topi
    x = te.placeholder(xshape, name="x")
    grid = te.placeholder(gshape, dtype=gdtype, name="grid")
    with pytest.raises(te.TEError, match=message):
        topi.grid_sample(x, grid, **kw)


def test_symbolic_spatial_sizes_are_refused():
    model, _ = make_model("GridSample", [X4, GRID4], {}, 20)
    model.graph.input[0].type.tensor_type.shape.dim[2].dim_param = "h"
    with pytest.raises(graph.UnsupportedError,
                       match=r"input 'X' needs constant spatial dimensions, got shape "
                             r"\[2, 3, h, 7\]"):
        graph.from_onnx(model)


@pytest.mark.parametrize("size,align", [((2, 3, 5, 7), 0), ((2, 3, 5, 7), 1),
                                        ((1, 2, 3, 4, 5), 0), ((1, 2, 3, 4, 5), 1)])
def test_affine_grid_matches_onnxruntime(size, align):
    r = len(size) - 2
    theta = rand(size[0], r, r + 1)
    model, feeds = make_model("AffineGrid", [theta, Const(np.array(size, np.int64))],
                              {"align_corners": align}, opset=20)
    check_levels(model, feeds)


def test_affine_grid_refusals():
    model, _ = make_model("AffineGrid", [rand(2, 2, 3), Const(np.array([2, 3, 4, 5, 6]))],
                          {}, opset=20)
    with pytest.raises(graph.UnsupportedError, match=r"theta must be \(N, 2, 3\) with a "
                                                     r"4-value size or \(N, 3, 4\) with a "
                                                     r"5-value size, got theta \[2, 2, 3\]"):
        graph.from_onnx(model)
    model, _ = make_model("AffineGrid", [rand(3, 2, 3), Const(np.array([2, 3, 4, 5]))], {},
                          opset=20)
    with pytest.raises(graph.UnsupportedError, match=r"size\[0\] must be theta's batch 3, "
                                                     r"got 2"):
        graph.from_onnx(model)
