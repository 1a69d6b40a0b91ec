"""The native thread pool behind `parallel` loops: libgomp, loaded once per process.

Takes nothing; gives load() (makes GOMP_parallel / omp_* resolvable by the JIT),
parallel_available(), num_threads() and set_num_threads(). libgomp is not fork-safe, so a
fork()ed child runs parallel loops on 1 thread (its parent's pool threads do not exist there);
use `spawn` or `forkserver` workers for parallel speed in children. Imports stdlib and llvmlite.
"""

from __future__ import annotations

import ctypes
import os
import threading

import llvmlite.binding as llvm

LIBGOMP_NAME = "libgomp.so.1"
MAX_THREADS = 1024

_lock = threading.Lock()
_loaded = False
_libgomp: ctypes.CDLL | None = None


def load() -> bool:
    """Load libgomp into the process (once) and set the default thread count.

    Returns whether it is available. Safe to call many times; cheap after the first.
    """
    global _loaded, _libgomp
    if _loaded:
        return _libgomp is not None
    with _lock:
        if _loaded:
            return _libgomp is not None
        try:
            # Permanent load puts GOMP_* into the JIT's symbol search; the CDLL is the same
            # dlopen handle, used to call the omp_* setters from Python.
            llvm.load_library_permanently(LIBGOMP_NAME)
            lib = ctypes.CDLL(LIBGOMP_NAME)
        except (OSError, RuntimeError):
            lib = None
        if lib is not None:
            lib.omp_get_max_threads.restype = ctypes.c_int
            lib.omp_get_max_threads.argtypes = []
            lib.omp_set_num_threads.restype = None
            lib.omp_set_num_threads.argtypes = [ctypes.c_int]
            if not os.environ.get("OMP_NUM_THREADS"):
                lib.omp_set_num_threads(_default_num_threads())
            # With 1 thread GOMP_parallel runs the body inline and never touches the pool
            # threads, which do not exist in a fork()ed child.
            os.register_at_fork(after_in_child=_single_thread_after_fork)
        _libgomp = lib
        _loaded = True
    return _libgomp is not None


def _single_thread_after_fork() -> None:
    if _libgomp is not None:
        _libgomp.omp_set_num_threads(1)


def _default_num_threads() -> int:
    # DESIGN.md: every core the process may use, not TVM's half-of-cores assumption.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # platforms without sched_getaffinity
        return max(1, os.cpu_count() or 1)


def parallel_available() -> bool:
    """Whether parallel loops can run on libgomp (codegen emits serial loops otherwise).

    Cost of one empty GOMP_parallel launch, measured by tests/runtime/launch_overhead.py
    (10000 calls of a kernel with the launch minus the same kernel without it) on 2 vCPUs:
    ~0.5 us with 1 thread (the body runs inline), ~4-6 us with 2 threads under
    OMP_WAIT_POLICY=passive, ~3 us with 2 threads under OMP_WAIT_POLICY=active.
    """
    return load()


def num_threads() -> int:
    """The number of threads a parallel loop launched now would use (1 without libgomp)."""
    if not load():
        return 1
    assert _libgomp is not None
    return int(_libgomp.omp_get_max_threads())


def set_num_threads(n: int) -> None:
    """Set the thread count for later parallel loops launched from this thread."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ValueError(f"set_num_threads: n: expected an integer >= 1, got {n!r}")
    if n > MAX_THREADS:
        # libgomp crashes or aborts ("Out of memory") when asked for such pools.
        raise ValueError(f"set_num_threads: n: expected at most {MAX_THREADS} threads, got {n}")
    if not load():
        if n != 1:
            raise RuntimeError(
                f"set_num_threads: {LIBGOMP_NAME} is not available, so only n=1 is possible "
                "(install libgomp, e.g. the gcc runtime package, for parallel loops)"
            )
        return
    assert _libgomp is not None
    _libgomp.omp_set_num_threads(n)
