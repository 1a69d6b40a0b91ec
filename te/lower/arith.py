"""Integer arithmetic analysis: a linear-form simplifier and symbolic interval bounds.

Takes expressions and, optionally, the ranges of loop variables; gives simplified
expressions (terms collected, constants folded, floordiv/floormod/min/max/comparisons
decided when the ranges prove them) and intervals [lo, hi] whose ends are expressions.
Imports te.compute.expr and te.dtype only. Float expressions are only constant-folded.
"""
from __future__ import annotations

from types import MappingProxyType

from .. import dtype as dt
from ..compute import expr as E
from ..compute.expr import Binary, Const, Expr, Var


def key(e: Expr) -> tuple:
    """A hashable structural key: equal keys mean structurally equal expressions. Flat (each
    node's tag and child count in pre-order), so a deep expression gives no nested tuple."""
    out: list = []
    todo = [e]
    while todo:
        node = todo.pop()
        out.append(_node_key(node))
        kids = E.children(node)
        if kids:
            out.append(len(kids))
            todo.extend(reversed(kids))
    return tuple(out)


def _node_key(e: Expr) -> tuple:
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Const):
        return ("c", e.dtype, e.value)
    extra = getattr(e, "op", None) or getattr(e, "name", None)
    ident = getattr(e, "tensor", None) or getattr(e, "buffer", None)
    ident = (id(ident.op), ident.value_index) if hasattr(ident, "value_index") else id(ident)
    lanes = getattr(e, "lanes", None)
    return (type(e).__name__, e.dtype, extra, ident, lanes)


class Linear:
    """sum(coeff * atom) + const over integers; atoms are keyed structurally."""

    def __init__(self, dtype: str, terms: dict | None = None, const: int = 0):
        self.dtype = dtype
        self.terms = terms or {}  # key -> [atom, coeff], insertion order = print order
        self.const = const

    def add(self, other: "Linear", sign: int = 1) -> "Linear":
        terms = {k: list(v) for k, v in self.terms.items()}
        for k, (atom, c) in other.terms.items():
            if k in terms:
                terms[k][1] += sign * c
            else:
                terms[k] = [atom, sign * c]
        return Linear(self.dtype, {k: v for k, v in terms.items() if v[1] != 0},
                      self.const + sign * other.const)

    def scale(self, c: int) -> "Linear":
        if c == 0:
            return Linear(self.dtype)
        return Linear(self.dtype, {k: [a, v * c] for k, (a, v) in self.terms.items()},
                      self.const * c)

    def to_expr(self) -> Expr:
        """Positive terms first, then the constant, then subtracted negative terms.

        Coefficients are taken modulo 2**bits (the generated code wraps), so the result is
        the same number as the expression this form came from, even where that wrapped."""
        d = self.dtype
        # A signed type's lowest value stays an added term: its negation does not fit.
        lowest = -(1 << (dt.bits(d) - 1)) if dt.is_int(d) else None
        terms = [(a, _wrap_coeff(c, d)) for a, c in self.terms.values()]
        pos = [(a, c) for a, c in terms if c > 0 or c == lowest]
        neg = [(a, -c) for a, c in terms if c < 0 and c != lowest]
        const = _wrap_coeff(self.const, d)

        def term(atom, c):
            return atom if c == 1 else Binary(d, "mul", atom, Const(d, c))
        out = None
        for atom, c in pos:
            out = term(atom, c) if out is None else Binary(d, "add", out, term(atom, c))
        if out is None:
            out = Const(d, dt.wrap(const, d)) if (const != 0 or not neg) else None
        elif const > 0 or const == lowest:
            out = Binary(d, "add", out, Const(d, const))
        elif const < 0:
            neg.append((Const(d, -const), 1))
        for atom, c in neg:
            out = Binary(d, "sub", Const(d, 0) if out is None else out, term(atom, c))
        return out


def _is_int_scalar(e: Expr) -> bool:
    return dt.is_integral(e.dtype) and dt.lanes(e.dtype) == 1


