"""Loop IR -> CUDA C: one `extern "C" __global__` function per kernel of a DevicePlan.

Takes a lowered PrimFunc, its DevicePlan (te/lower/passes/device_split.py) and the target;
gives CudaSource: the source text and, per kernel, its name and parameter list (which
argument buffer, temporary or size variable goes in each slot). A loop bound to a thread
axis becomes `const int i = threadIdx.x;` (guarded by `if (threadIdx.x < extent)` where the
loop is shorter than its axis's launch); a vectorized loop with contiguous, aligned accesses
becomes vector loads and stores (vector_access.py), other vectorized and unrolled loops
`#pragma unroll` loops; per-thread buffers become local arrays, 'wmma.accumulator' ones arrays of
wmma accumulator fragments (tensor_core.py), shared ones `__shared__` arrays with
`__syncthreads()` before and after each run of fills (a fill that reads an earlier one of
the run starts a new one). The source compiles with
nvcc, and as plain C++ after the prelude runtime/cuda_emulator.py supplies. Imports te.lower
(ir, the device split), te.compute.expr and te.dtype; the C types come with the target
(te.target, from runtime.cuda).
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass

import numpy as np

from ... import dtype as dt
from ...compute import expr as E
from ...errors import BuildError
from ...lower import ir
from ...lower.arith import Analyzer
from ...lower.func import PrimFunc
from ...lower.printer import print_expr
from ...lower.passes.device_split import DevicePlan, KernelPart
from ...lower.buffers import loaded_buffers, stored_buffers
from ...lower.passes.device_sync import BLOCK_TAGS, shared_arrays
from ...lower.passes.storage_flatten import NameTable
from . import half, tensor_core
from .allreduce import allreduce_lines
from .vector_access import LANES, VECTOR_TYPES, VectorLoop, vector_loop

# Integer division and modulo with te's semantics for any integer type: floor (Python's,
# te's floordiv/floormod) or truncating (C's `/` and `%`), and numpy's answers where C's
# trap or overflow: x / 0 and x % 0 are 0, MIN / -1 wraps to MIN, MIN % -1 is 0.
PRELUDE = """\
template <typename T> __device__ __forceinline__ bool te_div_special(T b) {
  return b == 0 || (T(-1) < T(0) && b == T(-1));
}
template <typename T> __device__ __forceinline__ T te_truncdiv(T a, T b) {
  if (te_div_special(b)) return b == 0 ? T(0) : T(0ull - (unsigned long long)a);
  return a / b;
}
template <typename T> __device__ __forceinline__ T te_truncmod(T a, T b) {
  return te_div_special(b) ? T(0) : T(a % b);
}
template <typename T> __device__ __forceinline__ T te_floordiv(T a, T b) {
  if (te_div_special(b)) return te_truncdiv(a, b);
  T q = a / b;
  return (q * b != a && ((a < 0) != (b < 0))) ? q - 1 : q;
}
template <typename T> __device__ __forceinline__ T te_floormod(T a, T b) {
  if (te_div_special(b)) return T(0);
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}
"""
_INT_DIVISION = ("floordiv", "floormod", "truncdiv", "truncmod")
# Shifts with te's (numpy's) answers for every amount, where C's are undefined: an amount
# below 0 or of the width or more shifts every bit out (0, or -1 for a negative value
# shifted right). The left shift runs in unsigned: C leaves it undefined for a negative
# value or one whose result overflows.
SHIFT_PRELUDE = """\
template <typename T> __device__ __forceinline__ bool te_shift_in_range(T b) {
  return (unsigned long long)b < sizeof(T) * 8;
}
template <typename T> __device__ __forceinline__ T te_shift_left(T a, T b) {
  return te_shift_in_range(b) ? T((unsigned long long)a << b) : T(0);
}
template <typename T> __device__ __forceinline__ T te_shift_right(T a, T b) {
  if (!te_shift_in_range(b)) return T(a < T(0) ? ~T(0) : T(0));
  return T(a >> b);
}
"""
# C's & | ^ on bit patterns; narrower types are promoted to int and cast back
_BITWISE = {"bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^"}
# Integer min and max: a function call evaluates each operand once (the select form
# `a < b ? a : b` repeats them, so nested mins grow exponentially in the source).
MINMAX_PRELUDE = """\
template <typename T> __device__ __forceinline__ T te_min(T a, T b) { return b < a ? b : a; }
template <typename T> __device__ __forceinline__ T te_max(T a, T b) { return a < b ? b : a; }
"""
# float min and max: CUDA's own, one instruction each. With one NaN operand they give the
# other operand (C's fminf/fmaxf), where numpy's np.minimum gives NaN.
_FLOAT_MINMAX = {("min", "float32"): "fminf", ("max", "float32"): "fmaxf",
                 ("min", "float64"): "fmin", ("max", "float64"): "fmax"}

# text that needs cuda_fp16.h: the half types, their conversions and intrinsics
_HALF_USE = re.compile(r"\bhalf2?\b|\b__h[a-z]+\(|\b__\w+2half\b|\b__half2float\b")
_INFIX = {"add": "+", "sub": "-", "mul": "*", "lt": "<", "le": "<=", "gt": ">", "ge": ">=",
          "eq": "==", "ne": "!=", "and": "&&", "or": "||"}
# te intrinsic -> C function for float64; float32 adds the `f` suffix (expf, sqrtf, ...).
_MATH = {"exp": "exp", "log": "log", "sqrt": "sqrt", "rsqrt": "rsqrt", "tanh": "tanh",
         "erf": "erf", "floor": "floor", "ceil": "ceil", "round": "rint", "trunc": "trunc",
         "sin": "sin", "cos": "cos", "log2": "log2", "log10": "log10", "exp2": "exp2",
         "pow": "pow", "abs": "fabs", **{n: n for n in (
             "tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh")}}
# -fast-math: float32 intrinsic -> CUDA's fast (approximate) version, as TVM's CUDA target
# maps exp to __expf.
_FAST_MATH = {"exp": "__expf", "log": "__logf", "log2": "__log2f", "log10": "__log10f",
              "sin": "__sinf", "cos": "__cosf", "tan": "__tanf", "pow": "__powf"}
# Names generated code must not take: C++ keywords, what CUDA and the emulator define, the
# math functions and macros kernels call.
_RESERVED = frozenset("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue
co_await co_return co_yield decltype default delete do double dynamic_cast else enum
explicit export extern false float for friend goto if inline int long mutable namespace new
noexcept not not_eq nullptr operator or or_eq private protected public register
reinterpret_cast requires restrict return short signed sizeof static static_assert
static_cast struct switch template this thread_local throw true try typedef typeid typename
union unsigned using virtual void volatile wchar_t while xor xor_eq main
threadIdx blockIdx blockDim gridDim warpSize dim3 min max abs float2 float4 int2 int4 double2
half half2 nvcuda
NAN INFINITY NULL pthread_barrier_t errno assert stdin stdout stderr offsetof isnan isinf
isfinite signbit fpclassify isnormal setjmp va_arg linux unix i386""".split()) | {
    name + suffix for name in list(_MATH.values()) + ["fmod", "floor", "trunc", "exp"]
    for suffix in ("", "f")}


