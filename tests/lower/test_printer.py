"""Golden text for the loop IR printer: functions, statements, expressions, name clashes."""
import dataclasses
import textwrap

import te
from te.compute import expr as E
from te.lower import ir
from te.lower.func import PrimFunc
from te.lower.printer import print_expr, print_func, print_stmt


def buf(name, dtype, shape, strides=(), scope="global"):
    return ir.Buffer(name, dtype, tuple(E.as_expr(s) for s in shape),
                     tuple(E.as_expr(s) for s in strides), E.Var(name, "handle"), scope)


def golden(text):
    return textwrap.dedent(text).strip("\n")


def test_func_reduction_golden():
    n, i, k = E.Var("n"), E.Var("i"), E.Var("k")
    A, B = buf("A", "float32", (n, 5)), buf("B", "float32", (n,))
    body = ir.For(i, E.const(0), n, ir.SERIAL, ir.seq(
        ir.Store(B, i, E.const(0.0)),
        ir.For(k, E.const(0), E.const(5), ir.SERIAL,
               ir.Store(B, i, ir.Load("float32", B, i)
                        + ir.Load("float32", A, i * 5 + k) * 2.0))))
    f = PrimFunc("main", (A, B), (n,), body)
    assert str(f) == print_func(f) == golden("""
        @main(A: float32[n, 5], B: float32[n], n: int32) {
          for (i, 0, n) {
            B[i] = 0f
            for (k, 0, 5) {
              B[i] = B[i] + (A[(i*5) + k]*2f)
            }
          }
        }
        """)


def test_loop_kinds_pragmas_allocate_if_let():
    i, j, tx, x = E.Var("i"), E.Var("j"), E.Var("tx"), E.Var("x")
    A, T = buf("A", "float32", (64,)), buf("T.local", "float32", (8,), scope="local")
    inner = ir.IfThenElse(
        (j < 5) & ~(i == 3),
        ir.Store(T, j, ir.Load("float32", A, i * 8 + j)),
        ir.Store(T, j, E.const(-1.5)))
    body = ir.For(i, E.const(0), E.const(8), ir.PARALLEL, ir.Allocate(T, E.const(8), ir.seq(
        ir.For(j, E.const(0), E.const(8), ir.UNROLLED, inner,
               pragmas=(("auto_unroll_max_step", 16),)),
        ir.LetStmt(x, i * 8, ir.Store(A, E.Ramp("int32x8", x, E.const(1), 8),
                                      ir.Load("float32x8", T, E.Ramp("int32x8", E.const(0),
                                                                     E.const(1), 8)))),
        ir.For(tx, E.const(0), E.const(4), ir.THREAD_BINDING,
               ir.Evaluate(E.call_extern("int32", "puts", tx)), thread_tag="threadIdx.x"))))
    assert print_stmt(body) == golden("""
        parallel for (i, 0, 8) {
          allocate T.local[float32 * 8] scope=local {
            // pragma auto_unroll_max_step = 16
            unrolled for (j, 0, 8) {
              if ((j < 5) && !(i == 3)) {
                T.local[j] = A[(i*8) + j]
              } else {
                T.local[j] = -1.5f
              }
            }
            let x = i*8
            A[ramp(x, 1, 8)] = T.local[ramp(0, 1, 8)]
            for (tx: threadIdx.x, 0, 4) {
              puts(tx)
            }
          }
        }
        """)
    assert print_stmt(ir.Store(A, i, E.const(0.0)), indent=2) == "    A[i] = 0f"


def test_vectorized_loop_prefix():
    i = E.Var("i")
    A = buf("A", "int8", (4,))
    s = ir.For(i, E.const(0), E.const(4), ir.VECTORIZED, ir.Store(A, i, E.const(3, "int8")))
    assert print_stmt(s) == "vectorized for (i, 0, 4) {\n  A[i] = 3i8\n}"


def test_constants():
    cases = [(E.const(5), "5"), (E.const(-5), "-5"), (E.const(5, "int64"), "5i64"),
             (E.const(5, "int8"), "5i8"), (E.const(3, "uint8"), "3u8"),
             (E.const(2.0), "2f"), (E.const(0.5), "0.5f"), (E.const(0.5, "float64"), "0.5f64"),
             (E.const(1e-5), "1e-05f"), (E.const(1.0, "float16"), "1f16"),
             (E.const(True), "True"), (E.const(False), "False"),
             (E.const(float("inf")), "float32(inf)")]
    for c, text in cases:
        assert print_expr(c) == text


