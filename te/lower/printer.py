"""Readable, stable C-like text for loop IR (what `str(te.lower(...))` shows).

Takes a PrimFunc, a statement or an expression (both IR phases: ProducerStore/TensorLoad and
Store/Load) and gives text that golden tests pin. Imports te.compute, te.dtype and ir.py.
Conventions: every nested infix operation is parenthesized as in TVM (`((i*5) + k)`), the
outermost one of a statement is not; two distinct Vars (or buffers) with one name get `_1`,
`_2`, ... in first-printed order.
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

from .. import dtype as dt
from ..compute import expr as E
from . import ir
from .visitor import run_frames

if TYPE_CHECKING:  # for annotations only: func.py imports this module
    from .func import PrimFunc

INDENT = "  "

# Infix operators; "*" and "/" bind visually tighter, so they are printed without spaces.
_INFIX = {"add": " + ", "sub": " - ", "mul": "*", "div": "/", "lt": " < ", "le": " <= ",
          "gt": " > ", "ge": " >= ", "eq": " == ", "ne": " != ", "and": " && ", "or": " || "}
_KIND_PREFIX = {ir.SERIAL: "", ir.PARALLEL: "parallel ", ir.VECTORIZED: "vectorized ",
                ir.UNROLLED: "unrolled ", ir.THREAD_BINDING: ""}
_INT_SUFFIX = {"int32": "", "int64": "i64", "int16": "i16", "int8": "i8", "uint8": "u8",
               "uint16": "u16", "uint32": "u32", "uint64": "u64"}
_FLOAT_SUFFIX = {"float32": "f", "float64": "f64", "float16": "f16"}


def print_func(func: PrimFunc) -> str:
    """The whole function: `@name(params) {`, the body indented, `}`."""
    return _Printer().func(func)


def print_stmt(stmt: ir.Stmt, indent: int = 0) -> str:
    """A statement, `indent` levels deep, one line per statement, no trailing newline."""
    return "\n".join(_Printer().stmt(stmt, indent))


def print_expr(expr: E.Expr) -> str:
    """An expression; the outermost infix operation is not parenthesized."""
    return _Printer().expr(expr, top=True)


def format_const(c: E.Const) -> str:
    """5, 5i64, 3u8, 2f, 0.5f, 0.5f64, True; a vector constant as broadcast(c, lanes)."""
    base, lanes = dt.split_lanes(c.dtype)
    if lanes > 1:
        return f"broadcast({format_const(E.Const(base, c.value))}, {lanes})"
    if base == "bool":
        return "True" if c.value else "False"
    if base in _INT_SUFFIX:
        return f"{int(c.value)}{_INT_SUFFIX[base]}"
    v = float(c.value)
    if not math.isfinite(v):
        return f"{base}({v!r})"
    text = repr(v)
    if text.endswith(".0"):
        text = text[:-2]
    return text + _FLOAT_SUFFIX.get(base, base)


class _Printer:
    """One printing session: owns the name table that disambiguates Vars and buffers."""

    def __init__(self):
        self.var_names: dict = {}      # Var -> printed name
        self.storage_names: dict = {}  # (data Var, name) / Tensor -> printed name
        self.taken: set = set()
        self.storage_taken: set = set()
        self.texts = None  # id(node) -> (node, text) while expr() prints one tree
        self.lines: list = []  # what stmt() has printed so far

    # -- names -------------------------------------------------------------------------
    def var(self, v: E.Var) -> str:
        name = self.var_names.get(v)
        if name is None:
            name = _fresh(v.name, self.taken)
            self.var_names[v] = name
        return name

    def storage(self, obj) -> str:
        # Buffers are the same storage when they share the data Var (passes may rebuild the
        # Buffer object); tensors are compared as tensors.
        key = (obj.data, obj.name) if isinstance(obj, ir.Buffer) else obj
        name = self.storage_names.get(key)
        if name is None:
            name = _fresh(obj.name, self.storage_taken)
            self.storage_names[key] = name
        return name

    # -- functions ---------------------------------------------------------------------
    def func(self, f: PrimFunc) -> str:
        params = [self.param_buffer(b) for b in f.params]
        params += [f"{self.var(v)}: {v.dtype}" for v in f.scalar_params]
        lines = [f"// attr {k} = {f.attrs[k]!r}" for k in sorted(f.attrs)]
        lines.append(f"@{f.name}({', '.join(params)}) {{")
        lines += self.stmt(f.body, 1)
        lines.append("}")
        return "\n".join(lines)

    def param_buffer(self, b: ir.Buffer) -> str:
        text = f"{self.storage(b)}: {b.dtype}[{self.exprs(b.shape)}]"
        if b.strides and not _is_dense(b.shape, b.strides):
            text += f" strides=[{self.exprs(b.strides)}]"
        if b.scope != "global":
            text += f" scope={b.scope}"
        return text

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: ir.Stmt, depth: int) -> list:
        """The lines of s at indent `depth`. Each stmt_<Type> appends its own lines and, as
        a generator, yields (child, depth) for its children: run_frames keeps those frames
        on its own stack, as deep as allocations nest (one per root stage)."""
        outer, self.lines = self.lines, []
        try:
            run_frames(self._begin((s, depth)), self._begin)
            return self.lines
        finally:
            self.lines = outer

    def _begin(self, item: tuple):
        s, depth = item
        method = getattr(self, "stmt_" + type(s).__name__, None)
        if method is None:
            raise TypeError(f"printer: unknown statement {type(s).__name__}")
        return method(s, depth)

    def block(self, head: str, body: ir.Stmt, depth: int):
        pad = INDENT * depth
        self.lines.append(f"{pad}{head} {{")
        yield body, depth + 1
        self.lines.append(f"{pad}}}")

    def stmt_For(self, s: ir.For, depth: int):
        pad = INDENT * depth
        self.lines += [f"{pad}// pragma {k}" if v is None
                       else f"{pad}// pragma {k} = {self.value(v)}" for k, v in s.pragmas]
        name = self.var(s.loop_var)
        if s.kind == ir.THREAD_BINDING:
            name = f"{name}: {s.thread_tag}"
        head = f"{_KIND_PREFIX.get(s.kind, s.kind + ' ')}for ({name}, {self.expr(s.min)}, " \
               f"{self.expr(s.extent)})"
        yield from self.block(head, s.body, depth)

    def stmt_ParallelTask(self, s: ir.ParallelTask, depth: int):
        captured = ", ".join(self.var(v) for v in s.captured)
        yield from self.block(f"parallel_task {s.name}({captured})", s.loop, depth)

    def stmt_SeqStmt(self, s: ir.SeqStmt, depth: int):
        for x in s.stmts:
            yield x, depth

    def stmt_IfThenElse(self, s: ir.IfThenElse, depth: int):
        yield from self.block(f"if ({self.expr(s.cond, top=True)})", s.then_case, depth)
        if s.else_case is not None:
            self.lines[-1] += " else {"
            yield s.else_case, depth + 1
            self.lines.append(f"{INDENT * depth}}}")

    def stmt_Evaluate(self, s: ir.Evaluate, depth: int) -> None:
        self.lines.append(INDENT * depth + self.expr(s.value, top=True))

    def stmt_LetStmt(self, s: ir.LetStmt, depth: int):
        value = self.expr(s.value, top=True)  # printed before the var is named
        self.lines.append(f"{INDENT * depth}let {self.var(s.var)} = {value}")
        yield s.body, depth

    def stmt_ThreadAllreduce(self, s: ir.ThreadAllreduce, depth: int):
        values = ", ".join(self.expr(x, top=True) for x in s.values)
        results = ", ".join(self.var(v) for v in s.results)
        head = f"allreduce {s.combiner.name} over {', '.join(s.tags)}: {results} = ({values})"
        yield from self.block(head, s.body, depth)

    def stmt_ProducerStore(self, s: ir.ProducerStore, depth: int) -> None:
        self.lines.append(f"{INDENT * depth}{self.storage(s.tensor)}[{self.exprs(s.indices)}] "
                          f"= {self.expr(s.value, top=True)}")

    def stmt_ProducerRealize(self, s: ir.ProducerRealize, depth: int):
        bounds = ", ".join(f"{self.expr(r.min)}:{self.expr(_end(r))}" for r in s.bounds)
        head = f"realize {self.storage(s.tensor)}[{bounds}]"
        if s.scope != "global":
            head += f" scope={s.scope}"
        if s.align:
            head += " align=[" + ", ".join(f"({a}, {f}, {o})" for a, f, o in s.align) + "]"
        yield from self.block(head, s.body, depth)

    def stmt_AliasScope(self, s: ir.AliasScope, depth: int):
        names = ", ".join(f"{self.storage(t)} in {self.storage(target)}"
                          for t, target in s.aliases)
        yield from self.block(f"alias {names}", s.body, depth)

    def stmt_BufferBind(self, s: ir.BufferBind, depth: int):
        names = ", ".join(f"{self.storage(b)} = {self.storage(t)}"
                          + (f"[{self.exprs(mins)}:]" if mins is not None else "")
                          for b, t, mins, _ in s.binds)
        yield from self.block(f"bind {names}", s.body, depth)

    def stmt_Store(self, s: ir.Store, depth: int) -> None:
        self.lines.append(f"{INDENT * depth}{self.storage(s.buffer)}"
                          f"[{self.expr(s.index, top=True)}] = {self.expr(s.value, top=True)}")

    def stmt_Allocate(self, s: ir.Allocate, depth: int):
        b = s.buffer
        head = f"allocate {self.storage(b)}[{b.dtype} * {self.expr(s.extent)}]"
        if b.scope != "global":
            head += f" scope={b.scope}"
        yield from self.block(head, s.body, depth)

    # -- expressions -------------------------------------------------------------------
    def exprs(self, items) -> str:
        return ", ".join(self.expr(x, top=True) for x in items)

    def value(self, v) -> str:
        """A pragma value or similar: an expression, or a plain Python value."""
        return self.expr(v, top=True) if isinstance(v, E.Expr) else repr(v)

    def expr(self, e: E.Expr, top: bool = False) -> str:
        """The text of `e`, in parentheses where it is an infix operation inside another.
        Subtrees are printed first, deepest first, and each node finds its operands' text
        in `texts`: a user's expression nests deeper than Python recurses."""
        if self.texts is not None:
            hit = self.texts.get(id(e))
            if hit is not None and hit[0] is e:
                return _parenthesized(e, hit[1], top)
        outer, self.texts = self.texts, {}
        try:
            for node in E.post_order(e, self._printed):
                self.texts[id(node)] = (node, self.text(node))
            return _parenthesized(e, self.texts[id(e)][1], top)
        finally:
            self.texts = outer

    def _printed(self, e: E.Expr) -> bool:
        hit = self.texts.get(id(e))
        return hit is not None and hit[0] is e

    def text(self, e: E.Expr) -> str:
        """The text of `e` without parentheses of its own."""
        if isinstance(e, E.Var):
            return self.var(e)
        if isinstance(e, E.Const):
            return format_const(e)
        if isinstance(e, E.Binary):
            if e.op in _INFIX:
                return f"{self.expr(e.a)}{_INFIX[e.op]}{self.expr(e.b)}"
            return f"{e.op}({self.expr(e.a, True)}, {self.expr(e.b, True)})"
        if isinstance(e, E.Not):
            return f"!{self.expr(e.a)}"
        if isinstance(e, E.Cast):
            return f"{e.dtype}({self.expr(e.value, True)})"
        if isinstance(e, E.Select):
            return f"select({self.exprs((e.cond, e.true_value, e.false_value))})"
        if isinstance(e, E.Call):
            return f"{e.name}({self.exprs(e.args)})"
        if isinstance(e, ir.Prefetch):
            name = "prefetch_write" if e.write else "prefetch"
            hint = "" if e.locality == 3 else f", locality={e.locality}"
            return f"{name}(&{self.expr(e.load, top=True)}{hint})"
        if isinstance(e, ir.Load):
            return f"{self.storage(e.buffer)}[{self.expr(e.index, top=True)}]"
        if isinstance(e, ir.AccessPtr):
            mode = "w" if e.write else "r"
            return f"access_ptr({self.storage(e.buffer)}, {self.expr(e.offset, True)}, {mode!r})"
        if isinstance(e, ir.BufferArg):
            return self.storage(e.buffer)
        if isinstance(e, ir.PackedCall):
            args = [repr(e.name)] + [self.expr(a, True) for a in e.args]
            return f"call_packed({', '.join(args)})"
        if isinstance(e, ir.CheckedIndex):  # index, checked to be in [0, extent)
            return f"checked({self.exprs((e.index, e.extent))})"
        if isinstance(e, E.TensorLoad):
            return f"{self.storage(e.tensor)}[{self.exprs(e.indices)}]"
        if isinstance(e, E.Ramp):
            return f"ramp({self.exprs((e.base, e.stride))}, {e.lanes})"
        if isinstance(e, E.Broadcast):
            return f"broadcast({self.expr(e.value, True)}, {e.lanes})"
        if isinstance(e, E.Reduce):
            return self.reduce(e)
        raise TypeError(f"printer: unknown expression {type(e).__name__}")

    def reduce(self, e: E.Reduce) -> str:
        axes = ", ".join(self.var(iv.var) for iv in e.axis)
        if len(e.source) == 1:
            text = f"reduce_{e.combiner.name}({self.expr(e.source[0], True)}, axis=[{axes}]"
        else:
            text = f"reduce_{e.combiner.name}(({self.exprs(e.source)}), axis=[{axes}]"
        if not (isinstance(e.condition, E.Const) and e.condition.value):
            text += f", where={self.expr(e.condition, True)}"
        if e.init:
            text += f", init=[{self.exprs(e.init)}]"
        text += ")"
        return text if len(e.source) == 1 else f"{text}[{e.value_index}]"


