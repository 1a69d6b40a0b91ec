"""Loop IR -> LLVM IR text, built with llvmlite.ir, for the CPU.

Takes a flattened PrimFunc (Allocate/Store/Load over flat Buffers, Ramp/Broadcast vectors)
and gives the text of `i32 @name(ptr %buf..., <scalars>..., [ptr %bound_error])`, which
returns 0, or -2 - 2k when heap buffer k (ModuleGen.heap_buffers) could not be allocated and
-3 - 2k when it exceeds the int32 index range, or -1 when a run-time bounds check failed (the
error record is an argument only when there are checks: bounds.py). The parallel_outline
pass's tasks run on GOMP_parallel (parallel.py); intrinsics and libm calls live in intrinsics.py,
the vector exp in exp.py, per-block value reuse in reuse.py, float64 -> float16 casts in
half.py. Imports llvmlite, te.dtype, te.errors, te.compute.expr, te.lower.ir, te.lower.arith
and te.lower.visitor only: code generation reads the lowering floor's IR and never runs a
pass itself.
"""
from __future__ import annotations

from types import GeneratorType

from llvmlite import binding as llvm
from llvmlite import ir

from ... import dtype as dt
from ...compute import expr as E
from ...errors import BuildError
from ...lower import ir as tir
from ...lower.func import PrimFunc
from ...lower.arith import Analyzer
from ...lower.passes.vectorize import masked_loads_suffice
from ...lower.visitor import run_frames, walk_stmts
from . import bounds
from . import intrinsics as cgmath
from . import masked
from . import packed
from . import parallel as par
from .half import double_to_half
from .reuse import BlockValues
from .types import I1, I8, I32, I64, PTR, intrinsic, ll_type

_FLOAT_BINOP = {"add": "fadd", "sub": "fsub", "mul": "fmul", "div": "fdiv", "truncmod": "frem"}
_INT_BINOP = {"add": "add", "sub": "sub", "mul": "mul", "and": "and_", "or": "or_",
              "bitwise_and": "and_", "bitwise_or": "or_", "bitwise_xor": "xor"}
_SIGNED_BINOP = {"truncdiv": "sdiv", "truncmod": "srem", "floordiv": "sdiv", "floormod": "srem"}
_UNSIGNED_BINOP = {"truncdiv": "udiv", "truncmod": "urem", "floordiv": "udiv",
                   "floormod": "urem"}
_CMP = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_INT_DIV_OPS = ("floordiv", "floormod", "truncdiv", "truncmod")
# Statements that keep the block's known memory contents up to date themselves.
_TRACKS_MEMORY = (tir.Store, tir.SeqStmt)
# Integer operations folded at generation time (as te.compute.expr.fold does): the identity
# of the right operand.
_IDENTITY = {"add": 0, "sub": 0, "mul": 1}
_MAX_STACK_BYTES = 64 * 1024
_FULL_UNROLL_LIMIT = 16
NO_UNROLL = "llvm.loop.unroll.disable"
# Instructions a loop nest may reach when LLVM flattens it (loop()); innermost loops, and
# nests below it (layernorm's 64 x 74), stay LLVM's to unroll.
_FLATTEN_LIMIT = 8192
MAX_DENSE_STRIDE = 4   # a strided vector load reads its whole span (stride 2: pool, pack)


def mem_type(dtype: str) -> ir.Type:
    """The LLVM in-memory type: bool is stored as one byte."""
    base, lanes = dt.split_lanes(dtype)
    t = I8 if base == "bool" else ll_type(base)
    return ir.VectorType(t, lanes) if lanes > 1 else t


def elem_bytes(dtype: str) -> int:
    return 1 if dt.is_bool(dtype) else dt.bits(dtype) // 8


def refuse_thread_binding(s: tir.Stmt) -> None:
    """Thread-bound loops only make sense on a GPU target: te.build says so before code
    generation, ModuleGen if it meets one anyway."""
    for node in walk_stmts(s):
        if isinstance(node, tir.For) and node.kind == tir.THREAD_BINDING:
            raise BuildError(f"te.build: loop '{node.loop_var.name}' is bound to thread axis "
                             f"'{node.thread_tag}'; thread-bound loops need target 'cuda' "
                             f"(remove the bind for target 'llvm')")


def codegen_llvm(func: PrimFunc, parallel: bool = True, features: frozenset = frozenset(),
                 *, index_limit: int) -> str:
    """LLVM IR text of `func`; parallel=False runs parallel loops serially (no libgomp).
    `features`: the CPU features the code will run with (LLVM names, such as "avx512f");
    the IR may use instructions of those, and is portable LLVM without them.
    `index_limit`: the target's (te.Target.index_limit); a heap buffer has fewer elements."""
    return str(ModuleGen(func, parallel, features, index_limit).module)