@dataclass(frozen=True)
class KernelSource:
    name: str
    # ("buffer", k): the k-th of the function's arguments followed by its temporaries;
    # ("scalar", k): the k-th size variable. One entry per kernel parameter, in order.
    params: tuple
    uses_barriers: bool = False
    threads: int | None = None   # per block, where every launch has the same number


@dataclass(frozen=True)
class CudaSource:
    text: str
    kernels: tuple   # KernelSource, in launch order


def generate_cuda(func: PrimFunc, plan: DevicePlan, target) -> CudaSource:
    """The CUDA C of `func`'s kernels; `target` (a te.target.Target for 'cuda') gives the
    C types."""
    buffers = list(func.params) + [b for b, _ in plan.temporaries]
    order = {b.data: k for k, b in enumerate(buffers)}
    parts, kernels = [], []
    for part in plan.kernels:
        gen = _KernelGen(part, target.c_types, target.fast_math)
        text, params = gen.kernel(sorted(part.buffers, key=lambda b: order[b.data]),
                                  part.scalars)
        parts.append(text)
        slots = [("buffer", order[b.data]) for b in sorted(part.buffers,
                                                           key=lambda b: order[b.data])]
        slots += [("scalar", func.scalar_params.index(v)) for v in part.scalars]
        kernels.append(KernelSource(part.name, tuple(slots), gen.uses_barriers,
                                    block_threads(part)))
        assert len(slots) == len(params)
    text = "\n".join(parts)
    if any(f"te_{op}<" in text for op in ("min", "max")):
        text = MINMAX_PRELUDE + "\n" + text
    if any(f"te_{op}<" in text for op in _INT_DIVISION):
        text = PRELUDE + "\n" + text
    if any(f"te_{op}<" in text for op in E.SHIFT_OPS):
        text = SHIFT_PRELUDE + "\n" + text
    if tensor_core.uses_tensor_cores(text):
        text = tensor_core.helper_text(text) + "\n" + text
    if _HALF_USE.search(text):
        text = half.INCLUDE + "\n" + text
    if tensor_core.uses_tensor_cores(text):   # after cuda_fp16.h, which it includes too
        text = tensor_core.INCLUDE + "\n" + text
    return CudaSource(text, tuple(kernels))


