"""The automatic GPU space: a schedule for target 'cuda' from the compute alone.

Takes the output tensor (constant shapes) and a config (ConfigSpace to collect knobs,
ConfigEntity to apply them); gives (schedule, args). Three kinds of graph: a float16 matmul
accumulated in float32 with M, N, K multiples of 16 gets tensor cores (wmma_space.py: warps
per block and 16x16 tiles per warp along M and N, a K chunk, A/B chunks staged in shared
memory or not); another matmul-like output (2-D, one reduction axis, reading placeholders)
gets TVM's GEMM recipe (block, virtual-thread, thread and inner tiles of both output axes;
shared tiles of every input filled cooperatively by the block's threads at each k step; a
local accumulator; unroll of the k step); an injective graph (its producers inlined) is
fused, split into vectors and bound to blocks and threads. Option 0 of every knob is the
default config, valid on any GPU (at most 1024 threads a block, a few KiB of shared
memory). Imports te.compute, te.schedule, auto_space, wmma_space and workload.
"""
from __future__ import annotations

from ..compute.api import thread_axis
from ..compute.tensor import ComputeOp, PlaceholderOp
from ..errors import ArgumentError
from ..schedule.schedule import create_schedule, topo_order
from .wmma_space import schedule_wmma, wmma_operands
from .workload import output_ops

STRATEGY = "gpu"

# Knob options, the default first. Threads per axis up to 32 (a block of at most 1024);
# wider options only where the axis is that long, so a small graph's space stays small.
THREADS = (8, 16, 4, 32)
INNER = (2, 1, 4)
VTHREADS = (1, 2)
K_STEPS = (8, 4, 16)
BLOCK_THREADS = (256, 128, 512, 64, 1024)
VECTOR = (1, 2, 4)


def gpu_strategy(cfg, outputs, args=None):
    """(schedule, args) as te.autotune's tasks take a space generator (strategy 'gpu')."""
    from .auto_space import default_args
    ops = output_ops(outputs)
    if len(ops) != 1 or not isinstance(ops[0], ComputeOp) or ops[0].num_outputs != 1:
        raise ArgumentError(f"te.autotune: the GPU space schedules one te.compute output, "
                            f"got {len(ops)} output operations")
    op = ops[0]
    args = list(args) if args is not None else default_args(outputs)
    if wmma_operands(op) is not None:
        return schedule_wmma(cfg, op), args
    if is_matmul_like(op):
        return schedule_matmul(cfg, op), args
    return schedule_injective(cfg, op), args


def is_matmul_like(op) -> bool:
    """A 2-D output with one reduction axis whose inputs are all placeholders."""
    return (op.is_reduction and len(op.axis) == 2 and len(op.reduce_axis) == 1
            and all(isinstance(t.op, PlaceholderOp) for t in op.input_tensors))


def _extent(iv) -> int:
    ext = getattr(iv.dom.extent, "value", None)
    if not isinstance(ext, int):
        raise ArgumentError(f"te.autotune: the GPU space needs constant extents, axis "
                            f"'{iv.var.name}' has extent {iv.dom.extent}")
    return ext


def _up_to(options, extent: int) -> list:
    """The options no larger than `extent` (the smallest kept where none is)."""
    kept = [v for v in options if v <= extent]
    return kept or [min(options)]


