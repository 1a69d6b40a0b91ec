"""Tensor-core candidates of the automatic GPU space: a float16 matmul accumulated in float32.

Takes C[[b,] i, j] = sum_k A[[b,] i, k].astype('float32') * B[[b,] k, j].astype('float32')
(float16 placeholders, M, N, K multiples of 16) and a config; gives a te.wmma_matmul_intrin
schedule: warps per block and 16x16 tiles per warp along M and N, K in chunks (a warp's C
tiles accumulated in 'wmma.accumulator' fragments across them, each stored once; or, with
fragments=False, loaded and stored in global memory per chunk), A/B chunks staged in
shared memory or not. Imports te.compute, te.schedule and te.codegen.cuda.tensor_core.
"""
from __future__ import annotations

from ..codegen.cuda.tensor_core import ACC_SCOPE, TILE, wmma_matmul_intrin, wmma_store_intrin
from ..compute import expr as E
from ..compute.api import thread_axis
from ..compute.tensor import PlaceholderOp
from ..schedule.schedule import create_schedule

WARP = 32
# per axis, warps per block and 16x16 tiles per warp: divisors of the tile count up to 4
# (at most 16 warps, 512 threads, a block)
PER_AXIS = 4
# K per update and per shared fill, the default first. 16 only where 32 does not divide K:
# each chunk waits at two barriers (and without fragments loads and stores every C tile), and
# 32 fits in shared memory wherever 16 does (at most 32 KiB a block); ptxas also spilled a
# few registers for chunks of 16 where 32 did not (sm_80, the test shapes)
CHUNKS = (32, 64)


def wmma_operands(op):
    """(A, B) where `op` computes [b,] i, j: sum_k A[[b,] i, k] * B[[b,] k, j] of float16
    placeholders cast to float32 (a batch axis b optional, either input may lack it), with
    M, N and K multiples of 16 (what te.wmma_matmul_intrin tensorizes); else None."""
    if not (op.is_reduction and len(op.axis) in (2, 3) and len(op.reduce_axis) == 1
            and op.num_outputs == 1 and op.output(0).dtype == "float32"):
        return None
    body = op.body[0]
    if not (isinstance(body, E.Reduce) and body.combiner.name == "sum" and len(body.source) == 1
            and isinstance(body.condition, E.Const) and body.condition.value is True
            and not body.init):
        return None
    prod = body.source[0]
    if not (isinstance(prod, E.Binary) and prod.op == "mul"):
        return None
    *batch, i, j = (iv.var for iv in op.axis)
    k = op.reduce_axis[0].var
    a = _half_load(prod.a, (*batch, i, k))
    b = _half_load(prod.b, (*batch, k, j))
    if a is None or b is None or a is b:
        return None
    extents = [getattr(iv.dom.extent, "value", None)
               for iv in (*op.axis[-2:], op.reduce_axis[0])]
    if not all(isinstance(n, int) and n % TILE == 0 for n in extents):
        return None
    return a, b


def _half_load(e, index_vars):
    """The float16 placeholder that `e` reads as tensor[index_vars].astype('float32'), or
    as tensor[index_vars[1:]] (an input without the batch axis)."""
    if not (isinstance(e, E.Cast) and e.dtype == "float32" and isinstance(e.value, E.TensorLoad)):
        return None
    t, indices = e.value.tensor, e.value.indices
    if not (isinstance(t.op, PlaceholderOp) and t.dtype == "float16"):
        return None
    for want in (index_vars, index_vars[-2:]):
        if len(indices) == len(want) and all(x is v for x, v in zip(indices, want)):
            return t
    return None


def define_wmma(cfg, op) -> None:
    """The knobs (the same for every config): per output axis a split of its 16x16 tiles
    into [blocks, warps per block, tiles per warp]; the K chunk (32 or 64 where they divide
    K, else 16); shared staging."""
    for name, iv in (("i", op.axis[-2]), ("j", op.axis[-1])):
        cfg.define_split(f"tile_{name}", iv.dom.extent.value // TILE, num_outputs=3,
                         filter=lambda e: e.size[1] <= PER_AXIS and e.size[2] <= PER_AXIS)
    K = op.reduce_axis[0].dom.extent.value
    cfg.define_knob("chunk", [c for c in CHUNKS if K % c == 0] or [TILE])
    cfg.define_knob("shared", (1, 0))