VECTOR_CODE = ("te.build: target 'cuda': the function holds vector code (lowered for the "
               "CPU); pass the schedule itself, which target 'cuda' lowers keeping vectorized "
               "loops as loops")


def c_type(dtype: str, c_types) -> str:
    """The C type of `dtype` in `c_types` (te dtype -> C type)."""
    if dt.lanes(dtype) > 1:
        raise BuildError(VECTOR_CODE)
    if dtype not in c_types:
        raise BuildError(f"te.build: target 'cuda' does not support dtype {dtype} yet")
    return c_types[dtype]


def block_threads(part: KernelPart) -> int | None:
    """The threads per block of `part`'s launches where they are a constant, else None."""
    threads = 1
    for tag in BLOCK_TAGS:
        extent = part.extents.get(tag, E.const(1))
        if not isinstance(extent, E.Const):
            return None
        threads *= int(extent.value)
    return threads


class _KernelGen:
    """Emits one kernel; owns its table of C names."""

    def __init__(self, part: KernelPart, c_types, fast_math: bool = False):
        self.part = part
        self.c_types = c_types
        self.fast_math = fast_math
        self.names: dict = {}
        self.taken = NameTable(_RESERVED)
        self.stored = stored_buffers(part.body)
        self.uses_barriers = False
        self.filling = False    # emitting a statement that fills shared memory
        # Emitting a Load/Store index or loop bounds: int32 arithmetic there is proven not
        # to overflow (index_width widens what could); data arithmetic wraps, and so may
        # int64 index arithmetic on loaded int64 values.
        self.in_index = False
        self.texts = None  # id(node) -> (node, text) while expr() writes one tree
        self.vector_shared: set = set()   # shared buffers (data Vars) accessed as vectors
        self.wmma_shared: set = set()     # shared buffers (data Vars) a wmma call points into
        self.ranges: dict = {}   # loop Var -> (lo, hi) of the constant loops being emitted

    def c_type(self, dtype: str) -> str:
        return c_type(dtype, self.c_types)

    def name(self, key, hint: str) -> str:
        got = self.names.get(key)
        if got is None:
            base = re.sub(r"\W", "_", hint) or "v"
            # an all-capitals name may be a macro of the C library (EOF, M_PI, INT32_MAX)
            macro_like = len(base) > 1 and base.upper() == base and not base.isdigit()
            if base[0].isdigit() or base[0] == "_" or base.startswith(("te_", "pthread")) \
                    or macro_like:
                base = "v_" + base
            got = self.names[key] = self.taken.get(base)
        return got

    def kernel(self, buffers: list, scalars: tuple) -> tuple:
        params = []
        for b in buffers:
            const = "" if b.data in self.stored else "const "
            params.append(f"{const}{self.c_type(b.dtype)}* __restrict__ "
                          f"{self.name(b.data, b.name)}")
        params += [f"{self.c_type(v.dtype)} {self.name(v, v.name)}" for v in scalars]
        # the block size, where it is known here: ptxas then keeps the registers per thread
        # low enough for that many threads to fit an SM (spilling if it must)
        threads = block_threads(self.part)
        bounds = f"__launch_bounds__({threads}) " if threads is not None else ""
        lines = [f'extern "C" __global__ void {bounds}{self.part.name}({", ".join(params)}) '
                 '{']
        # one array per shared buffer, at the top: a block has one copy whatever scope
        # declares it, and copies of its allocation (unrolled loops) must not add more;
        # aligned for the vector accesses the body makes of it and the wmma calls' pointers
        shared = [(b, extent, self.buffer(b)) for b, extent in
                  shared_arrays(self.part.body).values()]
        body = _one_barrier_per_run(self.stmt(self.part.body, 1))
        for b, extent, name in shared:
            align = ""
            if b.data in self.wmma_shared:
                align = f"__align__({tensor_core.POINTER_ALIGN}) "
            elif b.data in self.vector_shared:
                align = "__align__(16) "
            lines.append(f"  __shared__ {align}{self.c_type(b.dtype)} {name}[{extent}];")
        lines += body
        lines.append("}")
        return "\n".join(lines) + "\n", params

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: ir.Stmt, depth: int) -> list:
        pad = "  " * depth
        if isinstance(s, ir.SeqStmt):
            return self.sequence(s.stmts, depth)
        if isinstance(s, ir.For):
            return self.loop(s, depth)
        if isinstance(s, ir.IfThenElse):
            lines = [f"{pad}if ({_bare(self.expr(s.cond))}) {{"] + self.stmt(s.then_case, depth + 1)
            if s.else_case is not None:
                lines += [f"{pad}}} else {{"] + self.stmt(s.else_case, depth + 1)
            return lines + [f"{pad}}}"]
        if isinstance(s, ir.LetStmt):
            head = f"{pad}  const {self.c_type(s.var.dtype)} {self.name(s.var, s.var.name)} = " \
                   f"{_bare(self.expr(s.value))};"
            return [f"{pad}{{", head] + self.stmt(s.body, depth + 1) + [f"{pad}}}"]
        if isinstance(s, ir.Store):
            self.not_fragments(s.buffer)
            return [f"{pad}{self.buffer(s.buffer)}[{_bare(self.index(s.index))}] = "
                    f"{_bare(self.expr(s.value))};"]
        if isinstance(s, ir.Allocate):
            b = s.buffer
            if b.scope == "shared":   # declared at the kernel's top
                return self.stmt(s.body, depth)
            if b.scope == tensor_core.ACC_SCOPE:
                decl = f"{pad}  {tensor_core.FRAGMENT_TYPE} {self.buffer(b)}[{self.fragments(b)}];"
                return [f"{pad}{{", decl] + self.stmt(s.body, depth + 1) + [f"{pad}}}"]
            decl = f"{pad}  {self.c_type(b.dtype)} {self.buffer(b)}[{int(s.extent.value)}];"
            return [f"{pad}{{", decl] + self.stmt(s.body, depth + 1) + [f"{pad}}}"]
        if isinstance(s, ir.ThreadAllreduce):
            return allreduce_lines(self, s, depth)
        if isinstance(s, ir.Evaluate):
            if isinstance(s.value, ir.Prefetch):
                return []
            return [f"{pad}{self.expr(s.value)};"]
        raise BuildError(f"te.build: target 'cuda' cannot generate {type(s).__name__}")

    def sequence(self, stmts: tuple, depth: int) -> list:
        """Statements in order; a run of consecutive shared fills gets one barrier before
        it (earlier readers are done with the old values) and one after it (every thread's
        part is written before any read); a fill that reads what an earlier fill of the
        run wrote starts a new run."""
        pad = "  " * depth
        lines: list = []
        written: set = set()   # shared buffers filled since the last barrier
        for x in _spliced(stmts):
            fill = self.part.is_shared_fill(x)
            if fill and (not written or loaded_buffers(x) & written):
                self.barrier(lines, pad)
                written = set()
            elif not fill and written:
                self.barrier(lines, pad)
                written = set()
            self.filling, outer = self.filling or fill, self.filling
            lines += self.stmt(x, depth)
            self.filling = outer
            if fill:
                written |= stored_buffers(x) & self.part.shared
        if written:
            self.barrier(lines, pad)
        return lines

    def barrier(self, lines: list, pad: str) -> None:
        if self.filling:
            return   # inside a fill: the barriers go around all of it
        if not (lines and lines[-1].strip() == "__syncthreads();"):
            lines.append(f"{pad}__syncthreads();")
        self.uses_barriers = True

    def loop(self, s: ir.For, depth: int, as_vector: bool = True) -> list:
        """The loop's lines; its range, where constant, known inside (`ranges`)."""
        known = isinstance(s.min, E.Const) and isinstance(s.extent, E.Const) \
            and int(s.extent.value) > 0
        if known:
            lo = int(s.min.value)
            self.ranges[s.loop_var] = (lo, lo + int(s.extent.value) - 1)
        try:
            return self._loop(s, depth, as_vector)
        finally:
            self.ranges.pop(s.loop_var, None)

    def _loop(self, s: ir.For, depth: int, as_vector: bool = True) -> list:
        pad = "  " * depth
        var = self.name(s.loop_var, s.loop_var.name)
        ctype = self.c_type(s.loop_var.dtype)
        if s.kind == ir.THREAD_BINDING:
            kind, axis = s.thread_tag.split(".")
            index = f"(({ctype}){kind}.{axis})"
            value = index if _is_zero(s.min) else f"{self.index(s.min)} + {index}"
            lines = [f"{pad}{{  // {s.loop_var.name}: {s.thread_tag}"]
            inner = depth + 1
            guard = self.part.needs_guard(s)
            if guard:
                lines.append(f"{pad}  if ({index} < {_bare(self.index(s.extent))}) {{")
                inner += 1
            lines.append(f"{'  ' * inner}const {ctype} {var} = {value};")
            lines += self.stmt(s.body, inner)
            if guard:
                lines.append(f"{pad}  }}")
            return lines + [f"{pad}}}"]
        vec = vector_loop(s) if s.kind == ir.VECTORIZED and as_vector else None
        if vec is not None and vec.guard is None:
            return self.vector_loop(vec, depth)
        if vec is not None:   # the vector form where every lane passes the check
            return ([f"{pad}if ({_bare(self.expr(vec.guard))}) {{"]
                    + self.vector_loop(vec, depth + 1) + [f"{pad}}} else {{"]
                    + self.loop(s, depth + 1, as_vector=False) + [f"{pad}}}"])
        end = self.index(s.extent) if _is_zero(s.min) else \
            f"{self.index(s.min)} + {self.index(s.extent)}"
        lines = [f"{pad}#pragma unroll"] if s.kind in (ir.UNROLLED, ir.VECTORIZED) else []
        lines.append(f"{pad}for ({ctype} {var} = {self.index(s.min)}; {var} < {end}; ++{var}) {{")
        return lines + self.stmt(s.body, depth + 1) + [f"{pad}}}"]

    def vector_loop(self, vec: VectorLoop, depth: int) -> list:
        """One vector load per load that moves with the loop, each lane's value from their
        lanes, one vector store (vector_access.py)."""
        pad = "  " * depth
        vtype = VECTOR_TYPES[vec.store.buffer.dtype, vec.lanes]
        lines = [f"{pad}{{  // {vec.store.buffer.name}: {vec.lanes} lanes"]
        for (load, base), lanes in zip(vec.loads, vec.placeholders):
            name = self.name(object(), f"{load.buffer.name}_v")
            for lane, var in enumerate(lanes):
                self.names[var] = f"{name}.{LANES[lane]}"
            lines.append(f"{pad}  const {vtype} {name} = *(const {vtype}*)"
                         f"({self.buffer(load.buffer)} + {self.index(base)});")
            if load.buffer.scope == "shared":
                self.vector_shared.add(load.buffer.data)
        out = self.name(object(), f"{vec.store.buffer.name}_v")
        lines.append(f"{pad}  {vtype} {out};")
        for lane, value in enumerate(vec.lane_values):
            lines.append(f"{pad}  {out}.{LANES[lane]} = {_bare(self.expr(value))};")
        lines.append(f"{pad}  *({vtype}*)({self.buffer(vec.store.buffer)} + "
                     f"{self.index(vec.store_base)}) = {out};")
        if vec.store.buffer.scope == "shared":
            self.vector_shared.add(vec.store.buffer.data)
        return lines + [f"{pad}}}"]

    def index(self, e: E.Expr) -> str:
        """`e` as index arithmetic (see `in_index`)."""
        outer, self.in_index = self.in_index, True
        texts, self.texts = self.texts, None  # text written outside an index differs
        try:
            return self.expr(e)
        finally:
            self.in_index, self.texts = outer, texts

    def buffer(self, b: ir.Buffer) -> str:
        return self.name(b.data, b.name)

    def fragments(self, b: ir.Buffer) -> int:
        """The number of 16x16 accumulator fragments of 'wmma.accumulator' buffer `b`."""
        tile = tensor_core.TILE
        dims = [getattr(x, "value", None) for x in b.shape]
        strides = [getattr(x, "value", None) for x in b.strides]
        dense = [int(np.prod(dims[k + 1:])) for k in range(len(dims))] \
            if all(isinstance(d, int) for d in dims) else None
        if not (len(dims) >= 2 and dense == strides and dims[-1] % tile == 0
                and dims[-2] % tile == 0):
            raise BuildError(f"te.build: target 'cuda': stage '{b.name}' (scope "
                             f"'{b.scope}') needs a dense constant shape whose last two "
                             f"dimensions are multiples of {tile} (rows of 16x16 "
                             f"fragments), got ({', '.join(map(_shape_text, b.shape))})")
        return int(np.prod(dims)) // (tile * tile)

    def not_fragments(self, b: ir.Buffer) -> None:
        if b.scope == tensor_core.ACC_SCOPE:
            raise BuildError(f"te.build: target 'cuda': stage '{b.name}' has scope "
                             f"'{b.scope}' (wmma fragments, whose elements a thread cannot "
                             f"address): only te.wmma_matmul_intrin(k, accumulator=True) and "
                             f"te.wmma_store_intrin() may access it; tensorize its loops "
                             f"and its readers'")

    def fragment_args(self, e: E.Call) -> None:
        """Refuses fragments passed to a call that takes memory, and memory passed as a
        fragment (the first pointer of FRAGMENT_NAMES' calls but the store, its last)."""
        ptrs = [x for x in e.args if isinstance(x, ir.AccessPtr)]
        if e.name not in tensor_core.FRAGMENT_NAMES:
            want = None
        else:
            want = ptrs[-1] if e.name == tensor_core.STORE_NAME else ptrs[0]
        for x in ptrs:
            if (x.buffer.scope == tensor_core.ACC_SCOPE) != (x is want):
                raise BuildError(f"te.build: target 'cuda': {e.name} takes buffer "
                                 f"'{x.buffer.name}' (scope '{x.buffer.scope}') where it "
                                 f"needs {'a wmma.accumulator stage' if x is want else 'memory'}"
                                 f"; with C cached in 'wmma.accumulator' use "
                                 f"te.wmma_matmul_intrin(k, accumulator=True) and "
                                 f"te.wmma_store_intrin(), else the plain intrinsic")

    # -- expressions -------------------------------------------------------------------
    def expr(self, e: E.Expr) -> str:
        """The C text of `e`. Subtrees are written first, deepest first, and each node finds
        its operands' text in `texts`: a user's expression nests deeper than Python
        recurses. A load's index is left to index() (index arithmetic)."""
        if self.texts is not None:
            hit = self.texts.get(id(e))
            if hit is not None and hit[0] is e:
                return hit[1]
        outer, self.texts = self.texts, {}
        try:
            for node in E.post_order(e, self._written_or_load):
                self.texts[id(node)] = (node, self.text(node))
            return self.texts[id(e)][1] if id(e) in self.texts else self.text(e)
        finally:
            self.texts = outer

    def _written_or_load(self, e: E.Expr) -> bool:
        hit = self.texts.get(id(e))
        return (hit is not None and hit[0] is e) or isinstance(e, ir.Load)

    def text(self, e: E.Expr) -> str:
        """The C text of `e`, its operands through expr()."""
        if dt.lanes(e.dtype) > 1 or isinstance(e, (E.Ramp, E.Broadcast)):
            raise BuildError(VECTOR_CODE)
        if isinstance(e, E.Var):
            return self.name(e, e.name)
        if isinstance(e, E.Const):
            return c_literal(e, self.c_types)
        if isinstance(e, E.Binary) and half.uses_half(e):
            return half.binary(e, self.expr(e.a), self.expr(e.b))
        if isinstance(e, E.Binary):
            return self.binary(e)
        if isinstance(e, E.Not):
            return f"(!{self.expr(e.a)})"
        if isinstance(e, E.Cast) and half.HALF in (e.dtype, e.value.dtype):
            return half.cast(e, self.expr(e.value), self.c_type)
        if isinstance(e, E.Cast):
            if dt.is_bool(e.dtype):
                return f"({self.expr(e.value)} != 0)"
            return f"(({self.c_type(e.dtype)}){self.expr(e.value)})"
        if isinstance(e, E.Select):
            return (f"({self.expr(e.cond)} ? {self.expr(e.true_value)} : "
                    f"{self.expr(e.false_value)})")
        if isinstance(e, E.Call):
            return self.call(e)
        if isinstance(e, ir.Load):
            self.not_fragments(e.buffer)
            return f"{self.buffer(e.buffer)}[{_bare(self.index(e.index))}]"
        if isinstance(e, ir.AccessPtr) and e.buffer.scope == tensor_core.ACC_SCOPE:
            # the fragment of the 16x16 tile at e.offset (tensor_core.ACC_SCOPE)
            cols = e.buffer.strides[-2]
            tile = tensor_core.TILE
            ana = Analyzer(self.ranges)
            row, col = E.binary("floordiv", e.offset, cols), E.binary("floormod", e.offset, cols)
            for x in (row, col):
                if not _is_zero(ana.simplify(E.binary("floormod", x, tile))):
                    raise BuildError(f"te.build: target 'cuda': a wmma call takes a tile of "
                                     f"'{e.buffer.name}' (scope '{e.buffer.scope}') at "
                                     f"element {print_expr(e.offset)}, not provably a "
                                     f"16x16 fragment (row and column multiples of {tile})")
            index = (E.binary("floordiv", row, tile) * E.binary("floordiv", cols, tile)
                     + E.binary("floordiv", col, tile))
            return f"{self.buffer(e.buffer)}[{_bare(self.index(ana.simplify(index)))}]"
        if isinstance(e, ir.AccessPtr):   # an extern call's pointer argument
            return f"({self.buffer(e.buffer)} + {self.index(e.offset)})"
        raise BuildError(f"te.build: target 'cuda' cannot generate {type(e).__name__}")

    def binary(self, e: E.Binary) -> str:
        a, b = self.expr(e.a), self.expr(e.b)
        if e.op in ("min", "max"):
            if (e.op, e.dtype) in _FLOAT_MINMAX:
                return f"{_FLOAT_MINMAX[e.op, e.dtype]}({_bare(a)}, {_bare(b)})"
            return f"te_{e.op}<{self.c_type(e.dtype)}>({_bare(a)}, {_bare(b)})"
        if e.op in _BITWISE or e.op in E.SHIFT_OPS:
            return self.bitwise(e, a, b)
        if e.op in _INFIX:
            text = f"({a} {_INFIX[e.op]} {b})"
            if not (dt.is_integral(e.dtype) and e.op in ("add", "sub", "mul")) or (
                    self.in_index and e.dtype == "int32"):
                return text
            if e.dtype not in ("uint32", "uint64"):
                # Signed overflow (or int overflow of promoted narrow types) is undefined in
                # C: the arithmetic wraps in unsigned, as numpy's does.
                unsigned = "unsigned long long" if dt.bits(e.dtype) == 64 else "unsigned"
                text = f"(({unsigned}){a} {_INFIX[e.op]} ({unsigned}){b})"
            return f"(({self.c_type(e.dtype)}){text})"  # back to the dtype, wrapping
        float_suffix = "f" if e.dtype == "float32" else ""
        if dt.is_float(e.dtype):
            if e.op == "div":
                return f"({a} / {b})"
            if e.op == "floordiv":
                return f"floor{float_suffix}({a} / {b})"
            if e.op == "floormod":
                return f"({a} - floor{float_suffix}({a} / {b}) * {b})"
            if e.op == "truncdiv":
                return f"trunc{float_suffix}({a} / {b})"
            if e.op == "truncmod":
                return f"fmod{float_suffix}({a}, {b})"
        else:
            if e.op in _INT_DIVISION or e.op == "div":
                op = "truncdiv" if e.op == "div" else e.op
                return f"te_{op}<{self.c_type(e.dtype)}>({a}, {b})"
        raise BuildError(f"te.build: target 'cuda' cannot generate operator {e.op!r}")

    def bitwise(self, e: E.Binary, a: str, b: str) -> str:
        """C of a bitwise operator or shift; a xor with all-ones (te.bitwise_not) is `~a`.
        The result is cast back to a narrower type than int: C promotes the operands, and
        ~ of a promoted unsigned char is a negative int."""
        c_type = self.c_type(e.dtype)
        if e.op in E.SHIFT_OPS:
            return f"te_{e.op}<{c_type}>({_bare(a)}, {_bare(b)})"
        ones = E.all_ones(e.dtype)
        if e.op == "bitwise_xor" and isinstance(e.b, E.Const) and e.b.value == ones.value:
            text = f"(~{a})"
        else:
            text = f"({a} {_BITWISE[e.op]} {b})"
        return f"(({c_type}){text})" if dt.bits(e.dtype) < 32 else text

    def call(self, e: E.Call) -> str:
        if e.extern:
            self.fragment_args(e)
        args = [self.expr(x) for x in e.args]
        if e.extern:
            if e.name in tensor_core.HELPER_NAMES:
                self.wmma_shared.update(x.buffer.data for x in e.args if isinstance(
                    x, ir.AccessPtr) and x.buffer.scope == "shared")
            return f"{e.name}({', '.join(args)})"
        if e.name == "likely":
            return args[0]
        if e.name == "abs" and dt.is_integral(e.dtype):  # abs(MIN) wraps to MIN, as in numpy
            negated = f"(({self.c_type(e.dtype)})(0ull - (unsigned long long){args[0]}))"
            return f"({args[0]} < 0 ? {negated} : {args[0]})"
        if e.dtype == half.HALF:   # computed in float, rounded to half once
            return half.call(e.name, args, lambda name, xs: self.float_call(name, xs,
                                                                            "float32"))
        if e.dtype not in ("float32", "float64"):
            raise BuildError(f"te.build: target 'cuda' does not support {e.name} on "
                             f"{e.dtype} yet")
        return self.float_call(e.name, args, e.dtype)

    def float_call(self, name: str, args: list, dtype: str) -> str:
        """The C of math intrinsic `name` on `args` (C text) of float dtype `dtype`."""
        suffix = "f" if dtype == "float32" else ""
        fast = self.fast_math and dtype == "float32"
        if name == "sigmoid":
            one = c_literal(E.const(1.0, dtype), self.c_types)
            exp = "__expf" if fast else f"exp{suffix}"
            return f"({one} / ({one} + {exp}(-{args[0]})))"
        if fast and name in _FAST_MATH:
            return f"{_FAST_MATH[name]}({', '.join(args)})"
        if name not in _MATH:
            raise BuildError(f"te.build: target 'cuda' has no intrinsic {name!r}")
        return f"{_MATH[name]}{suffix}({', '.join(args)})"


