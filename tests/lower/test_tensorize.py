"""Stage.tensorize with te.decl_tensor_intrin and te.decl_buffer, the ir_builder, and
pragma "import_llvm" (LLVM IR written here by hand: the C micro-kernel's IR as clang
would give it), against numpy; errors where the intrinsic does not match."""
import numpy as np
import pytest

import te
from helpers import rand_array
from te.tvm.contrib import clang

# gemv_update(c, a, b, m, l, stride): c[i] += sum_j a[j] * b[i * stride + j], i < m, j < l
GEMV_UPDATE = r"""
define i32 @gemv_update(ptr %cc, ptr %aa, ptr %bb, i32 %m, i32 %l, i32 %stride) {
entry:
  br label %outer
outer:
  %i = phi i32 [0, %entry], [%i.next, %outer.end]
  %ci = getelementptr float, ptr %cc, i32 %i
  %row = mul i32 %i, %stride
  br label %inner
inner:
  %j = phi i32 [0, %outer], [%j.next, %inner]
  %acc = phi float [0.0, %outer], [%acc.next, %inner]
  %pa = getelementptr float, ptr %aa, i32 %j
  %idx = add i32 %row, %j
  %pb = getelementptr float, ptr %bb, i32 %idx
  %va = load float, ptr %pa
  %vb = load float, ptr %pb
  %prod = fmul float %va, %vb
  %acc.next = fadd float %acc, %prod
  %j.next = add i32 %j, 1
  %jdone = icmp eq i32 %j.next, %l
  br i1 %jdone, label %outer.end, label %inner
outer.end:
  %old = load float, ptr %ci
  %new = fadd float %old, %acc.next
  store float %new, ptr %ci
  %i.next = add i32 %i, 1
  %idone = icmp eq i32 %i.next, %m
  br i1 %idone, label %exit, label %outer
exit:
  ret i32 0
}
"""
# gemv_reset(c, m): c[i] = 0, i < m
GEMV_RESET = r"""
define i32 @gemv_reset(ptr %cc, i32 %m) {
entry:
  br label %loop
loop:
  %i = phi i32 [0, %entry], [%i.next, %loop]
  %p = getelementptr float, ptr %cc, i32 %i
  store float 0.0, ptr %p
  %i.next = add i32 %i, 1
  %done = icmp eq i32 %i.next, %m
  br i1 %done, label %exit, label %loop
exit:
  ret i32 0
}
"""


def matmul_nt(n, m, el):
    A = te.placeholder((n, el), name="A")
    B = te.placeholder((m, el), name="B")
    k = te.reduce_axis((0, el), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, k] * B[j, k], axis=k), name="C")
    return A, B, C


def intrin_gemv(m, el, parts=False, combine=None):
    a = te.placeholder((el,), name="a")
    b = te.placeholder((m, el), name="b")
    k = te.reduce_axis((0, el), name="k")
    combine = combine or (lambda x, y: x * y)
    c = te.compute((m,), lambda i: te.sum(combine(a[k], b[i, k]), axis=k), name="c")
    a_buf = te.decl_buffer(a.shape, a.dtype, name="Ab", offset_factor=1, strides=[1])
    b_buf = te.decl_buffer(b.shape, b.dtype, name="Bb", offset_factor=1,
                           strides=[te.var("s1"), 1])
    c_buf = te.decl_buffer(c.shape, c.dtype, name="Cb", offset_factor=1, strides=[1])

    def intrin_func(ins, outs):
        aa, bb = ins
        cc = outs[0]

        def update():
            ib = te.ir_builder.create()
            ib.emit(te.call_extern("int32", "gemv_update", cc.access_ptr("w"),
                                   aa.access_ptr("r"), bb.access_ptr("r"), m, el,
                                   bb.strides[0]))
            return ib.get()
        if not parts:
            return update()
        reset = te.call_extern("int32", "gemv_reset", cc.access_ptr("w"), m)
        return update(), reset, update()
    return te.decl_tensor_intrin(c.op, intrin_func, binds={a: a_buf, b: b_buf, c: c_buf},
                                 name="gemv")


