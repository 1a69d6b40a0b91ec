"""graph's compile cache: every kernel graph.compile builds is kept on disk (te.cache) and
loaded by the next compile that needs it, in any process, for any model. Gives build() (the
hook of graph.kernels.build_kernel), using() (graph.compile's cache=), cache_info(),
clear_cache() and stats(). Imports te's public API (te.cache, te.autotune), graph.errors.
"""
from __future__ import annotations

import contextvars
import hashlib
import json
import os
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager

import te
from te import cache as te_cache

from .errors import GraphError

_GRAPH_DIR = os.path.dirname(os.path.abspath(__file__))
_use: contextvars.ContextVar = contextvars.ContextVar("graph_cache_use", default=None)
_caches: dict = {}   # directory -> te.cache.KernelCache (one per directory, for its stats)
# (writer thread, its futures) of the graph.compile running in this context
_writes: contextvars.ContextVar = contextvars.ContextVar("graph_cache_writes", default=None)


@contextmanager
def using(cache):
    """Inside: graph.compile's `cache` argument decides (None: on unless TE_CACHE=0)."""
    if cache is not None and not isinstance(cache, bool):
        raise GraphError(f"graph.compile: cache must be True, False or None (the default: "
                         f"on unless TE_CACHE=0), got {cache!r}")
    token = _use.set(cache)
    # Entries are written by one thread beside the compile: exporting a kernel (LLVM's
    # object code, then a link by cc) waits on native code and another process, not the GIL.
    # The compile returns once they are all on disk.
    writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="te-cache-writer")
    writes = _writes.set((writer, []))
    try:
        yield
        for future in _writes.get()[1]:
            future.result()   # store() reports what it cannot write; this is anything else
    finally:
        writer.shutdown(wait=True)
        _writes.reset(writes)
        _use.reset(token)


def current():
    """The KernelCache this compile uses, or None when caching is off."""
    use = _use.get()
    if use is False or (use is None and not te_cache.enabled()):
        return None
    return _kernel_cache()


def _kernel_cache(directory: str | None = None):
    directory = os.path.abspath(directory or te_cache.cache_dir())
    if directory not in _caches:
        _caches[directory] = te_cache.KernelCache(directory)
    return _caches[directory]


def build(workload, family: str, target: str, out_types: list, schedule, make):
    """The runtime.Module of one kernel: loaded from the cache, else `make(*schedule())`
    and stored. `workload`: what decides the kernel in the graph (hashable, a stable
    repr); None builds without the cache."""
    store = current()
    if store is None or workload is None or not te_cache.cacheable(target):
        return make(*schedule())
    planned, applied = None, []
    if te.autotune.history_active():
        # only a schedule run shows which record it takes (one that fits its space)
        with te.autotune.trace_lookups() as applied:
            planned = schedule()
    fields = key_fields(workload, family, target, out_types, applied)
    hit = store.load(fields)
    if hit is not None:
        return hit[0]
    func = make(*(planned or schedule()))
    writer, futures = _writes.get() or (None, None)
    if writer is None:
        store.store(fields, func)
    else:
        futures.append(writer.submit(store.store, fields, func))
    return func


def key_fields(workload, family: str, target: str, out_types: list, records=()) -> dict:
    """The JSON-able fields that name a kernel's cache entry: its graph workload (a node's
    op, attributes, input dtypes and shapes; a fused group's nodes, their wiring and its
    anchor; a chain's part), schedule family and output types, the target and this host
    (te.cache.target_fields), the tuning records its schedule took, and the compiler's
    version (te.cache.compiler_fields, and a digest of graph's sources, which define the
    computes). Weights are not in it: a kernel takes every constant as an argument at run
    time, so one kernel serves any weights."""
    return {"kind": "graph kernel", "workload": repr(workload), "family": family,
            "out_types": [[dtype, list(shape)] for dtype, shape in out_types],
            "records": [_record_digest(r) for r in records],
            **te_cache.target_fields(target), "compiler": te_cache.compiler_fields(),
            "graph_sources": te_cache.source_digest(_GRAPH_DIR)}


def _record_digest(record) -> str:
    """What of a tuning record decides the code: its workload and config (not its time)."""
    text = json.dumps({"workload": record.workload, "config": record.config},
                      sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def cache_info(directory: str | None = None) -> dict:
    """{'directory', 'entries', 'bytes'} of the cache (default: TE_CACHE_DIR's)."""
    return _kernel_cache(directory).info()


def clear_cache(directory: str | None = None) -> int:
    """Remove the cache's entries; returns how many files were removed."""
    return _kernel_cache(directory).clear()


def stats(directory: str | None = None) -> dict:
    """This process's counts for the cache: hits, misses, stored, rejected, failed."""
    return dict(_kernel_cache(directory).stats)
