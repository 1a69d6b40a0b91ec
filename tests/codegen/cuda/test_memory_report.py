"""Target 'cuda': CudaModule.memory_report(), the memory access oracle (te/lower/gpu_memory.py).

Kernels whose coalescing and bank conflicts are known by hand (a vector add, a transpose, a
stride, shared reads with stride 1, 2 and 32 and a broadcast, a gather) pin the counting;
the final kernels of tutorials/03_gpu_matmul.ipynb and of TVM's GEMM and opt_conv_cuda
schedules (test_virtual_threads.py's, with the tutorials' thread shapes) pin what they do.
Every kernel is also checked against numpy in the emulator.
"""
import numpy as np
import pytest
from helpers import rand_array, run_emulated
from test_virtual_threads import _conv_hwcn_with_virtual_threads, _gemm_with_virtual_threads

import te
from runtime.cuda import EmulatedTimingWarning


def _bind(s, stage, outer, inner):
    s[stage].bind(outer, te.thread_axis("blockIdx.x"))
    s[stage].bind(inner, te.thread_axis("threadIdx.x"))


def _vector_add(n=1000, threads=64):
    A, B = te.placeholder((n,), name="A"), te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    s = te.create_schedule(C.op)
    _bind(s, C, *s[C].split(C.op.axis[0], factor=threads))
    return te.build(s, [A, B, C], target="cuda")


def test_a_vector_add_is_coalesced_with_exact_counts():
    mod = _vector_add()
    a, b = rand_array((1000,)), rand_array((1000,))
    (c,) = run_emulated(mod, [a, b], [(1000,)], ["float32"])
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    report = mod.memory_report(blocks=None)
    assert report.coalesced and report.conflict_free
    for buffer, access in (("A", "load"), ("B", "load"), ("C", "store")):
        stats = report.find(buffer, access)
        # 16 blocks of 2 warps; the last block has 40 threads: 4 sectors, then 1
        assert (stats.requests, stats.sectors, stats.ideal_sectors) == (32, 125, 125)
        assert stats.lines == 16 * 2 and stats.efficiency == 1.0
    assert "all 16 blocks" in str(report) and "sampled" not in str(report)


def test_sampled_blocks_are_first_middle_and_last_and_say_so():
    report = _vector_add().memory_report()
    kernel = report.kernels[0]
    assert (kernel.blocks_run, kernel.blocks_total, kernel.sampled) == (3, 16, True)
    assert "sampled 3 of 16 blocks" in str(report)
    assert report.find("A").sectors == 4 + 4 + 4 + 4 + 4 + 1   # blocks 0, 8 and 15


def test_a_transposed_read_uses_one_word_of_each_sector():
    X = te.placeholder((64, 96), name="X")
    Y = te.compute((96, 64), lambda i, j: X[j, i], name="Y")
    s = te.create_schedule(Y.op)
    by, bx, ty, tx = s[Y].tile(Y.op.axis[0], Y.op.axis[1], 8, 32)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[Y].bind(axis, te.thread_axis(tag))
    mod = te.build(s, [X, Y], target="cuda")
    x = rand_array((64, 96))
    (y,) = run_emulated(mod, [x], [(96, 64)], ["float32"])
    np.testing.assert_array_equal(y, x.T)
    report = mod.memory_report(blocks=None)
    load, store = report.find("X", "load"), report.find("Y", "store")
    assert load.efficiency == 1 / 8 and load.sectors_per_request == 32
    assert store.efficiency == 1.0 and store.sectors_per_request == 4
    assert not report.coalesced


@pytest.mark.parametrize("stride, efficiency", [(1, 1.0), (2, 0.5), (3, 1 / 3), (8, 1 / 8),
                                                (16, 1 / 8)])
