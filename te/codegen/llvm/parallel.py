"""Helpers of codegen_llvm: parallel tasks and per-lane scalarization.

Takes the FuncGen of codegen_llvm (duck-typed, never imported here, so no cycle) and the
ParallelTask nodes of te/lower/passes/parallel_outline.py, which say what each captures;
gives the task's `void @<name>(ptr %closure)` run by GOMP_parallel, and lane k of a vector
expression. Imports llvmlite, te.dtype, te.errors, te.compute.expr, te.lower.ir.
"""
from __future__ import annotations

import dataclasses

from llvmlite import ir

from ... import dtype as dt
from ...compute import expr as E
from ...errors import BuildError
from ...lower import ir as tir

PTR = ir.PointerType()
I32 = ir.IntType(32)
I64 = ir.IntType(64)


# Each thread of a parallel loop claims chunks of about extent / (threads * this)
# iterations from a shared counter until none are left, so a thread whose core is taken
# by another process leaves its share to the others instead of holding up the loop.
CHUNKS_PER_THREAD = 16


def emit_parallel_task(gen, task: tir.ParallelTask) -> None:
    """Task `task` as its function and a GOMP_parallel call passing it a closure of the
    values it captures; threads claim contiguous chunks of its loop."""
    mod = gen.mod
    b = gen.b
    s = task.loop
    lo, extent = gen.index_value(s.min), gen.index_value(s.extent)
    captured = list(task.captured)
    for v in captured:
        if v not in gen.env:
            raise BuildError(f"te.build: parallel task '{task.name}' captures '{v.name}', "
                             f"which is not bound where the task starts")
    if mod.error_record is not None:  # where a failed bounds check in the body writes
        captured.append(mod.error_record)
    # Field 2, the status a failure in the body (a heap allocation, a bounds check) records
    # (0: success); field 3, the next unclaimed iteration (relative to lo; 64-bit, so that
    # claims past the end cannot wrap around).
    fields = [lo, extent, I32(0), I64(0)] + [gen.env[v] for v in captured]
    closure_t = ir.LiteralStructType([f.type for f in fields])
    closure = gen.alloca(closure_t, align=8)
    for k, value in enumerate(fields):
        b.store(value, b.gep(closure, [I32(0), I32(k)], source_etype=closure_t))

    sites_before = mod.fail_sites
    name = task.name
    body_fn = _outline_body(gen, s, name, captured, lo.type)
    fn = _new_function(mod, name, ir.VoidType(), [PTR], ["closure"], gen.fn)
    fn.args[0].add_attribute("nonnull")
    child = type(gen)(mod, fn, in_parallel=True)
    cb = child.b
    values = [cb.load(cb.gep(fn.args[0], [I32(0), I32(k)], source_etype=closure_t), typ=f.type)
              for k, f in enumerate(fields) if k not in (2, 3)]
    status_ptr = cb.gep(fn.args[0], [I32(0), I32(2)], source_etype=closure_t)
    next_ptr = cb.gep(fn.args[0], [I32(0), I32(3)], source_etype=closure_t)
    body_fails = mod.fail_sites > sites_before
    _claim_chunks(child, values[0], values[1], next_ptr,
                  lambda start, count: cb.call(body_fn, values[2:] + [status_ptr, start, count]),
                  signed=not dt.is_uint(s.loop_var.dtype),
                  failed=status_ptr if body_fails else None)
    cb.ret_void()
    child.finish()

    gomp = mod.declare("GOMP_parallel", ir.VoidType(), [PTR, PTR, I32, I32])
    if gen.made_nontemporal:  # this thread's streamed stores, before other threads run
        gen.fence_nontemporal()
    b.call(gomp, [fn, closure, I32(0), I32(0)])
    if body_fails:  # the body allocates or checks bounds: pass its failure on
        status = b.load(b.gep(closure, [I32(0), I32(2)], source_etype=closure_t), typ=I32)
        gen.fail_if(b.icmp_signed("!=", status, I32(0)), status)


