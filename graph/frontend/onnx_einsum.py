"""The ONNX Einsum converter, composed of table ops: repeated labels of one operand become a
diagonal (transpose, reshape, take), labels no one else needs are summed out (reduce_sum),
and the operands are contracted pairwise, left to right, by one batched matmul each
(transpose and reshape around it; a multiply where a pair shares no summed label); a last
transpose gives the output's label order.

Like numpy.einsum: explicit and implicit ("ij,jk") equations, spaces anywhere, "..." for
right-aligned broadcast dims, and size-1 dims broadcasting against any size.
Imports numpy, graph's builder, nn and transform modules and graph.frontend.onnx_base.
"""
from __future__ import annotations

import numpy as np

from .. import builder, nn, transform
from ..builder import apply
from .onnx_base import Refused, row


def _split(term: str, where: str) -> tuple:
    """(letters before '...', whether there is one, letters after) of one term."""
    head, dots, tail = term.partition("...")
    if not all(c.isalpha() and c.isascii() for c in head + tail):
        raise Refused("equation", f"{where} '{term}' may hold letters and one '...' only")
    return head, bool(dots), tail


def _labels(term: str, rank: int, where: str) -> list:
    """A term's labels, one per dim; the dims an ellipsis covers get the labels ".1" (the
    last of them), ".2", ...: counted from the right, as they broadcast."""
    head, dots, tail = _split(term, where)
    n = rank - len(head) - len(tail)
    if n < 0 or (n and not dots):
        raise Refused("equation", f"{where} '{term}' has {len(head) + len(tail)} labels but "
                                  f"the operand has rank {rank}")
    return list(head) + [f".{k}" for k in range(n, 0, -1)] + list(tail)


def _parse(equation: str, ins) -> tuple:
    """([labels of each operand], output labels) of `equation` on the operands `ins`."""
    lhs, arrow, rhs = equation.replace(" ", "").partition("->")
    terms = lhs.split(",")
    if len(terms) != len(ins):
        raise Refused("equation", f"'{equation}' has {len(terms)} operand term(s) but the "
                                  f"node has {len(ins)} input(s)")
    labels = [_labels(t, len(x.shape), f"operand {k}")
              for k, (t, x) in enumerate(zip(terms, ins))]
    flat = [c for ls in labels for c in ls]
    dots = sorted({c for c in flat if c.startswith(".")}, key=lambda c: -int(c[1:]))
    if not arrow:  # implicit: the ellipsis dims, then the labels used once, alphabetically
        return labels, dots + sorted(c for c in set(flat) - set(dots) if flat.count(c) == 1)
    head, has_dots, tail = _split(rhs, "the output")
    if dots and not has_dots:
        raise Refused("equation", f"'{equation}': the operands have '...' dims but the "
                                  f"output has no '...'")
    out = list(head) + dots + list(tail)
    for c in out:
        if out.count(c) > 1 or c not in flat:
            raise Refused("equation", f"'{equation}': output label '{c}' is repeated or in "
                                      f"no operand")
    return labels, out


def _sizes(equation: str, ins, labels) -> dict:
    """Each label's size: equal within an operand, equal or 1 (broadcast) across them."""
    size: dict = {}
    for k, (x, ls) in enumerate(zip(ins, labels)):
        if any(not isinstance(d, int) for d in x.shape):
            raise Refused("", f"input {k} has a symbolic shape {x.shape}; Einsum needs "
                              f"static shapes")
        mine: dict = {}
        for c, d in zip(ls, x.shape):
            if mine.setdefault(c, d) != d:
                raise Refused("equation", f"'{equation}': label '{c}' of operand {k} has "
                                          f"sizes {mine[c]} and {d}")
            if size.setdefault(c, d) != d and 1 not in (size[c], d):
                raise Refused("equation", f"'{equation}': label '{c}' has sizes {size[c]} "
                                          f"and {d}, which do not broadcast")
            size[c] = max(size[c], d)
    return size


def _permute(x, labels: list, order: list, name: str):
    """x with its dims (named by `labels`, distinct) in the label order `order`."""
    perm = [labels.index(c) for c in order]
    return x if perm == sorted(perm) else transform.transpose(x, perm, name=name)


def _reshape(x, shape, name: str):
    shape = tuple(int(d) for d in shape)
    return x if tuple(x.shape) == shape else transform.reshape(x, shape, name=name)


def _diagonal(x, labels: list, name: str) -> tuple:
    """(x, labels) with each repeated label taken once: the diagonal along its dims, got
    by moving the two dims last, flattening them and taking every (n + 1)-th element."""
    for j, c in enumerate(sorted({c for c in labels if labels.count(c) > 1})):
        while labels.count(c) > 1:
            p = labels.index(c)
            q = labels.index(c, p + 1)
            rest = [i for i in range(len(labels)) if i not in (p, q)]
            n = x.shape[p]
            pre = f"{name}/diag{j}_{len(labels)}"
            if rest + [p, q] != list(range(len(labels))):
                x = transform.transpose(x, rest + [p, q], name=f"{pre}/t")
            x = _reshape(x, [x.shape[i] for i in range(len(rest))] + [n * n], f"{pre}/r")
            idx = builder.constant(np.arange(n, dtype=np.int64) * (n + 1), name=f"{pre}/i")
            x = transform.take(x, idx, axis=len(rest), name=pre)
            labels = [labels[i] for i in rest] + [c]
    return x, labels


