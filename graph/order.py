"""Execution orders that lower the peak of live memory (MindSpore's execution-order pass).

schedule_orders(steps, storage, nbytes) gives memory-aware topological orders of PlanSteps
(graph.plan), each by greedy list scheduling: among the steps whose inputs exist, a view
first (it costs nothing and lets its readers run), else the step that frees the most arena
bytes net of what it allocates (freed: the buffers it reads last; allocated: its outputs in
the arena), ties to the earlier step in the given order. The depth-first variant first
prefers a step reading what the previous step wrote (it finishes a branch before starting
another, as a DFS order does). graph.plan keeps whichever order (these or the given one)
gives the smallest arena. Imports nothing from the project.
"""
from __future__ import annotations


def schedule_orders(steps: list, storage, nbytes) -> list:
    """[(heuristic name, steps in a new order)]; `storage` is graph.plan's _Storage."""
    return [("greedy: frees most", _greedy(steps, storage, nbytes, depth_first=False)),
            ("greedy: frees most, depth first",
             _greedy(steps, storage, nbytes, depth_first=True))]


def _greedy(steps: list, storage, nbytes, depth_first: bool) -> list:
    producer = {id(v): k for k, s in enumerate(steps) for v in s.outputs}
    users: list = [[] for _ in steps]
    waiting = []
    for k, s in enumerate(steps):
        deps = {producer[id(v)] for v in s.inputs if id(v) in producer}
        waiting.append(len(deps))
        for j in deps:
            users[j].append(k)
    # reads[k]: the arena buffers (by root) step k reads; readers: how many steps still will
    reads, readers, size = [], {}, {}
    for s in steps:
        roots = {}
        if not s.view:
            roots = {id(storage.root[id(v)]): storage.root[id(v)] for v in s.inputs
                     if storage.in_arena(v)}
        for r, v in roots.items():
            readers[r] = readers.get(r, 0) + 1
            size[r] = nbytes(v)
        reads.append(set(roots))
    made = [sum(nbytes(v) for v in s.outputs if storage.in_arena(v)) if not s.view else 0
            for s in steps]
    ready = [k for k, w in enumerate(waiting) if w == 0]
    order, recent = [], set()

    def score(k: int) -> tuple:
        freed = sum(size[r] for r in reads[k] if readers[r] == 1)
        near = depth_first and any(id(v) in recent for v in steps[k].inputs)
        return (near, freed - made[k], -k)

    while ready:
        views = [k for k in ready if steps[k].view]
        pick = min(views) if views else max(ready, key=score)
        ready.remove(pick)
        step = steps[pick]
        order.append(step)
        for r in reads[pick]:
            readers[r] -= 1
        ids = {id(v) for v in step.outputs}
        recent = recent | ids if step.view else ids
        for u in users[pick]:
            waiting[u] -= 1
            if waiting[u] == 0:
                ready.append(u)
    if len(order) != len(steps):
        raise ValueError(f"schedule_orders: steps: {len(steps) - len(order)} of them read "
                         f"values no step writes before them (a cycle)")
    return order
