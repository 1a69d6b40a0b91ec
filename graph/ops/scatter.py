"""Scatter ops: scatter_elements, scatter_nd (opaque: a scan of every candidate update per
output element, in one or two stages) and tensor_scatter (injective: one candidate per
element, read directly).

Computes are te.compute.ops.scatter's. Imports te.compute.ops and graph.ops.base.
"""
from __future__ import annotations

from te.compute import ops as topi

from .base import OpDef, Pattern

OPS = {op.name: op for op in (
    OpDef("scatter_elements", Pattern.OPAQUE,
          lambda ins, axis, reduction: topi.scatter_elements(
              ins[0], ins[1], ins[2], axis, reduction, name="scatter_elements"), (3, 3),
          doc="data with updates written (or added, multiplied, maxed, mined) at the "
              "positions an index tensor gives along an axis (ONNX ScatterElements)"),
    OpDef("scatter_nd", Pattern.OPAQUE,
          lambda ins, reduction: topi.scatter_nd(ins[0], ins[1], ins[2], reduction,
                                                 name="scatter_nd"), (3, 3),
          doc="data with update slices written (or combined) at the leading coordinates "
              "each index row gives (ONNX ScatterND)"),
    OpDef("tensor_scatter", Pattern.INJECTIVE,
          lambda ins, axis, circular: topi.tensor_scatter(
              ins[0], ins[1], ins[2] if len(ins) > 2 else None, axis, circular,
              name="tensor_scatter"), (2, 3),
          doc="a cache with an update written along an axis from a per-batch position "
              "(ONNX TensorScatter)"),
)}