def test_expression_forms():
    a, b = E.Var("a"), E.Var("b")
    x, y = E.Var("x", "float32"), E.Var("y", "float32")
    cases = [
        (a + b * 3 - 1, "(a + (b*3)) - 1"),
        (a // b, "floordiv(a, b)"), (a % (b + 1), "floormod(a, b + 1)"),
        (te.truncdiv(a, b), "truncdiv(a, b)"), (te.truncmod(a, b), "truncmod(a, b)"),
        (te.min(a, b), "min(a, b)"), (te.max(a, 0), "max(a, 0)"),
        (x / y, "x/y"), ((a <= b) | (a != 0), "(a <= b) || (a != 0)"),
        (te.if_then_else(a >= 1, x, 0.0), "select(a >= 1, x, 0f)"),
        (te.exp(x) + te.sqrt(y), "exp(x) + sqrt(y)"), (a.astype("float32"), "float32(a)"),
        (E.Broadcast("float32x4", x, 4), "broadcast(x, 4)"),
        (E.Cast("float32x4", E.Ramp("int32x4", a * 4, E.const(1), 4)),
         "float32x4(ramp(a*4, 1, 4))"),
    ]
    for e, text in cases:
        assert print_expr(e) == text


def test_realize_producer_store_reduce():
    n = te.var("n")
    A = te.placeholder((n, 7), name="A")
    k = te.reduce_axis((0, 7), name="k")
    C = te.compute((n,), lambda i: te.sum(A[i, k] * 2.0, axis=k, where=k > 1), name="C")
    i = C.op.axis[0].var
    body = ir.ProducerRealize(C, (te.Range(E.const(0), n),), "global", ir.For(
        i, E.const(0), n, ir.SERIAL, ir.ProducerStore(C, (i,), C.op.body[0])))
    assert print_stmt(body) == golden("""
        realize C[0:n] {
          for (i, 0, n) {
            C[i] = reduce_sum(A[i, k]*2f, axis=[k], where=k > 1)
          }
        }
        """)
    off = ir.ProducerRealize(C, (te.Range(i * 4, E.const(4)),), "local", ir.Evaluate(E.const(0)),
                             align=((0, 16, 1),))
    assert print_stmt(off).splitlines()[0] == \
        "realize C[(i*4):((i*4) + 4)] scope=local align=[(0, 16, 1)] {"


def test_same_name_vars_and_buffers_are_disambiguated():
    i1, i2, i3 = E.Var("i"), E.Var("i"), E.Var("i_1")
    A = buf("A", "float32", (4, 4))
    T1, T2 = buf("T", "float32", (4,)), buf("T", "float32", (4,))
    body = ir.For(i1, E.const(0), E.const(4), ir.SERIAL, ir.seq(
        ir.For(i2, E.const(0), E.const(4), ir.SERIAL,
               ir.Allocate(T1, E.const(4), ir.Store(T1, i2, ir.Load("float32", A, i1 * 4 + i2)))),
        ir.For(i3, E.const(0), E.const(4), ir.SERIAL,
               ir.Allocate(T2, E.const(4), ir.Store(T2, i3, E.const(1.0))))))
    f = PrimFunc("f", (A,), (), body)
    expected = golden("""
        @f(A: float32[4, 4]) {
          for (i, 0, 4) {
            for (i_1, 0, 4) {
              allocate T[float32 * 4] {
                T[i_1] = A[(i*4) + i_1]
              }
            }
            for (i_1_1, 0, 4) {
              allocate T_1[float32 * 4] {
                T_1[i_1_1] = 1f
              }
            }
          }
        }
        """)
    assert print_func(f) == expected
    assert print_func(f) == expected  # stable across calls


def test_param_strides_and_attrs():
    m, n = E.Var("m"), E.Var("n")
    dense = buf("A", "float32", (m, n), strides=(n, 1))
    padded = buf("B", "float32", (m, n), strides=(n + 3, 1))
    f = PrimFunc("g", (dense, padded), (m, n), ir.Evaluate(E.const(0)),
                    attrs={"target": "llvm"})
    assert print_func(f) == golden("""
        // attr target = 'llvm'
        @g(A: float32[m, n], B: float32[m, n] strides=[n + 3, 1], m: int32, n: int32) {
          0
        }
        """)


def test_rebuilt_buffer_with_same_storage_keeps_its_name():
    i = E.Var("i")
    T = buf("T", "float32", (4,))
    T2 = dataclasses.replace(T, shape=(E.const(2), E.const(2)))
    s = ir.Allocate(T, E.const(4), ir.Store(T2, i, ir.Load("float32", T, i)))
    assert print_stmt(s) == "allocate T[float32 * 4] {\n  T[i] = T[i]\n}"
