"""A serial loop around a kernel's block-bound loops (a scan's time loop on target
'cuda') runs inside the kernel, each thread going through its iterations on its own: GPU
blocks cannot wait for each other between iterations. That is right only while every
thread reads, of what the loop stores, the elements it stored itself; a read of another
thread's element (a scan step reading state[t - 1, 0]) is refused, naming the loop.

Takes one kernel nest (device_split.py); raises BuildError or returns. Imports ir,
visitor, arith, printer and te.compute.
"""
from __future__ import annotations

from ...compute import expr as E
from ...errors import BuildError
from .. import ir
from ..arith import Analyzer
from ..printer import print_expr
from ..visitor import pre_order_exprs, walk_stmts


def check_carried_reads(kernel: str, nest: ir.Stmt) -> None:
    for loop in walk_stmts(nest):
        if not (isinstance(loop, ir.For) and loop.kind != ir.THREAD_BINDING):
            continue
        inner = [s for s in walk_stmts(loop.body) if isinstance(s, ir.For)]
        threads = {s.loop_var for s in inner if s.kind == ir.THREAD_BINDING}
        if not any(s.thread_tag.startswith("blockIdx") for s in inner
                   if s.kind == ir.THREAD_BINDING):
            continue  # inside one block: its threads synchronize (device_sync's barriers)
        stores = [s for s in walk_stmts(loop.body) if isinstance(s, ir.Store)]
        for store in stores:
            for load in _loads_of(loop.body, store.buffer.data):
                if not _same_thread(load.index, store.index, threads):
                    raise BuildError(
                        f"te.build: target 'cuda': loop '{loop.loop_var.name}' runs inside "
                        f"kernel '{kernel}' around its thread-bound loops, and reads "
                        f"'{store.buffer.name}' at {print_expr(ir.unchecked(load.index))} "
                        f"where other threads store it ({print_expr(store.index)}); blocks "
                        f"cannot wait for each other between its iterations, and a kernel "
                        f"launch per iteration is not generated yet: read only what the same "
                        f"thread stored, or build for target 'llvm'")


def _loads_of(s: ir.Stmt, data) -> list:
    found = []

    def visit(e):
        if isinstance(e, ir.Load) and e.buffer.data is data:
            found.append(e)
    pre_order_exprs(s, visit)
    return found


def _same_thread(load_index: E.Expr, store_index: E.Expr, threads: set) -> bool:
    """Does the load read an element the storing thread itself stored: does the distance
    between the two indices not depend on the thread?"""
    diff = Analyzer().simplify(ir.unchecked(load_index) - ir.unchecked(store_index))
    return not (set(E.free_vars(diff)) & threads)