def test_a_strided_read_wastes_what_it_skips(stride, efficiency):
    A = te.placeholder((64 * stride,), name="A")
    C = te.compute((64,), lambda i: A[i * stride] * 2.0, name="C")
    s = te.create_schedule(C.op)
    _bind(s, C, *s[C].split(C.op.axis[0], factor=32))
    mod = te.build(s, [A, C], target="cuda")
    a = rand_array((64 * stride,))
    (c,) = run_emulated(mod, [a], [(64,)], ["float32"])
    np.testing.assert_allclose(c, a[::stride] * 2.0, rtol=1e-6)
    stats = mod.memory_report(blocks=None).find("A")
    assert stats.efficiency == pytest.approx(efficiency, abs=1e-12)


def _shared_read(read, size, dtype="float32"):
    """C[i] = A.shared[read(i)] for 32 threads, the tile filled by the same threads."""
    A = te.placeholder((size,), name="A", dtype=dtype)
    C = te.compute((32,), lambda i: A[read(i)] + te.const(1, dtype), name="C")
    s = te.create_schedule(C.op)
    AS = s.cache_read(A, "shared", [C])
    bx, tx = s[C].split(C.op.axis[0], factor=32)
    _bind(s, C, bx, tx)
    s[AS].compute_at(s[C], bx)
    _, fill = s[AS].split(AS.op.axis[0], factor=32)
    s[AS].bind(fill, te.thread_axis("threadIdx.x"))
    return te.build(s, [A, C], target="cuda"), A


