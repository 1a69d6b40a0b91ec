"""check_plan(plan): a memory plan (graph.plan_report.MemoryPlan) is safe, checked from the
plan's order and locations alone, independently of how graph.plan placed the buffers.

For every value u held in the arena (a view included: it holds its source's bytes) the
bytes [offset, offset + size) must stay as written from the step that wrote them (its
storage's first step) to the last step reading u; no step in that span may write another
value over any of those bytes, except the one allowed in-place case: the step reading u
last is elementwise, reads u, and writes an output of u's dtype and shape at u's offset.
A concatenation the plan elided (plan.elided) runs nothing: its inputs must lie at their
blocks' offsets of its output, whose bytes are written by the producers of those blocks
(and of theirs, nested), from the first of them on.
Also: graph inputs, constants and outputs are never in the arena, offsets are aligned, and
the arena holds every buffer. Imports numpy.
"""
import numpy as np


def _nbytes(v) -> int:
    return int(np.prod(v.shape, dtype=np.int64)) * np.dtype(v.dtype).itemsize


def check_plan(plan) -> int:
    """Assert the plan is safe; returns how many outputs were written in place."""
    loc = plan.locations
    inputs, constants, outputs = plan.inputs, plan.constants, plan.outputs
    for k, v in enumerate(inputs):
        assert loc[id(v)] == ("input", k), v.name
    for k, v in enumerate(constants):
        assert loc[id(v)] == ("constant", k), v.name
    for v in outputs:
        assert loc[id(v)][0] in ("output", "input", "constant"), (v.name, loc[id(v)])
    elided = plan.elided
    written, reads, root_first, blocks = {}, {}, {}, {}
    for k, step in enumerate(plan.order):
        for v in step.inputs:
            if not step.view and id(step) not in elided:
                reads.setdefault(id(v), []).append(k)
        for v in step.outputs:
            written[id(v)] = (k, v, step)
    # the step that wrote a view's bytes is its source's (a chain of views followed back);
    # an elided concatenation's, the first of its blocks' writers
    for k, step in enumerate(plan.order):
        if id(step) in elided:
            (out,) = step.outputs
            kind, at = loc[id(out)]
            assert kind == "arena", (out.name, loc[id(out)])
            blocks[id(out)] = set()
            for v in step.inputs:
                assert loc[id(v)] == ("arena", at), (v.name, loc[id(v)], at)
                at += _nbytes(v)
                blocks[id(out)] |= {id(v)} | blocks.get(id(v), set())
            assert at == loc[id(out)][1] + _nbytes(out), out.name
            root_first[id(out)] = min(root_first[id(v)] for v in step.inputs)
            continue
        for v in step.outputs:
            src = step.inputs[0] if step.view else None
            root_first[id(v)] = root_first.get(id(src), k) if src is not None else k
            if src is not None and id(src) in blocks:
                blocks[id(v)] = blocks[id(src)]
    arena = [(id(v), v, k) for k, v, step in written.values()
             if loc[id(v)][0] == "arena" and not step.view and id(step) not in elided]
    inplace = 0
    for _, u, _ in list(arena) + [(id(v), v, k) for k, v, step in written.values()
                                  if loc[id(v)][0] == "arena" and step.view]:
        off = loc[id(u)][1]
        assert off % plan.alignment == 0, (u.name, off)
        assert off + _nbytes(u) <= plan.arena_bytes, (u.name, off, plan.arena_bytes)
        start = root_first[id(u)]
        end = max(reads.get(id(u), [start]))
        for _, w, k in arena:
            if w is u or not start <= k <= end or id(w) in blocks.get(id(u), ()):
                continue
            if k == start and root_first[id(w)] == root_first[id(u)] and (
                    written[id(u)][2].view):
                continue  # u is a view of w (or of what w was written over): same bytes
            woff = loc[id(w)][1]
            if woff >= off + _nbytes(u) or off >= woff + _nbytes(w):
                continue
            step = written[id(w)][2]
            ok = (k == end and step.elementwise and any(x is u for x in step.inputs)
                  and woff == off and w.dtype == u.dtype and tuple(w.shape) == tuple(u.shape))
            assert ok, (f"step {k} ({step.label}) writes %{w.name} at [{woff}, "
                        f"{woff + _nbytes(w)}) over %{u.name} at [{off}, {off + _nbytes(u)}) "
                        f"live over steps {start}-{end}")
            inplace += 1
    return inplace
