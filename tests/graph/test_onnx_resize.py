"""Resize's cubic mode, antialiasing, half_pixel_symmetric and tf_crop_and_resize
coordinates, `axes`, keep_aspect_ratio_policy, and Upsample, against onnxruntime at O0 and
O1 (one-node models, random data, odd sizes, up- and downsampling); te's cubic resize
against a numpy model of ONNX's reference on its own."""
import re

import numpy as np
import pytest

import graph
import te
from te.compute import ops as topi
from onnx_cases import Const, check_levels, make_model, rand

I64, F32 = np.int64, np.float32
X = rand(2, 3, 7, 9)


def _scales(*s):
    return Const(np.array(s, F32))


def _sizes(*s):
    return Const(np.array(s, I64))


CASES = [
    # (inputs after x: roi, scales, sizes), attributes, opset
    ((None, _scales(1, 1, 1.6, 2.3)), {"mode": "cubic"}, 13),
    ((None, _scales(1, 1, 0.6, 0.45)), {"mode": "cubic"}, 13),
    ((None, None, _sizes(2, 3, 11, 5)), {"mode": "cubic", "cubic_coeff_a": -0.5,
                                         "exclude_outside": 1}, 13),
    ((None, None, _sizes(2, 3, 12, 6)), {"mode": "cubic", "coordinate_transformation_mode":
                                         "align_corners"}, 13),
    ((None, _scales(1, 1, 2.0, 1.5)), {"mode": "cubic",
                                       "coordinate_transformation_mode": "asymmetric"}, 13),
    ((None, _scales(1, 1, 0.7, 1.3)), {"mode": "linear", "coordinate_transformation_mode":
                                       "half_pixel_symmetric"}, 19),
    ((None, None, _sizes(5, 13)), {"mode": "nearest", "axes": [3, 2]}, 18),
    ((None, _scales(1.5, 0.8)), {"mode": "linear", "axes": [2, -1]}, 18),
    ((None, None, _sizes(12, 12)), {"mode": "linear", "axes": [2, 3],
                                    "keep_aspect_ratio_policy": "not_larger"}, 18),
    ((None, None, _sizes(12, 12)), {"mode": "nearest", "axes": [2, 3],
                                    "keep_aspect_ratio_policy": "not_smaller"}, 18),
    ((Const(np.array([0, 0, 0.2, 0.1, 1, 1, 0.9, 1.2], F32)), None, _sizes(2, 3, 5, 8)),
     {"mode": "linear", "coordinate_transformation_mode": "tf_crop_and_resize",
      "extrapolation_value": 2.5}, 13),
    ((Const(np.array([0.3, -0.1, 0.8, 0.7], F32)), None, _sizes(6, 4)),
     {"mode": "nearest", "coordinate_transformation_mode": "tf_crop_and_resize",
      "axes": [2, 3]}, 18),
]


@pytest.mark.parametrize("extra,attrs,opset", CASES,
                         ids=[f"{c[1]['mode']}-{k}" for k, c in enumerate(CASES)])
