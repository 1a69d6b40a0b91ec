"""The native thread pool behind `parallel` loops: libgomp, loaded once per process.

Takes nothing; gives load() (libgomp with global symbols; runtime.cpu shows them to the JIT),
parallel_available(), num_threads() and set_num_threads(). libgomp is not fork-safe, so a
fork()ed child runs parallel loops on 1 thread (its parent's pool threads do not exist there);
use `spawn` or `forkserver` workers for parallel speed in children. Imports stdlib only.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import threading

LIBGOMP_NAME = "libgomp.so.1"
MAX_THREADS = 1024
# How long an idle pool thread spins before it sleeps, in libgomp's units (GOMP_SPINCOUNT).
# Passive (0 spins) makes every launch wake the workers through a futex, which on a VM
# costs a hypervisor exit and makes a small kernel with several parallel loops several
# times slower. libgomp's active default (300000) keeps idle threads busy long enough to
# slow whatever runs next on those cores, numpy included. 10000 units keep launches
# cheap and spin for well under a millisecond after a parallel loop, then sleep
# (the measurements: benchmarks/ANALYSIS.md, "Measurements behind the source").
IDLE_SPIN_COUNT = 10000

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
            # Global, so that libraries loaded later resolve GOMP_* against this copy (and
            # runtime.cpu adds it to the JIT's symbol search); libgomp reads its environment
            # once, at this first load.
            with _environment(spin_env(os.environ)):
                lib = ctypes.CDLL(LIBGOMP_NAME, mode=ctypes.RTLD_GLOBAL)
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


def spin_env(environ) -> dict:
    """The variables to set while libgomp loads (it reads its environment once, then):
    GOMP_SPINCOUNT=IDLE_SPIN_COUNT unless the user chose a spin count, or asked for spinning
    pools with OMP_WAIT_POLICY=active. Under passive or no policy, idle threads spin briefly
    and then sleep, so a launch right after another is cheap and a quiet pool costs nothing."""
    if "GOMP_SPINCOUNT" in environ:
        return {}
    if environ.get("OMP_WAIT_POLICY", "").strip().lower() == "active":
        return {}
    return {"GOMP_SPINCOUNT": str(IDLE_SPIN_COUNT)}


@contextlib.contextmanager
def _environment(variables: dict):
    """Set `variables` in the process environment for the block, then restore it, so child
    processes (and their own libgomp) see the user's environment unchanged."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


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

    One empty GOMP_parallel launch is cheap with one thread (the body runs inline) and
    while the pool threads still spin (IDLE_SPIN_COUNT), and costs a wake-up from sleep
    after that; tests/runtime/launch_overhead.py measures it.
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
