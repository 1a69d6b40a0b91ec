"""The native thread pool behind `parallel` loops: libgomp, loaded once per process.

Takes nothing; gives parallel_available(), num_threads(), set_num_threads() and load(), which
makes GOMP_parallel / omp_get_thread_num / omp_get_num_threads resolvable by the JIT. The
default thread count is every core the process may use (os.sched_getaffinity) unless
OMP_NUM_THREADS says otherwise. Imports stdlib and llvmlite.

Measured on this machine (2 vCPUs, OMP_WAIT_POLICY=passive; tests/runtime/launch_overhead.py):
an empty GOMP_parallel launch costs about 10-15 us on 2 threads and under 1 us on 1 thread
(libgomp runs the body inline), on top of ~0.3 us for the ctypes call itself.
libgomp is not fork-safe: a child forked after a parallel region deadlocks on the pool, so
measurement workers must use the `spawn` or `forkserver` start method.
"""

from __future__ import annotations

import ctypes
import os
import threading

import llvmlite.binding as llvm

LIBGOMP_NAME = "libgomp.so.1"

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
        _libgomp = lib
        _loaded = True
    return _libgomp is not None


def _default_num_threads() -> int:
    # DESIGN.md: every core the process may use, not TVM's half-of-cores assumption.
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # platforms without sched_getaffinity
        return max(1, os.cpu_count() or 1)


def parallel_available() -> bool:
    """Whether parallel loops can run on libgomp (codegen emits serial loops otherwise)."""
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
    if not load():
        if n != 1:
            raise RuntimeError(
                f"set_num_threads: {LIBGOMP_NAME} is not available, so only n=1 is possible "
                "(install libgomp, e.g. the gcc runtime package, for parallel loops)"
            )
        return
    assert _libgomp is not None
    _libgomp.omp_set_num_threads(n)