def c_literal(c: E.Const, c_types) -> str:
    if dt.is_bool(c.dtype):
        return "true" if c.value else "false"
    if c.dtype == half.HALF:
        return half.literal(c.value)
    if dt.is_integral(c.dtype):
        v = int(c.value)
        suffix = {"int64": "LL", "uint64": "ULL", "uint32": "U"}.get(c.dtype, "")
        if c.dtype == "int64" and v == -2**63:
            return "(-9223372036854775807LL - 1)"
        if c.dtype == "int32" and v == -2**31:
            return "(-2147483647 - 1)"
        text = f"{v}{suffix}"
        if dt.bits(c.dtype) < 32:
            return f"(({c_type(c.dtype, c_types)}){text})"
        return f"({text})" if v < 0 else text
    v = float(np.float32(c.value)) if c.dtype == "float32" else float(c.value)
    cast = "(float)" if c.dtype == "float32" else "(double)"
    if math.isnan(v):
        return f"({cast}NAN)"
    if math.isinf(v):
        return f"({'-' if v < 0 else ''}{cast}INFINITY)"
    text = repr(v)
    if "e" not in text and "." not in text:
        text += ".0"
    text += "f" if c.dtype == "float32" else ""
    return f"({text})" if v < 0 or text.startswith("-") else text


