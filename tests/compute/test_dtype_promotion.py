"""The documented dtype promotion rules (te/dtype.py) and how expressions apply them."""
import pytest

import te
from te.compute import expr as E
from te import dtype as dt


@pytest.mark.parametrize("a, b, expected", [
    ("float32", "float32", "float32"),
    ("float32", "float64", "float64"),
    ("int32", "float32", "float32"),
    ("int64", "float32", "float32"),
    ("bool", "int8", "int8"),
    ("bool", "float64", "float64"),
    ("int8", "int32", "int32"),
    ("uint8", "uint16", "uint16"),
    ("int16", "uint8", "int16"),
    ("int8", "uint8", "int16"),
    ("int32", "uint32", "int64"),
    ("int64", "uint64", "int64"),
    ("uint8", "int64", "int64"),
])
def test_promote_table(a, b, expected):
    assert dt.promote(a, b) == expected
    assert dt.promote(b, a) == expected


def test_expression_operands_are_promoted_and_cast():
    x = te.var("x", "int8")
    y = te.var("y", "float32")
    e = x + y
    assert e.dtype == "float32"
    assert isinstance(e.a, E.Cast) and e.a.dtype == "float32"


@pytest.mark.parametrize("var_dtype, literal, expected", [
    ("int8", 3, "int8"),
    ("int64", 3, "int64"),
    ("float64", 3, "float64"),
    ("float64", 0.5, "float64"),
    ("float32", 0.5, "float32"),
    ("int32", 0.5, "float32"),
    ("bool", 1, "int32"),
])
def test_python_literal_rules(var_dtype, literal, expected):
    v = te.var("v", var_dtype)
    assert (v + literal).dtype == expected
    assert (literal + v).dtype == expected


def test_comparisons_give_bool_and_constants_fold():
    x = te.var("x")
    assert (x < 3).dtype == "bool"
    c = te.const(2) * 3 + 1
    assert isinstance(c, E.Const) and c.value == 7


def test_integer_division_follows_floor_semantics_when_folded():
    assert (te.const(-7) // 2).value == -4
    assert (te.const(-7) % 2).value == 1
    assert te.truncdiv(te.const(-7), te.const(2)).value == -3
    assert te.truncmod(te.const(-7), te.const(2)).value == -1


def test_integer_true_division_is_refused():
    x = te.var("x")
    with pytest.raises(te.DTypeError, match="integer division with '/' is ambiguous"):
        x / 2


def test_astype_and_const_folding_of_casts():
    assert te.const(2.7, "float32").astype("int32").value == 2
    assert te.const(-2.7, "float32").astype("int32").value == -2
    assert te.const(3, "int32").astype("bool").value is True
    with pytest.raises(te.DTypeError, match="astype dtype: expected one of"):
        te.var("x").astype("float128")


def test_unknown_dtype_names_the_parameter():
    with pytest.raises(te.DTypeError, match="te.placeholder dtype: expected one of .* got 'f32'"):
        te.placeholder((3,), dtype="f32")


def test_math_intrinsics_need_floats():
    with pytest.raises(te.DTypeError,
                       match=r"te.exp: expected a float expression, got dtype int32"):
        te.exp(te.var("i"))


def test_expression_has_no_truth_value():
    with pytest.raises(te.TEError, match="no Python truth value"):
        if te.var("x") < 3:
            pass


def test_equality_builds_nodes_but_membership_uses_identity():
    x, y = te.var("x"), te.var("y")
    assert isinstance(x == y, E.Binary)
    assert x in [y, x]
    assert [y, x].index(x) == 1
    assert te.structural_equal(x + 1, x + 1)
    assert not te.structural_equal(x + 1, y + 1)
