"""Schedule.consumes and Schedule.depends_on: which stage reads which, directly, through
inlined stages only (consumes), or through any chain (depends_on). Imports te.
"""
from __future__ import annotations

import te


def _chain():
    """A -> B -> C -> D, with E reading A directly next to D."""
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1, name="B")
    C = te.compute((8,), lambda i: B[i] * 2, name="C")
    D = te.compute((8,), lambda i: C[i] - 3, name="D")
    E = te.compute((8,), lambda i: D[i] + A[i], name="E")
    return te.create_schedule(E.op), A, B, C, D, E


def test_consumes_sees_direct_reads_and_reads_through_inlined_stages():
    s, A, B, C, D, E = _chain()
    assert s.consumes(s[C], s[B]) and s.consumes(s[E], s[D])
    assert not s.consumes(s[D], s[B])     # C is computed, not inlined, in between
    s[C].compute_inline()
    assert s.consumes(s[D], s[B])
    assert not s.consumes(s[E], s[B])     # D is still computed in between
    assert not s.consumes(s[B], s[C])     # the other way round


def test_depends_on_follows_any_chain():
    s, A, B, C, D, E = _chain()
    assert s.depends_on(s[E], s[B]) and s.depends_on(s[D], s[B])
    assert s.depends_on(s[E], s[A])
    assert not s.depends_on(s[B], s[D]) and not s.depends_on(s[B], s[B])
