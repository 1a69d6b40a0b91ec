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


def test_signature_marks_computed_arguments_as_outputs():
    m = add_module()
    assert [arg.output for arg in m.signature.args] == [False, False, True]
    again = runtime.KernelSignature.from_json(m.signature.to_json())
    assert again == m.signature


def test_old_signature_json_without_output_field_loads():
    text = ('{"args": [{"dtype": "float32", "name": "A", "shape": [8]}], "name": "k", '
            '"scalars": [], "version": 1}')
    sig = runtime.KernelSignature.from_json(text)
    assert sig.args[0].output is False and sig.heap_buffers == ()


def test_read_only_output_is_rejected():
    m = add_module()
    a = np.ones(8, np.float32)
    read_only = np.frombuffer(bytes(32), dtype=np.float32)
    with pytest.raises(runtime.ArgumentError, match=r"^argument 'C': expected a writeable array "
                       r"\(it is an output\), got a read-only array$"):
        m(a, a, read_only)
    m(read_only, read_only, np.zeros(8, np.float32))  # read-only inputs are fine


def test_output_aliasing_an_input_is_rejected():
    m = add_module(16)
    x = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    message = (r"^argument 'C' overlaps argument 'A' in memory; outputs must not alias inputs "
               r"\(kernel parameters are noalias\)$")
    with pytest.raises(runtime.ArgumentError, match=message):
        m(x, b, x)
    big = np.zeros(32, np.float32)
    with pytest.raises(runtime.ArgumentError, match=r"argument 'C' overlaps argument 'B'"):
        m(x, big[8:24], big[:16])  # partial overlap
    m(x, big[16:], big[:16])  # adjacent, not overlapping
    m(x, x, b)  # two inputs may share memory


def test_symbolic_argument_beyond_int32_index_range_is_rejected():
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="int8")
    B = te.compute((n,), lambda i: A[i] + te.const(1, "int8"), name="B")
    m = te.build(te.create_schedule(B.op), [A, B])
    # A contiguous-looking view over 1 byte: rejected before any memory is touched.
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), (2**31 - 1,), (1,),
                                           writeable=False)
    with pytest.raises(runtime.ArgumentError, match=r"^argument 'A': 2147483647 elements "
                       r"exceed the int32 index range of this kernel$"):
        m(huge, huge)


def test_static_argument_beyond_int32_index_range_is_a_build_error():
    A = te.placeholder((2**16 + 8, 2**15 + 8), name="A", dtype="int8")
    B = te.compute((2**15 + 8, 2**16 + 8), lambda j, i: A[i, j], name="B")
    with pytest.raises(BuildError, match=r"^te.build: argument 'A' has 2148270144 elements, "
                       r"beyond the int32 index range; int64 indexing is not supported yet$"):
        te.build(te.create_schedule(B.op), [A, B])