def schedule_wmma(cfg, op):
    """The tensor-core schedule with the sizes `cfg` chooses."""
    define_wmma(cfg, op)
    (_, wi, ti), (_, wj, tj) = cfg["tile_i"].size, cfg["tile_j"].size
    return wmma_schedule(op, (wi, wj), (ti, tj), cfg["chunk"].val, bool(cfg["shared"].val))


def wmma_schedule(op, warps: tuple, tiles: tuple, chunk: int, shared: bool = True,
                  fragments: bool = True):
    """A multi-warp tensor-core GEMM: a block computes warps[0]*tiles[0] x warps[1]*tiles[1]
    tiles of 16x16, its warps (threadIdx.z, threadIdx.y) tiles[0] x tiles[1] each, K in
    chunks of `chunk`; with `shared`, per chunk the block fills A's and B's chunk into
    shared memory, all its threads taking consecutive elements (threadIdx.x the lanes). A
    batch axis goes to blockIdx.z. With `fragments` (TVM's 'wmma.accumulator'), a warp's
    C tiles are a cache_write in accumulator fragments, declared before the chunk loop,
    each stored to C once after it; without, every chunk loads and stores each C tile."""
    C = op.output(0)
    A, B = wmma_operands(op)
    s = create_schedule([op])
    staged = [s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])] if shared else []
    acc = s.cache_write(C, ACC_SCOPE) if fragments else C
    *batch, i, j = C.op.axis
    io, ii = s[C].split(i, TILE)
    jo, ji = s[C].split(j, TILE)
    ib, iw = s[C].split(io, warps[0] * tiles[0])
    jb, jw = s[C].split(jo, warps[1] * tiles[1])
    wz, it = s[C].split(iw, tiles[0])
    wy, jt = s[C].split(jw, tiles[1])
    binds = [(ib, "blockIdx.y"), (jb, "blockIdx.x"), (wz, "threadIdx.z"), (wy, "threadIdx.y")]
    binds += [(b, "blockIdx.z") for b in batch]
    if fragments:
        s[C].reorder(*batch, ib, jb, wz, wy, it, jt, ii, ji)
        s[C].tensorize(ii, wmma_store_intrin())
        # the fragments' indices constant: the tiles' loops unrolled, here and in the matmul
        s[C].unroll(it)
        s[C].unroll(jt)
        s[acc].compute_at(s[C], wy)
        *_, ai, aj = acc.op.axis
        it, ii = s[acc].split(ai, TILE)
        jt, ji = s[acc].split(aj, TILE)
        ko, ki = s[acc].split(acc.op.reduce_axis[0], chunk)
        s[acc].reorder(ko, it, jt, ii, ji, ki)
        s[acc].unroll(it)
        s[acc].unroll(jt)
    else:
        ko, ki = s[C].split(C.op.reduce_axis[0], chunk)
        s[C].reorder(*batch, ib, jb, wz, wy, ko, it, jt, ii, ji, ki)
    for axis, tag in binds:
        s[C].bind(axis, thread_axis(tag))
    s[acc].tensorize(ii, wmma_matmul_intrin(chunk, accumulator=fragments))
    for T in staged:   # cooperative fill: the chunk fused, spread over all the threads
        s[T].compute_at(s[acc], ko)
        rest, tx = s[T].split(s[T].fuse(*s[T].op.axis), WARP)
        rest, ty = s[T].split(rest, warps[1])
        _, tz = s[T].split(rest, warps[0])
        for axis, tag in ((tx, "threadIdx.x"), (ty, "threadIdx.y"), (tz, "threadIdx.z")):
            s[T].bind(axis, thread_axis(tag))
    return s
