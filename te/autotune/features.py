"""Program features of a lowered function, for the cost model.

Takes a PrimFunc (after lowering: flat Stores/Loads over Buffers, For loops with kinds);
gives a fixed-length float vector: loop structure (extents and kinds of the innermost
loops, parallel/vector/unroll totals), per-access innermost stride classes weighted by how
often they run, FLOPs and bytes estimates, and the memory footprint touched below each of
the innermost loop levels (a cache-tile size). Values are log2(1 + x) so that the model sees
ratios. Imports te.compute.expr, te.lower (ir, visitor, the pipeline) and te.target.
"""
from __future__ import annotations

import math

from ..compute import expr as E
from ..lower import ir
from ..lower.func import PrimFunc
from ..lower.pipeline import lower
from ..lower.visitor import stmt_children
from ..target import parse_target

NATIVE_LANES = [8]   # float32 lanes of a native vector; set by extract() from the host
KINDS = (ir.SERIAL, ir.PARALLEL, ir.VECTORIZED, ir.UNROLLED)
INNER = 4          # innermost loops described one by one
LEVELS = 5         # footprint levels
NAMES = (["n_loops", "depth", "parallel_ext", "vector_lanes", "unroll_ext", "n_stores",
          "flops", "bytes", "arith_intensity", "loads_s0", "loads_s1", "loads_sN",
          "stores_s1", "stores_sN", "vector_loads", "n_allocs", "alloc_bytes",
          "guards", "acc_bytes", "acc_vregs", "vec_native_mult", "vec_native_ratio",
          "unroll_body", "unroll_inner", "reduce_outside_tile", "global_allocs"]
         + [f"inner{k}_{w}" for k in range(INNER) for w in ("ext",) + KINDS]
         + [f"footprint{k}" for k in range(LEVELS)])


def _coef(e, var) -> float | None:
    """d(e)/d(var) for an affine index expression; None if not affine in var."""
    if isinstance(e, E.Var):
        return 1.0 if e is var else 0.0
    if isinstance(e, E.Const):
        return 0.0
    if isinstance(e, E.Ramp):
        return _coef(e.base, var)
    if isinstance(e, E.Broadcast):
        return _coef(e.value, var)
    if isinstance(e, E.Cast):
        return _coef(e.value, var)
    if isinstance(e, E.Binary):
        a, b = _coef(e.a, var), _coef(e.b, var)
        if a is None or b is None:
            return None
        if e.op == "add":
            return a + b
        if e.op == "sub":
            return a - b
        if e.op == "mul":
            if isinstance(e.b, E.Const):
                return a * float(e.b.value)
            if isinstance(e.a, E.Const):
                return b * float(e.a.value)
            return None if (a or b) else 0.0
        if e.op in ("floordiv", "floormod", "div", "truncdiv", "truncmod"):
            return 0.0 if not (a or b) else None
        return 0.0 if not (a or b) else None
    kids = E.children(e)
    return 0.0 if all(_coef(k, var) == 0.0 for k in kids) else None


def _flops(e) -> int:
    n = 0

    def visit(x):
        nonlocal n
        if isinstance(x, E.Binary) and x.op in ("add", "sub", "mul", "div"):
            n += 1
        elif isinstance(x, E.Call) and not x.extern:
            n += 4
    E.pre_order(e, visit)
    return n


def _lanes(e) -> int:
    dtype = e.dtype
    return int(dtype.split("x")[1]) if "x" in dtype else 1


