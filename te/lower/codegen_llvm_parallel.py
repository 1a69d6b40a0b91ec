"""Helpers of codegen_llvm: parallel-loop outlining and per-lane scalarization.

Takes the FuncGen of codegen_llvm (duck-typed, never imported here, so no cycle) and IR from
te.lower.ir; gives the outlined `void @<name>_par<k>(ptr %closure)` run by GOMP_parallel, and
lane k of a vector expression. Imports llvmlite, te.dtype, te.compute.expr, te.lower.ir.
"""
from __future__ import annotations

import dataclasses

from llvmlite import ir

from .. import dtype as dt
from ..compute import expr as E
from . import ir as tir
from .visitor import stmt_children

PTR = ir.PointerType()
I32 = ir.IntType(32)


def free_vars(s: tir.Stmt) -> list:
    """Vars a statement reads (buffer data pointers included), in first-use order."""
    seen: dict = {}

    def visit_expr(e):
        if isinstance(e, E.Var):
            seen.setdefault(e, None)
        elif isinstance(e, tir.Load):
            seen.setdefault(e.buffer.data, None)

    def visit(node):
        if isinstance(node, (tir.Store, tir.Allocate)):
            seen.setdefault(node.buffer.data, None)
        if isinstance(node, tir.LetStmt):
            seen.setdefault(node.var, None)
        if isinstance(node, tir.For):
            seen.setdefault(node.loop_var, None)
        ex, st = stmt_children(node)
        for x in ex:
            E.pre_order(x, visit_expr)
        for x in st:
            visit(x)
    visit(s)
    return list(seen)


def emit_parallel_for(gen, s: tir.For) -> None:
    """Outline the body of parallel loop `s`; every thread runs one contiguous chunk."""
    mod = gen.mod
    b = gen.b
    lo, extent = gen.expr(s.min), gen.expr(s.extent)
    captured = [v for v in free_vars(s.body) if v in gen.env and v is not s.loop_var]
    fields = [lo, extent] + [gen.env[v] for v in captured]
    closure_t = ir.LiteralStructType([f.type for f in fields])
    closure = gen.alloca(closure_t, align=8)
    for k, value in enumerate(fields):
        b.store(value, b.gep(closure, [I32(0), I32(k)], source_etype=closure_t))

    name = f"{mod.func.name}_par{mod.n_outlined}"
    mod.n_outlined += 1
    fn = ir.Function(mod.module, ir.FunctionType(ir.VoidType(), [PTR]), name=name)
    fn.linkage = "internal"
    fn.args[0].name = "closure"
    for attr in ("noalias", "nonnull", "captures(none)"):
        fn.args[0].add_attribute(attr)
    for attr in fn_attributes(gen.fn):
        set.add(fn.attributes, attr)
    child = type(gen)(mod, fn, in_parallel=True)
    cb = child.b
    values = [cb.load(cb.gep(fn.args[0], [I32(0), I32(k)], source_etype=closure_t), typ=f.type)
              for k, f in enumerate(fields)]
    for var, value in zip(captured, values[2:]):
        child.env[var] = value
    _emit_chunk(child, s, values[0], values[1])
    cb.ret_void()
    child.finish()

    gomp = mod.declare("GOMP_parallel", ir.VoidType(), [PTR, PTR, I32, I32])
    b.call(gomp, [fn, closure, I32(0), I32(0)])


def fn_attributes(fn: ir.Function) -> list:
    return list(set.__iter__(fn.attributes))


def _emit_chunk(child, s: tir.For, lo, extent) -> None:
    """Iterations [tid*chunk, min(extent, (tid+1)*chunk)) with chunk = ceil(extent/nthreads)."""
    b = child.b
    t = lo.type
    tid = b.call(child.mod.declare("omp_get_thread_num", I32, []), [])
    nthreads = b.call(child.mod.declare("omp_get_num_threads", I32, []), [])
    if t.width > 32:
        tid, nthreads = b.sext(tid, t), b.sext(nthreads, t)
    one = ir.Constant(t, 1)
    chunk = b.sdiv(b.sub(b.add(extent, nthreads), one), nthreads)
    begin = b.mul(tid, chunk)
    end = b.add(begin, chunk)
    end = b.select(b.icmp_signed("<", extent, end), extent, end)
    count = b.sub(end, begin)  # <= 0 for threads past the end: the loop does not run
    child.loop(s.loop_var, b.add(lo, begin), count, lambda: child.stmt(s.body))


def lane(gen, e: E.Expr, k: int) -> ir.Value:
    """The value of lane k of vector expression `e`, evaluated with scalar (lazy) code."""
    return gen.expr(_lane_expr(gen, e, k))


def _lane_expr(gen, e: E.Expr, k: int) -> E.Expr:
    base, n = dt.split_lanes(e.dtype)
    if n == 1:
        return e
    if isinstance(e, E.Ramp):
        offset = E.Binary(e.base.dtype, "mul", e.stride, E.Const(e.base.dtype, k))
        return E.Binary(e.base.dtype, "add", e.base, offset)
    if isinstance(e, E.Broadcast):
        return e.value
    if isinstance(e, E.Const):
        return E.Const(base, e.value)
    if isinstance(e, E.Var):  # a vector bound by a LetStmt: extract into a fresh scalar
        scalar = E.Var(f"{e.name}_lane{k}", base)
        gen.env[scalar] = gen.b.extract_element(gen.expr(e), I32(k))
        return scalar
    kids = tuple(_lane_expr(gen, c, k) for c in E.children(e))
    return dataclasses.replace(E.with_children(e, kids), dtype=base)
