"""Deterministic facts of the code generated for Stage.prefetch (never timings): a read
prefetch becomes an x86 prefetcht0, or prefetcht1 / prefetcht2 / prefetchnta for locality
2 / 1 / 0, a write prefetch a prefetchw (or prefetcht0 where the host lacks it), and the
benchmark softmax prefetches the next row into L2 inside its vector loops."""
import os
import re
import sys

import pytest

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


@pytest.mark.parametrize("locality, instruction", [(3, "prefetcht0"), (2, "prefetcht1"),
                                                   (1, "prefetcht2"), (0, "prefetchnta")])
def test_prefetch_locality_picks_the_x86_hint(locality, instruction):
    A = te.placeholder((64, 256), name="A")
    B = te.compute((64, 256), lambda i, j: A[i, j] + 1.0, name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].vectorize(ji)
    s[B].prefetch(A, jo, 16, locality=locality)
    ll = te.build(s, [A, B]).get_source("ll")
    assert re.search(rf"call void @llvm\.prefetch\.p0\(ptr [^,]+, i32 0, i32 {locality}, "
                     rf"i32 1\)", ll)
    found = set(re.findall(r"\bprefetch(?:t[012]|nta|w)\b", _asm(s, [A, B])))
    assert found == {instruction}


def test_softmax_prefetches_inside_its_vector_loops_and_streams_its_output():
    s, args = kernels.softmax(64, 4096)
    asm = _asm(s, args)
    assert asm.count("prefetcht1") >= 1 and "prefetcht0" not in asm   # into L2
    assert "vmovntps" in asm and "sfence" in asm
    assert "expf" not in asm
