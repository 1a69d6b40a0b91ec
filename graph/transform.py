"""Layout and type ops of the builder: reshape (flatten, squeeze, unsqueeze are reshapes),
transpose, concatenate, pad, slice, split, expand, take, tile, where, cast, clip.

Each function normalizes its attributes to static Python values and adds a node through
graph.builder.apply. Imports numpy, te's public API and graph's builder and errors.
"""
from __future__ import annotations

import numpy as np

import te
from te.compute.ops.transform import PAD_MODES

from .builder import apply, normalize_axes
from .errors import GraphError


def _static_shape(x, who: str) -> tuple:
    if any(not isinstance(d, int) for d in x.shape):
        raise GraphError(f"graph.{who}: '{x.name}' must have a constant shape, got "
                         f"{x.type_str}")
    return tuple(x.shape)


def reshape(x, newshape, name: str | None = None):
    """Row-major reshape; one entry may be -1 (inferred)."""
    old = _static_shape(x, "reshape")
    new = [int(d) for d in newshape]
    if new.count(-1) == 1:
        known = int(np.prod([d for d in new if d != -1]))
        new[new.index(-1)] = int(np.prod(old)) // known if known else 0
    if any(d < 1 for d in new) or int(np.prod(new)) != int(np.prod(old)):
        raise GraphError(f"graph.reshape: cannot reshape '{x.name}' {x.type_str} to "
                         f"{tuple(newshape)}")
    return apply("reshape", [x], {"newshape": tuple(new)}, name)


def flatten(x, axis: int = 1, name: str | None = None):
    """To 2-d: (prod(shape[:axis]), prod(shape[axis:]))."""
    shape = _static_shape(x, "flatten")
    if not -len(shape) <= axis <= len(shape):
        raise GraphError(f"graph.flatten: axis must be in [{-len(shape)}, {len(shape)}], "
                         f"got {axis}")
    if axis < 0:
        axis += len(shape)
    return reshape(x, (int(np.prod(shape[:axis])), int(np.prod(shape[axis:]))), name)


def squeeze(x, axis=None, name: str | None = None):
    shape = _static_shape(x, "squeeze")
    axes = (tuple(a for a, d in enumerate(shape) if d == 1) if axis is None
            else normalize_axes(axis, len(shape), "squeeze"))
    if any(shape[a] != 1 for a in axes):
        raise GraphError(f"graph.squeeze: axes {axes} of '{x.name}' {x.type_str} must have "
                         f"size 1")
    return reshape(x, tuple(d for a, d in enumerate(shape) if a not in axes), name)


def unsqueeze(x, axis, name: str | None = None):
    shape = list(_static_shape(x, "unsqueeze"))
    axes = normalize_axes(axis, len(shape) + len(axis if isinstance(axis, (list, tuple))
                                                  else (axis,)), "unsqueeze")
    for a in axes:
        shape.insert(a, 1)
    return reshape(x, tuple(shape), name)


def transpose(x, axes=None, name: str | None = None):
    n = len(x.shape)
    perm = tuple(reversed(range(n))) if axes is None else tuple(int(a) % n for a in axes)
    if sorted(perm) != list(range(n)):
        raise GraphError(f"graph.transpose: axes must be a permutation of 0..{n - 1}, got "
                         f"{axes!r}")
    return apply("transpose", [x], {"axes": perm}, name)


def concatenate(values, axis: int = 0, name: str | None = None):
    values = list(values)
    if not values:
        raise GraphError("graph.concatenate: values must not be empty")
    (axis,) = normalize_axes(axis, len(values[0].shape), "concatenate")
    return apply("concatenate", values, {"axis": axis}, name)


def pad(x, pad_before, pad_after, value: float = 0.0, name: str | None = None,
        mode: str = "constant"):
    """numpy.pad in mode constant (value), edge, reflect or wrap; a negative pad crops that
    many elements first (ONNX Pad). te.compute.ops.pad checks what each mode needs."""
    n = len(x.shape)
    before, after = tuple(int(p) for p in pad_before), tuple(int(p) for p in pad_after)
    if len(before) != n or len(after) != n:
        raise GraphError(f"graph.pad: pad_before and pad_after must be {n} ints, got "
                         f"{pad_before!r}, {pad_after!r}")
    if mode not in PAD_MODES:
        raise GraphError(f"graph.pad: mode must be one of {list(PAD_MODES)}, got {mode!r}")
    attrs = {"pad_before": before, "pad_after": after, "value": float(value)}
    if mode != "constant":  # constant pads keep the attributes (node text, cache keys) they had
        attrs["mode"] = mode
    return apply("pad", [x], attrs, name)


