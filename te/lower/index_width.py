"""Index arithmetic computed exactly: int32 where it provably fits, else int64.

Takes the bodies of the computed stages (in terms of their own axes, inlined producers
substituted) and gives them with each tensor access's per-dimension index unchanged when no
int32 or int64 add, subtract or multiply in it can leave its dtype, else with that index's
arithmetic in int64 (TVM's index narrowing in reverse). Where int64 could overflow too, it
refuses with a LoweringError, unless the index reads tensors (int64 arithmetic on loaded
values wraps, as numpy's). Narrower and unsigned arithmetic wraps as typed. Bounds come from
the axes' domains and the sizes, which the call-time checker holds below the target's
index_limit (runtime.checker.INDEX_LIMIT, handed down by te.target: a loop or tensor
dimension spans fewer elements than its tensor), and from the access being inside its
tensor: the index itself is below its dimension, which caps what an add or multiply of
non-negative terms inside it reaches. Anything else (a loaded value) is taken to span its
dtype. Splitting and fusing loops later substitute expressions for the axes that take the
same values. Imports te.compute, te.dtype, te.errors, arith and printer.
"""
from __future__ import annotations

from .. import dtype as dt
from ..compute import expr as E
from ..compute.expr import Binary, Const, Expr, TensorLoad, Var
from ..errors import LoweringError
from .arith import Analyzer, bitwise_bound
from .printer import print_expr

_WRAPPING_OPS = ("add", "sub", "mul")
# Index arithmetic of these is exact; narrower and unsigned types wrap as the user asked.
_EXACT_DTYPES = ("int32", "int64")


def exact_indices(bodies: dict, arg_tensors: list, index_limit: int) -> dict:
    """stage -> body exprs (as build_loops.inline_bodies gives) with exact indices; sizes and
    dimensions are below `index_limit`."""
    sizes = {v: (0, index_limit - 1) for t in arg_tensors for d in t.shape
             for v in E.free_vars(d)}
    out = {}
    for st, body in bodies.items():
        ana = Analyzer(sizes)
        for iv in st.op.axis + st.op.reduce_axis:
            _bind_axis(ana, iv, index_limit)
        out[st] = tuple(E.transform(b, lambda e: _exact_load(e, ana, index_limit))
                        for b in body)
    return out


def _bind_axis(ana: Analyzer, iv, index_limit: int) -> None:
    """An axis spans [min, min + extent): a dimension, below index_limit."""
    lo, hi = value_bound(iv.dom.min, ana)
    extent = min(value_bound(iv.dom.extent, ana)[1], index_limit - 1)
    ana.bind(iv.var, lo, hi + extent - 1)


def _exact_load(e: Expr, ana: Analyzer, index_limit: int):
    if not isinstance(e, TensorLoad):
        return None
    indices = tuple(exact_index(idx, ana, f"{e.tensor.name}: index {k}",
                                _dim_cap(dim, ana, index_limit))
                    for k, (idx, dim) in enumerate(zip(e.indices, e.tensor.shape)))
    if all(a is b for a, b in zip(indices, e.indices)):
        return None
    return E.with_children(e, indices)


def _dim_cap(dim: Expr, ana: Analyzer, index_limit: int) -> int:
    return min(value_bound(dim, ana)[1], index_limit - 1) - 1


def exact_index(e: Expr, ana: Analyzer, what: str, cap: int | None = None) -> Expr:
    """`e`, or `e` computed in int64 when int32 could overflow; `what` names the access in
    the error ("A: index 0"), `cap` is the largest value an access inside the tensor takes."""
    if not _overflows(e, ana, cap, {}):
        return e
    wide = _widen(e) if e.dtype == "int32" else e
    if _overflows(wide, ana, cap, {}) and not _reads_data(e):
        raise _too_wide(e, what)
    # Arithmetic on loaded int64 values may wrap, as numpy's does: nothing wider exists.
    return wide


def value_bound(e: Expr, ana: Analyzer, memo: dict | None = None) -> tuple:
    """(lo, hi) of integer expression e over unbounded integers: the exact value when no
    add, subtract or multiply in it wraps. Unlike Analyzer.const_bound, a leaf without a
    range spans its dtype, so every node gets finite ends."""
    memo = {} if memo is None else memo
    hit = memo.get(id(e))
    if hit is not None:
        return hit
    out = _bound(e, ana, memo)
    memo[id(e)] = out
    return out


def _bound(e: Expr, ana: Analyzer, memo: dict) -> tuple:
    tlo, thi = dt.int_range(e.dtype) if _is_int_scalar(e) else (None, None)
    if isinstance(e, Const):
        return int(e.value), int(e.value)
    if isinstance(e, Var):
        lo, hi = ana.ranges.get(e, (None, None))
        return (tlo if lo is None else max(lo, tlo)), (thi if hi is None else min(hi, thi))
    if isinstance(e, E.Cast) and _is_int_scalar(e) and _is_int_scalar(e.value):
        lo, hi = value_bound(e.value, ana, memo)
        return (lo, hi) if tlo <= lo and hi <= thi else (tlo, thi)
    if isinstance(e, E.Select) and _is_int_scalar(e):
        t, f = value_bound(e.true_value, ana, memo), value_bound(e.false_value, ana, memo)
        return min(t[0], f[0]), max(t[1], f[1])
    if not (isinstance(e, Binary) and _is_int_scalar(e)):
        return tlo, thi
    a, b = value_bound(e.a, ana, memo), value_bound(e.b, ana, memo)
    op = e.op
    if op == "add":
        return a[0] + b[0], a[1] + b[1]
    if op == "sub":
        return a[0] - b[1], a[1] - b[0]
    if op == "mul":
        products = [x * y for x in a for y in b]
        return min(products), max(products)
    if op in ("min", "max"):
        pick = min if op == "min" else max
        return pick(a[0], b[0]), pick(a[1], b[1])
    if op in ("floordiv", "truncdiv") and b[0] == b[1] and b[0] > 0:
        c = b[0]
        if op == "truncdiv" and a[1] < 0:
            return a[0] // c, -(-a[1] // c)   # rounds toward zero: up for negatives
        return a[0] // c, a[1] // c
    if op == "floormod" and b[0] > 0:
        return 0, b[1] - 1
    if op in E.BITWISE_OPS:   # a bit pattern, not a quotient: the rule below is wrong for it
        lo, hi = bitwise_bound(op, a, b)
        return (tlo if lo is None else max(lo, tlo)), (thi if hi is None else min(hi, thi))
    # Any other quotient or remainder is no larger in magnitude than an operand.
    m = max(abs(a[0]), abs(a[1]), abs(b[0]), abs(b[1]))
    return max(-m, tlo), min(m, thi)