def _spliced(stmts: tuple):
    """`stmts` with each shared allocation replaced by its body's statements: it declares
    nothing where it stands (the arrays are at the kernel's top), and a fill inside it
    then joins the run of fills before it (one barrier for both, where neither reads the
    other)."""
    for x in stmts:
        while isinstance(x, ir.Allocate) and x.buffer.scope == "shared":
            x = x.body
        if isinstance(x, ir.SeqStmt):
            yield from _spliced(x.stmts)
        else:
            yield x


def _one_barrier_per_run(lines: list) -> list:
    """`lines` without a barrier that directly follows another: consecutive lines are in
    one block (every block opens and closes on a line of its own), so the second waits for
    nothing the first did not."""
    out: list = []
    for line in lines:
        if line.strip() == "__syncthreads();" and out and out[-1].strip() == line.strip():
            continue
        out.append(line)
    return out


def _bare(text: str) -> str:
    """`text` without its outer parentheses, when they enclose all of it."""
    if not text.startswith("("):
        return text
    depth = 0
    for k, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return text[1:-1] if k == len(text) - 1 else text
    return text


def _shape_text(x) -> str:
    return print_expr(E.as_expr(x))


def _is_zero(x: E.Expr) -> bool:
    return isinstance(x, E.Const) and x.value == 0
