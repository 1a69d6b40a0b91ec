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


# A parallel loop is cut into one contiguous share per thread (a "slot"), each in this
# many chunks. A thread claims the chunks of its own slot first, from that slot's counter,
# then those left in the other slots, so a thread whose core is taken by another process
# leaves its share to the others instead of holding up the loop; while no thread falls
# behind, thread t runs the same part of every loop of a kernel (the part of a pack its
# GEMM then reads stays in its own cache) and claims from a counter no other thread
# touches. One counter shared by all threads cost short kernels their locality and a
# cache-line transfer per claim (benchmarks/CONV_SHAPES.md, "twenty-second session").
CHUNKS_PER_THREAD = 16
# The most slots a loop has: threads past it share slots (thread t takes slot t mod the
# slot count). Each slot's counter has a 64-byte cache line of its own in the closure.
MAX_SLOTS = 64
SLOT_WORDS = 8     # i64 words per slot: one cache line
# False: one slot, its counter shared by all threads, each claim ceil(extent / (threads *
# CHUNKS_PER_THREAD)) iterations (the scheme before; benchmarks compare the two)
PER_THREAD_SLOTS = True
# The loop body is a function of its own, never inlined into the claiming loops around it:
# inlined, its registers were allocated together with theirs, and a GEMM's tile loop whose
# pixel addresses need many general registers spilled vector registers (SqueezeNet's row-
# Winograd GEMMs ran 2x slower at 1 thread). True: inlined (benchmarks compare the two)
INLINE_BODY = False
COUNTERS, LO, EXTENT, STATUS, SLOTS = range(5)   # the closure's fields, captured ones after


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
    # The closure: the slots' counters (each the next unclaimed iteration of its slot,
    # 64-bit so that claims past the end cannot wrap around), the loop's bounds, the status
    # a failure in the body (a heap allocation, a bounds check) records (0: success), how
    # many slots the caller zeroed, then the captured values.
    counters_t = ir.ArrayType(ir.ArrayType(I64, SLOT_WORDS), MAX_SLOTS)
    max_threads = b.sext(b.call(mod.declare("omp_get_max_threads", I32, []), []), I64)
    most = MAX_SLOTS if PER_THREAD_SLOTS else 1
    slots = b.select(b.icmp_signed("<", max_threads, I64(most)), max_threads, I64(most))
    slots = b.select(b.icmp_signed("<", slots, I64(1)), I64(1), slots)
    fields = [lo, extent, I32(0), slots] + [gen.env[v] for v in captured]
    closure_t = ir.LiteralStructType([counters_t] + [f.type for f in fields])
    closure = gen.alloca(closure_t, align=8 * SLOT_WORDS)
    # Live only around its task: LLVM then gives every task of the function one stack slot
    # (the counters make a closure 4 KiB; one per task made a kernel of 50 parallel stages
    # take 220 KiB of stack, past a small thread stack)
    lifetime = [mod.declare(f"llvm.lifetime.{edge}.p0", ir.VoidType(), [PTR])
                for edge in ("start", "end")]
    b.call(lifetime[0], [closure])
    for k, value in enumerate(fields, start=LO):
        b.store(value, b.gep(closure, [I32(0), I32(k)], source_etype=closure_t))
    memset = mod.declare("llvm.memset.p0.i64", ir.VoidType(), [PTR, ir.IntType(8), I64,
                                                                ir.IntType(1)])
    b.call(memset, [b.gep(closure, [I32(0), I32(COUNTERS)], source_etype=closure_t),
                    ir.IntType(8)(0), b.mul(slots, I64(8 * SLOT_WORDS)),
                    ir.IntType(1)(0)])

    sites_before = mod.fail_sites
    name = task.name
    body_fn = _outline_body(gen, s, name, captured, lo.type)
    fn = _new_function(mod, name, ir.VoidType(), [PTR], ["closure"], gen.fn)
    fn.args[0].add_attribute("nonnull")
    child = type(gen)(mod, fn, in_parallel=True)
    cb = child.b
    values = [cb.load(cb.gep(fn.args[0], [I32(0), I32(k)], source_etype=closure_t), typ=f.type)
              for k, f in enumerate(fields, start=LO) if k not in (STATUS, SLOTS)]
    status_ptr = cb.gep(fn.args[0], [I32(0), I32(STATUS)], source_etype=closure_t)
    zeroed = cb.load(cb.gep(fn.args[0], [I32(0), I32(SLOTS)], source_etype=closure_t),
                     typ=I64)
    body_fails = mod.fail_sites > sites_before
    counters = cb.gep(fn.args[0], [I32(0), I32(COUNTERS)], source_etype=closure_t)
    _claim_chunks(child, values[0], values[1], counters, zeroed,
                  lambda start, count: cb.call(body_fn, values[2:] + [status_ptr, start, count]),
                  signed=not dt.is_uint(s.loop_var.dtype),
                  failed=status_ptr if body_fails else None)
    cb.ret_void()
    child.finish()

    gomp = mod.declare("GOMP_parallel", ir.VoidType(), [PTR, PTR, I32, I32])
    if gen.made_nontemporal:  # this thread's streamed stores, before other threads run
        gen.fence_nontemporal()
    b.call(gomp, [fn, closure, I32(0), I32(0)])
    status = None
    if body_fails:  # the body allocates or checks bounds: pass its failure on
        status = b.load(b.gep(closure, [I32(0), I32(STATUS)], source_etype=closure_t),
                        typ=I32)
    b.call(lifetime[1], [closure])
    if status is not None:
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

    Buffer pointers arrive as `noalias` arguments, so the loop still vectorizes without
    runtime alias checks, as it would in the entry function (where INLINE_BODY inlines it
    into the closure-unpacking function, that becomes scoped alias metadata).
    """
    arg_types = [gen.env[v].type for v in captured] + [PTR, index_t, index_t]
    names = [v.name for v in captured] + ["status", "start", "count"]
    fn = _new_function(gen.mod, name + "_body", ir.VoidType(), arg_types, names, gen.fn)
    fn.attributes.add("alwaysinline" if INLINE_BODY else "noinline")
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


def _claim_chunks(child, lo, extent, counters, zeroed, run, signed: bool,
                  failed=None) -> None:
    """Run every iteration of [lo, lo + extent) once over the threads: the loop in
    `slots` = min(threads, `zeroed`) contiguous shares, thread t's own slot t mod slots; a
    thread claims the chunks of its own slot, then of each slot after it in turn, each
    claim an atomic add of the slot's grain on the slot's counter (`counters`: slot k's at
    64-bit word SLOT_WORDS * k), then run(start, count) on them. grain =
    ceil(share / CHUNKS_PER_THREAD), or the whole share on one thread. The counting is
    64-bit, extended by the loop variable's signedness, so neither an int32 extent near its
    maximum nor a uint32 one past 2^31 can wrap; an extent below 1 runs nothing. `failed`:
    the status a failing body records; once it is set, no thread claims another chunk (the
    loop's result is an error anyway)."""
    b = child.b
    t = lo.type
    widen = (lambda v: v) if t.width == 64 else \
        (lambda v: b.sext(v, I64)) if signed else (lambda v: b.zext(v, I64))
    less = b.icmp_signed if signed else b.icmp_unsigned
    n = widen(extent)
    fn = child.fn
    slot_head = fn.append_basic_block("slot")
    claim = fn.append_basic_block("claim")
    work = fn.append_basic_block("claimed")
    next_slot = fn.append_basic_block("slot_done")
    done = fn.append_basic_block("all_claimed")
    prepare = fn.append_basic_block("slots")
    b.cbranch(less("<", n, I64(1)), done, prepare)
    # from here n >= 1, so unsigned 64-bit arithmetic serves both signednesses
    b.position_at_end(prepare)
    nthreads = b.sext(b.call(child.mod.declare("omp_get_num_threads", I32, []), []), I64)
    thread = b.sext(b.call(child.mod.declare("omp_get_thread_num", I32, []), []), I64)
    slots = b.select(b.icmp_unsigned("<", nthreads, zeroed), nthreads, zeroed)
    own = b.urem(thread, slots)
    share, rest = b.udiv(n, slots), b.urem(n, slots)
    single = b.icmp_signed("==", nthreads, I64(1))
    b.branch(slot_head)

    # for k in [0, slots): slot v = (own + k) mod slots
    b.position_at_end(slot_head)
    k = b.phi(I64, "k")
    k.add_incoming(I64(0), prepare)
    v = b.add(own, k)
    v = b.select(b.icmp_unsigned("<", v, slots), v, b.sub(v, slots))
    first = b.add(b.mul(v, share), b.select(b.icmp_unsigned("<", v, rest), v, rest))
    count = b.add(share, b.zext(b.icmp_unsigned("<", v, rest), I64))
    chunks = I64(CHUNKS_PER_THREAD) if PER_THREAD_SLOTS else \
        b.mul(nthreads, I64(CHUNKS_PER_THREAD))
    grain = b.add(b.udiv(count, chunks),
                  b.zext(b.icmp_unsigned("!=", b.urem(count, chunks), I64(0)), I64))
    grain = b.select(single, count, grain)
    grain = b.select(b.icmp_unsigned("<", grain, I64(1)), I64(1), grain)
    counter = b.gep(counters, [b.mul(v, I64(SLOT_WORDS))], source_etype=I64)
    b.branch(claim)

    b.position_at_end(claim)
    begin = b.atomic_rmw("add", counter, grain, "monotonic")
    b.cbranch(b.icmp_unsigned("<", begin, count), work, next_slot)
    b.position_at_end(work)
    end = b.add(begin, grain)
    end = b.select(b.icmp_unsigned("<", count, end), count, end)
    narrow = (lambda v: v) if t.width == 64 else (lambda v: b.trunc(v, t))
    run(b.add(lo, narrow(b.add(first, begin))), narrow(b.sub(end, begin)))
    if failed is None:
        b.branch(claim)
    else:
        status = b.load_atomic(failed, "monotonic", 4, typ=I32)
        b.cbranch(b.icmp_signed("!=", status, I32(0)), done, claim)

    b.position_at_end(next_slot)
    k_next = b.add(k, I64(1))
    k.add_incoming(k_next, next_slot)
    b.cbranch(b.icmp_unsigned("<", k_next, slots), slot_head, done)
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
