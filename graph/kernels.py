"""One compiled kernel per distinct node workload (op, attributes, input dtypes and shapes).

compile_node(node, target, cache) builds the op's te compute on placeholders, schedules it
(graph.schedule) and builds it with te.build; a node whose workload is already in `cache`
reuses that kernel, and graph/cache.py's disk cache keeps it for the next compile.
build_kernel schedules and builds any compute by schedule family (the
fused groups of level O1 use it too, graph/group_kernels.py). A Kernel is called with numpy
arrays and returns its outputs as numpy arrays. Imports numpy, te's public API and
graph.{cache,errors,ops,schedule}.
"""
from __future__ import annotations

import numpy as np

import te

from . import cache as disk_cache
from .errors import GraphError
from .ops import OPS, build_compute
from .schedule import schedule


class Kernel:
    """A built single-node kernel: __call__(*inputs) -> list of output arrays."""

    def __init__(self, name: str, func, out_types: list):
        self.name = name
        self.func = func
        self.out_types = out_types  # [(dtype, te shape as ints)] as the kernel writes them

    def __call__(self, *inputs) -> list:
        outs = [np.empty(shape, dtype=dtype) for dtype, shape in self.out_types]
        # 0-d values are 1-element tensors inside te (te.compute has no 0-d tensors)
        self.func(*[a.reshape(1) if a.ndim == 0 else a for a in inputs], *outs)
        return outs


def compile_node(node, target: str, cache: dict) -> Kernel:
    key = node.workload()
    kernel = cache.get(key)
    if kernel is None:
        kernel = _build(node, target, f"k{len(cache)}_{node.op}")
        cache[key] = kernel
    return kernel


def _build(node, target: str, name: str) -> Kernel:
    check_static(list(node.inputs) + list(node.outputs))
    opdef = OPS[node.op]
    ins, outs = build_compute(opdef, [(v.dtype, v.shape) for v in node.inputs], node.attr)
    return build_kernel(name, opdef.schedule, ins, outs, target,
                        workload=("node",) + node.workload())


def check_static(values) -> None:
    for v in values:
        if any(not isinstance(d, int) for d in v.shape):
            raise GraphError(f"graph.compile: value '{v.name}' has symbolic shape "
                             f"{v.type_str}; compile needs constant shapes (give them with "
                             f"from_onnx(..., shapes=...) or graph.input)")


def build_kernel(name: str, family: str, ins: list, outs: list, target: str,
                 workload=None) -> Kernel:
    """Schedule the compute `ins` -> `outs` by `family` (graph.schedule) and build it.
    `workload`: what decides this kernel in the graph, its compile-cache key
    (graph/cache.py); None builds it without the cache."""
    def build(sch, args):
        return te.build(sch, args, target=target, name=name)

    out_types = [(t.dtype, tuple(int(d.value) for d in t.shape)) for t in outs]
    func = disk_cache.build(workload, family, target, out_types,
                       lambda: schedule(family, outs, ins + outs), build)
    return Kernel(name, func, out_types)
