"""Deterministic facts of the code generated for Stage.prefetch (never timings): a read
prefetch becomes an x86 prefetcht0, a write prefetch a prefetchw (or prefetcht0 where the
host lacks it), and the benchmark softmax prefetches inside its vector loops."""
import os
import re
import sys

import te

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import kernels  # noqa: E402


def _asm(s, args) -> str:
    return te.build(s, args).get_source("asm")


def test_read_prefetch_is_prefetcht0_and_write_prefetch_is_prefetchw():
    A = te.placeholder((64, 256), name="A")
    B = te.compute((64, 256), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].vectorize(ji)
    s[B].prefetch(A, jo, 16)
    ll = te.build(s, [A, B]).get_source("ll")
    assert re.search(r"call void @llvm\.prefetch\.p0\(ptr [^,]+, i32 0, i32 3, i32 1\)", ll)
    assert "prefetcht0" in _asm(s, [A, B])
    s[B].prefetch(B, jo, 4)
    asm = _asm(s, [A, B])
    assert "prefetcht0" in asm and re.search(r"\bprefetch(w|t0)\b", asm)


def test_softmax_prefetches_inside_its_vector_loops_and_streams_its_output():
    s, args = kernels.softmax(64, 4096)
    asm = _asm(s, args)
    assert asm.count("prefetcht0") >= 1
    assert "vmovntps" in asm and "sfence" in asm
    assert "expf" not in asm