def slice(x, starts, ends, axes=None, steps=None, name: str | None = None):  # noqa: A001
    """x[starts[k]:ends[k]:steps[k]] on axes[k], with Python slice semantics."""
    n = len(x.shape)
    axes = tuple(range(len(starts))) if axes is None else tuple(int(a) % n for a in axes)
    steps = (1,) * len(axes) if steps is None else tuple(int(s) for s in steps)
    return apply("slice", [x], {"starts": tuple(int(s) for s in starts),
                                "ends": tuple(int(e) for e in ends), "axes": axes,
                                "steps": steps}, name)


def split(x, sizes, axis: int = 0, name: str | None = None, output_names=None):
    (axis,) = normalize_axes(axis, len(x.shape), "split")
    sizes = tuple(int(s) for s in sizes)
    if sum(sizes) != x.shape[axis] or min(sizes) < 1:
        raise GraphError(f"graph.split: sizes {sizes} must be positive and sum to "
                         f"{x.shape[axis]} (axis {axis} of '{x.name}')")
    outs = apply("split", [x], {"axis": axis, "sizes": sizes}, name, output_names)
    return outs if isinstance(outs, tuple) else (outs,)


def expand(x, shape, name: str | None = None):
    return apply("expand", [x], {"shape": tuple(int(d) for d in shape)}, name)


def cast(x, dtype: str, name: str | None = None):
    try:
        dtype = te.placeholder((1,), dtype=dtype).dtype
    except te.TEError as e:
        raise GraphError(f"graph.cast: {e}") from None
    return apply("cast", [x], {"dtype": dtype}, name)


def clip(x, min=None, max=None, name: str | None = None):  # noqa: A002  (ONNX's names)
    attrs = {"min": None if min is None else float(min),
             "max": None if max is None else float(max)}
    return apply("clip", [x], attrs, name)


def take(data, indices, axis: int = 0, name: str | None = None):
    """numpy.take / ONNX Gather: indices (an integer Value) select along `axis`."""
    (axis,) = normalize_axes(axis, len(data.shape), "take")
    return apply("take", [data, indices], {"axis": axis}, name)


def tile(x, repeats, name: str | None = None):
    return apply("tile", [x], {"repeats": tuple(int(r) for r in repeats)}, name)


def where(cond, lhs, rhs, name: str | None = None):
    """lhs where cond else rhs, broadcast together."""
    return apply("where", [cond, lhs, rhs], {}, name)


def resize(x, shape, scales=None, method: str = "nearest",
           coordinate_mode: str = "half_pixel", nearest_mode: str = "round_prefer_floor",
           name: str | None = None, cubic_a: float = -0.75, exclude_outside: bool = False,
           roi=None, extrapolation_value: float = 0.0, antialias: bool = False):
    """x resized to `shape` by 'nearest', 'linear' or 'cubic' interpolation; `scales`
    (default out / in per axis) enter the coordinate map as in ONNX Resize; `cubic_a`,
    `exclude_outside` and, for coordinate_mode 'tf_crop_and_resize', `roi` ((start, end)
    per axis) and `extrapolation_value`, and `antialias` (linear and cubic downsampling
    through the filter widened by 1 / scale) as ONNX's attributes and roi input."""
    shape = tuple(int(d) for d in shape)
    in_shape = _static_shape(x, "resize")
    if len(shape) != len(in_shape) or min(shape, default=1) < 1:
        raise GraphError(f"graph.resize: shape must be {len(in_shape)} positive ints, got "
                         f"{shape}")
    scales = (tuple(o / i for o, i in zip(shape, in_shape)) if scales is None
              else tuple(float(s) for s in scales))
    if coordinate_mode == "tf_crop_and_resize" and roi is None:
        roi = [(0.0, 1.0)] * len(shape)
    return apply("resize", [x], {"shape": shape, "scales": scales, "method": method,
                                 "coordinate_mode": coordinate_mode,
                                 "nearest_mode": nearest_mode}
                 | ({"cubic_a": float(cubic_a), "exclude_outside": bool(exclude_outside)}
                    if method == "cubic" else {})
                 | ({"roi": tuple((float(a), float(b)) for a, b in roi),
                     "extrapolation_value": float(extrapolation_value)}
                    if coordinate_mode == "tf_crop_and_resize" else {})
                 | ({"antialias": True} if antialias and method != "nearest" else {}), name)