def run_matmul(s, A, B, C, zero_output=True):
    n, el = (int(d) for d in A.shape)
    m = int(B.shape[0])
    a, b = rand_array((n, el)), rand_array((m, el))
    c = np.zeros((n, m), "float32") if zero_output else rand_array((n, m))
    te.build(s, [A, B, C])(a, b, c)
    np.testing.assert_allclose(c, a @ b.T, rtol=1e-4, atol=1e-5)


def test_gemv_body_covers_the_whole_reduction():
    A, B, C = matmul_nt(5, 32, 24)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    s[C].reorder(x, yo, yi, z)
    s[C].tensorize(yi, intrin_gemv(16, 24))
    s[C].pragma(x, "import_llvm", GEMV_UPDATE)
    text = str(te.lower(s, [A, B, C]))
    assert "gemv_update(access_ptr(C, (i*32) + (j.outer*16), 'w'), access_ptr(A, i*24, 'r'), " \
           "access_ptr(B, j.outer*384, 'r'), 16, 24, 24)" in text
    run_matmul(s, A, B, C)
    run_matmul(te.create_schedule(C.op), A, B, C)  # the unscheduled result is the same


def test_gemv_reset_and_update_when_the_reduction_is_split():
    A, B, C = matmul_nt(3, 32, 48)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(16, 16, parts=True))
    # gemv_update imported twice (the tutorial does): the first definition is kept
    s[C].pragma(x, "import_llvm", GEMV_UPDATE)
    s[C].pragma(yo, "import_llvm", GEMV_UPDATE + GEMV_RESET)
    run_matmul(s, A, B, C, zero_output=False)  # reset clears what the output held


def test_reset_before_a_chunk_loop_that_holds_data_loops_and_a_cached_input():
    # odd sizes: 5 rows, 3 tiles of 16 columns, 5 chunks of 16; the chunk loop outside the
    # tile loop, and A's chunk cached at it: reset (bound to C alone) runs before that loop,
    # where the cache does not exist, update inside it per tile
    A, B, C = matmul_nt(5, 48, 80)
    s = te.create_schedule(C.op)
    AA = s.cache_read(A, "global", [C])
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, zo, yo, yi, zi)
    s[AA].compute_at(s[C], zo)
    s[C].tensorize(yi, intrin_gemv(16, 16, parts=True))
    s[C].pragma(x, "import_llvm", GEMV_UPDATE + GEMV_RESET)
    text = str(te.lower(s, [A, B, C]))
    reset = "gemv_reset(access_ptr(C, (i*48) + (j.outer*16), 'w'), 16)"
    assert text.index(reset) < text.index("for (k.outer, 0, 5)") < text.index("A.global[")
    assert "gemv_update(access_ptr(C, (i*48) + (j.outer*16), 'w'), access_ptr(A.global, 0, " \
           "'r'), access_ptr(B, (j.outer*1280) + (k.outer*16), 'r'), 16, 16, 80)" in text
    run_matmul(s, A, B, C, zero_output=False)


