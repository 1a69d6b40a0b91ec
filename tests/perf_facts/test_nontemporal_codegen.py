"""The "nontemporal_store" loop pragma: results equal the plain schedule's for aligned and
unaligned arrays, odd sizes, parallel and vectorized loops; and deterministic facts of the
generated code (never timings): stores to argument buffers become vmovntps behind a
run-time alignment check, the function ends with sfence, and local buffers keep plain
stores."""
import os
import platform
import re
import sys

import numpy as np
import pytest

from runtime.checker import INDEX_LIMIT
import te
from te.codegen.llvm.codegen import codegen_llvm
from te.lower.interp import run_func
from helpers import check_schedule, rand_array

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import kernels  # noqa: E402

NT = "nontemporal_store"
X86 = platform.machine() in ("x86_64", "AMD64")
x86_only = pytest.mark.skipif(not X86, reason="x86 instructions (vmovntps, sfence)")


def _affine(rows: int, cols: int, where: str, lanes: int = 16, dtype: str = "float32"):
    """B = A * 2 + 1 with the pragma on: "row" a serial row loop (inner loops inside it),
    "serial" the column loop of serial rows, "parallel" the parallel row loop, "outer" the
    column loop of parallel rows, "vector" the vectorized loop, "unrolled" an unrolled
    loop of 4-row blocks."""
    A = te.placeholder((rows, cols), name="A", dtype=dtype)
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2 + 1, name="B")
    s = te.create_schedule(B.op)
    i = B.op.axis[0]
    jo, ji = s[B].split(B.op.axis[1], factor=lanes)
    s[B].vectorize(ji)
    if where == "unrolled":
        io, ii = s[B].split(i, factor=4)
        s[B].reorder(io, jo, ii, ji)
        s[B].unroll(ii)
        s[B].pragma(ii, NT)
        return s, A, B
    if where in ("parallel", "outer", "vector"):
        s[B].parallel(i)
    s[B].pragma({"row": i, "serial": jo, "parallel": i, "outer": jo, "vector": ji}[where], NT)
    return s, A, B


@pytest.mark.parametrize("where", ["row", "serial", "parallel", "outer", "vector", "unrolled"])
@pytest.mark.parametrize("rows, cols", [(37, 1003), (5, 64), (1, 17), (3, 8)])
def test_nontemporal_store_gives_the_plain_result(where, rows, cols):
    s, A, B = _affine(rows, cols, where)
    check_schedule(s, [A], [B], lambda a: a * 2 + 1)


@pytest.mark.parametrize("dtype, lanes", [("float64", 8), ("float16", 16), ("int8", 64),
                                          ("int32", 2), ("uint8", 8)])
def test_nontemporal_store_of_other_dtypes_and_widths(dtype, lanes):
    """8- to 128-byte vectors, and 2- or 8-byte ones that stay plain stores."""
    s, A, B = _affine(7, 203, "outer", lanes, dtype)
    check_schedule(s, [A], [B], lambda a: (a * 2 + 1).astype(dtype), rtol=1e-3, atol=1e-3)


@x86_only
@pytest.mark.parametrize("where", ["row", "vector", "unrolled"])
def test_the_pragma_reaches_the_stores_wherever_the_loop_goes(where):
    """The pragma'd loop may vanish (vectorized, unrolled, one iteration): its stores
    are still non-temporal, and a split tail is still vector code."""
    s, A, B = _affine(8, 37, where)
    text = str(te.lower(s, [A, B]))
    assert "ramp(" in text.split("pragma nontemporal_store")[-1]
    assert "vmovntps" in te.build(s, [A, B]).get_source("asm")