class ModuleGen:
    """One llvmlite module: the entry function, outlined parallel bodies, declarations."""

    def __init__(self, func: PrimFunc, parallel: bool, features: frozenset,
                 index_limit: int):
        self.func = func
        self.parallel = parallel
        self.features = frozenset(features)
        self.index_limit = index_limit   # indices are int32, with headroom for split loops
        self.module = ir.Module(name=func.name)
        self.module.triple = llvm.get_process_triple()
        self.fail_sites = 0  # the fail_if branches made so far
        self.heap_buffers: list[str] = []  # names, in status-code order
        self.checked_buffers = bounds.checked_buffers(func.body)  # names, in record order
        self.error_record = bounds.ERROR_RECORD if self.checked_buffers else None
        params = list(func.params)
        self.param_data = frozenset(buf.data for buf in params)
        # Whether any loop asks for non-temporal stores (then a failure return fences too).
        self.streams = (_is_x86(self.module.triple)
                        and tir.NONTEMPORAL_STORE in _all_pragmas(func.body))
        arg_types = [PTR] * len(params) + [ll_type(v.dtype) for v in func.scalar_params]
        handles = [buf.data for buf in params]
        if self.error_record is not None:
            arg_types.append(PTR)
            handles.append(self.error_record)
        fn = ir.Function(self.module, ir.FunctionType(I32, arg_types), name=func.name)
        add_function_attributes(fn)
        gen = FuncGen(self, fn, in_parallel=False)
        pointer_args = fn.args[:len(params)] + fn.args[len(params) + len(func.scalar_params):]
        for arg, var in zip(pointer_args, handles):
            for attr in ("noalias", "nonnull", "captures(none)"):
                arg.add_attribute(attr)
            arg.name = var.name
            gen.env[var] = arg
        for arg, var in zip(fn.args[len(params):], func.scalar_params):
            arg.name = var.name
            gen.env[var] = arg
        gen.stmt(func.body)
        gen.fence_nontemporal()
        gen.b.ret(ir.Constant(I32, 0))
        gen.finish()

    def declare(self, name: str, ret: ir.Type, args: list) -> ir.Function:
        """The function `name`, declared once; a second, different signature is an error."""
        fnty = ir.FunctionType(ret, args)
        existing = self.module.globals.get(name)
        if existing is not None:
            if existing.function_type != fnty:
                raise BuildError(f"Call: function {name!r} used with two signatures "
                                 f"({existing.function_type} and {fnty})")
            return existing
        return ir.Function(self.module, fnty, name=name)

    def loop_metadata(self, *options) -> ir.values.MDValue:
        """A fresh, self-referencing loop id carrying `options` (LLVM LangRef): each a key,
        or a (key, value) pair."""
        m = self.module
        nodes = []
        for option in options:
            key, value = option if isinstance(option, tuple) else (option, None)
            nodes.append(m.add_metadata([ir.MetaDataString(m, key)]
                                        + ([value] if value is not None else [])))
        # Bypass add_metadata's cache: every loop needs its own distinct id.
        loop_id = ir.values.MDValue(m, nodes, name=str(len(m.metadata)))
        loop_id.operands = (loop_id, *nodes)
        return loop_id


def add_function_attributes(fn: ir.Function) -> None:
    fn.attributes.add("nounwind")
    # llvmlite only knows enum attributes; these string attributes let LLVM vectorize
    # loops containing float divisions and select-based reductions without trap checks.
    set.add(fn.attributes, '"no-trapping-math"="true"')