def _parenthesized(e: E.Expr, text: str, top: bool) -> str:
    return f"({text})" if not top and isinstance(e, E.Binary) and e.op in _INFIX else text


def _end(r) -> E.Expr:
    if isinstance(r.min, E.Const) and r.min.value == 0:
        return r.extent
    return E.binary("add", r.min, r.extent)


def _fresh(name: str, taken: set) -> str:
    candidate, k = name, 0
    while candidate in taken:
        k += 1
        candidate = f"{name}_{k}"
    taken.add(candidate)
    return candidate


def _is_dense(shape: tuple, strides: tuple) -> bool:
    """True when `strides` are the row-major strides of `shape`, whatever the factor order."""
    if len(shape) != len(strides):
        return False
    expect: list = []
    for extent, stride in zip(reversed(shape), reversed(strides)):
        if _factors(stride) != _canonical(expect):
            return False
        expect.append(extent)
    return True


def _factors(e) -> tuple:
    """A product as (constant, sorted ids of the other factors); None when not a product."""
    e = E.as_expr(e)
    if isinstance(e, E.Const):
        return (e.value, ())
    if isinstance(e, E.Binary) and e.op == "mul":
        fa, fb = _factors(e.a), _factors(e.b)
        if fa is None or fb is None:
            return None
        return (fa[0] * fb[0], tuple(sorted(fa[1] + fb[1])))
    return (1, (id(e),))


def _canonical(extents: list) -> tuple:
    const, others = 1, ()
    for x in extents:
        f = _factors(x)
        if f is None:
            return None
        const, others = const * f[0], others + f[1]
    return (const, tuple(sorted(others)))
