"""Matmul weights laid out once, in the panels the matmul's register tile streams.

A matmul by a constant [k, n] matrix W whose product has rows (a dense layer) becomes
matmul_panel of W's panels P[p, k, r] = W[k, p * nr + r] (zero past column n), nr being
te's default tile width for n columns (te.autotune.panel_width): the kernel then streams
the weight as it is instead of packing it on every call (TVM's alter_op_layout of dense
into dense_pack, its weight transform folded as a constant). Imports numpy, te's public API
and graph.passes.rewrite.
"""
from __future__ import annotations

import numpy as np

import te

from .rewrite import rebuild


def panels(w: np.ndarray, nr: int) -> np.ndarray:
    """W [k, n] as [ceil(n / nr), k, nr] panels, zero past column n."""
    k, n = w.shape
    count = -(-n // nr)
    padded = np.zeros((k, count * nr), w.dtype)
    padded[:, :n] = w
    return np.ascontiguousarray(padded.reshape(k, count, nr).transpose(1, 0, 2))


def _rule(rw, node, ins):
    if node.op != "matmul":
        return None
    a, w = ins
    if not w.is_constant or len(w.shape) != 2 or len(a.shape) < 2 or \
            w.dtype not in ("float32", "float64") or a.dtype != w.dtype or \
            not all(isinstance(d, int) for d in a.shape):
        return None
    n = w.shape[1]
    nr = te.autotune.panel_width(n, w.dtype)
    if n < 2 or nr < 2:
        return None
    data = panels(np.asarray(w.data), nr)
    return [rw.apply("matmul_panel", [a, rw.constant(data, f"{w.name}/panels")], {"n": n},
                     name=node.outputs[0].name)]


def pack_matmul_weights(g):
    return rebuild(g, _rule)
