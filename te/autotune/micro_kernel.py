"""The register-blocked micro-kernel, for matmul-like reduction outputs (matmul, batch
matmul, conv, pool): its public API, define_matmul_like and schedule_matmul_like.

Takes a reduction op and a config; defines its register-tile knobs and applies them (the
tile accumulates in a local buffer, reduction loops outside it); also the packing rewrite
and the host's vector width. Used by auto_space.py and templates. Imports te.compute,
te.dtype, te.errors; llvmlite lazily.
"""
from __future__ import annotations

import functools
import math

from .. import dtype as dt
from ..compute import expr as E
from ..compute.tensor import ComputeOp, Tensor
from ..errors import ArgumentError

MAX_UNROLL = 256


def static_extent(iv) -> int:
    ext = iv.dom.extent
    if not hasattr(ext, "value"):
        raise ArgumentError(f"te.autotune: axis '{iv.var.name}' has a symbolic extent; the "
                            f"automatic space needs constant shapes")
    return int(ext.value)


def vector_lanes(dtype: str = "float32") -> int:
    """Lanes of one native vector register for `dtype` on the host (AVX-512: 512 bits,
    AVX/AVX2: 256, otherwise 128)."""
    bits = _vector_bits()
    width = dt.bits(dtype) if dtype != "bool" else 8
    return max(1, bits // max(width, 8))


@functools.lru_cache(maxsize=None)
def _vector_bits() -> int:
    try:
        import llvmlite.binding as llvm
        feats = llvm.get_host_cpu_features()
    except Exception:  # noqa: BLE001 - no JIT here: plan for SSE
        return 128
    if feats.get("avx512f"):
        return 512
    if feats.get("avx2") or feats.get("avx"):
        return 256
    return 128


def _preferred(options: list, first) -> list:
    """`options` with `first` moved to the front (the default config takes option 0)."""
    return [first] + [o for o in options if o != first] if first in options else options


def define_matmul_like(cfg, op, prefix: str):
    """Define the register-tile knobs of reduction output `op` (a ComputeOp or its tensor)
    as `prefix` + ".nr", ".mr", ".mc", ".fr", ".kc", ".unroll_r", ".order", ".parallel",
    ".pack", ".rfactor". Call it before te.create_schedule: when the config packs the panel
    operand, `op` is rewritten to read a packed copy. Returns (the op to schedule, whose
    output replaces the original's in the build's arguments; the packed tensor or None)."""
    op = _reduction_op(op, prefix, "define_matmul_like")
    _define_micro_kernel(cfg, op, prefix)
    # (partial results along k read the operands as they are: no packed panels)
    if cfg[prefix + ".pack"].val and not cfg[prefix + ".rfactor"].val:
        return _pack_rewrite(op, cfg[prefix + ".nr"].val)
    return op, None


def _reduction_op(op, prefix, who: str):
    """`op` as a reduction ComputeOp; else an ArgumentError that names the parameter."""
    if not isinstance(prefix, str) or not prefix:
        raise ArgumentError(f"te.autotune.{who}: prefix must be a non-empty string (the "
                            f"knob names' prefix), got {prefix!r}")
    op = op.op if isinstance(op, Tensor) else op
    if isinstance(op, ComputeOp) and op.is_reduction:
        return op
    got = f"stage '{op.name}', which has no reduce_axis" if isinstance(op, ComputeOp) \
        else type(op).__name__
    raise ArgumentError(f"te.autotune.{who}: op must be a reduction te.compute stage "
                        f"(C.op of a matmul, conv or pool), got {got}")


def _define_micro_kernel(cfg, op, pfx: str) -> None:
    """The register-tile knobs of a reduction output (defined before any rewrite, because
    the packed layout depends on nr). Option 0 of each knob is the expected best."""
    spatial = list(op.axis)
    ext = [static_extent(iv) for iv in spatial]
    rext = [static_extent(iv) for iv in op.reduce_axis]
    lanes = vector_lanes(op.output_dtype(0))
    given = panel_read(op)
    # panels made ahead (matmul_panel): the tile is as wide as they are
    cfg.define_knob(pfx + ".nr", [given] if given else _nr_options(ext[-1], lanes))
    _define_tile_rows(cfg, op, pfx, -(-cfg[pfx + ".nr"].val // lanes), lanes)
    k0 = rext[0] if rext else 1
    cfg.define_knob(pfx + ".kc", [k for k in (4, 1, 2, 8) if k <= k0] or [1])
    small = any(e <= 7 for e in rext[1:])
    cfg.define_knob(pfx + ".unroll_r", [True, False] if small else [False])
    cfg.define_knob(pfx + ".order", ["rows_cols", "cols_rows"] if len(spatial) >= 2
                    else ["rows_cols"])
    cfg.define_knob(pfx + ".parallel", ["fused", "outer", "none"])
    cfg.define_knob(pfx + ".pack", [True, False] if _pack_candidate(op) else [False])
    # an output too small to fill a register tile may be summed as vector partial results
    few = math.prod(ext) < 64 and rext[0] >= 64
    cfg.define_knob(pfx + ".rfactor", [False, True] if few else [False])


def panel_width(n: int, dtype: str = "float32") -> int:
    """The default register-tile width (`.nr`) of a matmul-like output whose last axis
    has extent n: the width of the panels to lay a constant weight out in ahead of time
    (te.compute.ops.matmul_panel), so that the tile streams them as they are."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ArgumentError(f"te.autotune.panel_width: n must be a positive int (the "
                            f"output's columns), got {n!r}")
    return _nr_options(n, vector_lanes(dtype))[0]


def panel_read(op):
    """nr when `op` reads an input as panels made ahead, P[.., j // nr, .., j % nr] with j
    its last axis (matmul_panel); else None. Such a read is not packed again."""
    j = op.axis[-1].var if op.axis else None

    def part(e, kind):
        return isinstance(e, E.Binary) and e.op == kind and e.a is j and \
            isinstance(e.b, E.Const) and int(e.b.value) > 1
    for load in tensor_loads(op):
        idx = load.indices
        if j is not None and idx and part(idx[-1], "floormod") and \
                any(part(e, "floordiv") and int(e.b.value) == int(idx[-1].b.value)
                    for e in idx[:-1]):
            return int(idx[-1].b.value)
    return None


def _nr_options(last: int, lanes: int) -> list:
    """The tile widths (`.nr`) for an innermost axis of extent `last`, default first."""
    nr_opts = [m * lanes for m in (1, 2, 3, 4) if m * lanes <= max(last, lanes)]
    if last < lanes:
        nr_opts = [last]
    elif not any(last % o == 0 for o in nr_opts) and last % (lanes // 2) == 0 and lanes >= 16:
        nr_opts = [lanes // 2] + nr_opts   # 56 wide on AVX-512: half vectors, no tail
        if last <= 4 * lanes:
            nr_opts.append(last)           # or the whole row: 3 full vectors and a half
    ideal_nr = 2 * lanes if lanes >= 16 else 3 * lanes
    # prefer a width that divides the axis (no tail), the widest up to the ideal one; a
    # whole row that no vector width divides beats half vectors (56 on AVX-512)
    fits = [o for o in nr_opts if last % o == 0 and o <= ideal_nr]
    nr0 = max(fits) if fits else min(nr_opts, key=lambda o: (last % o != 0, abs(o - ideal_nr)))
    if last in nr_opts and last % lanes and last > lanes:
        nr0 = last
    return _preferred(nr_opts, nr0)


def _define_tile_rows(cfg, op, pfx: str, n_vec: int, lanes: int) -> None:
    """The tile's rows (`.mr`, along the second-last axis), row blocks (`.mc`) and rows of
    the third-last axis (`.fr`), by default as many as leave room in the vector registers
    next to `n_vec` accumulators per tile row."""
    spatial = list(op.axis)
    ext = [static_extent(iv) for iv in spatial]
    regs = 16 if lanes >= 16 else 12          # accumulators that leave room for B and A
    rows = ext[-2] if len(spatial) >= 2 else 1
    fe = ext[-3] if len(spatial) >= 3 else 1
    mr_opts = [m for m in (1, 2, 3, 4, 6, 8) if m <= rows] or [1]
    fr_opts = [f for f in (1, 2, 4, 8) if f <= fe] or [1]
    # Fill the accumulators first along the axis the streamed vector operand does not
    # depend on (it is reused across that axis: A's rows in matmul, output channels in
    # conv); an axis it depends on costs a vector load per tile row.
    streamed = _streamed_operand_axes(op)
    fr_first = len(spatial) >= 3 and spatial[-3].var not in streamed and \
        spatial[-2].var in streamed

    def largest(opts, extent, budget):
        return max([m for m in opts if m <= budget and extent % m == 0] or [1])
    if fr_first:
        fr0 = largest(fr_opts, fe, regs // n_vec)
        mr0 = largest(mr_opts, rows, max(1, regs // (n_vec * fr0)))
    else:
        mr0 = largest(mr_opts, rows, max(1, min(8, regs // n_vec)))
        fr0 = 1
    if len(spatial) >= 2:
        cfg.define_knob(pfx + ".mr", _preferred(mr_opts, mr0))
        blocks = -(-rows // cfg[pfx + ".mr"].val)
        mc_opts = [b for b in (16, 1, 4, 8, 32) if b <= blocks] or [1]
        cfg.define_knob(pfx + ".mc", mc_opts)
    else:
        cfg.define_knob(pfx + ".mr", [1])
        cfg.define_knob(pfx + ".mc", [1])
    if len(spatial) >= 3:
        if not fr_first:
            acc = cfg[pfx + ".mr"].val * n_vec
            fr0 = largest(fr_opts, fe, regs // acc)
        cfg.define_knob(pfx + ".fr", _preferred(fr_opts, fr0))
    else:
        cfg.define_knob(pfx + ".fr", [1])


def tensor_loads(op) -> list:
    """The TensorLoads of `op`'s body, in pre-order."""
    found: list = []
    E.pre_order(op.body[0], lambda x: found.append(x) if isinstance(x, E.TensorLoad) else None)
    return found


def _index_vars(load) -> set:
    return {v for e in load.indices for v in E.free_vars(e)}


def _streamed_operand_axes(op) -> set:
    """Spatial axis vars that the loads indexed by the innermost spatial axis depend on
    (the operand the register tile streams as vectors)."""
    j = op.axis[-1].var
    spatial = {iv.var for iv in op.axis}
    out: set = set()
    for load in tensor_loads(op):
        used = _index_vars(load)
        if j in used:
            out.update(used & spatial)
    return out


def _pack_candidate(op):
    """(tensor, indices) of the input a register tile streams as a panel, or None.

    That is an input read through one index pattern that depends on the innermost spatial
    axis j and on a reduction axis but not on the row axis of the register tile (so one
    packed panel serves every row): B in A[i, k] * B[k, j] (or B[j, k], which is strided
    along j), per batch in batch matmul. Packing lays it out as [.., j // nr, k, j % nr]:
    the micro-kernel then reads nr contiguous values per step of k.
    """
    if op.num_outputs != 1 or not op.is_reduction or not op.axis or panel_read(op):
        return None
    j = op.axis[-1].var
    row = op.axis[-2].var if len(op.axis) >= 2 else None
    rvars = {iv.var for iv in op.reduce_axis}
    loads: dict = {}
    for load in tensor_loads(op):
        loads.setdefault(load.tensor, []).append(load.indices)
    for t, patterns in loads.items():
        first = patterns[0]
        if any(not all(E.structural_equal(a, b) for a, b in zip(first, other))
               for other in patterns[1:]):
            continue
        used = {v for e in first for v in E.free_vars(e)}
        if j in used and used & rvars and (row is None or row not in used):
            return t, first
    return None


def _pack_rewrite(op, nr: int):
    """(new output op, packed tensor): `op` reading its panel input from a packed copy,
    built from the operator's own index expressions (any matmul-like te.compute)."""
    from ..compute import api as T
    t, indices = _pack_candidate(op)
    jv = op.axis[-1]
    n = static_extent(jv)
    used = {v for e in indices for v in E.free_vars(e)}
    sdeps = [iv for iv in op.axis[:-1] if iv.var in used]
    rdeps = [iv for iv in op.reduce_axis if iv.var in used]
    panels = -(-n // nr)
    shape = [static_extent(iv) for iv in sdeps] + [panels] + \
        [static_extent(iv) for iv in rdeps] + [nr]
    ns = len(sdeps)

    def fpack(*vs):
        jj = vs[ns] * nr + vs[-1]
        mapping = {iv.var: v for iv, v in zip(sdeps, vs[:ns])}
        mapping.update({iv.var: v + iv.dom.min for iv, v in zip(rdeps, vs[ns + 1:-1])})
        mapping[jv.var] = T.min(jj, n - 1) if n % nr else jj
        val = t(*[E.substitute(e, mapping) for e in indices])
        return T.if_then_else(jj < n, val, E.zero_like(val)) if n % nr else val
    packed = T.compute(shape, fpack, name=f"{t.op.name}_pack")
    new_idx = tuple([iv.var for iv in sdeps] + [T.indexdiv(jv.var, nr)]
                    + [iv.var - iv.dom.min for iv in rdeps] + [T.indexmod(jv.var, nr)])

    def swap(x):
        if isinstance(x, E.TensorLoad) and x.tensor == t:
            return packed(*new_idx)
        return None
    body = tuple(E.transform(b, swap) for b in op.body)
    new = ComputeOp(op.name, op.tag, op.attrs, op.axis, op.reduce_axis, body)
    return new, packed


def schedule_matmul_like(cfg, s, op, prefix: str, packed=None, epilogue=None):
    """Schedule reduction output `op` (as define_matmul_like returned it, with the same
    `prefix`; `packed` its packed tensor) as a register-blocked micro-kernel, defining knob
    `.cache`. Spatial axes ..., f, i, j get register tiles fr x mr x nr (nr a multiple of
    the vector width); the tile accumulates in a cache_write local buffer computed at the
    row-block loop, with the reduction loops outside the tile, the tile rows unrolled and
    its last axis vectorized; row blocks of mc tiles, parallel over the fused outer loops.
    Without the cache, the same tiling is applied to the op itself; with `.rfactor`, vector
    partial results along k instead. With `epilogue`, an elementwise stage of op's shape
    reading op (its other readers inlined into it): that output is tiled, and op is
    computed into its tile, as the cache would be (TVM's dense schedules). Returns the
    row-block loop (where other stages can be computed), or None."""
    op = _reduction_op(op, prefix, "schedule_matmul_like")
    spatial = list(op.axis)
    for iv in spatial:
        static_extent(iv)                 # raises on a symbolic extent
    cfg.define_knob(prefix + ".cache", [True] if epilogue is not None else
                    [True, False] if op.num_outputs == 1 else [False])
    if packed is not None:
        _schedule_pack(cfg, s, packed, prefix)
    if cfg[prefix + ".rfactor"].val:
        return _schedule_rfactor(cfg, s, op, prefix)
    nd = len(spatial)
    tiles = [1] * nd
    tiles[-1] = cfg[prefix + ".nr"].val
    if nd >= 2:
        tiles[-2] = cfg[prefix + ".mr"].val
    if nd >= 3:
        tiles[-3] = cfg[prefix + ".fr"].val
    if epilogue is not None:
        cache, out = op.output(0), epilogue
    else:
        cache = s.cache_write(op.output(0), "local") if cfg[prefix + ".cache"].val else None
        out = op
    st = s[out]
    loops, inner = _tile_loops(cfg, st, list(out.axis), tiles, prefix)
    attach = loops[-1]
    if cache is None:
        _micro_kernel(cfg, st, list(op.reduce_axis), inner, tiles, prefix)
        return attach
    _annotate_tile(st, inner)
    cst = s[cache]
    cst.compute_at(st, attach)
    _micro_kernel(cfg, cst, list(cst.op.reduce_axis), list(cst.op.axis), tiles, prefix)
    return attach


def _tile_loops(cfg, st, spatial: list, tiles: list, prefix: str):
    """Split each spatial axis by its tile size and the row axis by `.mc` tiles, order the
    outer loops (`.order`) above the tile and make them parallel (`.parallel`). Returns
    (the outer loops, the tile's axes with None where untiled)."""
    nd = len(spatial)
    row_axis = nd - 2 if nd >= 2 else nd - 1
    mc = cfg[prefix + ".mc"].val
    outer, inner = [], []
    for iv, t in zip(spatial, tiles):
        o, i = st.split(iv, factor=t) if t > 1 else (iv, None)
        outer.append(o)
        inner.append(i)
    roo, roi = st.split(outer[row_axis], factor=mc) if mc > 1 else (outer[row_axis], None)
    rest = outer[row_axis + 1:]
    blocks = rest + [roo] if cfg[prefix + ".order"].val == "cols_rows" else [roo] + rest
    loops = outer[:row_axis] + blocks + ([roi] if roi is not None else [])
    st.reorder(*(loops + [i for i in inner if i is not None]))
    # the last outer loop, where the local tile is computed, stays out of the parallel one
    parallel_loops(cfg, st, loops[:-1] if len(loops) > 1 else loops, prefix)
    return loops, inner


def _annotate_tile(st, inner: list) -> None:
    """The write-back of a tile: rows unrolled (constant offsets into the local buffer keep
    it in registers), last axis vectorized."""
    if inner[-1] is not None:
        st.vectorize(inner[-1])
    for iv in inner[:-1]:
        if iv is not None and 1 < _const_extent(iv) <= 16:
            st.unroll(iv)


def _micro_kernel(cfg, st, reduce: list, axes: list, tiles: list, pfx: str) -> None:
    """Order the reduction loops outside the register tile (`axes`, of extents `tiles`,
    None where untiled); unroll k by kc, small reduction axes (unroll_r) and the tile rows;
    vectorize the tile's last axis."""
    kc = cfg[pfx + ".kc"].val
    ko, ki = st.split(reduce[0], factor=kc) if kc > 1 else (reduce[0], None)
    others = reduce[1:]
    tile = [(a, t) for a, t in zip(axes, tiles) if a is not None]
    st.reorder(*([ko] + others + ([ki] if ki is not None else []) + [a for a, _ in tile]))
    if axes[-1] is not None and tiles[-1] > 1:
        st.vectorize(axes[-1])
    body = 1
    for a, t in tile[:-1]:
        if 1 < t <= 16:
            st.unroll(a)
            body *= t
    if cfg[pfx + ".unroll_r"].val:
        for r in others:
            e = _const_extent(r)
            if 1 < e <= 7 and body * e <= MAX_UNROLL:
                st.unroll(r)
                body *= e
    if ki is not None and body * kc <= MAX_UNROLL:
        st.unroll(ki)


def parallel_loops(cfg, st, loops: list, pfx: str):
    """Parallel over the fused outer loops ("fused"), the first one ("outer") or none."""
    mode = cfg[pfx + ".parallel"].val
    if mode == "none" or not loops:
        return None
    if mode == "fused" and len(loops) > 1:
        fused = st.fuse(*loops)
        st.parallel(fused)
        return fused
    st.parallel(loops[0])
    return None


def _schedule_pack(cfg, s, packed, pfx: str) -> None:
    """The packing stage: panels in parallel, the nr-wide rows vectorized."""
    pst = s[packed]
    axes = list(packed.op.axis)
    pst.vectorize(axes[-1])
    if cfg[pfx + ".parallel"].val != "none":
        outer = [a for a in axes[:-2]]
        pst.parallel(pst.fuse(*outer) if len(outer) > 1 else outer[0])


def _const_extent(iv) -> int:
    ext = iv.dom.extent
    return int(ext.value) if hasattr(ext, "value") else 0


def rfactor_lanes(s, op, kc: int):
    """op's one reduction as vector partial results: kc vectors of them, the lane axis
    innermost below the reduction loop and vectorized. Returns the partial stage."""
    _, ki = s[op].split(op.reduce_axis[0], factor=vector_lanes(op.output_dtype(0)) * kc)
    rf = s.rfactor(op.output(0), ki, factor_axis=len(op.axis))
    return lanes_innermost(s, rf)


def lanes_innermost(s, rf):
    """The lane axis (last) of rfactor stage `rf` below its reduction loop, vectorized:
    each step of the reduction is one vector operation on the partial results."""
    st = s[rf]
    lane = st.op.axis[-1]
    st.reorder(*(list(st.op.axis[:-1]) + list(st.op.reduce_axis) + [lane]))
    st.vectorize(lane)
    return rf


def _schedule_rfactor(cfg, s, op, pfx: str):
    """Little spatial parallelism: the partial results at root."""
    rfactor_lanes(s, op, cfg[pfx + ".kc"].val)
    if op.axis and cfg[pfx + ".parallel"].val != "none":
        s[op].parallel(op.axis[0])
    return None