class _Walker:
    def __init__(self):
        self.f = dict.fromkeys(NAMES, 0.0)
        self.innermost: list = []     # loops around the heaviest store
        self.heaviest = -1.0
        self.footprints = [0.0] * LEVELS

    def walk(self, s, loops: list, guards: int) -> None:
        # an explicit stack, in program order: allocations nest one per root stage
        todo = [(s, loops, guards)]
        while todo:
            s, loops, guards = todo.pop()
            if isinstance(s, ir.For):
                self.f["n_loops"] += 1
                todo.append((s.body, loops + [s], guards))
                continue
            if isinstance(s, ir.Allocate):
                self.f["n_allocs"] += 1
                ext = s.extent.value if isinstance(s.extent, E.Const) else 1
                self.f["alloc_bytes"] += ext * 4
                if s.buffer.scope == "local":   # the accumulator tile of a cache_write
                    self.f["acc_bytes"] = max(self.f["acc_bytes"], ext * 4)
                else:
                    self.f["global_allocs"] += 1
            if isinstance(s, ir.IfThenElse):
                guards += 1
            if isinstance(s, ir.Store):
                self._store(s, loops, guards)
                continue
            todo.extend((child, loops, guards) for child in reversed(stmt_children(s)[1]))

    def _store(self, s: ir.Store, loops: list, guards: int) -> None:
        loops = [lp for lp in loops if not (isinstance(lp.extent, E.Const)
                                            and lp.extent.value == 1)]
        exts = [float(lp.extent.value) if isinstance(lp.extent, E.Const) else 16.0
                for lp in loops]
        count = math.prod(exts) if exts else 1.0
        lanes = _lanes(s.value)
        f = self.f
        f["n_stores"] += 1
        f["depth"] = max(f["depth"], len(loops))
        f["guards"] += guards * count
        f["flops"] += _flops(s.value) * count * lanes
        loads = []
        E.pre_order(s.value, lambda x: loads.append(x) if isinstance(x, ir.Load) else None)
        inner = loops[-1].loop_var if loops else None
        for ld in loads:
            stride = _coef(ld.index, inner) if inner is not None else 0.0
            key = "loads_s0" if stride == 0 else "loads_s1" if stride == 1 else "loads_sN"
            f[key] += count
            f["bytes"] += count * 4 * _lanes(ld)
            if _lanes(ld) > 1:
                f["vector_loads"] += count
        stride = _coef(s.index, inner) if inner is not None else 0.0
        f["stores_s1" if stride in (0, 1) else "stores_sN"] += count
        f["bytes"] += count * 4 * lanes
        for lp in loops:
            ext = exts[loops.index(lp)]
            if lp.kind == ir.PARALLEL:
                f["parallel_ext"] = max(f["parallel_ext"], ext)
            elif lp.kind == ir.VECTORIZED:
                f["vector_lanes"] = max(f["vector_lanes"], ext)
            elif lp.kind == ir.UNROLLED:
                f["unroll_ext"] = max(f["unroll_ext"], ext)
        f["vector_lanes"] = max(f["vector_lanes"], lanes)
        if count > self.heaviest:
            self.heaviest = count
            self.innermost = list(zip(loops, exts))
            self._micro_kernel(s, loops, exts, lanes)
            self.footprints = self._footprints(s, loads, loops, exts)

    def _micro_kernel(self, s, loops, exts, lanes) -> None:
        """What makes a register-blocked kernel: vector width against the native one,
        the unrolled body around the store, and whether the store's own index is constant
        over the loops outside the unrolled/vector part (the reduction runs outside a tile
        that stays in registers)."""
        f = self.f
        vec = lanes
        for lp, ext in zip(loops, exts):
            if lp.kind == ir.VECTORIZED:
                vec = max(vec, ext)
        native = NATIVE_LANES[0]
        f["vec_native_mult"] = 1.0 if vec > 1 and vec % native == 0 else 0.0
        f["vec_native_ratio"] = vec / native
        body, k = 1.0, len(loops) - 1
        while k >= 0 and loops[k].kind in (ir.UNROLLED, ir.VECTORIZED):
            if loops[k].kind == ir.UNROLLED:
                body *= exts[k]
            k -= 1
        f["unroll_body"] = body
        f["unroll_inner"] = float(sum(1 for lp in loops if lp.kind == ir.UNROLLED))
        if k >= 0:  # the first loop outside the unrolled/vector part: a reduction loop?
            f["reduce_outside_tile"] = 1.0 if _coef(s.index, loops[k].loop_var) == 0.0 \
                else 0.0
        f["acc_vregs"] = f["acc_bytes"] / (4.0 * native)

    @staticmethod
    def _footprints(s, loads, loops, exts) -> list:
        """Elements touched inside each of the innermost LEVELS loops, over all accesses."""
        out = []
        accesses = [(ld.index, _lanes(ld)) for ld in loads] + [(s.index, _lanes(s.value))]
        for level in range(LEVELS):
            inside = list(zip(loops, exts))[len(loops) - level - 1:] if level < len(loops) \
                else list(zip(loops, exts))
            total = 0.0
            for index, lanes in accesses:
                touched = float(lanes)
                for lp, ext in inside:
                    if _coef(index, lp.loop_var) != 0.0:
                        touched *= ext
                total += touched
            out.append(total)
        return out


def lower_for_features(sch, args) -> PrimFunc:
    """Loop nests after storage flattening and software pipelining (Stage.pipeline moves
    and doubles buffers, and joins loops), before the (slow) simplify/vectorize passes:
    loop kinds are still annotations and that is all the features need."""
    return lower(sch, args, parse_target("llvm"), name="features",   # the tuner's target
                 stop_after="software_pipeline")


def extract(func: PrimFunc) -> list:
    """The feature vector (len(NAMES) floats) of a lowered function."""
    from .auto_space import vector_lanes
    NATIVE_LANES[0] = vector_lanes("float32")
    w = _Walker()
    w.walk(func.body, [], 0)
    f = w.f
    f["arith_intensity"] = f["flops"] / max(f["bytes"], 1.0)
    inner = list(reversed(w.innermost))[:INNER]
    for k in range(INNER):
        if k < len(inner):
            lp, ext = inner[k]
            f[f"inner{k}_ext"] = ext
            for kind in KINDS:
                f[f"inner{k}_{kind}"] = 1.0 if lp.kind == kind else 0.0
    for k in range(LEVELS):
        f[f"footprint{k}"] = w.footprints[k] * 4
    return [math.log2(1.0 + max(0.0, f[n])) for n in NAMES]
