"""Golden te.lower text for small schedules: the printed loop IR is a stable, public form.

Pins the exact strings for a non-dividing split (a guard-free main loop and a guarded
tail), a vectorized split (with and without a tail) and a reduction computed at its
consumer's outer loop. Imports te only.
"""
import textwrap

import te


def _golden(text: str) -> str:
    return textwrap.dedent(text).strip("\n")


def _add_one(n, vector_factor=None):
    A = te.placeholder((n,), name="A")
    B = te.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    xo, xi = s[B].split(B.op.axis[0], factor=4)
    if vector_factor:
        s[B].vectorize(xi)
    return str(te.lower(s, [A, B]))


def test_golden_split_non_dividing_partitions_the_tail():
    # the tail's inner loop is partitioned in turn: 2 iterations, no guard
    assert _add_one(10) == _golden("""
        @main(A: float32[10], B: float32[10]) {
          for (i.outer, 0, 2) {
            for (i.inner, 0, 4) {
              B[(i.outer*4) + i.inner] = (A[(i.outer*4) + i.inner]*2f) + 1f
            }
          }
          for (i.inner, 0, 2) {
            B[i.inner + 8] = (A[i.inner + 8]*2f) + 1f
          }
        }
        """)


def test_golden_vectorize_dividing():
    assert _add_one(12, vector_factor=4) == _golden("""
        @main(A: float32[12], B: float32[12]) {
          for (i.outer, 0, 3) {
            B[ramp(i.outer*4, 1, 4)] = (A[ramp(i.outer*4, 1, 4)]*broadcast(2f, 4)) + broadcast(1f, 4)
          }
        }
        """)


def test_golden_vectorize_with_tail_vector_body_and_shorter_vector_tail():
    # the tail's guard `i.inner + 8 < 10` becomes the extent 2: the tail is vector code too
    assert _add_one(10, vector_factor=4) == _golden("""
        @main(A: float32[10], B: float32[10]) {
          for (i.outer, 0, 2) {
            B[ramp(i.outer*4, 1, 4)] = (A[ramp(i.outer*4, 1, 4)]*broadcast(2f, 4)) + broadcast(1f, 4)
          }
          B[ramp(8, 1, 2)] = (A[ramp(8, 1, 2)]*broadcast(2f, 2)) + broadcast(1f, 2)
        }
        """)


def test_golden_vectorize_splits_a_multiple_of_four_into_power_of_two_vectors():
    # <12 x float> would be widened by LLVM; 8 + 4 lanes map onto whole registers
    A = te.placeholder((12,), name="A")
    B = te.compute((12,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = te.create_schedule(B.op)
    s[B].vectorize(B.op.axis[0])
    assert str(te.lower(s, [A, B])) == _golden("""
        @main(A: float32[12], B: float32[12]) {
          B[ramp(0, 1, 8)] = (A[ramp(0, 1, 8)]*broadcast(2f, 8)) + broadcast(1f, 8)
          B[ramp(8, 1, 4)] = (A[ramp(8, 1, 4)]*broadcast(2f, 4)) + broadcast(1f, 4)
        }
        """)


def test_golden_reduction_compute_at():
    X = te.placeholder((6, 5), name="X")
    k = te.reduce_axis((0, 5), "k")
    Y = te.compute((6,), lambda i: te.sum(X[i, k], axis=k), name="Y")
    Z = te.compute((6,), lambda i: Y[i] * 2.0, name="Z")
    s = te.create_schedule(Z.op)
    zo, zi = s[Z].split(Z.op.axis[0], 3)
    s[Y].compute_at(s[Z], zo)
    assert str(te.lower(s, [X, Z])) == _golden("""
        @main(X: float32[6, 5], Z: float32[6]) {
          for (i.outer, 0, 2) {
            allocate Y[float32 * 3] {
              for (i, 0, 3) {
                Y[i] = 0f
                for (k, 0, 5) {
                  Y[i] = Y[i] + X[((i.outer*15) + (i*5)) + k]
                }
              }
              for (i.inner, 0, 3) {
                Z[(i.outer*3) + i.inner] = Y[i.inner]*2f
              }
            }
          }
        }
        """)