@pytest.mark.parametrize("lanes", [4, 8, 16])
@pytest.mark.parametrize("offset", [0, 1, 4, 8])
def test_nontemporal_store_on_unaligned_arrays(lanes, offset):
    """numpy arrays that start 4..32 bytes past a 64-byte line: the aligned vectors go
    past the cache, the others are plain stores, and every element is written."""
    rows, cols = 9, 101
    s, A, B = _affine(rows, cols, "outer", lanes)
    mod = te.build(s, [A, B])
    store = np.zeros(rows * cols + 32, "float32")
    pad = (-store.ctypes.data // 4) % 16 + offset
    a = rand_array((rows, cols))
    b = store[pad:pad + rows * cols].reshape(rows, cols)
    b.fill(np.nan)
    mod(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    assert not store[:pad].any() and not store[pad + rows * cols:].any()  # nothing outside


@x86_only
def test_nontemporal_store_on_a_layernorm_row_loop_keeps_local_buffers_cached():
    """The pragma on the row loop of layernorm covers its compute_at stages too (the
    partial sums in local buffers): only the output's stores are non-temporal."""
    rows, cols = 6, 200
    s, (X, g, b, Y) = kernels.layernorm(rows, cols)
    s[Y].pragma(s[Y].leaf_iter_vars[0], NT)

    def ref(x, gamma, beta):
        mean = x.mean(axis=1, keepdims=True)
        var = ((x - mean) ** 2).mean(axis=1, keepdims=True)
        return (x - mean) / np.sqrt(var + 1e-5) * gamma + beta
    check_schedule(s, [X, g, b], [Y], ref, rtol=1e-4, atol=1e-4)
    # before LLVM's passes: named pointers
    ll = codegen_llvm(te.lower(s, [X, g, b, Y]), index_limit=INDEX_LIMIT)
    bases = set()
    for fn in ll.split("\ndefine "):  # value names repeat from one function to the next
        defs = dict(re.findall(r'(%"?[\w.]+"?) = getelementptr inbounds \w+, ptr (%"?\w+"?)',
                               fn))
        targets = re.findall(r"store <16 x float> %[^,]+, ptr (%\S+), align 64, !nontemporal",
                             fn)
        bases |= {defs.get(p) for p in targets}
    assert bases == {'%"Y"'}, bases
    assert re.search(r"store <16 x float> %[^,]+, ptr %\S+, align 4$", ll, re.M)  # locals


@x86_only
def test_nontemporal_store_code_facts():
    s, A, B = _affine(64, 256, "outer")
    mod = te.build(s, [A, B])
    ll = mod.get_source("ll")
    assert re.search(r"store <\d+ x float> .*, align \d+,.* !nontemporal", ll)
    assert "llvm.x86.sse.sfence" in ll
    asm = mod.get_source("asm")
    assert "vmovntps" in asm and "sfence" in asm
    # 16-byte aligned, not 64 (numpy's usual large array): 16-byte non-temporal pieces
    assert re.search(r"vmovntps\s+%xmm", asm)
    plain = te.build(*_plain(64, 256)).get_source("asm")
    assert "vmovntps" not in plain and "sfence" not in plain


def _plain(rows, cols):
    A = te.placeholder((rows, cols), name="A")
    B = te.compute((rows, cols), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].vectorize(ji)
    return s, [A, B]


def test_nontemporal_pragma_is_printed_and_the_interpreter_ignores_it():
    s, A, B = _affine(8, 40, "vector")
    func = te.lower(s, [A, B])
    assert "// pragma nontemporal_store" in str(func)
    a, b = rand_array((8, 40)), np.full((8, 40), np.nan, "float32")
    run_func(func, [a, b])
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


@x86_only
def test_a_failure_return_fences_the_streamed_stores():
    """A row buffer on the heap (80 KB, past the stack limit) allocated per row: its
    allocation may fail after earlier rows were streamed, and that return is fenced too."""
    A = te.placeholder((3, 20000), name="A")
    T = te.compute((3, 20000), lambda i, j: A[i, j] + 1.0, name="T")
    B = te.compute((3, 20000), lambda i, j: T[i, j] * 2.0, name="B")
    s = te.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].vectorize(ji)
    s[T].compute_at(s[B], B.op.axis[0])
    s[B].pragma(B.op.axis[0], NT)
    ll = codegen_llvm(te.lower(s, [A, B]), index_limit=INDEX_LIMIT)
    blocks = ll.split("\nfail")[1:]
    assert blocks and all("llvm.x86.sse.sfence" in b.split("ret ")[0] for b in blocks)
    check_schedule(s, [A], [B], lambda a: (a + 1) * 2)


@x86_only
def test_streamed_stores_are_fenced_before_a_parallel_loop_reads_them():
    """B streamed by the calling thread, then read by the threads of C's parallel loop."""
    A = te.placeholder((16, 64), name="A")
    B = te.compute((16, 64), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((16, 64), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule([B.op, C.op])
    jo, ji = s[B].split(B.op.axis[1], factor=16)
    s[B].vectorize(ji)
    s[B].pragma(jo, NT)
    s[C].parallel(C.op.axis[0])
    ll = codegen_llvm(te.lower(s, [A, B, C]), index_limit=INDEX_LIMIT)
    before_launch = ll.split("@GOMP_parallel(ptr")[0].split("define i32 @")[-1]
    assert "llvm.x86.sse.sfence" in before_launch
    check_schedule(s, [A], [B, C], lambda a: [a + 1, (a + 1) * 2])
