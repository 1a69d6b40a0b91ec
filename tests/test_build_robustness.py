"""Robustness of built modules: fork()ed children, aliasing and read-only outputs, int32 index
limits, failed heap allocations, unsupported targets and names, export/reload and timing
parameters. Crash-prone cases run in a subprocess that must exit 0 within a timeout.

Imports te, runtime, numpy and pytest.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

import runtime
import te
from te.errors import BuildError

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_script(source: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `source` in a fresh interpreter; a hang or a crash fails the calling test."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_WAIT_POLICY="passive")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=env,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def add_module(n=8, name="main"):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    return te.build(te.create_schedule(C.op), [A, B, C], name=name)


def test_parallel_kernel_runs_in_forked_children():
    result = run_script("""
        import multiprocessing as mp
        import numpy as np
        import te
        n = 1 << 16
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        s[B].parallel(B.op.axis[0])
        m = te.build(s, [A, B])
        a = np.ones(n, np.float32)
        m(a, np.zeros(n, np.float32))  # the parent's pool has run

        def child(_):
            out = np.zeros(n, np.float32)
            m(a, out)
            return float(out.sum())

        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:
                print(pool.map(child, range(4)))
    """, timeout=60)
    assert result.stdout.strip() == "[131072.0, 131072.0, 131072.0, 131072.0]"