def test_tensorize_errors():
    A, B, C = matmul_nt(4, 32, 16)

    def scheduled(factor=16, split_k=False):
        s = te.create_schedule(C.op)
        x, y = C.op.axis
        (z,) = C.op.reduce_axis
        yo, yi = s[C].split(y, factor=factor)
        if split_k:
            zo, zi = s[C].split(z, factor=8)
            s[C].reorder(x, yo, zo, yi, zi)
        else:
            s[C].reorder(x, yo, yi, z)
        return s, yi
    s, yi = scheduled()
    s[C].tensorize(yi, intrin_gemv(16, 16, combine=lambda p, q: p + q))
    with pytest.raises(te.LoweringError, match="tensorize on stage 'C' at loop 'j.inner': the "
                       "stage computes A\\[i, k\\]\\*B\\[\\(j.outer\\*16\\) \\+ i_1, k\\] where "
                       "intrinsic 'gemv' computes A\\[i, k\\] \\+ B\\[\\(j.outer\\*16\\) \\+ "
                       "i_1, k\\]"):
        te.lower(s, [A, B, C])
    s, yi = scheduled()
    s[C].tensorize(yi, intrin_gemv(8, 16))
    with pytest.raises(te.LoweringError, match="loop 'j.inner' \\(of axis 'j'\\) runs 16 "
                                               "iterations but intrinsic 'gemv' axis 'i' has 8"):
        te.lower(s, [A, B, C])
    s, yi = scheduled(factor=5)
    s[C].tensorize(yi, intrin_gemv(5, 16))
    with pytest.raises(te.LoweringError, match="the loops need a bounds guard"):
        te.lower(s, [A, B, C])
    s, yi = scheduled(split_k=True)
    s[C].tensorize(yi, intrin_gemv(16, 8))
    with pytest.raises(te.LoweringError, match="reduction loop 'k.outer' stays outside the "
                                               "tensorized loops, so the intrinsic must give "
                                               "\\(body, reset, update\\)"):
        te.lower(s, [A, B, C])
    s, yi = scheduled()
    with pytest.raises(te.ScheduleError, match="tensor_intrin must be a "
                                               "te.decl_tensor_intrin\\(...\\) result, got str"):
        s[C].tensorize(yi, "gemv")
    s[C].tensorize(yi, intrin_gemv(16, 16))
    with pytest.raises(te.ScheduleError, match="tensorized with intrinsic 'gemv', a Python "
                                               "object that recorded steps do not hold"):
        te.create_schedule(C.op).replay(s.to_json())


def test_decl_buffer_stride_that_does_not_fit():
    A, B, C = matmul_nt(2, 16, 16)
    a = te.placeholder((16,), name="a")
    b = te.placeholder((16, 16), name="b")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((16,), lambda i: te.sum(a[k] * b[i, k], axis=k), name="c")
    b_buf = te.decl_buffer(b.shape, b.dtype, name="Bb", offset_factor=1, strides=[20, 1])
    intrin = te.decl_tensor_intrin(c.op, lambda ins, outs: te.call_extern(
        "int32", "f", ins[1].access_ptr("r")), binds={b: b_buf})
    s = te.create_schedule(C.op)
    s[C].tensorize(C.op.axis[1], intrin)
    with pytest.raises(te.LoweringError, match="buffer 'Bb' declares strides\\[0\\] = 20, but "
                                               "the tensor region it is bound to has "
                                               "strides\\[0\\] = 16"):
        te.lower(s, [A, B, C])
    with pytest.raises(te.ComputeError, match="buffer 'Bb' \\(float32, 2 dimensions\\) does "
                                              "not fit tensor 'a' \\(float32, 1 dimensions\\)"):
        te.decl_tensor_intrin(c.op, lambda ins, outs: None, binds={a: b_buf})


def test_ir_builder_extern():
    n = 11
    A = te.placeholder((n,), name="A")

    def fcompute(ins, outs):
        ib = te.ir_builder.create()
        src, dst = ib.buffer_ptr(ins[0]), ib.buffer_ptr(outs[0])
        tmp = ib.allocate("float32", (1,), name="tmp")
        with ib.for_range(0, n, name="i") as i:
            with ib.if_scope(i % 2 == 0):
                tmp[0] = src[i] * 2.0
            with ib.else_scope():
                tmp[0] = -src[i]
            scale = ib.let("scale", te.const(3.0))
            dst[i] = tmp[0] * scale
        with ib.for_range(2, 4, name="j") as j:  # a loop that does not start at 0
            dst[j] = dst[j] + 100.0
        return ib.get()
    B = te.extern((n,), [A], fcompute, name="B")
    a = rand_array((n,))
    want = np.where(np.arange(n) % 2 == 0, a * 2, -a) * 3
    want[2:4] += 100
    got = np.zeros(n, "float32")
    te.build(te.create_schedule(B.op), [A, B])(a, got)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    ib = te.ir_builder.create()
    with pytest.raises(te.ComputeError, match="else_scope: must follow an if_scope block"):
        with ib.else_scope():
            pass