def _overflows(e: Expr, ana: Analyzer, cap: int | None, memo: dict) -> bool:
    """Whether some add, subtract or multiply in `e` may leave its integer dtype, when e's
    value is at most `cap` (None: no cap)."""
    if _is_leaf(e):
        return False
    if not _is_int_scalar(e):  # a float or bool part may still hold integer arithmetic
        return any(_overflows(k, ana, None, memo) for k in E.children(e))
    lo, hi = value_bound(e, ana, memo)
    if isinstance(e, Binary) and e.op in _WRAPPING_OPS and e.dtype in _EXACT_DTYPES:
        tlo, thi = dt.int_range(e.dtype)
        if lo < tlo or (hi if cap is None else min(hi, cap)) > thi:
            return True
    caps = _child_caps(e, ana, min(hi, cap) if cap is not None else None, memo)
    return any(_overflows(k, ana, c, memo) for k, c in zip(E.children(e), caps))


def _child_caps(e: Expr, ana: Analyzer, cap: int | None, memo: dict) -> tuple:
    """The largest value each child of `e` takes when e's value is at most `cap`: known
    where e grows with the child (adding or multiplying non-negative terms)."""
    kids = E.children(e)
    if cap is None or not (isinstance(e, Binary) and _is_int_scalar(e)):
        return (None,) * len(kids)
    a, b = value_bound(e.a, ana, memo), value_bound(e.b, ana, memo)
    if e.op == "add" and a[0] >= 0 and b[0] >= 0:
        return cap - b[0], cap - a[0]
    if e.op == "sub" and b[0] >= 0:
        return cap + b[1], None
    if e.op == "mul" and a[0] >= 0 and b[0] >= 1:
        return cap // b[0], (cap // a[0] if a[0] >= 1 else None)
    if e.op in ("floordiv", "truncdiv") and b[0] == b[1] and b[0] > 0 and a[0] >= 0:
        return cap * b[0] + b[0] - 1, None
    return (None,) * len(kids)


def _widen(e: Expr) -> Expr:
    """`e` with its int32 arithmetic rebuilt in int64 (int32 leaves cast to int64)."""
    if isinstance(e, Binary) and e.op in E.SHIFT_OPS and e.a.dtype == "int32" \
            and isinstance(e.b, Const) and 0 <= e.b.value < 32:
        # a shift by a constant amount below the width is a product or floor quotient by
        # 2**amount, exact in int64 as the other index arithmetic
        out = E.binary(e.op, _widen(e.a), E.const(e.b.value, "int64"))
    elif _is_leaf(e) or (isinstance(e, Binary) and e.op in E.SHIFT_OPS):
        # any other shift stays in its dtype: in int64, a left shift by 32 to 63 would no
        # longer give te's (and numpy's) 0 for an amount of the width or more
        out = e
    elif isinstance(e, Binary) and e.op in E.LOGIC_OPS:
        out = E.logical(e.op, _widen(e.a), _widen(e.b))
    elif isinstance(e, Binary) and e.a.dtype == "int32":  # arithmetic or a comparison
        out = E.binary(e.op, _widen(e.a), _widen(e.b))
    elif isinstance(e, E.Not):
        out = E.logical_not(_widen(e.a))
    elif isinstance(e, E.Select):
        out = E.select(_widen(e.cond), _widen(e.true_value), _widen(e.false_value))
    elif isinstance(e, E.Cast):
        out = E.cast(_widen(e.value), e.dtype)
    else:  # arithmetic of another dtype keeps its dtype
        out = E.with_children(e, tuple(_widen(k) for k in E.children(e)))
    return E.cast(out, "int64") if out.dtype == "int32" else out


def _is_leaf(e: Expr) -> bool:
    """Nodes whose children are not this index's arithmetic (a nested access's indices are
    made exact on their own)."""
    return isinstance(e, (Var, Const, TensorLoad, E.Call))


def _reads_data(e: Expr) -> bool:
    found = []
    E.pre_order(e, lambda node: found.append(node) if isinstance(node, TensorLoad) else None)
    return bool(found)


def _is_int_scalar(e: Expr) -> bool:
    return dt.is_integral(e.dtype) and dt.lanes(e.dtype) == 1


def _too_wide(e: Expr, what: str) -> LoweringError:
    return LoweringError(f"{what}: the index {print_expr(e)} can exceed the int64 range for "
                         f"some values of its loop variables, sizes or loaded values; "
                         f"bound its operands (for example with floormod) so it fits")