def define_matmul(cfg, op) -> None:
    """The knobs of a matmul-like output (defined in the same order for every config)."""
    (i, j), (k,) = op.axis, op.reduce_axis
    for name, iv in (("i", i), ("j", j)):
        ext = _extent(iv)
        cfg.define_knob(f"threads_{name}", _up_to(THREADS, ext))
        cfg.define_knob(f"vthread_{name}", _up_to(VTHREADS, max(ext // 16, 1)))
        cfg.define_knob(f"inner_{name}", _up_to(INNER, ext))
    cfg.define_knob("k_step", _up_to(K_STEPS, _extent(k)))
    cfg.define_knob("shared", (1, 0))      # shared tiles of the inputs, or global reads
    cfg.define_knob("unroll_k", (1, 0))


def schedule_matmul(cfg, op):
    """TVM's GEMM recipe with the tile sizes `cfg` chooses."""
    define_matmul(cfg, op)
    C = op.output(0)
    s = create_schedule([op])
    inputs = list(dict.fromkeys(op.input_tensors))
    shared = [s.cache_read(t, "shared", [C]) for t in inputs] if cfg["shared"].val else []
    CL = s.cache_write(C, "local")
    ty, tx = thread_axis("threadIdx.y"), thread_axis("threadIdx.x")
    loops = {}
    for name, ax in (("i", C.op.axis[0]), ("j", C.op.axis[1])):
        th, vt, inner = (cfg[f"{p}_{name}"].val for p in ("threads", "vthread", "inner"))
        block, rest = s[C].split(ax, factor=vt * th * inner)
        virtual, rest = s[C].split(rest, factor=th * inner)
        thread, inner_loop = s[C].split(rest, factor=inner)
        loops[name] = (block, virtual, thread, inner_loop)
    (bi, vi, ti, ii), (bj, vj, tj, ij) = loops["i"], loops["j"]
    s[C].reorder(bi, bj, vi, vj, ti, tj, ii, ij)
    s[C].bind(bi, thread_axis("blockIdx.y"))
    s[C].bind(bj, thread_axis("blockIdx.x"))
    s[C].bind(vi, thread_axis("vthread", name="vi"))
    s[C].bind(vj, thread_axis("vthread", name="vj"))
    s[C].bind(ti, ty)
    s[C].bind(tj, tx)
    s[CL].compute_at(s[C], tj)
    yo, xo = CL.op.axis
    ko, ki = s[CL].split(CL.op.reduce_axis[0], factor=cfg["k_step"].val)
    s[CL].reorder(ko, ki, yo, xo)
    if cfg["unroll_k"].val:
        s[CL].unroll(ki)
    threads_i, threads_j = cfg["threads_i"].val, cfg["threads_j"].val
    for fill in shared:
        # cooperative fetch: the block's threads take consecutive elements (coalesced)
        s[fill].compute_at(s[CL], ko)
        fused = s[fill].fuse(*s[fill].op.axis)
        _, lanes = s[fill].split(fused, factor=threads_i * threads_j)
        fy, fx = s[fill].split(lanes, factor=threads_j)
        s[fill].bind(fy, ty)
        s[fill].bind(fx, tx)
    return s


def define_injective(cfg, op) -> None:
    total = 1
    for iv in op.axis:
        total *= _extent(iv)
    cfg.define_knob("block_threads", _up_to(BLOCK_THREADS, total))
    cfg.define_knob("vector", _up_to(VECTOR, total))


def schedule_injective(cfg, op):
    """Producers inlined; the output fused, split into vectors, bound to blocks/threads."""
    producers = [p for p in topo_order([op]) if isinstance(p, ComputeOp) and p is not op]
    for p in [op] + producers:
        if p.is_reduction:
            why = ("a reduction of another shape" if p is op else
                   f"a reduction read by '{op.name}' (stages over a reduction are not in "
                   f"the space yet)")
            raise ArgumentError(f"te.autotune: the GPU space schedules a matmul-like output "
                                f"(2-D, one reduction axis, reading placeholders) or an "
                                f"injective graph; '{p.name}' is {why}")
    define_injective(cfg, op)
    s = create_schedule([op])
    for p in producers:
        s[p].compute_inline()
    fused = s[op].fuse(*s[op].op.axis) if len(op.axis) > 1 else s[op].op.axis[0]
    outer, vec = s[op].split(fused, factor=cfg["vector"].val)
    block, thread = s[op].split(outer, factor=cfg["block_threads"].val)
    s[op].bind(block, thread_axis("blockIdx.x"))
    s[op].bind(thread, thread_axis("threadIdx.x"))
    if cfg["vector"].val > 1:
        s[op].vectorize(vec)
    return s
