"""One compiled kernel per distinct node workload (op, attributes, input dtypes and shapes).

compile_node(node, target, cache) builds the op's te compute on placeholders, schedules it
(graph.schedule) and builds it with te.build; a node whose workload is already in `cache`
reuses that kernel, and graph/cache.py's disk cache keeps it for the next compile.
build_kernel schedules and builds any compute by schedule family (the
fused groups of level O1 use it too, graph/group_kernels.py); a kernel of at most
SMALL_KERNEL_WORK scalar steps is compiled at LLVM's -O0 (small_kernel_target). A Kernel
is called with numpy arrays and returns its outputs as numpy arrays. Imports numpy, te's
public API and graph.{cache,errors,ops,schedule}.
"""
from __future__ import annotations

import numpy as np

import te

from . import cache as disk_cache
from .errors import GraphError
from .ops import OPS, build_compute
from .schedule import schedule

# Scalar steps (each stage's output elements x its reduction extent, summed) up to which a
# kernel compiles at LLVM -O0: LLVM's -O3 pipeline and machine code cost several times
# -O0's even for a 60-element kernel, and a kernel this small runs in a few microseconds
# either way (benchmarks/COMPILE_TIME.md: the conformance cases, shape subgraphs, tiny
# tensors, where compiling is nearly all the cost).
SMALL_KERNEL_WORK = 1024


class Kernel:
    """A built single-node kernel: __call__(*inputs) -> list of output arrays."""

    def __init__(self, name: str, func, out_types: list, target: str = "llvm"):
        self.name = name
        self.func = func
        self.out_types = out_types  # [(dtype, te shape as ints)] as the kernel writes them
        self.target = target        # what it was built for (small_kernel_target's)

    @property
    def opt_level(self) -> int:
        """The LLVM opt level of its code: export_library compiles a kernel loaded from
        the compile cache from its stored IR at this level, to the same machine code."""
        return int(te.target.parse_target(self.target).get("opt-level", 3))

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
    target = small_kernel_target(target, outs)

    def build(sch, args):
        return te.build(sch, args, target=target, name=name)

    out_types = [(t.dtype, tuple(int(d.value) for d in t.shape)) for t in outs]
    func = disk_cache.build(workload, family, target, out_types,
                       lambda: schedule(family, outs, ins + outs), build)
    return Kernel(name, func, out_types, target)


def kernel_work(outs: list) -> int:
    """Scalar steps of the computes `outs` and every stage they read: per stage its output
    elements times its reduction extent (placeholders count nothing)."""
    total, todo, seen = 0, [t.op for t in outs], set()
    while todo:
        op = todo.pop()
        if id(op) in seen or not hasattr(op, "reduce_axis"):
            continue
        seen.add(id(op))
        steps = 1
        for iv in (*op.axis, *op.reduce_axis):
            extent = iv.dom.extent
            steps *= int(extent.value) if hasattr(extent, "value") else SMALL_KERNEL_WORK + 1
        total += steps
        todo.extend(t.op for t in op.input_tensors)
    return total


def small_kernel_target(target: str, outs: list) -> str:
    """`target` with -opt-level=0 where the kernel computing `outs` takes at most
    SMALL_KERNEL_WORK scalar steps (an LLVM CPU target that names no opt level itself)."""
    if target.split()[0] != "llvm" or "-opt-level" in target:
        return target
    return f"{target} -opt-level=0" if kernel_work(outs) <= SMALL_KERNEL_WORK else target
