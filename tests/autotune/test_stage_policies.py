"""The automatic space's stage policies: the kind each stage is given, the knob names that
tuning logs are keyed by, and the public micro-kernel API (te.autotune.define_matmul_like,
schedule_matmul_like) called from a template as auto_schedule calls it."""
from __future__ import annotations

import random

import numpy as np
import pytest

import te
from te.autotune.auto_space import (INJECTIVE_OUTPUT, MATMUL_LIKE, PRODUCER, REDUCTION,
                                    ROW_REDUCTION, auto_schedule, default_args, stage_kind)
from te.autotune.space import ConfigSpace
from te.compute import ops
from te.compute.tensor import PlaceholderOp
from te.schedule.schedule import topo_order
from helpers import rand_array


def _kinds(outputs) -> dict:
    out_ops = [t.op for t in (outputs if isinstance(outputs, list) else [outputs])]
    return {op.name: stage_kind(op, out_ops) for op in topo_order(out_ops)
            if not isinstance(op, PlaceholderOp)}


def test_each_stage_kind_picks_its_policy():
    X = te.placeholder((8, 301), name="X")
    assert _kinds(ops.softmax(X)) == {
        "T_softmax_maxelem": REDUCTION, "T_softmax_exp": PRODUCER,
        "T_softmax_expsum": REDUCTION, "T_softmax_norm": INJECTIVE_OUTPUT}
    A, B = te.placeholder((16, 24), name="A"), te.placeholder((24, 40), name="B")
    assert _kinds(ops.matmul(A, B)) == {"T_matmul": MATMUL_LIKE}
    assert _kinds(ops.relu(ops.matmul(A, B))) == {"T_matmul": REDUCTION,
                                                  "T_relu": INJECTIVE_OUTPUT}
    assert _kinds(ops.sum(X, axis=1)) == {"T_sum": ROW_REDUCTION}
    # a column sum reads its input across rows: the register tile, not partial row sums
    assert _kinds(ops.sum(X, axis=0)) == {"T_sum": MATMUL_LIKE}
    D, W = te.placeholder((1, 3, 9, 9), name="D"), te.placeholder((4, 3, 3, 3), name="W")
    assert _kinds(ops.conv2d_nchw(D, W, padding=1)) == {"pad_temp": PRODUCER,
                                                        "T_conv2d_nchw": MATMUL_LIKE}


def _knob_names(outputs) -> list:
    space = ConfigSpace()
    auto_schedule(space, outputs)
    return list(space.knobs)


def test_knob_names_and_order_stay_those_of_existing_tuning_logs():
    """A tuning log stores configs by knob name and the space's order decides the config
    index: both are pinned here for a graph of each kind of stage."""
    X = te.placeholder((5, 301), name="X")
    assert _knob_names(ops.softmax(X)) == [
        "T_softmax_exp.place", "T_softmax_exp.root.vec", "T_softmax_exp.root.parallel",
        "T_softmax_exp.prefetch", "T_softmax_exp.sum_with", "T_softmax_norm.vec",
        "T_softmax_norm.parallel", "T_softmax_norm.out_store", "T_softmax_norm.pipeline",
        "T_softmax_expsum.at", "T_softmax_expsum.parallel", "T_softmax_expsum.lanes",
        "T_softmax_expsum.prefetch", "T_softmax_maxelem.at", "T_softmax_maxelem.parallel",
        "T_softmax_maxelem.lanes", "T_softmax_maxelem.prefetch"]
    D, W = te.placeholder((1, 3, 9, 9), name="D"), te.placeholder((4, 3, 3, 3), name="W")
    tile = ["nr", "mr", "mc", "fr", "kc", "unroll_r", "order", "parallel", "pack", "rfactor"]
    assert _knob_names(ops.conv2d_nchw(D, W, padding=1)) == \
        [f"T_conv2d_nchw.{k}" for k in tile] + \
        ["pad_temp.place", "pad_temp.root.vec", "pad_temp.root.parallel",
         "pad_temp.prefetch", "pad_temp.sum_with", "T_conv2d_nchw.cache"]
    T = te.compute((23, 301), lambda i, j: X[i % 5, j] * 2.0, name="T")
    k = te.reduce_axis((0, 301), name="k")
    S = te.compute((23,), lambda i: te.sum(T[i, k], axis=k), name="S")
    e = te.compute((23, 301), lambda i, j: te.exp(T[i, j]), name="o")
    o2 = te.compute((23, 301), lambda i, j: e[i, j] * 2.0, name="o")
    assert _knob_names([S, o2]) == [
        "S.kc", "S.parallel", "S.rows", "S.prefetch",
        "T.place", "T.root.vec", "T.root.parallel", "T.prefetch", "T.sum_with",
        "o.place", "o.root.vec", "o.root.parallel", "o.prefetch", "o.sum_with",
        "o#3.vec", "o#3.parallel", "o#3.out_store", "o#3.pipeline"]


