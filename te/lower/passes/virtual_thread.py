"""inject_virtual_thread: loops bound to a virtual thread ("vthread", "cthread") run serially.

TVM's virtual threads are not GPU threads: each thread of the launch runs every virtual
thread one after another. This is the simplest correct form of TVM's InjectVirtualThread:
the bound loop becomes a serial loop where it stands (an unrolled one when its extent is a
small constant and its body has no loop or allocation), so the local buffers allocated
inside it are per iteration, as they are per virtual thread in TVM, and a shared-memory fill
inside it is repeated per iteration with its barriers (a loop of the same trip count in
every thread, so a __syncthreads() inside it is legal). TVM instead pushes the loop inward
past statements that do not use it (one fill for all virtual threads); that optimization is
not done here. Bound inference relaxes these loops for shared stages, as TVM does
(te/lower/bound.py), so a fill covers what all virtual threads read. Imports ir, visitor.
"""
from __future__ import annotations

import dataclasses

from ...compute.expr import Const
from .. import ir
from ..visitor import post_order_stmt, walk_stmts

VIRTUAL_THREAD_TAGS = ("vthread", "cthread")

# TVM unrolls a virtual thread loop with no loop inside it below this many iterations.
MAX_UNROLLED_VIRTUAL_THREADS = 16


def is_virtual_thread(tag: str) -> bool:
    return tag in VIRTUAL_THREAD_TAGS


def inject_virtual_thread(s: ir.Stmt) -> ir.Stmt:
    """`s` with every loop bound to a virtual thread made serial (or unrolled)."""
    def rewrite(node: ir.Stmt):
        if not (isinstance(node, ir.For) and node.kind == ir.THREAD_BINDING
                and is_virtual_thread(node.thread_tag)):
            return None
        small = isinstance(node.extent, Const) and \
            int(node.extent.value) <= MAX_UNROLLED_VIRTUAL_THREADS
        straight = not any(isinstance(x, (ir.For, ir.Allocate))
                           for x in walk_stmts(node.body))
        kind = ir.UNROLLED if small and straight else ir.SERIAL
        return dataclasses.replace(node, kind=kind, thread_tag="")
    return post_order_stmt(s, rewrite)