def test_resize_matches_onnxruntime(extra, attrs, opset):
    model, feeds = make_model("Resize", [X, *extra], attrs, opset)
    check_levels(model, feeds, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mode", ["linear", "cubic"])
def test_align_corners_with_scales_follows_onnxs_reference(mode):
    """align_corners maps by the unrounded output length (input size x scale), as ONNX's
    reference does; onnxruntime takes the rounded output size there, so only the reference
    is compared (they agree where sizes are given)."""
    model, feeds = make_model("Resize", [X, None, _scales(1, 1, 1.7, 0.8)],
                              {"mode": mode, "coordinate_transformation_mode": "align_corners"},
                              13)
    check_levels(model, feeds, rtol=1e-4, atol=1e-4, onnx_reference=True)


@pytest.mark.parametrize("opset,mode", [(7, "nearest"), (7, "linear"), (9, "nearest"),
                                        (9, "linear")])
def test_upsample_matches_onnxruntime(opset, mode):
    scales = [1.0, 1.0, 2.0, 1.5]
    if opset < 9:
        model, feeds = make_model("Upsample", [X], {"mode": mode, "scales": scales}, opset)
    else:
        model, feeds = make_model("Upsample", [X, Const(np.array(scales, F32))],
                                  {"mode": mode}, opset)
    check_levels(model, feeds, rtol=1e-4, atol=1e-4)


def _cubic_reference(x, out, scale, a, exclude):
    """ONNX's cubic resize of a 1-d x, half_pixel coordinates (as its reference: float64,
    taps clamped to the edges, outside taps dropped and renormalized with `exclude`)."""
    y = np.empty(out)
    for o in range(out):
        c = (o + 0.5) / scale - 0.5
        base = np.floor(c)
        t = c - base
        d = np.array([t + 1, t, 1 - t, 2 - t])
        w = np.where(d <= 1, ((a + 2) * d - (a + 3)) * d * d + 1,
                     ((a * d - 5 * a) * d + 8 * a) * d - 4 * a)
        idx = base.astype(int) - 1 + np.arange(4)
        if exclude:
            w = np.where((idx < 0) | (idx >= len(x)), 0.0, w)
            w = w / w.sum()
        y[o] = (x[np.clip(idx, 0, len(x) - 1)] * w).sum()
    return y


@pytest.mark.parametrize("out,a,exclude", [(13, -0.75, False), (4, -0.5, True),
                                           (9, -0.75, True)])
def test_te_cubic_resize_matches_a_numpy_model(out, a, exclude):
    x = rand(7)
    X1 = te.placeholder((7,), name="x")
    Y = topi.resize(X1, (out,), (out / 7,), "cubic", cubic_a=a, exclude_outside=exclude)
    f = te.build(te.create_schedule(Y.op), [X1, Y])
    y = np.empty(out, F32)
    f(x, y)
    np.testing.assert_allclose(y, _cubic_reference(x.astype(np.float64), out, out / 7, a,
                                                   exclude), rtol=1e-5, atol=1e-5)


ANTIALIAS = [
    ((None, _scales(1, 1, 0.6, 0.45)), {"mode": "linear"}),
    ((None, None, _sizes(2, 3, 4, 5)), {"mode": "cubic"}),
    ((None, _scales(1, 1, 0.7, 1.6)), {"mode": "cubic", "exclude_outside": 1,
                                       "cubic_coeff_a": -0.5}),   # one axis upsampled
    ((None, _scales(1, 1, 0.3, 0.8)), {"mode": "linear",
                                       "coordinate_transformation_mode": "asymmetric"}),
]


@pytest.mark.parametrize("extra,attrs", ANTIALIAS,
                         ids=[f"{c[1]['mode']}-{k}" for k, c in enumerate(ANTIALIAS)])
def test_antialiased_resize_matches_onnxruntime(extra, attrs):
    model, feeds = make_model("Resize", [X, *extra], {**attrs, "antialias": 1}, 18)
    check_levels(model, feeds, rtol=1e-4, atol=1e-4)


def test_antialiasing_that_reads_too_much_is_refused_at_import():
    model, _ = make_model("Resize", [rand(1, 1, 200, 200), None, _scales(1, 1, 0.02, 0.02)],
                          {"mode": "cubic", "antialias": 1}, 18)
    with pytest.raises(graph.UnsupportedError,
                       match=r"Resize, attribute 'antialias', node 'node0': downsampling by "
                             r"scales \[1.0, 1.0, 0.0199.*\] reads 40804 input elements per "
                             r"output \(at most 1024\)"):
        graph.from_onnx(model)


def test_roi_of_the_wrong_length_is_refused_at_import():
    model, _ = make_model("Resize", [X, Const(np.array([0, 0, 1, 1], F32)), None,
                                     _sizes(2, 3, 5, 5)],
                          {"coordinate_transformation_mode": "tf_crop_and_resize"}, 13)
    with pytest.raises(graph.UnsupportedError,
                       match=r"roi must hold 8 values \(the starts, then the ends of axes "
                             r"\[0, 1, 2, 3\]\), got 4"):
        graph.from_onnx(model)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_integer_cubic_resize_rounds_and_saturates_as_onnxs_reference(dtype):
    """Cubic weights overshoot: a 255 beside a 0 interpolates to about 279, which an 8-bit
    output saturates (onnxruntime has no integer cubic kernel; onnx's reference rounds and
    clips)."""
    info = np.iinfo(dtype)
    row = np.array([info.min, info.max] * 3, dtype)
    x = np.stack([row, row[::-1]] * 2)[None, None]
    model, feeds = make_model("Resize", [x, None, _scales(1, 1, 1.7, 2.3)], {"mode": "cubic"},
                              19)
    check_levels(model, feeds, onnx_reference=True)


@pytest.mark.parametrize("axes", [[4], [-5], [2, -2]])
def test_resize_axes_out_of_range_or_repeated_are_refused(axes):
    model, _ = make_model("Resize", [X, None, _scales(*[1.5] * len(axes))],
                          {"mode": "nearest", "axes": axes}, 18)
    with pytest.raises(graph.UnsupportedError,
                       match=rf"axes {re.escape(str(axes))} must be distinct axes of the "
                             rf"rank-4 input"):
        graph.from_onnx(model)


def test_antialiasing_counts_the_upsampled_axes_too():
    """4 cubic taps along the upsampled batch axis times 64 and 16 along the downsampled
    ones: refused at import, as te's resize would refuse it at compile."""
    model, _ = make_model("Resize", [rand(1, 1, 64, 64), None, _scales(2, 1, 0.0625, 0.25)],
                          {"mode": "cubic", "antialias": 1}, 18)
    with pytest.raises(graph.UnsupportedError,
                       match=r"reads 4096 input elements per output \(at most 1024\)"):
        graph.from_onnx(model)