def test_extern_call_runs_once_and_bad_llvm_text():
    # bump(p): *p += 1; called once per iteration, also at the top of an Evaluate
    bump = r"""
define i32 @bump(ptr %p) {
  %v = load float, ptr %p
  %w = fadd float %v, 1.0
  store float %w, ptr %p
  ret i32 0
}
"""
    n = 6
    A = te.placeholder((n,), name="A")

    def fcompute(ins, outs):
        ib = te.ir_builder.create()
        dst = ib.buffer_ptr(outs[0])
        with ib.for_range(0, n, name="i") as i:
            dst[i] = ib.buffer_ptr(ins[0])[i]
            ib.emit(te.call_extern("int32", "bump", outs[0].access_ptr("w", offset=i)))
        return ib.get()
    B = te.extern((n,), [A], fcompute, name="B")
    # an extern stage has no loops to annotate: the pragma goes on a consumer's loop
    C = te.compute((n,), lambda i: B[i] * 1.0, name="C")
    s = te.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "import_llvm", bump)
    a = rand_array((n,))
    got = np.zeros(n, "float32")
    te.build(s, [A, C])(a, got)
    np.testing.assert_allclose(got, a + 1, rtol=1e-6)
    s = te.create_schedule(C.op)
    s[C].pragma(C.op.axis[0], "import_llvm", "define i32 @broken( {")
    with pytest.raises(te.BuildError, match="pragma 'import_llvm' text 0 is not valid LLVM IR"):
        te.build(s, [A, C])


GEMV_C = """
extern "C" int gemv_update(float *cc, float *aa, float *bb, int m, int l, int stride) {
  for (int i = 0; i < m; ++i)
    for (int j = 0; j < l; ++j) cc[i] += aa[j] * bb[i * stride + j];
  return 0;
}
extern "C" int gemv_reset(float *cc, int m) {
  for (int i = 0; i < m; ++i) cc[i] = 0.0f;
  return 0;
}
"""


@pytest.mark.skipif(not clang.find_clang(False),
                    reason="no clang (15 or later) on PATH: apt-get install clang-19 runs the "
                           "C micro-kernel path of import_llvm")
def test_import_llvm_of_a_c_micro_kernel_compiled_by_clang(tmp_path):
    ll = clang.create_llvm(GEMV_C, output=str(tmp_path / "gemv.ll"))
    assert "define" in ll and (tmp_path / "gemv.ll").read_text() == ll
    A, B, C = matmul_nt(4, 32, 32)
    s = te.create_schedule(C.op)
    x, y = C.op.axis
    (z,) = C.op.reduce_axis
    yo, yi = s[C].split(y, factor=16)
    zo, zi = s[C].split(z, factor=16)
    s[C].reorder(x, yo, zo, yi, zi)
    s[C].tensorize(yi, intrin_gemv(16, 16, parts=True))
    s[C].pragma(yo, "import_llvm", ll)
    run_matmul(s, A, B, C, zero_output=False)


def test_clang_missing_or_failing():
    with pytest.raises(RuntimeError, match="cc '/nonexistent/clang' is not an executable"):
        clang.create_llvm(GEMV_C, cc="/nonexistent/clang")
    found = clang.find_clang(False)
    if found:
        with pytest.raises(RuntimeError, match="contrib.clang: .* failed"):
            clang.create_llvm("this is not C++", cc=found[0])