def _sum_out(x, labels: list, keep: set, name: str) -> tuple:
    """(x, labels) summed over the labels not in `keep`."""
    axes = [i for i, c in enumerate(labels) if c not in keep]
    if not axes:
        return x, labels
    if len(axes) == len(labels):  # a 0-d result: te declares none, so keep dims, reshape
        s = builder.REDUCE_FUNCTIONS["reduce_sum"](x, axes, True, name=f"{name}/keep")
        return transform.reshape(s, (), name=name), []
    s = builder.REDUCE_FUNCTIONS["reduce_sum"](x, axes, False, name=name)
    return s, [c for c in labels if c in keep]


def _drop(x, labels: list, c: str, name: str) -> tuple:
    """(x, labels) without the size-1 dim of label c."""
    k = labels.index(c)
    return _reshape(x, x.shape[:k] + x.shape[k + 1:], name), labels[:k] + labels[k + 1:]


def _contract(a: tuple, b: tuple, keep: set, name: str) -> tuple:
    """The product of operands a and b, (value, labels) each, summed over the labels they
    share that `keep` (the output's and later operands' labels) lacks."""
    (x, xl), (y, yl) = a, b
    for c in [c for c in xl if c in yl]:  # a size-1 dim broadcasts: the other side has it
        if x.shape[xl.index(c)] < y.shape[yl.index(c)]:
            x, xl = _drop(x, xl, c, f"{name}/a_drop_{c}")
        elif y.shape[yl.index(c)] < x.shape[xl.index(c)]:
            y, yl = _drop(y, yl, c, f"{name}/b_drop_{c}")
    x, xl = _sum_out(x, xl, keep | set(yl), f"{name}/a_sum")
    y, yl = _sum_out(y, yl, keep | set(xl), f"{name}/b_sum")
    batch = [c for c in xl if c in yl and c in keep]
    summed = [c for c in xl if c in yl and c not in keep]
    left = [c for c in xl if c not in yl]
    right = [c for c in yl if c not in xl]
    size = dict(zip(xl, x.shape)) | dict(zip(yl, y.shape))
    dims = lambda cs: [size[c] for c in cs]  # noqa: E731
    bs, nl, nr = dims(batch), len(left), len(right)
    if not summed:  # a broadcast product: an elementwise multiply, not a matmul
        x = _reshape(_permute(x, xl, batch + left, f"{name}/a_t"), bs + dims(left) + [1] * nr,
                     f"{name}/a_r")
        y = _reshape(_permute(y, yl, batch + right, f"{name}/b_t"),
                     bs + [1] * nl + dims(right), f"{name}/b_r")
        return apply("multiply", [x, y], {}, f"{name}/mul"), batch + left + right
    x = _reshape(_permute(x, xl, batch + left + summed, f"{name}/a_t"),
                 bs + [np.prod(dims(left)), np.prod(dims(summed))], f"{name}/a_r")
    y = _reshape(_permute(y, yl, batch + summed + right, f"{name}/b_t"),
                 bs + [np.prod(dims(summed)), np.prod(dims(right))], f"{name}/b_r")
    z = nn.matmul(x, y, name=f"{name}/matmul")
    return _reshape(z, bs + dims(left) + dims(right), f"{name}/r"), batch + left + right


def _einsum(ins, attrs, opset, outs):
    if "equation" not in attrs:
        raise Refused("equation", "the required attribute 'equation' is missing")
    equation = attrs["equation"]
    labels, out = _parse(equation, ins)
    if len({x.dtype for x in ins}) > 1:
        raise Refused("", f"the inputs' dtypes differ: {[x.dtype for x in ins]}")
    size = _sizes(equation, ins, labels)
    if ins[0].dtype == "float16" and any(size[c] > 1 for c in set(size) - set(out)):
        # float16 sums round differently from ONNX's reference (see FLOAT16_ACCUMULATING)
        raise Refused("", "float16 inputs are not supported where Einsum sums")
    name = outs[0]
    ops = [_diagonal(x, ls, f"{name}/{k}") for k, (x, ls) in enumerate(zip(ins, labels))]
    x, xl = ops[0]
    for k in range(1, len(ops)):
        keep = set(out).union(*(ls for _, ls in ops[k + 1:]))
        x, xl = _contract((x, xl), ops[k], keep, f"{name}/{k}")
    x, xl = _sum_out(x, xl, set(out), f"{name}/sum")
    if xl == out:
        return [apply("identity", [x], {}, name)]
    return [transform.transpose(x, [xl.index(c) for c in out], name=name)]


EINSUM_CONVERTERS = {"Einsum": row(_einsum, "equation")}
