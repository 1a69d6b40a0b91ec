"""Pass winograd_rows: a 3x3 stride-1 conv2d of a constant weight as Winograd F(4, 3) along
its rows (te.compute.ops.winograd_rows), for the sizes where that measured faster than the
direct GEMM form (on an AVX-512 host: benchmarks/CONV_SHAPES.md).

conv2d(x, W, b) becomes winograd_rows_output(conv2d(winograd_rows_input(x), U, groups 6), b)
with U = winograd_rows_weight(W) computed here, once (a constant). The middle conv does half
the multiplies of the 3x3 one and is a GEMM-form conv itself (pack_conv_weights packs U
next); the two transforms are injective kernels, the output one taking the bias and, by
fusion, what follows (relu, a residual add).

On finite inputs of ordinary size the answers differ from the direct form's by rounding
(the transforms' coefficients run from 1/24 to 8: a few times the direct form's error).
Not beyond that: an infinite input gives NaN (0 * inf and inf - inf in the transforms)
where the direct conv gives an infinity, a NaN reaches all 4 output rows of its tile (the
direct conv: the 3 rows whose window holds it), and inputs within about 10x of the
dtype's largest value can overflow in the input transform. TE_WINOGRAD=0 in the
environment turns the pass off (O1 and O2 then keep the direct form, as O0 does).

Which convs: groups 1, dilation 1, float32, at least WINOGRAD_MIN_CHANNELS input and output
channels and an output of at least WINOGRAD_MIN_SIZE rows and columns (smaller ones
measured slower: benchmarks/CONV_SHAPES.md). Imports os, numpy, te's op library and
graph.passes.rewrite.
"""
from __future__ import annotations

import os

import numpy as np
from te.compute.ops import winograd_rows as wr

from ..ir import Graph
from .rewrite import rebuild

WINOGRAD_MIN_CHANNELS = 16
WINOGRAD_MIN_SIZE = 7
WINOGRAD_ON = True    # (benchmarks turn it off to compare; users set TE_WINOGRAD=0)


def eligible(node, ins) -> bool:
    """Whether conv2d node `node` (inputs `ins`) takes the row-Winograd form."""
    if not WINOGRAD_ON or os.environ.get("TE_WINOGRAD", "1") == "0" or \
            node.op != "conv2d" or not ins[1].is_constant:
        return False
    attr = node.attr
    if attr["groups"] != 1 or tuple(attr["strides"]) != (1, 1) or \
            tuple(attr["dilation"]) != (1, 1) or ins[0].dtype != "float32":
        return False
    xs, ws = tuple(ins[0].shape), tuple(ins[1].shape)
    if not all(isinstance(d, int) for d in xs + ws) or ws[2:] != (3, 3):   # te.var dims
        return False
    top, left, bottom, right = attr["padding"]
    oh, ow = xs[2] + top + bottom - 2, xs[3] + left + right - 2
    return (min(xs[1], ws[0]) >= WINOGRAD_MIN_CHANNELS and min(oh, ow) >= WINOGRAD_MIN_SIZE
            and max(top, bottom) <= 2)


def transform_weight(w: np.ndarray) -> np.ndarray:
    """U (6 * CO, CI, 1, 3) of a (CO, CI, 3, 3) weight, in float64 and then w's dtype."""
    g = np.array(wr.G, dtype=np.float64)
    u = np.einsum("ak,oikx->aoix", g, w.astype(np.float64))
    co, ci = w.shape[:2]
    return u.reshape(wr.WINOGRAD_ALPHA * co, ci, 1, 3).astype(w.dtype)


def _rule(rw, node, ins):
    if not eligible(node, ins):
        return None
    top, left, bottom, right = node.attr["padding"]
    out_height = int(ins[0].shape[2]) + top + bottom - 2
    name = node.outputs[0].name
    rows = rw.apply("winograd_rows_input", [ins[0]], {"top": top, "out_height": out_height},
                    base=f"{name}/winograd_input")
    u = rw.constant(transform_weight(ins[1].data), f"{ins[1].name}/winograd")
    tiles = rw.apply("conv2d", [rows, u], {"strides": (1, 1), "padding": (0, left, 0, right),
                                           "dilation": (1, 1),
                                           "groups": wr.WINOGRAD_ALPHA},
                     base=f"{name}/winograd_conv")
    return [rw.apply("winograd_rows_output", [tiles, *ins[2:]], {"out_height": out_height},
                     name=name)]


def winograd_rows(g: Graph) -> Graph:
    """g with each eligible 3x3 conv2d in the row-Winograd form."""
    return rebuild(g, _rule)
