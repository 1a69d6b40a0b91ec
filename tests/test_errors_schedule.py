"""Schedule errors: each illegal primitive raises ScheduleError with a pinned, plain message.

The messages name the stage, the parameter, what was expected and what came; they are
part of the API (the autotuner records them, users read them). Imports te and pytest.
"""
import pytest

import te


@pytest.fixture()
def graph():
    A = te.placeholder((10, 12), name="A")
    k = te.reduce_axis((0, 12), "k")
    R = te.compute((10,), lambda i: te.sum(A[i, k], axis=k), name="R")
    B = te.compute((10, 12), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((10, 12), lambda i, j: B[i, j] * 2.0, name="C")
    s = te.create_schedule([C.op, R.op])
    return s, A, B, C, R


def test_reorder_of_split_axis(graph):
    s, A, B, C, R = graph
    i, j = C.op.axis
    s[C].split(i, 4)
    with pytest.raises(te.ScheduleError, match=r"^reorder on stage 'C': axis 'i' has already "
                       r"been split or fused; the current loops are: i.outer, i.inner, j$"):
        s[C].reorder(j, i)


def test_reorder_of_axis_of_another_stage(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"reorder on stage 'C': axis 'i' does not "
                                               r"belong to this stage; the current loops are"):
        s[C].reorder(B.op.axis[0], C.op.axis[1])


def test_reorder_repeated_axis(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^reorder on stage 'C': an axis appears twice$"):
        s[C].reorder(C.op.axis[0], C.op.axis[0])


def test_fuse_non_adjacent(graph):
    s, A, B, C, R = graph
    io, ii = s[C].split(C.op.axis[0], 4)
    with pytest.raises(te.ScheduleError, match=r"^fuse on stage 'C': axes i.outer, j must be "
                       r"adjacent and in loop order \(outermost first\); the loop order is "
                       r"i.outer, i.inner, j$"):
        s[C].fuse(io, C.op.axis[1])


def test_fuse_wrong_order(graph):
    s, A, B, C, R = graph
    i, j = C.op.axis
    with pytest.raises(te.ScheduleError, match=r"axes j, i must be adjacent and in loop order"):
        s[C].fuse(j, i)


def test_fuse_reduction_with_data_axis(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^fuse on stage 'R': cannot fuse a reduction "
                                               r"axis with a data-parallel axis$"):
        s[R].fuse(R.op.axis[0], R.op.reduce_axis[0])


@pytest.mark.parametrize("factor,shown", [(0, "0"), (-3, "-3"), (2.5, "2.5"), ("4", "'4'"),
                                          (True, "True")])
def test_split_bad_factor(graph, factor, shown):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=rf"^split on stage 'C': factor must be a "
                                               rf"positive int, got {shown}$"):
        s[C].split(C.op.axis[1], factor)


def test_split_bad_nparts(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"nparts must be a positive int, got 0$"):
        s[C].split(C.op.axis[1], nparts=0)


def test_split_needs_exactly_one(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"give exactly one of factor and nparts"):
        s[C].split(C.op.axis[1])
    with pytest.raises(te.ScheduleError, match=r"give exactly one of factor and nparts"):
        s[C].split(C.op.axis[1], factor=2, nparts=2)


def test_compute_at_non_consumer(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^compute_at on stage 'B': stage 'R' does not "
                       r"read 'B', so 'B' cannot be computed inside its loops$"):
        s[B].compute_at(s[R], R.op.axis[0])


def test_compute_at_scope_of_other_stage(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"compute_at on stage 'C': scope 'i' does not "
                                               r"belong to this stage"):
        s[B].compute_at(s[C], R.op.axis[0])


def test_compute_at_self(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"cannot attach a stage to itself"):
        s[C].compute_at(s[C], C.op.axis[0])


def test_compute_inline_reduction(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^compute_inline on stage 'R': cannot inline a "
                       r"reduction; use compute_at to place it instead$"):
        s[R].compute_inline()


def test_compute_inline_placeholder_and_output(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^compute_inline: 'A' is a placeholder \(an "
                                               r"input\); it has no computation to place$"):
        s[A].compute_inline()
    with pytest.raises(te.ScheduleError, match=r"cannot inline an output of the schedule"):
        s[C].compute_inline()


def test_compute_inline_after_split(graph):
    s, A, B, C, R = graph
    s[B].split(B.op.axis[0], 2)
    with pytest.raises(te.ScheduleError, match=r"the stage has loop transformations that "
                                               r"inlining would discard"):
        s[B].compute_inline()


def test_vectorize_reduction_axis(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^vectorize on stage 'R': cannot vectorize "
                       r"reduction axis 'k' \(its iterations update the same element\); use "
                       r"rfactor first$"):
        s[R].vectorize(R.op.reduce_axis[0])


def test_parallel_reduction_axis(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^parallel on stage 'R': cannot parallelize "
                                               r"reduction axis 'k'"):
        s[R].parallel(R.op.reduce_axis[0])


def test_vectorize_and_unroll_symbolic_extent():
    n = te.var("n")
    X = te.placeholder((n,), name="X")
    Y = te.compute((n,), lambda i: X[i] + 1.0, name="Y")
    s = te.create_schedule(Y.op)
    for prim in ("vectorize", "unroll"):
        with pytest.raises(te.ScheduleError, match=rf"^{prim} on stage 'Y': axis 'i' must have "
                           r"a constant extent, but its extent is symbolic; split it by a "
                           r"constant factor first$"):
            getattr(s[Y], prim)(Y.op.axis[0])


def test_bind_reduction_and_non_thread_axis(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^bind on stage 'R': reduction axis 'k' can "
                       r"be bound to threadIdx.x, .y or .z only \(the threads of one block "
                       r"combine their partial results\), got 'blockIdx.x'; rfactor it"):
        s[R].bind(R.op.reduce_axis[0], te.thread_axis("blockIdx.x"))
    with pytest.raises(te.ScheduleError, match=r"thread_ivar must come from te.thread_axis"):
        s[C].bind(C.op.axis[0], C.op.axis[1])


def test_storage_align_errors(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"the innermost axis 'j' has stride 1"):
        s[B].storage_align(B.op.axis[1], 4, 0)
    with pytest.raises(te.ScheduleError, match=r"need factor > 0 and 0 <= offset < factor, "
                                               r"got factor=4, offset=4"):
        s[B].storage_align(B.op.axis[0], 4, 4)


def test_cache_errors(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^cache_read: scope must be one of global, "
                                               r"shared, local, warp, wmma\.accumulator, "
                                               r"got 'foo'$"):
        s.cache_read(A, "foo", [B])
    with pytest.raises(te.ScheduleError, match=r"^cache_read: 'C' does not read 'A'$"):
        s.cache_read(A, "local", [C])
    s[B].split(B.op.axis[0], 2)
    with pytest.raises(te.ScheduleError, match=r"apply cache_write before any other primitive"):
        s.cache_write(B, "local")


def test_rfactor_errors(graph):
    s, A, B, C, R = graph
    with pytest.raises(te.ScheduleError, match=r"^rfactor: 'C' is not a reduction$"):
        s.rfactor(C, C.op.axis[0])
    with pytest.raises(te.ScheduleError, match=r"axis 'i' is not a reduction axis"):
        s.rfactor(R, R.op.axis[0])


def test_tensor_not_in_schedule(graph):
    s, A, B, C, R = graph
    other = te.compute((3,), lambda i: i * 2, name="Other")
    with pytest.raises(te.ScheduleError, match=r"schedule: 'Other' is not part of this "
                                               r"schedule's compute graph"):
        s[other]


def test_attach_point_split_afterwards_is_a_lowering_error(graph):
    s, A, B, C, R = graph
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].split(C.op.axis[0], 2)
    with pytest.raises(te.LoweringError, match=r"stage 'B' is computed at loop 'i' of 'C', "
                                               r"which was split or fused afterwards"):
        te.lower(s, [A, C, R])


@pytest.mark.parametrize("c_at", [None, 0])
def test_transitive_compute_at_with_reader_outside_the_loop(c_at):
    """B at D's loop j, but C (which reads B) runs at root or at D's outer loop i."""
    A = te.placeholder((9, 10), name="A")
    B = te.compute((9, 10), lambda i, j: A[i, j] + 1.0, name="B")
    C = te.compute((9, 10), lambda i, j: B[i, j] * 2.0, name="C")
    D = te.compute((9, 10), lambda i, j: C[i, j] - A[i, j], name="D")
    s = te.create_schedule(D.op)
    s[B].compute_at(s[D], D.op.axis[1])  # allowed: D reads B through C
    if c_at is not None:
        s[C].compute_at(s[D], D.op.axis[c_at])
    with pytest.raises(te.LoweringError, match=r"^stage 'B' is computed inside loop 'j' of "
                       r"'D', but its reader 'C' runs outside that loop; use compute_root or "
                       r"attach it at an outer loop$"):
        te.lower(s, [A, D])


def test_lower_arg_from_another_graph_names_the_argument(graph):
    s, A, B, C, R = graph
    other = te.placeholder((3,), name="Other")
    with pytest.raises(te.LoweringError, match=r"^te.lower: args\[1\] 'Other' is not part of "
                                               r"this schedule's compute graph"):
        te.lower(s, [A, other, C, R])