class FuncGen(BlockValues):
    """Emits one LLVM function; `env` maps each bound Var (by identity) to its value."""

    def __init__(self, mod: ModuleGen, fn: ir.Function, in_parallel: bool):
        self.mod = mod
        self.fn = fn
        self.in_parallel = in_parallel
        self.entry = fn.append_basic_block("entry")  # allocas only; see finish()
        self.body_start = fn.append_basic_block("body")
        self.b = ir.IRBuilder(self.body_start)
        self.env: dict = {}
        self.heap_live: list = []  # heap pointers to free on an early return
        self.status_ptr = None  # in an outlined parallel body: where a failure is recorded
        self.init_block_values()
        self._const_exprs: dict = {}  # (dtype, value) of a Const node -> its constant
        self._expr_methods: dict = {}  # expression type -> bound expr_<Type> method
        # While generating a Load/Store index or loop bounds: int32 arithmetic there is
        # proven not to wrap (index_width computes in int64 what could overflow int32), and
        # `nsw` lets LLVM turn sext(i*n + j) into an affine address. Data wraps, and so may
        # int64 index arithmetic on loaded int64 values.
        self.in_index = False
        self._emitted = None  # id(node) -> (node, value) while expr() walks a tree
        # While a side of a select on a lane-varying condition is emitted (masked.py): the
        # <n x i1> lanes that take it; vector loads read only those lanes
        self.load_mask = None
        # Inside a loop with pragma "nontemporal_store": dense vector stores to argument
        # buffers bypass the caches; a function that made any fences them before returning.
        self.nontemporal = False
        self.made_nontemporal = False
        # While a loop's body is emitted: whether it holds a loop, and how many instructions
        # LLVM's full unroller would add by flattening the loops inside (see loop()).
        self._holds_loop = False
        self._flattened_extra = 0

    def finish(self) -> None:
        ir.IRBuilder(self.entry).branch(self.body_start)

    def fence_nontemporal(self) -> None:
        """Before the function's normal return: order its non-temporal stores, if any."""
        if self.made_nontemporal:
            cgmath.store_fence(self)

    def alloca(self, typ: ir.Type, align: int | None = None) -> ir.Instruction:
        """Stack storage in the entry block, so loops do not grow the stack."""
        slot = ir.IRBuilder(self.entry).alloca(typ)
        slot.type = PTR  # llvmlite types allocas as typed pointers; LLVM 22 has only `ptr`
        if align is not None:
            slot.align = align
        return slot

    # -- statements ---------------------------------------------------------------------

    def stmt(self, s: tir.Stmt) -> None:
        """Emit s. The stmt_<Type> of a statement that holds the rest of the function (a
        sequence, an allocation, a let) is a generator yielding its children, and
        run_frames keeps those frames on its own stack: they nest as deep as the stages."""
        run_frames(self._stmt_steps(s), self._stmt_steps)

    def _stmt_steps(self, s: tir.Stmt):
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise BuildError(f"LLVM codegen: unsupported statement {type(s).__name__}")
        tracks = type(s) in _TRACKS_MEMORY
        if not tracks:
            self.forget_memory()
        steps = method(s)
        if isinstance(steps, GeneratorType):
            yield from steps
        if not tracks:
            self.forget_memory()

    def stmt_SeqStmt(self, s: tir.SeqStmt):
        for x in s.stmts:
            yield x

    def stmt_Evaluate(self, s: tir.Evaluate) -> None:
        self.expr(s.value)

    def stmt_LetStmt(self, s: tir.LetStmt):
        self.env[s.var] = self.expr(s.value)
        yield s.body

    def stmt_IfThenElse(self, s: tir.IfThenElse) -> None:
        if dt.lanes(s.cond.dtype) != 1:
            raise BuildError(f"IfThenElse: the condition must be a scalar bool, "
                             f"got dtype {s.cond.dtype}")
        cond = self.expr(s.cond)
        if s.else_case is None:
            with self.b.if_then(cond):
                self.stmt(s.then_case)
            return
        with self.b.if_else(cond) as (then, otherwise):
            with then:
                self.stmt(s.then_case)
            with otherwise:
                self.stmt(s.else_case)

    def stmt_Store(self, s: tir.Store) -> None:
        buf, n = s.buffer, dt.lanes(s.value.dtype)
        index = bounds.check(self, s.index, store=True)
        value = self.to_mem(self.expr(s.value), s.value.dtype)
        align = elem_bytes(buf.dtype)
        if n == 1:
            self.store(buf.data, value, self.address(buf, self.index_value(index)), align)
        elif _is_dense_ramp(index):
            ptr = self.address(buf, self.index_value(index.base))
            if (self.nontemporal and buf.data in self.mod.param_data
                    and cgmath.nontemporal_store(self, value, ptr, align)):
                self.made_nontemporal = True
                self.forget_memory(buf.data)
            else:
                self.store(buf.data, value, ptr, align)
        else:  # scatter, lane by lane
            for k, ptr in enumerate(self.lane_addresses(buf, index, n)):
                self.store(buf.data, self.b.extract_element(value, I32(k)), ptr, align)

    def stmt_Allocate(self, s: tir.Allocate):
        elem = mem_type(dt.base(s.buffer.dtype))
        size = elem_bytes(s.buffer.dtype)
        extent = s.extent
        if isinstance(extent, E.Const) and int(extent.value) * size <= _MAX_STACK_BYTES:
            n = max(int(extent.value), 1)
            self.env[s.buffer.data] = self.alloca(ir.ArrayType(elem, n), align=64)
            yield s.body
            return
        if isinstance(extent, E.Const) and int(extent.value) >= self.mod.index_limit:
            raise BuildError(f"te.build: buffer '{s.buffer.name}' has {int(extent.value)} "
                             f"elements, beyond the int32 index range; int64 indexing is not "
                             f"supported yet")
        k = len(self.mod.heap_buffers)
        self.mod.heap_buffers.append(s.buffer.name)
        # In i64: n * n of int32 sizes may overflow int32 and must still be caught here.
        count = self.expr_i64(extent)
        self.fail_if(self.b.icmp_unsigned(">=", count, I64(self.mod.index_limit)), I32(-3 - 2 * k))
        nbytes = self.b.mul(count, I64(size))
        nbytes = self.b.and_(self.b.add(nbytes, I64(64)), I64(~63))  # >0, multiple of 64
        aligned_alloc = self.mod.declare("aligned_alloc", PTR, [I64, I64])
        ptr = self.b.call(aligned_alloc, [I64(64), nbytes])
        self.fail_if(self.b.icmp_unsigned("==", ptr, ir.Constant(PTR, None)), I32(-2 - 2 * k))
        self.env[s.buffer.data] = ptr
        self.heap_live.append(ptr)
        yield s.body
        self.heap_live.pop()
        self.b.call(self.mod.declare("free", ir.VoidType(), [PTR]), [ptr])

    def fail_if(self, cond, code, record=None) -> None:
        """When `cond` holds: free the live heap buffers and return status `code` (i32);
        record(), when given, first writes the details of the error (a bounds check).

        An outlined parallel body records the code for its caller and returns; the entry
        function returns it.
        """
        self.mod.fail_sites += 1
        fail = self.fn.append_basic_block("fail")
        ok = self.fn.append_basic_block("ok")
        self.b.cbranch(cond, fail, ok)
        self.b.position_at_end(fail)
        if self.mod.streams:   # non-temporal stores made before (or in an earlier iteration)
            cgmath.store_fence(self)
        for ptr in reversed(self.heap_live):
            self.b.call(self.mod.declare("free", ir.VoidType(), [PTR]), [ptr])
        if self.status_ptr is not None and record is None:
            # Atomic: several threads may fail at once; any one code is a fine answer.
            self.b.atomic_rmw("xchg", self.status_ptr, code, "monotonic")
            self.b.ret_void()
        elif self.status_ptr is not None:  # the first thread to fail writes the details
            old = self.b.cmpxchg(self.status_ptr, I32(0), code, "monotonic", "monotonic")
            with self.b.if_then(self.b.extract_value(old, 1)):
                record()
            self.b.ret_void()
        else:
            if record is not None:
                record()
            self.b.ret(code)
        self.b.position_at_end(ok)

    def expr_i64(self, e: E.Expr) -> ir.Value:
        """Integer expression `e` evaluated with 64-bit adds, subtracts and multiplies."""
        if (isinstance(e, E.Binary) and e.op in ("add", "sub", "mul") and dt.is_int(e.dtype)
                and dt.lanes(e.dtype) == 1):
            return getattr(self.b, e.op)(self.expr_i64(e.a), self.expr_i64(e.b))
        if isinstance(e, E.Const):
            return I64(int(e.value))
        return self.cast(self.expr(e), e.dtype, "int64")

    def stmt_For(self, s: tir.For) -> None:
        if s.kind == tir.THREAD_BINDING:
            refuse_thread_binding(s)
        outer = self.nontemporal
        self.nontemporal = outer or tir.has_pragma(s, tir.NONTEMPORAL_STORE)
        try:
            self._emit_loop(s)
        finally:
            self.nontemporal = outer

    def stmt_ParallelTask(self, s: tir.ParallelTask) -> None:
        """The task's function and its run on the thread pool; without one (parallel=False)
        the loop runs here, serially, as a parallel loop inside a task does."""
        if self.mod.parallel and not self.in_parallel:
            par.emit_parallel_task(self, s)
        else:
            self.stmt(s.loop)

    def _emit_loop(self, s: tir.For) -> None:
        """A loop that runs in this function (serial, unrolled or vectorized)."""
        lo = self.index_value(s.min)
        if (s.kind == tir.UNROLLED and isinstance(s.extent, E.Const)
                and int(s.extent.value) <= _FULL_UNROLL_LIMIT):
            for k in range(int(s.extent.value)):
                self.env[s.loop_var] = self.int_op("add", lo, self.const(lo.type, k))
                self.stmt(s.body)
            return
        options = []
        if s.kind == tir.UNROLLED:
            options.append("llvm.loop.unroll.full")
        elif s.kind == tir.VECTORIZED:
            options.append(("llvm.loop.vectorize.enable", I1(1)))
        elif (s.kind == tir.SERIAL and not tir.has_pragma(s, "vectorize_hint")
              and _strided_store(s)):
            options.append(("llvm.loop.vectorize.enable", I1(0)))
        self.loop(s.loop_var, lo, self.index_value(s.extent), lambda: self.stmt(s.body),
                  options, may_unroll=s.kind == tir.SERIAL)

    def loop(self, var: E.Var, lo, extent, body, options=(), may_unroll=False) -> None:
        """for (var = lo; var < lo + extent; ++var) body(), counting in var's dtype, its
        back edge carrying loop metadata `options` (loop_metadata's).

        Emitted rotated: a guard (none when the bounds are constants that enter the loop),
        then a body that tests at its end, the form LLVM's loop passes work on. Left to
        LLVM's LoopRotate, a function of thousands of loops (a chain of stages at root)
        took time quadratic in their number.

        may_unroll: a serial loop, left to LLVM's unroller unless it holds other loops and
        either reads no memory (a fill, such as a GEMM accumulator zeroed before its
        reduction) or, flattened, would pass _FLATTEN_LIMIT instructions. LLVM's full
        unroller flattened such nests into one block (ResNet-50's stride-2 conv: its
        zeroing, 8 x 34 iterations of 8 vector stores, as 2,176 stores; BERT's 16 x 96
        bias-add epilogue as ~30,000 instructions), and its machine schedulers then took
        seconds over that block; a fill gains nothing from being unrolled."""
        outer_extra = self._flattened_extra
        self._holds_loop, self._flattened_extra = False, 0
        start = len(self.fn.blocks)
        signed = not dt.is_uint(var.dtype)
        cmp = self.b.icmp_signed if signed else self.b.icmp_unsigned
        narrow = lo.type.width < 32
        if narrow:
            # An 8- or 16-bit variable counts in 32 bits: its loop may end one past the
            # type's maximum (int8 [1, 128)), where lo + extent and i + 1 would wrap
            widen = self.b.sext if signed else self.b.zext
            lo, extent = widen(lo, I32), widen(extent, I32)
            cmp = self.b.icmp_signed
            signed = True
        end = self.int_op("add", lo, extent)
        pre = self.b.block
        inner = self.fn.append_basic_block(f"for_{var.name}_body")
        exit_ = self.fn.append_basic_block(f"for_{var.name}_end")
        first, last = _const_int(lo), _const_int(end)
        if first is not None and last is not None and 0 <= first < last:  # signed or not
            self.b.branch(inner)
        else:
            self.b.cbranch(cmp("<", lo, end), inner, exit_)
        self.b.position_at_end(inner)
        i = self.b.phi(lo.type, name=var.name)
        i.add_incoming(lo, pre)
        self.env[var] = self.b.trunc(i, ll_type(var.dtype)) if narrow else i
        body()
        step = self.b.add(i, ir.Constant(i.type, 1), flags=["nsw"] if signed else ["nuw"])
        i.add_incoming(step, self.b.block)
        back = self.b.cbranch(cmp("<", step, end), inner, exit_)
        options = list(options)
        blocks = self.fn.blocks[start:]   # this loop's, with the loops inside it
        emitted = sum(len(block.instructions) for block in blocks)
        size = emitted + self._flattened_extra  # with the loops inside flattened
        trips = _const_int(extent)
        flattened = size
        if trips is not None and "llvm.loop.unroll.full" in options:
            flattened = trips * size
        elif may_unroll and trips is not None:
            if self._holds_loop and (trips * size > _FLATTEN_LIMIT
                                     or not _reads_memory(blocks)):
                options.append(NO_UNROLL)
            else:
                flattened = trips * size
        self._holds_loop = True   # for the loop around this one
        self._flattened_extra = outer_extra + flattened - emitted
        if options:
            back.set_metadata("llvm.loop", self.mod.loop_metadata(*options))
        self.b.position_at_end(exit_)

    # -- memory -------------------------------------------------------------------------

    def address(self, buf: tir.Buffer, index, inbounds: bool = True) -> ir.Value:
        """&buf[index] for a scalar integer index value. inbounds=False for an address that
        may lie outside the buffer (a masked load's, whose lanes there are never read):
        an `inbounds` GEP that leaves its object is a poison value to LLVM."""
        if buf.data not in self.env:
            raise BuildError(f"Load/Store: buffer {buf.name!r} is neither a parameter "
                             f"nor allocated")
        # The index goes in as is: a GEP sign-extends a narrower index to the pointer width
        # (index dtypes are signed in practice; an unsigned one below 2^31 extends equally).
        base = self.env[buf.data]
        key = ("gep", base, index, buf.dtype, inbounds)
        ptr = self.reuse(key)
        if ptr is None:
            ptr = self.keep(key, self.b.gep(base, [index], inbounds=inbounds,
                                            source_etype=mem_type(dt.base(buf.dtype))))
        return ptr

    def to_mem(self, value, dtype: str):
        return self.b.zext(value, mem_type(dtype)) if dt.is_bool(dtype) else value

    def from_mem(self, value, dtype: str):
        return self.b.trunc(value, ll_type(dtype)) if dt.is_bool(dtype) else value

    # -- expressions --------------------------------------------------------------------

    def expr(self, e: E.Expr) -> ir.Value:
        """The value of `e`. Its subtrees are emitted first, deepest first, in the order
        the expr_<Type> methods would emit them (left to right): a user's expression nests
        deeper than Python recurses, and each node then finds its operands emitted. The
        branches of a lazy select are not entered (they are emitted in their own blocks)."""
        if type(e) in (E.Var, E.Const):
            return self._emit(e)
        if self._emitted is not None:
            hit = self._emitted.get(id(e))
            if hit is not None and hit[0] is e:
                return hit[1]
        outer, self._emitted = self._emitted, {}
        try:
            for node in E.post_order(e, self._emitted_or_lazy):
                value = self._emit(node)
                if isinstance(node, E.Call) and node.extern:
                    # it may write memory: later loads read again (its own value stays:
                    # emitting the call again would call it twice)
                    self._emitted = {}
                self._emitted[id(node)] = (node, value)
            hit = self._emitted.get(id(e))
            return hit[1] if hit is not None and hit[0] is e else self._emit(e)
        finally:
            self._emitted = outer

    def _emitted_or_lazy(self, e: E.Expr) -> bool:
        """Whether expr() leaves e's subtree alone: emitted already, a lazy select, or a
        load (its index is emitted as index arithmetic, see index_value)."""
        hit = self._emitted.get(id(e))
        return (hit is not None and hit[0] is e) or isinstance(
            e, (tir.Load, tir.Prefetch, tir.AccessPtr, tir.PackedCall)) or (
            isinstance(e, E.Select) and not (_is_safe(e.true_value) and _is_safe(e.false_value)))

    def _emit(self, e: E.Expr) -> ir.Value:
        method = self._expr_methods.get(type(e))
        if method is None:
            method = getattr(self, "expr_" + type(e).__name__, None)
            if method is None:
                raise BuildError(f"LLVM codegen: unsupported expression {type(e).__name__}")
            self._expr_methods[type(e)] = method
        return method(e)

    def index_value(self, e: E.Expr) -> ir.Value:
        """`e` generated as index arithmetic (see `in_index`)."""
        outer, self.in_index = self.in_index, True
        emitted, self._emitted = self._emitted, None  # values made outside an index differ
        try:
            return self.expr(e)
        finally:
            self.in_index, self._emitted = outer, emitted

    def expr_Var(self, e: E.Var) -> ir.Value:
        if e not in self.env:
            raise BuildError(f"Var: {e.name!r} is used but never bound")
        return self.env[e]

    def expr_Const(self, e: E.Const) -> ir.Value:
        value = e.value
        key = (e.dtype, value.hex() if isinstance(value, float) else value)
        c = self._const_exprs.get(key)
        if c is not None:
            return c
        base, n = dt.split_lanes(e.dtype)
        t = ll_type(base)
        if dt.is_float(base):
            c = self.const(t, float(value))
        else:  # two's complement, so uint8 255 prints as i8 -1
            c = self.const(t, dt.wrap(int(value), _int_dtype(t)))
        c = self._const_exprs[key] = self.splat(c, n) if n > 1 else c
        return c

    def expr_Cast(self, e: E.Cast) -> ir.Value:
        return self.cast(self.expr(e.value), e.value.dtype, e.dtype)

    def cast(self, v, src: str, dst: str) -> ir.Value:
        src, dst = dt.base(src), dt.base(dst)
        if src == dst:
            return v
        key = ("cast", v, src, dst)
        out = self.reuse(key)
        return out if out is not None else self.keep(key, self._convert(v, src, dst))

    def _convert(self, v, src: str, dst: str) -> ir.Value:
        t = ll_type(dt.with_lanes(dst, _lanes_of(v)))
        if dt.is_bool(dst):
            zero = ir.Constant(v.type, None)
            if dt.is_float(src):  # NaN is true, as in numpy
                return self.b.fcmp_unordered("!=", v, zero)
            return self.b.icmp_unsigned("!=", v, zero)
        if src == "float64" and dst == "float16":
            return double_to_half(self.b, v)   # not LLVM's libcall: half.py says why
        if dt.is_float(src) and dt.is_float(dst):
            return (self.b.fpext if dt.bits(dst) > dt.bits(src) else self.b.fptrunc)(v, t)
        if dt.is_float(src):
            return (self.b.fptoui if dt.is_uint(dst) else self.b.fptosi)(v, t)
        if dt.is_float(dst):
            unsigned = dt.is_uint(src) or dt.is_bool(src)
            return (self.b.uitofp if unsigned else self.b.sitofp)(v, t)
        if dt.bits(dst) > dt.bits(src):
            unsigned = dt.is_uint(src) or dt.is_bool(src)
            return (self.b.zext if unsigned else self.b.sext)(v, t)
        if dt.bits(dst) < dt.bits(src):
            return self.b.trunc(v, t)
        return v

    def expr_Not(self, e: E.Not) -> ir.Value:
        return self.b.not_(self.expr(e.a))

    def expr_Binary(self, e: E.Binary) -> ir.Value:
        a, b = self.expr(e.a), self.expr(e.b)
        return self.binary(e.op, e.a.dtype, a, b)

    def binary(self, op: str, dtype: str, a, b) -> ir.Value:
        """`a op b`; pure, so computed once per block for the same operand values."""
        key = (op, dtype, a, b, self.in_index)
        out = self.reuse(key)
        return out if out is not None else self.keep(key, self._binary(op, dtype, a, b))

    def _binary(self, op: str, dtype: str, a, b) -> ir.Value:
        if op in _CMP:
            return self.compare(op, dtype, a, b)
        if dt.is_float(dtype):
            return self.float_binary(op, dtype, a, b)
        unsigned = dt.is_uint(dtype) or dt.is_bool(dtype)
        if op in _INT_BINOP:
            no_wrap = self.in_index and dtype == "int32" and op in ("add", "sub", "mul")
            return self.int_op(op, a, b, ["nsw"] if no_wrap else [])
        if op in ("min", "max"):
            cmp = self.b.icmp_unsigned if unsigned else self.b.icmp_signed
            return self.b.select(cmp("<" if op == "min" else ">", a, b), a, b)
        if op in E.SHIFT_OPS:
            return self.shift(op, unsigned, a, b)
        if op not in _INT_DIV_OPS:
            raise BuildError(f"Binary: operator {op!r} is not supported for dtype {dtype}")
        divisor = _int_const(b)
        if divisor is not None and divisor != 0 and (unsigned or divisor != -1):
            return self.divide(op, unsigned, a, b)
        return self.divide_guarded(op, unsigned, a, b)

    def divide_guarded(self, op: str, unsigned: bool, a, b) -> ir.Value:
        """Integer division or modulo with numpy's answers where the hardware traps: x / 0
        and x % 0 give 0, MIN / -1 wraps to MIN and MIN % -1 gives 0. The divisor is made
        safe first (1 in those cases), so no lane ever divides by 0 or overflows."""
        zero = ir.Constant(a.type, None)
        one = self.splat(self.const(_scalar_type(a.type), 1), _lanes_of(a)) \
            if isinstance(a.type, ir.VectorType) else self.const(a.type, 1)
        by_zero = self.b.icmp_unsigned("==", b, zero)
        special = by_zero
        if not unsigned:  # x / -1 is -x, which overflows for MIN
            by_minus_one = self.b.icmp_signed("==", b, self.b.sub(zero, one))
            special = self.b.or_(by_zero, by_minus_one)
        q = self.divide(op, unsigned, a, self.b.select(special, one, b))
        if op in ("floormod", "truncmod"):
            return q  # x % 1 is 0, numpy's answer for both cases
        if not unsigned:
            q = self.b.select(by_minus_one, self.b.sub(zero, a), q)  # wraps for MIN
        return self.b.select(by_zero, zero, q)

    def shift(self, op: str, unsigned: bool, a, b) -> ir.Value:
        """a << b or a >> b with numpy's answers for every amount b. LLVM's shl, lshr and
        ashr are poison for an amount of the width or more (a negative one included, read
        unsigned), so such an amount is replaced before shifting and the result chosen
        after: 0, or for ashr the shift by width - 1, which gives the sign (0 or -1)."""
        width = _scalar_type(a.type).width
        amount = _int_const(b)
        if amount is not None and 0 <= amount % (1 << width) < width:
            return self._shift_op(op, unsigned)(a, b)   # a constant in range: plain shift
        in_range = self.b.icmp_unsigned("<", b, self.int_splat(a, width))
        if op == "shift_right" and not unsigned:
            return self.b.ashr(a, self.b.select(in_range, b, self.int_splat(a, width - 1)))
        zero = ir.Constant(a.type, None)
        out = self._shift_op(op, unsigned)(a, self.b.select(in_range, b, zero))
        return self.b.select(in_range, out, zero)

    def _shift_op(self, op: str, unsigned: bool):
        if op == "shift_left":
            return self.b.shl
        return self.b.lshr if unsigned else self.b.ashr

    def int_splat(self, like, value: int) -> ir.Value:
        """Integer constant `value` of `like`'s type, a vector of it for a vector `like`."""
        c = self.const(_scalar_type(like.type), value)
        return self.splat(c, _lanes_of(like)) if isinstance(like.type, ir.VectorType) else c

    def divide(self, op: str, unsigned: bool, a, b) -> ir.Value:
        """Integer division or modulo by a divisor that is neither 0 nor (signed) -1."""
        if not unsigned and op in ("floordiv", "floormod") and _positive_const(b):
            return self.floor_divmod_const(op, a, b)
        table = _UNSIGNED_BINOP if unsigned else _SIGNED_BINOP
        q = getattr(self.b, table[op])(a, b)
        if unsigned or op in ("truncdiv", "truncmod"):
            return q
        # Floor division: adjust when the remainder is non-zero and its sign differs from b's.
        rem = q if op == "floormod" else self.b.srem(a, b)
        zero = ir.Constant(a.type, None)
        fix = self.b.and_(self.b.icmp_signed("!=", rem, zero),
                          self.b.xor(self.b.icmp_signed("<", rem, zero),
                                     self.b.icmp_signed("<", b, zero)))
        if op == "floordiv":
            return self.b.sub(q, self.b.zext(fix, a.type))
        return self.b.add(rem, self.b.select(fix, b, zero))

    def int_op(self, op: str, a, b, flags=()) -> ir.Value:
        """add/sub/mul/and/or of two integer values, folded when both are constants or `b`
        is the identity (x + 0, x - 0, x * 1)."""
        if op in _IDENTITY and isinstance(b, ir.Constant) and type(b.constant) is int:
            if b.constant == _IDENTITY[op]:
                return a
            if isinstance(a, ir.Constant) and type(a.constant) is int:
                value = E.fold(op, a.constant, b.constant, _int_dtype(a.type))
                return self.const(a.type, dt.wrap(value, _int_dtype(a.type)))
        return getattr(self.b, _INT_BINOP[op])(a, b, flags=list(flags))

    def floor_divmod_const(self, op: str, a, b: ir.Constant) -> ir.Value:
        """floordiv/floormod of a signed value by a positive constant: a shift or mask for a
        power of two (exact in two's complement), else truncating division corrected for a
        negative remainder."""
        c = b.constant
        if c & (c - 1) == 0:
            if op == "floordiv":
                return self.b.ashr(a, self.const(a.type, c.bit_length() - 1))
            return self.b.and_(a, self.const(a.type, c - 1))
        rem = self.b.srem(a, b)
        negative = self.b.icmp_signed("<", rem, self.const(a.type, 0))
        if op == "floordiv":
            return self.b.sub(self.b.sdiv(a, b), self.b.zext(negative, a.type))
        return self.b.add(rem, self.b.select(negative, b, self.const(a.type, 0)))

    def float_binary(self, op: str, dtype: str, a, b) -> ir.Value:
        if op in _FLOAT_BINOP:
            return getattr(self.b, _FLOAT_BINOP[op])(a, b, flags=cgmath.fp_flags(dtype))
        if op in ("min", "max"):
            return self.intrinsic(cgmath.LLVM_MATH[op], dtype, [a, b])
        if op == "floormod":
            return self.float_floormod(dtype, a, b)
        quotient = self.b.fdiv(a, b, flags=cgmath.fp_flags(dtype))
        if op == "truncdiv":
            return self.intrinsic("llvm.trunc", dtype, [quotient])
        if op == "floordiv":
            return self.intrinsic("llvm.floor", dtype, [quotient])
        raise BuildError(f"Binary: operator {op!r} is not supported for dtype {dtype}")

    def float_floormod(self, dtype: str, a, b) -> ir.Value:
        """numpy's (and Python's) float a % b, from the exact C fmod (frem): a non-zero
        remainder whose sign differs from b's moves by b, a zero one takes b's sign.
        (a - floor(a / b) * b is wrong once a / b rounds, for quotients past 2**24 in
        float32.)"""
        rem = self.b.frem(a, b)
        zero = self.float_const(0.0, dtype)
        differs = self.b.and_(self.b.fcmp_ordered("!=", rem, zero),
                              self.b.xor(self.b.fcmp_ordered("<", rem, zero),
                                         self.b.fcmp_ordered("<", b, zero)))
        moved = self.b.select(differs, self.b.fadd(rem, b), rem)
        signed_zero = self.intrinsic("llvm.copysign", dtype, [zero, b])
        return self.b.select(self.b.fcmp_ordered("==", rem, zero), signed_zero, moved)

    def compare(self, op: str, dtype: str, a, b) -> ir.Value:
        if dt.is_float(dtype):
            if op == "ne":  # NaN != x is true
                return self.b.fcmp_unordered("!=", a, b)
            return self.b.fcmp_ordered(_CMP[op], a, b)
        if dt.is_uint(dtype) or dt.is_bool(dtype):
            return self.b.icmp_unsigned(_CMP[op], a, b)
        return self.b.icmp_signed(_CMP[op], a, b)

    def expr_Select(self, e: E.Select) -> ir.Value:
        if _is_safe(e.true_value) and _is_safe(e.false_value):
            cond = self.expr(e.cond)
            return self.b.select(cond, self.expr(e.true_value), self.expr(e.false_value))
        if dt.lanes(e.cond.dtype) > 1 and masked_loads_suffice(e.true_value) \
                and masked_loads_suffice(e.false_value):
            return masked.select(self, e, _is_safe)
        if dt.lanes(e.cond.dtype) > 1:  # lazy per lane: scalarize
            return self.vector_of([par.lane(self, e, k) for k in range(dt.lanes(e.dtype))],
                                  e.dtype)
        cond = self.expr(e.cond)
        with self.b.if_else(cond) as (then, otherwise):
            with then:
                t, t_block = self.expr(e.true_value), self.b.block
            with otherwise:
                f, f_block = self.expr(e.false_value), self.b.block
        phi = self.b.phi(t.type)
        phi.add_incoming(t, t_block)
        phi.add_incoming(f, f_block)
        return phi

    def expr_Load(self, e: tir.Load) -> ir.Value:
        buf, n = e.buffer, dt.lanes(e.dtype)
        align = elem_bytes(buf.dtype)
        mask = self.load_mask if n > 1 else None
        index = bounds.check(self, e.index, store=False, mask=mask)
        if n == 1:
            ptr = self.address(buf, self.index_value(index))
            return self.from_mem(self.load(buf.data, ptr, mem_type(e.dtype), align), e.dtype)
        if _is_dense_ramp(index):
            ptr = self.address(buf, self.index_value(index.base), inbounds=mask is None)
            return self.from_mem(self._dense_load(buf, ptr, mem_type(e.dtype), align, mask),
                                 e.dtype)
        stride = _small_stride(index)
        if stride:
            return self.from_mem(self._strided_load(buf, index, n, stride, align, mask),
                                 e.dtype)
        elem = mem_type(dt.base(e.dtype))
        ptrs = self.lane_addresses(buf, index, n, inbounds=mask is None)
        if mask is not None:
            return self.from_mem(masked.gather(self, ptrs, elem, align, mask), e.dtype)
        lanes = [self.load(buf.data, ptr, elem, align) for ptr in ptrs]   # lane by lane
        return self.from_mem(self.vector_of(lanes, dt.with_lanes(mem_dtype(e.dtype), n)),
                             e.dtype)

    def _dense_load(self, buf, ptr, vec: ir.Type, align: int, mask) -> ir.Value:
        """The vector at `ptr`; where `mask` is given, only its lanes (a masked load is
        never remembered as the memory's contents: its other lanes are not)."""
        if mask is None:
            return self.load(buf.data, ptr, vec, align)
        return masked.dense_load(self, ptr, vec, align, mask)

    def lane_addresses(self, buf, index: E.Expr, n: int, inbounds: bool = True) -> list:
        """&buf[lane k of index] for the n lanes of a vector index. A ramp of constant
        stride gives each lane as the scalar base plus a constant, which x86 folds into the
        load's or store's address (a cvec conv's crop reads its channel-vector tiles at
        stride 32: a vector of indices cost an extract and a sign extension per lane)."""
        if isinstance(index, E.Ramp) and isinstance(index.stride, E.Const):
            step = int(index.stride.value)
            return [self.address(buf, self.index_value(index.base + k * step if k
                                                        else index.base), inbounds)
                    for k in range(n)]
        lanes = self.index_value(index)
        return [self.address(buf, self.b.extract_element(lanes, I32(k)), inbounds)
                for k in range(n)]

    def _strided_load(self, buf, index, n: int, stride: int, align: int,
                      mask=None) -> ir.Value:
        """Lanes base, base + stride, ... of a ramp: dense n-lane loads covering the lanes'
        span (the last one moved back to end at the last lane: no read past the buffer),
        joined and shuffled. One load of the odd-sized span instead (<31 x float> for 16
        lanes at stride 2) is legalized by LLVM into pieces rebuilt element by element.
        With a `mask`, each piece reads only the elements of lanes it enables."""
        elem = mem_type(dt.base(buf.dtype))
        width = (n - 1) * stride + 1
        count = -(-width // n)
        starts = [min(j * n, width - n) for j in range(count)]
        vec = ir.VectorType(elem, n)
        pieces = [self._dense_load(
            buf, self.address(buf, self.index_value(index.base + o if o else index.base),
                              inbounds=mask is None),
            vec, align, None if mask is None else masked.piece_mask(self, mask, o, n, stride))
            for o in starts]
        while len(pieces) & (len(pieces) - 1):   # a power of two of pieces to join
            pieces.append(ir.Constant(pieces[0].type, None))
        while len(pieces) > 1:                  # join neighbours: <2m> from two <m>
            m = pieces[0].type.count
            both = ir.Constant(ir.VectorType(I32, 2 * m), list(range(2 * m)))
            pieces = [self.b.shuffle_vector(pieces[k], pieces[k + 1], both)
                      for k in range(0, len(pieces), 2)]

        def where(p):   # the lane of the joined pieces holding span element p
            j = min(p // n, count - 1)
            return j * n + p - starts[j]
        lanes = ir.Constant(ir.VectorType(I32, n), [where(k * stride) for k in range(n)])
        joined = pieces[0]
        return self.b.shuffle_vector(joined, ir.Constant(joined.type, None), lanes)

    def expr_Ramp(self, e: E.Ramp) -> ir.Value:
        base, stride = self.expr(e.base), self.expr(e.stride)
        steps = ir.Constant(ir.VectorType(base.type, e.lanes), list(range(e.lanes)))
        offsets = self.b.mul(self.splat(stride, e.lanes), steps)
        return self.b.add(self.splat(base, e.lanes), offsets)

    def expr_Broadcast(self, e: E.Broadcast) -> ir.Value:
        return self.splat(self.expr(e.value), e.lanes)

    def splat(self, v, n: int) -> ir.Value:
        if isinstance(v, ir.Constant):  # one object per function: its text is cached
            return self.shared(("splat", v, n), lambda: ir.Constant(ir.VectorType(v.type, n),
                                                                    [v] * n))
        key = ("splat", v, n)
        out = self.reuse(key)
        if out is not None:
            return out
        undef = self.shared(("undef1", v.type), lambda: ir.Constant(ir.VectorType(v.type, 1),
                                                                     None))
        zeros = self.shared(("mask0", n), lambda: ir.Constant(ir.VectorType(I32, n), [0] * n))
        one = self.b.insert_element(undef, v, self.const(I32, 0))
        return self.keep(key, self.b.shuffle_vector(one, one, zeros))

    def vector_of(self, values: list, dtype: str) -> ir.Value:
        vec = ir.Constant(ll_type(dtype), None)
        for k, v in enumerate(values):
            vec = self.b.insert_element(vec, v, I32(k))
        return vec

    def expr_Call(self, e: E.Call) -> ir.Value:
        value = cgmath.emit_call(self, e)
        if e.extern:  # may write memory
            self.forget_memory()
        return value

    def expr_AccessPtr(self, e: tir.AccessPtr) -> ir.Value:
        return packed.access_ptr(self, e)

    def expr_PackedCall(self, e: tir.PackedCall) -> ir.Value:
        return packed.packed_call(self, e)

    def expr_BufferArg(self, e: tir.BufferArg) -> ir.Value:
        raise BuildError(f"buffer '{e.buffer.name}' is passed whole outside a call_packed; "
                         f"pass buffer.access_ptr(...) to an extern function instead")

    def expr_Prefetch(self, e: tir.Prefetch) -> ir.Value:
        return cgmath.prefetch(self, e.load, e.write, e.locality)

    def float_const(self, value: float, dtype: str) -> ir.Value:
        return self.expr_Const(E.Const(dtype, value))

    def intrinsic(self, name: str, dtype: str, args: list) -> ir.Value:
        return intrinsic(self, name, dtype, args)


def mem_dtype(dtype: str) -> str:
    """The dtype whose register type equals the memory type (bool -> uint8)."""
    return dt.with_lanes("uint8", dt.lanes(dtype)) if dt.is_bool(dtype) else dtype


def _int_dtype(t: ir.IntType) -> str:
    """The signed dtype of LLVM integer type `t` (bool for i1): its constants print in two's
    complement, so uint8 255 is i8 -1."""
    return "bool" if t.width == 1 else f"int{t.width}"


def _positive_const(v) -> bool:
    return isinstance(v, ir.Constant) and type(v.constant) is int and v.constant > 0


def _int_const(v) -> int | None:
    """The value of an integer constant, or of a vector constant whose lanes are all equal."""
    if not isinstance(v, ir.Constant):
        return None
    if isinstance(v.type, ir.VectorType):
        lanes = v.constant
        if not isinstance(lanes, list) or not lanes:
            return None
        values = {_int_const(lane) for lane in lanes}
        return values.pop() if len(values) == 1 else None
    return v.constant if type(v.constant) is int else None


def _scalar_type(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def _lanes_of(v) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 1


def _is_x86(triple: str) -> bool:
    return triple.startswith("x86_64")


def _all_pragmas(s: tir.Stmt) -> set:
    keys: set = set()
    for node in walk_stmts(s):
        if isinstance(node, tir.For):
            keys.update(k for k, _ in node.pragmas)
    return keys


def _strided_store(s: tir.For) -> bool:
    """Whether some store in loop `s` moves by other than 0 or 1 element per iteration (or
    non-linearly). LLVM's vectorizer must not take such a loop: it would scatter, and it
    does take outer loops once it has fully unrolled the inner ones (the GEMM chain's
    blocking step: the row loop with gathers and scatters of C, 4.6 s instead of 0.4 s
    on Zen 4, where a scatter is microcoded). Vectorizing is the schedule's decision;
    LLVM keeps the loops whose stores are contiguous or invariant."""
    ana = Analyzer()

    for node in walk_stmts(s.body):
        if isinstance(node, tir.Store):
            index = tir.unchecked(node.index)
            index = index.base if isinstance(index, E.Ramp) else index
            step = _step(index, s.loop_var, ana)
            if step is None or abs(step) > 1:
                return True
    return False


def _reads_memory(blocks) -> bool:
    """Whether any of these LLVM blocks loads memory or calls out (a gather, an intrinsic
    that reads, a task)."""
    return any(isinstance(inst, (ir.LoadInstr, ir.CallInstr))
               for block in blocks for inst in block.instructions)


def _step(index: E.Expr, var: E.Var, ana: Analyzer):
    """How far `index` moves when `var` grows by one, or None when not linearly."""
    step = 0
    for atom, coeff in ana.linear(index).terms.values():
        if atom is var:
            step = coeff
        elif var in E.free_vars(atom):
            return None
    return step


def _is_dense_ramp(index: E.Expr) -> bool:
    return (isinstance(index, E.Ramp) and isinstance(index.stride, E.Const)
            and int(index.stride.value) == 1)


def _small_stride(index: E.Expr) -> int | None:
    """The constant stride of a ramp index with stride 2 to MAX_DENSE_STRIDE, else None."""
    if isinstance(index, E.Ramp) and isinstance(index.stride, E.Const):
        stride = int(index.stride.value)
        return stride if 2 <= stride <= MAX_DENSE_STRIDE else None
    return None


def _const_int(v):
    """The Python int of an integer ir.Constant, else None."""
    return v.constant if isinstance(v, ir.Constant) and type(v.constant) is int else None


def _is_safe(e: E.Expr) -> bool:
    """True when evaluating `e` speculatively can neither fault nor have side effects."""
    unsafe = []

    def visit(node):
        if isinstance(node, (tir.Load, tir.PackedCall)) or (isinstance(node, E.Call)
                                                             and node.extern):
            unsafe.append(node)
        elif (isinstance(node, E.Binary) and node.op in _INT_DIV_OPS
              and not dt.is_float(node.dtype)):
            unsafe.append(node)
    E.pre_order(e, visit)
    return not unsafe