@te.autotune.template("test_stage_policies_matmul_like")
def matmul_like_template(m, n, k):
    A = te.placeholder((m, k), name="A")
    B = te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    cfg = te.autotune.get_config()
    op, packed = te.autotune.define_matmul_like(cfg, C, "C")
    s = te.create_schedule(op)
    te.autotune.schedule_matmul_like(cfg, s, op, "C", packed)
    return s, [A, B, op.output(0)]


def test_a_template_calling_the_micro_kernel_gets_the_automatic_spaces_kernel():
    """The template's knobs are the automatic space's under the template's prefix, and
    each config (packed or not, cached or not, partial sums along k) lowers to the same
    program as auto_schedule gives, with numpy's answer."""
    m, n, k = 3, 19, 200   # 57 outputs: few enough for partial sums along k
    space = matmul_like_template.space(m, n, k)
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    out = ops.matmul(A, B)
    auto = ConfigSpace()
    auto_schedule(auto, out)
    assert [name[len("C."):] for name in space.knobs] == \
        [name[len("T_matmul."):] for name in auto.knobs]
    assert [kn.options for kn in space.knobs.values()] == \
        [kn.options for kn in auto.knobs.values()]
    a, b = rand_array((m, k)), rand_array((k, n))
    base = space.default().values
    picks = [{}, {"C.pack": False}, {"C.cache": False}, {"C.rfactor": True}]
    picks += [space.get(i).values for i in random.Random(3).sample(range(len(space)), 3)]
    for change in picks:
        values = dict(base, **change)
        s, args = matmul_like_template.instantiate(space.from_json_dict({"knobs": values}),
                                                   m, n, k)
        auto_values = {"T_matmul." + name[len("C."):]: v for name, v in values.items()}
        s2, args2 = auto_schedule(auto.from_json_dict({"knobs": auto_values}), out)
        ir = str(te.lower(s, args))
        assert ir == str(te.lower(s2, args2)), change
        assert ("B_pack" in ir) == (values["C.pack"] and not values["C.rfactor"]), change
        c = np.full((m, n), np.nan, "float32")
        te.build(s, args)(a, b, c)
        np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4, err_msg=str(change))


def test_the_micro_kernel_api_names_what_it_was_given():
    X = te.placeholder((4, 20), name="X")
    Y = te.compute((4, 20), lambda i, j: X[i, j] + 1.0, name="Y")
    with pytest.raises(te.ArgumentError, match=r"define_matmul_like: op must be a reduction "
                       r"te.compute stage \(C.op of a matmul, conv or pool\), got stage "
                       r"'Y', which has no reduce_axis"):
        te.autotune.define_matmul_like(ConfigSpace(), Y, "Y")
    with pytest.raises(te.ArgumentError, match="schedule_matmul_like: op must be a reduction "
                       "te.compute stage .*, got PlaceholderOp"):
        te.autotune.schedule_matmul_like(ConfigSpace(), te.create_schedule(Y.op), X.op, "X")
    S = ops.sum(X, axis=0)
    with pytest.raises(te.ArgumentError, match="define_matmul_like: prefix must be a "
                       "non-empty string \\(the knob names' prefix\\), got ''"):
        te.autotune.define_matmul_like(ConfigSpace(), S, "")
    args = default_args(S)
    assert [a.op.name for a in args] == ["X", "T_sum"]