def _wrap_coeff(c: int, dtype: str) -> int:
    """Coefficient `c` modulo 2**bits of integer `dtype`, in [-2**(bits-1), 2**(bits-1)):
    the same product in the generated code's wrapping arithmetic, negative where a
    subtraction reads better (unsigned 0 - x stays that)."""
    return dt.wrap(c, f"int{dt.bits(dtype)}") if dt.is_integral(dtype) else c


# How deep simplify() and linear() recurse before they walk the rest of an expression
# with their own stack: recursion is the fast way through the usual few levels, and this
# stays far from Python's limit (a user's expression may nest thousands deep).
WARM_DEPTH = 48


class Analyzer:
    """Simplifies integer expressions using known constant ranges of variables.

    Results are remembered per expression node (by identity) until a range changes, so a
    subtree shared by many statements (unrolled copies) is analyzed once.

    Signed 32/64-bit arithmetic is taken as exact (index semantics: storage_flatten computes
    in int64 what could overflow int32) unless `wraps`: then it wraps around as the
    generated code of data arithmetic does (numpy's semantics), and floordiv, floormod,
    min, max and comparisons are decided only where `exact` proves no wrap around.
    """

    def __init__(self, ranges: dict | None = None, wraps: bool = False):
        self.wraps = wraps
        self._ranges: dict = dict(ranges or {})  # Var -> (lo, hi) inclusive ints
        self._linear_memo: dict = {}  # id(expr) -> (expr, Linear)
        self._simplify_memo: dict = {}  # id(expr) -> (expr, simplified expr)
        self._depth = 0  # simplify() calls in progress, one inside the other

    @property
    def ranges(self) -> MappingProxyType:
        """Var -> (lo, hi), read-only: change it with bind() and unbind()."""
        return MappingProxyType(self._ranges)

    def bind(self, var: Var, lo: int, hi: int | None) -> None:
        self._ranges[var] = (lo, hi)
        self._forget()

    def unbind(self, var: Var, previous: tuple | None = None) -> None:
        """Drop var's range, or restore `previous` (what ranges.get(var) gave before bind)."""
        if previous is None:
            self._ranges.pop(var, None)
        else:
            self._ranges[var] = previous
        self._forget()

    def _forget(self) -> None:
        self._linear_memo = {}
        self._simplify_memo = {}

    # -- linear forms ------------------------------------------------------------------
    def linear(self, e: Expr) -> Linear:
        """The linear form of integer expression e (a shared object: do not modify it)."""
        hit = self._linear_memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if self._depth >= WARM_DEPTH:
            self._warm(e)
        self._depth += 1
        try:
            out = self._linear(e)
        finally:
            self._depth -= 1
        self._linear_memo[id(e)] = (e, out)
        return out

    def _linear(self, e: Expr) -> Linear:
        if isinstance(e, Const):
            return Linear(e.dtype, {}, int(e.value))
        if isinstance(e, Binary) and e.op in ("add", "sub"):
            return self._merge_divmod(
                self.linear(e.a).add(self.linear(e.b), 1 if e.op == "add" else -1))
        if isinstance(e, Binary) and e.op == "mul":
            la, lb = self.linear(e.a), self.linear(e.b)
            if not lb.terms:
                return la.scale(lb.const)
            if not la.terms:
                return lb.scale(la.const)
            atom = Binary(e.dtype, "mul", la.to_expr(), lb.to_expr())
            return Linear(e.dtype, {key(atom): [atom, 1]})
        atom = self._simplify_atom(e)
        if isinstance(atom, Const):
            return Linear(e.dtype, {}, int(atom.value))
        if isinstance(atom, Binary) and atom.op in ("add", "sub", "mul"):
            return self.linear(atom)
        return Linear(e.dtype, {key(atom): [atom, 1]})

    def _merge_divmod(self, lin: Linear) -> Linear:
        """m * c * floordiv(x, c) + m * floormod(x, c) -> m * x (exact for floor division):
        the index of a fused loop's (outer, inner) pair that addresses the same flat
        memory as the fused variable (a 1x1 conv's output pixels, y * W + x)."""
        divs = {}
        for k, (atom, _) in lin.terms.items():
            if isinstance(atom, Binary) and atom.op == "floordiv" and isinstance(atom.b, Const):
                divs[(key(atom.a), atom.b.value)] = k
        if not divs:
            return lin
        for k, (atom, m) in list(lin.terms.items()):
            if not (isinstance(atom, Binary) and atom.op == "floormod"
                    and isinstance(atom.b, Const) and k in lin.terms):
                continue
            dk = divs.get((key(atom.a), atom.b.value))
            if dk is not None and dk in lin.terms and lin.terms[dk][1] == m * atom.b.value:
                rest = Linear(lin.dtype, {x: v for x, v in lin.terms.items()
                                          if x not in (k, dk)}, lin.const)
                lin = rest.add(self.linear(atom.a).scale(m))
        return lin

    def simplify(self, e: Expr) -> Expr:
        if isinstance(e, (Var, Const)):
            return e
        hit = self._simplify_memo.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if self._depth >= WARM_DEPTH:
            self._warm(e)
        self._depth += 1
        try:
            out = self.linear(e).to_expr() if _is_int_scalar(e) else self._simplify_atom(e)
        finally:
            self._depth -= 1
        self._simplify_memo[id(e)] = (e, out)
        return out

    def _warm(self, e: Expr) -> None:
        """Analyze e's subtrees first, deepest first (an integer one to its linear form, as
        the rules of its parent take it), so that the rules of e recurse one level only
        however deep it is."""
        for node in E.post_order(e, self._analyzed):
            if node is not e:
                self.linear(node) if _is_int_scalar(node) else self.simplify(node)

    def _analyzed(self, e: Expr) -> bool:
        """Whether simplify(e) (or linear(e), for an integer e) is remembered."""
        if isinstance(e, (Var, Const)):
            return True
        hit = (self._linear_memo if _is_int_scalar(e) else self._simplify_memo).get(id(e))
        return hit is not None and hit[0] is e

    # -- bounds ------------------------------------------------------------------------
    def const_bound(self, e: Expr) -> tuple:
        """(lo, hi) ints bounding integer expression e, with None for an unknown end."""
        lo, hi = self._const_bound(e)
        if isinstance(e, Binary) and _is_int_scalar(e):
            tlo, thi = dt.int_range(e.dtype)
            if _no_wrap(e.dtype):
                if self.wraps and ((lo is not None and lo < tlo)
                                   or (hi is not None and hi > thi)):
                    return None, None  # the exact result may wrap around: unknown
            elif lo is None or hi is None or lo < tlo or hi > thi:
                return tlo, thi  # the exact result would wrap around
        return lo, hi

    def exact(self, e: Expr) -> bool:
        """Whether integer expression e provably does not wrap around: its linear form,
        evaluated over unbounded integers, stays in e's dtype, so the value the generated
        code computes is the mathematical one the rules below reason about."""
        return self._fits_exactly(self.linear(e), e.dtype)

    def _fits_exactly(self, lin: Linear, dtype: str) -> bool:
        tlo, thi = dt.int_range(dtype)
        lo = hi = lin.const
        for atom, c in lin.terms.values():
            alo, ahi = self.const_bound(atom)
            alo, ahi = (tlo if alo is None else alo), (thi if ahi is None else ahi)
            lo, hi = lo + min(c * alo, c * ahi), hi + max(c * alo, c * ahi)
        return tlo <= lo and hi <= thi

    def _const_bound(self, e: Expr) -> tuple:
        if isinstance(e, Const):
            return int(e.value), int(e.value)
        if isinstance(e, Var):
            return self._ranges.get(e, (None, None))
        if not isinstance(e, Binary):
            if isinstance(e, E.Select):
                a, b = self.const_bound(e.true_value), self.const_bound(e.false_value)
                return _min(a[0], b[0]), _max(a[1], b[1])
            if isinstance(e, E.Cast) and _is_int_scalar(e.value) and _is_int_scalar(e):
                lo, hi = self.const_bound(e.value)
                tlo, thi = dt.int_range(e.dtype)
                if lo is not None and hi is not None and tlo <= lo and hi <= thi:
                    return lo, hi
                return tlo, thi  # a narrowing cast wraps: only the target range is certain
            return None, None
        a, b = self.const_bound(e.a), self.const_bound(e.b)
        op = e.op
        if op == "add":
            return _add(a[0], b[0]), _add(a[1], b[1])
        if op == "sub":
            return _add(a[0], _neg(b[1])), _add(a[1], _neg(b[0]))
        if op == "mul":
            if None in a or None in b:
                if b[0] is not None and b[0] == b[1]:
                    c = b[0]
                    return (_mul(a[0], c), _mul(a[1], c)) if c >= 0 else \
                        (_mul(a[1], c), _mul(a[0], c))
                if a[0] is not None and a[0] == a[1]:
                    c = a[0]
                    return (_mul(b[0], c), _mul(b[1], c)) if c >= 0 else \
                        (_mul(b[1], c), _mul(b[0], c))
                return None, None
            prods = [x * y for x in a for y in b]
            return min(prods), max(prods)
        if op in ("floordiv", "truncdiv") and b[0] is not None and b[0] == b[1] and b[0] > 0:
            c = b[0]
            if op == "truncdiv" and (a[0] is None or a[0] < 0):
                return None, None
            return (None if a[0] is None else a[0] // c), (None if a[1] is None else a[1] // c)
        if op in ("floormod", "truncmod") and b[0] is not None and b[0] == b[1] and b[0] > 0:
            c = b[0]
            if a[0] is not None and a[1] is not None and a[0] >= 0 and a[1] < c:
                return a
            if op == "floormod" or (a[0] is not None and a[0] >= 0):
                return 0, c - 1
            return -(c - 1), c - 1
        if op == "min":
            return _min(a[0], b[0]), _min(a[1], b[1])
        if op == "max":
            return _max(a[0], b[0]), _max(a[1], b[1])
        if op in E.BITWISE_OPS:
            return bitwise_bound(op, a, b)
        return None, None

    def can_prove(self, cond: Expr) -> bool:
        s = self.simplify(cond)
        return isinstance(s, Const) and bool(s.value)

    # -- node rules ----------------------------------------------------------------------
    def _simplify_atom(self, e: Expr) -> Expr:
        kids = E.children(e)
        if kids:
            e = E.with_children(e, tuple(self.simplify(k) for k in kids))
        if isinstance(e, Binary):
            return self._binary(e)
        if isinstance(e, E.Select) and isinstance(e.cond, Const):
            return e.true_value if e.cond.value else e.false_value
        if isinstance(e, E.Not) and isinstance(e.a, Const):
            return E.const(not e.a.value)
        if isinstance(e, E.Cast) and isinstance(e.value, Const):
            return E.cast(e.value, e.dtype)
        return e

    def _binary(self, e: Binary) -> Expr:
        a, b, op = e.a, e.b, e.op
        if isinstance(a, Const) and isinstance(b, Const):
            return E.binary(op, a, b) if op not in E.LOGIC_OPS else E.logical(op, a, b)
        if op in E.LOGIC_OPS:
            return _logic(e)
        if not _is_int_scalar(a) or not _no_wrap(a.dtype):
            # Narrow and unsigned integers wrap in the generated code (as in numpy), so the
            # exact-integer reasoning below would be unsound for them.
            return e
        if self.wraps and not (self.exact(a) and self.exact(b)):
            return e  # these may wrap too: the rules below need the exact values
        if op in ("floordiv", "floormod") and isinstance(b, Const) and b.value > 0:
            return self._divmod(op, a, int(b.value), e.dtype)
        if op in ("min", "max"):
            diff = self._floordiv_order(a, b)
            if diff is None:
                diff = self.const_bound(self.linear(a).add(self.linear(b), -1).to_expr())
            if diff[1] is not None and diff[1] <= 0:
                return a if op == "min" else b
            if diff[0] is not None and diff[0] >= 0:
                return b if op == "min" else a
            return e
        if op in E.COMPARE_OPS:
            lo, hi = self.const_bound(self.linear(a).add(self.linear(b), -1).to_expr())
            verdict = _decide(op, lo, hi)
            if verdict is not None:
                return E.const(verdict)
        return e

    def _floordiv_order(self, a: Expr, b: Expr):
        """floordiv(x, c) vs floordiv(x + d, c): ordered like d (a monotone function)."""
        if not (isinstance(a, Binary) and isinstance(b, Binary) and a.op == b.op == "floordiv"
                and isinstance(a.b, Const) and isinstance(b.b, Const)
                and a.b.value == b.b.value and a.b.value > 0):
            return None
        d = self.linear(a.a).add(self.linear(b.a), -1)
        if d.terms:
            return None
        return (0, None) if d.const >= 0 else (None, 0)

    def _divmod(self, op: str, a: Expr, c: int, dtype: str) -> Expr:
        if c == 1:
            return a if op == "floordiv" else Const(dtype, 0)
        lin = self.linear(a)
        whole = Linear(dtype, {k: [t, v // c] for k, (t, v) in lin.terms.items() if v % c == 0},
                       lin.const // c)
        rest = Linear(dtype, {k: [t, v] for k, (t, v) in lin.terms.items() if v % c != 0},
                      lin.const % c)
        if self.wraps and not self._fits_exactly(rest, dtype):
            return Binary(dtype, op, a, Const(dtype, c))  # the part left to divide may wrap
        lo, hi = self.const_bound(rest.to_expr())
        if lo is not None and hi is not None and lo // c == hi // c:
            if op == "floordiv":
                return whole.add(Linear(dtype, {}, lo // c)).to_expr()
            return rest.add(Linear(dtype, {}, -(lo // c) * c)).to_expr()
        cc = Const(dtype, c)
        if op == "floordiv":
            inner = Binary(dtype, "floordiv", rest.to_expr(), cc)
            return whole.add(Linear(dtype, {key(inner): [inner, 1]})).to_expr()
        return Binary(dtype, "floormod", rest.to_expr(), cc)


def _no_wrap(dtype: str) -> bool:
    """Signed 32/64-bit integers, exact as index arithmetic (see Analyzer's `wraps`)."""
    return dt.is_int(dtype) and dt.bits(dtype) >= 32


def bitwise_bound(op: str, a: tuple, b: tuple) -> tuple:
    """(lo, hi) bounding `a op b` for a bitwise operator or shift of operands bounded by
    a and b ((lo, hi) pairs, None for an unknown end); (None, None) when unknown. A left
    shift may reach any value of the dtype."""
    if op == "shift_right":   # toward 0 or -1, which a shift of any amount gives at most
        return (None if a[0] is None else min(a[0], 0)), (None if a[1] is None else
                                                          max(a[1], 0))
    if op == "bitwise_and" and any(x[0] is not None and x[0] >= 0 for x in (a, b)):
        # x & y keeps only bits set in both: for y >= 0, between 0 and y
        his = [x[1] for x in (a, b) if x[0] is not None and x[0] >= 0 and x[1] is not None]
        return 0, (min(his) if his else None)
    if op == "shift_left" or None in a or None in b:
        return None, None
    # each operand is a k-bit two's complement value, in [-2**k, 2**k): so is the result
    k = max(x.bit_length() if x >= 0 else (~x).bit_length() for x in a + b)
    return (0 if a[0] >= 0 and b[0] >= 0 else -(1 << k)), (1 << k) - 1


def _fits(itv: tuple, dtype: str, ana: "Analyzer") -> bool:
    lo, hi = ana.const_bound(itv[0])[0], ana.const_bound(itv[1])[1]
    tlo, thi = dt.int_range(dtype)
    return lo is not None and hi is not None and tlo <= lo and hi <= thi


def _logic(e: Binary) -> Expr:
    a, b = e.a, e.b
    for x, y in ((a, b), (b, a)):
        if isinstance(x, Const):
            if e.op == "and":
                return y if x.value else E.const(False)
            return E.const(True) if x.value else y
    return e


def _decide(op: str, lo, hi):
    """Decide `d op 0` for d in [lo, hi]; None when undecided."""
    if op == "lt":
        return True if hi is not None and hi < 0 else False if lo is not None and lo >= 0 else None
    if op == "le":
        return True if hi is not None and hi <= 0 else False if lo is not None and lo > 0 else None
    if op == "gt":
        return True if lo is not None and lo > 0 else False if hi is not None and hi <= 0 else None
    if op == "ge":
        return True if lo is not None and lo >= 0 else False if hi is not None and hi < 0 else None
    if op == "eq":
        if lo == hi and lo is not None:
            return lo == 0
        return False if (lo is not None and lo > 0) or (hi is not None and hi < 0) else None
    if op == "ne":
        v = _decide("eq", lo, hi)
        return None if v is None else not v
    return None


def _add(x, y):
    return None if x is None or y is None else x + y


def _neg(x):
    return None if x is None else -x


def _mul(x, c):
    return None if x is None else x * c


def _min(x, y):
    return None if x is None or y is None else min(x, y)


def _max(x, y):
    return None if x is None or y is None else max(x, y)


def simplify(e: Expr, ranges: dict | None = None) -> Expr:
    return Analyzer(ranges).simplify(e)


# ---------------------------------------------------------------------------------------
# Symbolic intervals for bound inference

def interval(e: Expr, ranges: dict, ana: Analyzer):
    """[lo, hi] expressions bounding e when each Var in `ranges` spans ranges[var] (a
    (lo_expr, hi_expr) pair); other Vars are fixed. None when no bound can be given."""
    if isinstance(e, Var):
        return ranges.get(e, (e, e))
    if isinstance(e, Const):
        return e, e
    if not any(v in ranges for v in E.free_vars(e)):
        return e, e
    if isinstance(e, E.Cast) and _is_int_scalar(e.value) and _is_int_scalar(e):
        inner = interval(e.value, ranges, ana)
        if inner is None or not _fits(inner, e.dtype, ana):
            return None  # a narrowing cast may wrap: no bound
        return inner
    if isinstance(e, E.Select):
        t, f = interval(e.true_value, ranges, ana), interval(e.false_value, ranges, ana)
        if t is None or f is None:
            return None
        return _smin(t[0], f[0], ana), _smax(t[1], f[1], ana)
    if not isinstance(e, Binary) or not _is_int_scalar(e):
        return None
    out = _binary_interval(e, ranges, ana)
    if out is not None and not _no_wrap(e.dtype) and not _fits(out, e.dtype, ana):
        return None  # the exact result would wrap around in this dtype
    return out


def _binary_interval(e: Binary, ranges: dict, ana: Analyzer):
    a, b = interval(e.a, ranges, ana), interval(e.b, ranges, ana)
    if a is None or b is None:
        return None
    s = ana.simplify
    op = e.op
    if op == "add":
        return s(a[0] + b[0]), s(a[1] + b[1])
    if op == "sub":
        return s(a[0] - b[1]), s(a[1] - b[0])
    if op == "mul":
        for x, y in ((a, b), (b, a)):
            if _point_const(x):
                c = x[0]
                return (s(y[0] * c), s(y[1] * c)) if c.value >= 0 else (s(y[1] * c), s(y[0] * c))
        return None
    if op == "floordiv" and _point_const(b) and b[0].value > 0:
        return s(E.binary("floordiv", a[0], b[0])), s(E.binary("floordiv", a[1], b[0]))
    if op == "floormod" and _point_const(b) and b[0].value > 0:
        width = ana.const_bound(s(a[1] - a[0]))
        if width[1] is not None and width[1] < b[0].value:
            lo_q = s(E.binary("floordiv", a[0], b[0]))
            hi_q = s(E.binary("floordiv", a[1], b[0]))
            if E.structural_equal(lo_q, hi_q):
                return s(E.binary("floormod", a[0], b[0])), s(E.binary("floormod", a[1], b[0]))
        return Const(e.dtype, 0), Const(e.dtype, b[0].value - 1)
    if op == "min":
        return _smin(a[0], b[0], ana), _smin(a[1], b[1], ana)
    if op == "max":
        return _smax(a[0], b[0], ana), _smax(a[1], b[1], ana)
    return None


def _point_const(x) -> bool:
    return isinstance(x[0], Const) and isinstance(x[1], Const) and x[0].value == x[1].value


def _smin(x: Expr, y: Expr, ana: Analyzer) -> Expr:
    return ana.simplify(E.binary("min", x, y))


def _smax(x: Expr, y: Expr, ana: Analyzer) -> Expr:
    return ana.simplify(E.binary("max", x, y))