@pytest.mark.parametrize("name, read, ways", [
    ("consecutive", lambda i: i, 1),
    ("stride 2", lambda i: i * 2, 2),
    ("stride 3", lambda i: i * 3, 1),      # odd strides meet every bank once
    ("stride 8", lambda i: i * 8, 8),
    ("stride 32", lambda i: i * 32, 32),
    ("broadcast", lambda i: i * 0 + 5, 1),
    ("pairs", lambda i: i // 2, 1),        # two lanes per word: a broadcast, no conflict
])
def test_shared_reads_count_bank_conflicts(name, read, ways):
    mod, A = _shared_read(read, 32 * 32)
    a = rand_array((32 * 32,))
    (c,) = run_emulated(mod, [a], [(32,)], ["float32"])
    np.testing.assert_allclose(c, a[[read(i) for i in range(32)]] + 1.0, rtol=1e-6)
    report = mod.memory_report()
    stats = report.find("A.shared", "load")
    assert (stats.requests, stats.max_ways, stats.ways) == (1, ways, ways), name
    assert report.conflict_free == (ways == 1)
    assert report.find("A.shared", "store").max_ways == 1   # the fill: consecutive words


@pytest.mark.parametrize("dtype, sectors", [("float64", 8), ("int8", 1), ("int16", 2)])
def test_element_sizes_other_than_four_bytes(dtype, sectors):
    """A warp reading 32 consecutive elements needs 32 x size bytes: 8 sectors of float64,
    one of int8; shared memory serves 8-byte words in two passes, which is no conflict."""
    mod, _ = _shared_read(lambda i: i, 64, dtype)
    a = rand_array((64,), dtype)
    (c,) = run_emulated(mod, [a], [(32,)], [dtype])
    np.testing.assert_array_equal(c, a[:32] + np.array(1, dtype))
    report = mod.memory_report()
    assert report.find("A").sectors_per_request == sectors
    assert report.coalesced and report.conflict_free
    assert report.find("A.shared", "load").ways == 1


def test_vectorized_loops_count_as_wide_accesses_when_contiguous():
    """Four consecutive floats per thread: one float4 request touching 16 sectors, all
    used; unrolled instead, four scalar requests each using a quarter of what they touch."""
    def build(annotate):
        A = te.placeholder((1024,), name="A")
        C = te.compute((1024,), lambda i: A[i] * 3.0, name="C")
        s = te.create_schedule(C.op)
        outer, inner = s[C].split(C.op.axis[0], factor=4)
        _bind(s, C, *s[C].split(outer, factor=64))
        getattr(s[C], annotate)(inner)
        return te.build(s, [A, C], target="cuda")
    a = rand_array((1024,))
    for annotate, per_request, efficiency in (("vectorize", 16, 1.0), ("unroll", 16, 0.25)):
        mod = build(annotate)
        (c,) = run_emulated(mod, [a], [(1024,)], ["float32"])
        np.testing.assert_allclose(c, a * 3.0, rtol=1e-6)
        stats = mod.memory_report(blocks=None).find("A")
        assert stats.sectors_per_request == per_request, annotate
        assert stats.efficiency == efficiency, annotate



def _scaled(n, lanes, annotate, dtype="float32", transposed=False):
    """C = A * 3 (or C[i, j] = A[j, i] * 3, a strided read), `lanes` consecutive elements
    of C per thread in a loop marked `annotate`, 64 threads a block."""
    if transposed:
        A = te.placeholder((n, n), name="A", dtype=dtype)
        C = te.compute((n, n), lambda i, j: A[j, i] * 3, name="C")
        s = te.create_schedule(C.op)
        outer, inner = s[C].split(C.op.axis[1], factor=lanes)
        _bind(s, C, C.op.axis[0], outer)
    else:
        A = te.placeholder((n,), name="A", dtype=dtype)
        C = te.compute((n,), lambda i: A[i] * 3, name="C")
        s = te.create_schedule(C.op)
        outer, inner = s[C].split(C.op.axis[0], factor=lanes)
        _bind(s, C, *s[C].split(outer, factor=64))
    getattr(s[C], annotate)(inner)
    return te.build(s, [A, C], target="cuda")


def test_a_vectorized_loops_tail_counts_as_the_code_runs_it():
    """1022 floats, four a thread: the code's float4 form runs where all four lanes are in
    range, so every warp makes one 16-byte request a thread (8 requests, the last warp's
    31 threads); the last thread's two elements (1020, 1021) go lane by lane in the else
    branch, one scalar request each. Sectors: 7 warps of 16, 496 bytes from byte 3584
    (16), then 2 sectors for bytes 4080 and 4084 (one each: a request is counted alone)."""
    mod = _scaled(1022, 4, "vectorize")
    assert "float4" in mod.get_source()
    a = rand_array((1022,))
    (c,) = run_emulated(mod, [a], [(1022,)], ["float32"])
    np.testing.assert_allclose(c, a * 3, rtol=1e-6)
    report = mod.memory_report(blocks=None)
    for access in ("load", "store"):
        stats = report.find("A" if access == "load" else "C", access)
        assert (stats.requests, stats.sectors, stats.lanes) == (10, 7 * 16 + 16 + 2, 255 + 2)


@pytest.mark.parametrize("lanes, dtype, transposed", [
    (2, "int64", False),      # no longlong2 in the code generator: lane by lane
    (4, "float32", True),     # a strided read: the whole loop stays scalar
])
def test_a_vectorized_loop_the_code_runs_lane_by_lane_counts_as_scalar(lanes, dtype,
                                                                       transposed):
    mods = [_scaled(64, lanes, annotate, dtype, transposed) for annotate in ("vectorize",
                                                                           "unroll")]
    assert not any(t in mods[0].get_source() for t in ("float4", "float2", "int4", "int2",
                                                       "double2"))
    shape = (64, 64) if transposed else (64,)
    a = rand_array(shape, dtype)
    (c,) = run_emulated(mods[0], [a], [shape], [dtype])
    np.testing.assert_array_equal(c, (a.T if transposed else a) * np.array(3, dtype))
    vector, unrolled = (m.memory_report(blocks=None) for m in mods)
    for name, access in (("A", "load"), ("C", "store")):
        got, want = vector.find(name, access), unrolled.find(name, access)
        assert (got.requests, got.sectors, got.lanes) == \
            (want.requests, want.sectors, want.lanes), (name, access)



@pytest.mark.parametrize("lanes, per_request", [(1, 4), (2, 8)])
def test_a_2d_block_counts_by_hand(lanes, per_request):
    """Y = X * 2 on 64 x 64 floats, blocks of threadIdx.y 8 rows by threadIdx.x 16 threads
    of one float (lanes 1) or 8 threads of a float2 (lanes 2): a warp covers 32 // (16 //
    lanes) rows of 64 bytes, each two aligned sectors of one 128-byte line, so a request
    touches 4 or 8 sectors (all used) in 2 or 4 lines (1 or 2 needed); 4096 / lanes / 32
    requests; one lane a thread."""
    X = te.placeholder((64, 64), name="X")
    Y = te.compute((64, 64), lambda i, j: X[i, j] * 2.0, name="Y")
    s = te.create_schedule(Y.op)
    by, bx, ty, tx = s[Y].tile(Y.op.axis[0], Y.op.axis[1], 8, 16)
    if lanes > 1:
        tx, lane = s[Y].split(tx, factor=lanes)
        s[Y].vectorize(lane)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[Y].bind(axis, te.thread_axis(tag))
    mod = te.build(s, [X, Y], target="cuda")
    assert ("float2" in mod.get_source()) == (lanes == 2)
    x = rand_array((64, 64))
    (y,) = run_emulated(mod, [x], [(64, 64)], ["float32"])
    np.testing.assert_array_equal(y, x * 2.0)
    report = mod.memory_report(blocks=None)
    requests = 4096 // lanes // 32
    for name, access in (("X", "load"), ("Y", "store")):
        stats = report.find(name, access)
        assert (stats.requests, stats.sectors, stats.ideal_sectors) == \
            (requests, requests * per_request, requests * per_request)
        assert (stats.lines, stats.ideal_lines, stats.lanes) == \
            (requests * per_request // 2, requests * per_request // 4, 4096 // lanes)



def test_a_transpose_through_an_unpadded_shared_tile_by_hand():
    """Y = X.T through a 16 x 16 shared tile, blocks of 16 x 16 threads (threadIdx.y rows):
    a warp is two rows of 16 threads. The fill writes X_shared[ty*16 + tx], 32 consecutive
    words (no conflict); the read X_shared[tx*16 + ty] puts the even tx of one ty in one
    bank and the odd ones in another: 8 distinct words a bank, 8 wavefronts where 1 would
    do. The global reads and writes: two rows of 64 aligned bytes, 4 sectors in 2 lines."""
    X = te.placeholder((64, 64), name="X")
    Y = te.compute((64, 64), lambda i, j: X[j, i], name="Y")
    s = te.create_schedule(Y.op)
    XS = s.cache_read(X, "shared", [Y])
    by, bx, ty, tx = s[Y].tile(Y.op.axis[0], Y.op.axis[1], 16, 16)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[Y].bind(axis, te.thread_axis(tag))
    s[XS].compute_at(s[Y], bx)
    s[XS].bind(XS.op.axis[0], te.thread_axis("threadIdx.y"))
    s[XS].bind(XS.op.axis[1], te.thread_axis("threadIdx.x"))
    mod = te.build(s, [X, Y], target="cuda")
    x = rand_array((64, 64))
    (y,) = run_emulated(mod, [x], [(64, 64)], ["float32"])
    np.testing.assert_array_equal(y, x.T)
    report = mod.memory_report(blocks=None)
    requests = 64 * 64 // 32
    fill, read = report.find("X.shared", "store"), report.find("X.shared", "load")
    assert (fill.requests, fill.wavefronts, fill.ideal_wavefronts) == (requests,) * 3
    assert (read.requests, read.wavefronts, read.ideal_wavefronts) == \
        (requests, 8 * requests, requests)
    for name, access in (("X", "load"), ("Y", "store")):
        stats = report.find(name, access)
        assert (stats.requests, stats.sectors, stats.lines) == \
            (requests, 4 * requests, 2 * requests)
    assert report.coalesced and not report.conflict_free


def test_a_gather_counts_its_data_dependent_addresses_as_unresolved():
    A = te.placeholder((50,), name="A")
    idx = te.placeholder((64,), name="idx", dtype="int32")
    C = te.compute((64,), lambda i: A[idx[i]], name="C")
    s = te.create_schedule(C.op)
    _bind(s, C, *s[C].split(C.op.axis[0], factor=32))
    mod = te.build(s, [A, idx, C], target="cuda")
    a, ids = rand_array((50,)), np.random.default_rng(1).integers(0, 50, 64).astype("int32")
    (c,) = run_emulated(mod, [a, ids], [(64,)], ["float32"])
    np.testing.assert_array_equal(c, a[ids])
    report = mod.memory_report(blocks=None)
    assert report.find("idx").efficiency == 1.0
    gathered = report.find("A")
    assert (gathered.unresolved, gathered.requests) == (2, 0)
    assert not report.coalesced   # what cannot be followed is not claimed coalesced
    assert "2 requests with data-dependent addresses not counted" in str(report)


def test_symbolic_sizes_come_from_the_call_arguments():
    n = te.var("n")
    A = te.placeholder((n,), name="A")
    C = te.compute((n,), lambda i: A[i] - 1.0, name="C")
    s = te.create_schedule(C.op)
    _bind(s, C, *s[C].split(C.op.axis[0], factor=32))
    mod = te.build(s, [A, C], target="cuda")
    with pytest.raises(ValueError, match=r"memory_report of 'main': args: expected the call's "
                                         r"arguments, which give the sizes n; got none"):
        mod.memory_report()
    a = rand_array((70,))
    report = mod.memory_report(a, np.empty_like(a), blocks=None)
    assert report.find("A").requests == 3 and report.find("A").sectors == 4 + 4 + 1


@pytest.mark.parametrize("option, value, message", [
    ("blocks", 0, "blocks: expected None or an integer >= 1, got 0"),
    ("iterations", 1, "iterations: expected None or an integer >= 2, got 1"),
    ("blocks", 2.5, "blocks: expected None or an integer >= 1, got 2.5"),
])
def test_bad_sampling_options_are_refused(option, value, message):
    with pytest.raises(ValueError, match=message):
        _vector_add().memory_report(**{option: value})


def _tutorial_03_final_schedule(M, N, K):
    """tutorials/03_gpu_matmul.ipynb, step 3: 16 x 16 tiles of A and B in shared memory."""
    A, B = te.placeholder((M, K), name="A"), te.placeholder((K, N), name="B")
    k = te.reduce_axis((0, K), name="k")
    C = te.compute((M, N), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = te.create_schedule(C.op)
    AA, BB = s.cache_read(A, "shared", [C]), s.cache_read(B, "shared", [C])
    CL = s.cache_write(C, "local")
    by, bx, ty, tx = s[C].tile(C.op.axis[0], C.op.axis[1], 16, 16)
    for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                      (tx, "threadIdx.x")):
        s[C].bind(axis, te.thread_axis(tag))
    s[CL].compute_at(s[C], tx)
    ko, _ = s[CL].split(CL.op.reduce_axis[0], factor=16)
    for T in (AA, BB):
        s[T].compute_at(s[CL], ko)
        s[T].bind(T.op.axis[0], te.thread_axis("threadIdx.y"))
        s[T].bind(T.op.axis[1], te.thread_axis("threadIdx.x"))
    return s, [A, B, C]


def test_the_gpu_matmul_tutorials_final_kernel_is_coalesced_and_conflict_free():
    M, N, K = 96, 80, 72   # the tutorial's sizes: a tail step of k
    s, args = _tutorial_03_final_schedule(M, N, K)
    mod = te.build(s, args, target="cuda")
    a, b = rand_array((M, K)), rand_array((K, N))
    (c,) = run_emulated(mod, [a, b], [(M, N)], ["float32"])
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    report = mod.memory_report(blocks=None, iterations=None)
    assert report.coalesced and report.conflict_free, report
    # a warp is two rows of 16 threads: 64 bytes of each row, 2 sectors
    assert report.find("B").sectors_per_request == 4
    assert report.find("A.shared", "load").requests == 30 * 8 * K   # 8 warps, every k
    # three blocks and 8 of the 16 steps of each k tile: the same counts, scaled
    sampled = mod.memory_report()
    assert "sampled 3 of 30 blocks; loops over 8 iterations sampled" in str(sampled)
    for buffer, access in (("A", "load"), ("B", "load"), ("A.shared", "load")):
        exact, estimate = report.find(buffer, access), sampled.find(buffer, access)
        assert estimate.efficiency == exact.efficiency == 1.0
        assert estimate.sectors_per_request == pytest.approx(exact.sectors_per_request,
                                                             rel=0.1)


def test_tvm_gemm_schedule_loads_are_coalesced_and_its_shared_tiles_conflict_free():
    """TVM's GEMM recipe (8 x 8 threads, 2 x 2 virtual threads): the tile loads are
    coalesced (vectorized fills) and no shared access conflicts; its output stores are
    not: each thread writes 2 consecutive floats with scalar stores, half of each sector."""
    s, args = _gemm_with_virtual_threads(512, 512, 256, num_thread=8, vthread=2, step=8)
    mod = te.build(s, args, target="cuda")
    report = mod.memory_report()
    assert report.conflict_free, report
    for buffer in ("A", "B"):
        assert report.find(buffer).efficiency == 1.0, report
    assert report.find("C", "store").efficiency == 0.5, report
    assert "loops over 8 iterations sampled" in str(report)
    small, small_args = _gemm_with_virtual_threads(64, 64, 32, num_thread=8, vthread=2,
                                                   step=8)
    small_mod = te.build(small, small_args, target="cuda")
    a, b = rand_array((32, 64)), rand_array((32, 64))
    (c,) = run_emulated(small_mod, [a, b], [(64, 64)], ["float32"])
    np.testing.assert_allclose(c, a.T @ b, rtol=1e-4, atol=1e-4)


def test_tvm_opt_conv_schedule_is_neither_coalesced_nor_conflict_free():
    """TVM's opt_conv_cuda schedule (8 x 8 threads, 2 x 2 virtual threads, float4 fills):
    each thread fills 8 consecutive elements of W as two float4s, so a request uses half of
    each sector it touches and W's shared stores conflict 2-way (threads tx and tx + 4 of a
    quarter warp meet in one bank); A's fill stays scalar (its loads are under the padding
    condition: a vector load would read outside A at the border), an eighth of each sector
    and its shared stores 8-way; the output is stored with scalar stores, 4 floats per
    thread: a quarter of each sector. The shared reads of the inner loop conflict-free."""
    s, args = _conv_hwcn_with_virtual_threads(5, 16, 64, 64, tile=8, num_thread=8, step=8)
    mod = te.build(s, args, target="cuda")
    report = mod.memory_report()
    assert (report.coalesced, report.conflict_free) == (False, False)
    assert report.find("A").efficiency == 0.125 and report.find("W").efficiency == 0.5
    assert report.find("B", "store").efficiency == 0.25
    for buffer, ways in (("Apad.shared", 8), ("W.shared", 2)):
        assert report.find(buffer, "store").max_ways == ways
        assert report.find(buffer, "load").max_ways == 1
    a, w = rand_array((5, 5, 16, 64)), rand_array((3, 3, 16, 64))
    (b,) = run_emulated(mod, [a, w], [(5, 5, 64, 64)], ["float32"])
    padded = np.pad(a, ((1, 1), (1, 1), (0, 0), (0, 0)))
    want = sum(np.einsum("yxcn,cf->yxfn", padded[ry:ry + 5, rx:rx + 5], w[ry, rx])
               for ry in range(3) for rx in range(3))
    np.testing.assert_allclose(b, want, rtol=1e-4, atol=1e-4)


def test_emulated_timings_say_they_are_emulated():
    mod = _vector_add(n=256).emulator()
    assert mod.emulated and "emulated on the CPU" in repr(mod)
    assert not _vector_add(n=256).emulated
    a, b, c = rand_array((256,)), rand_array((256,)), np.empty(256, "float32")
    with pytest.warns(EmulatedTimingWarning, match="CPU emulation times, not GPU times"):
        evaluator = mod.time_evaluator(number=1, repeat=2)
    result = evaluator(a, b, c)
    assert result.emulated and len(result.results) == 2
    assert "emulated: CPU emulation time, not GPU time" in repr(result)
    mod(a, b, c)
    np.testing.assert_allclose(c, a + b, rtol=1e-6)
    # the emulator keeps the module's analysis
    assert mod.memory_report().coalesced