def _new_function(mod, name, ret, arg_types, arg_names, like) -> ir.Function:
    fn = ir.Function(mod.module, ir.FunctionType(ret, arg_types), name=name)
    fn.linkage = "internal"
    for arg, arg_name in zip(fn.args, arg_names):
        arg.name = arg_name
    for attr in set.__iter__(like.attributes):
        set.add(fn.attributes, attr)
    return fn


def _outline_body(gen, s: tir.For, name: str, captured: list, index_t) -> ir.Function:
    """`void @<name>_body(captured..., status, start, count)` running [start, start+count);
    a failed heap allocation or bounds check stores its code at `status` and returns.

    Buffer pointers arrive as `noalias` arguments; once LLVM inlines this function into the
    closure-unpacking one, that becomes scoped alias metadata, so the loop still vectorizes
    without runtime alias checks, as it would in the entry function.
    """
    arg_types = [gen.env[v].type for v in captured] + [PTR, index_t, index_t]
    names = [v.name for v in captured] + ["status", "start", "count"]
    fn = _new_function(gen.mod, name + "_body", ir.VoidType(), arg_types, names, gen.fn)
    fn.attributes.add("alwaysinline")
    child = type(gen)(gen.mod, fn, in_parallel=True)
    child.status_ptr = fn.args[len(captured)]
    child.nontemporal = gen.nontemporal or tir.has_pragma(s, tir.NONTEMPORAL_STORE)
    for var, arg in zip(captured, fn.args):
        child.env[var] = arg
        if var.dtype == "handle":
            for attr in ("noalias", "nonnull", "captures(none)"):
                arg.add_attribute(attr)
    child.loop(s.loop_var, fn.args[-2], fn.args[-1], lambda: child.stmt(s.body))
    child.fence_nontemporal()
    child.b.ret_void()
    child.finish()
    return fn


def _claim_chunks(child, lo, extent, next_ptr, run, signed: bool, failed=None) -> None:
    """Until the loop is used up: claim the next `grain` iterations with an atomic add on
    the shared counter and run(start, count) on them. grain = ceil(extent / chunks), with
    chunks = threads * CHUNKS_PER_THREAD, or 1 on one thread (the whole loop in one
    chunk). The counting is 64-bit, extended by the loop variable's signedness, so neither
    an int32 extent near its maximum nor a uint32 one past 2^31 can wrap. `failed`: the
    status a failing body records; once it is set, no thread claims another chunk (the
    loop's result is an error anyway)."""
    b = child.b
    t = lo.type
    widen = (lambda v: v) if t.width == 64 else \
        (lambda v: b.sext(v, I64)) if signed else (lambda v: b.zext(v, I64))
    less = b.icmp_signed if signed else b.icmp_unsigned
    n = widen(extent)
    nthreads = b.sext(b.call(child.mod.declare("omp_get_num_threads", I32, []), []), I64)
    one = I64(1)
    single = b.icmp_signed("==", nthreads, one)
    chunks = b.select(single, one, b.mul(nthreads, I64(CHUNKS_PER_THREAD)))
    div = b.sdiv if signed else b.udiv
    grain = div(b.sub(b.add(n, chunks), one), chunks)
    grain = b.select(less("<", grain, one), one, grain)  # an empty or negative extent
    fn = child.fn
    claim = fn.append_basic_block("claim")
    work = fn.append_basic_block("claimed")
    done = fn.append_basic_block("all_claimed")
    b.branch(claim)
    b.position_at_end(claim)
    begin = b.atomic_rmw("add", next_ptr, grain, "monotonic")
    b.cbranch(less("<", begin, n), work, done)
    b.position_at_end(work)
    end = b.add(begin, grain)
    end = b.select(less("<", n, end), n, end)
    narrow = (lambda v: v) if t.width == 64 else (lambda v: b.trunc(v, t))
    run(b.add(lo, narrow(begin)), narrow(b.sub(end, begin)))
    if failed is None:
        b.branch(claim)
    else:
        status = b.load_atomic(failed, "monotonic", 4, typ=I32)
        b.cbranch(b.icmp_signed("!=", status, I32(0)), done, claim)
    b.position_at_end(done)


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
