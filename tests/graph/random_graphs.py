"""Seeded random DAGs built with the graph builder, for the O0 / O1 / onnxruntime property
tests (tests/graph/test_graph_random.py).

random_graph(seed) grows a graph step by step: each step picks an op kind, its operands
among the values made so far (the latest unread ones mostly, any one sometimes: diamonds)
and odd sizes. The kinds cover what level O1 rewrites and fuses: elementwise and
broadcasting ops, neutral constants (x*1, x+0, identities), chains on constants only,
repeated nodes, reductions, softmax, layer_norm, transpose/reshape chains, slices, concat,
split, pad, clip, matmul (batched, broadcast), gemm, conv2d, pools and batch_norm. Every
value carries an upper bound of its magnitude, so that no op overflows or leaves its
domain: exp sees bounded inputs, log/sqrt/reciprocal/divide see abs(x) + c, and a value
whose bound grows large is rescaled (random_graph_core holds that state, random_graph_nn
the nn steps). random_feeds(g, seed) gives inputs never near zero. Imports numpy, graph
and those two modules.
"""
from __future__ import annotations

import numpy as np
import random_graph_nn as nn_steps
from random_graph_core import MAX_ELEMENTS, ODD, Generator, broadcasts_to, random_feeds, size_of

import graph

__all__ = ["STEPS", "random_feeds", "random_graph"]

# op -> (attributes, bound of the result given the input's bound b)
SAFE_UNARY = {
    "relu": ({}, lambda b: b), "tanh": ({}, lambda b: 1.0), "sigmoid": ({}, lambda b: 1.0),
    "abs": ({}, lambda b: b), "negative": ({}, lambda b: b), "erf": ({}, lambda b: 1.0),
    "softsign": ({}, lambda b: 1.0), "elu": ({"alpha": 0.7}, lambda b: max(b, 0.7)),
    "leaky_relu": ({"alpha": 0.1}, lambda b: b), "selu": ({}, lambda b: 1.06 * max(b, 1.76)),
    "hard_sigmoid": ({"alpha": 0.3, "beta": 0.4}, lambda b: 1.0),
    "hard_swish": ({}, lambda b: b), "gelu": ({}, lambda b: b),
    "softplus": ({}, lambda b: b + 1.0), "exp": ({}, np.exp),
}
REDUCE_BOUND = {
    "reduce_sum": lambda b, n: b * n, "reduce_mean": lambda b, n: b,
    "reduce_max": lambda b, n: b, "reduce_min": lambda b, n: b,
    "reduce_l1": lambda b, n: b * n, "reduce_l2": lambda b, n: b * np.sqrt(n),
    "reduce_sum_square": lambda b, n: b * b * n, "reduce_prod": lambda b, n: b ** n,
}


# ---- the steps: each takes the generator and a value, returns the new value or None ----

def _unary(gen, v):
    op = str(gen.rng.choice(list(SAFE_UNARY)))
    attrs, bound = SAFE_UNARY[op]
    if op in ("exp", "softplus"):
        v = gen.tame(v, 4.0)
    return gen.add(graph.apply(op, [v], attrs), bound(gen.b(v)))


def _guarded(gen, v):
    """log, sqrt, reciprocal, power, divide on abs(.) + c."""
    kind = int(gen.rng.integers(5))
    if kind == 0:
        p = gen.positive(v)
        return gen.add(graph.log(p), max(np.log(gen.b(p)), 0.7))
    if kind == 1:
        p = gen.positive(v, 0.1)
        return gen.add(graph.sqrt(p), np.sqrt(gen.b(p)))
    if kind == 2:
        return gen.add(graph.reciprocal(gen.positive(v)), 2.0)
    if kind == 3:
        p = gen.positive(gen.tame(v, 4.0))
        e = float(gen.rng.choice([2.0, 0.5, 3.0, -1.5]))
        return gen.add(graph.power(p, np.float32(e)), max(gen.b(p) ** e, 2.0 ** -e))
    return gen.add(graph.divide(v, gen.positive(gen.partner(v))), 2.0 * gen.b(v))


def _binary(gen, v):
    op = str(gen.rng.choice(["add", "subtract", "multiply", "maximum", "minimum", "prelu"]))
    if op == "prelu":  # the slope broadcasts to x (ONNX PRelu is unidirectional)
        return gen.add(graph.prelu(v, gen.const(gen.sub_shape(v.shape))), gen.b(v) * 1.5)
    u = gen.partner(v)
    a, b = (v, u) if gen.rng.random() < 0.7 else (u, v)
    bound = gen.b(a) * gen.b(b) if op == "multiply" else gen.b(a) + gen.b(b)
    return gen.add(graph.apply(op, [a, b]), bound)


def _neutral(gen, v):
    """x*1, 1*x, x+0, x-0, x/1 with neutral constants of several shapes (one that widens
    x must stay), an identity or a cast to the same dtype."""
    kind = int(gen.rng.integers(4))
    if kind == 0:
        return gen.add(graph.identity(v), gen.b(v))
    if kind == 1:
        return gen.add(graph.cast(v, "float32"), gen.b(v))
    op, value = [("multiply", 1), ("add", 0), ("subtract", 0), ("divide", 1)][
        int(gen.rng.integers(4))]
    shape = [(), v.shape, gen.sub_shape(v.shape), (2,) + tuple(v.shape)][
        int(gen.rng.integers(4 if len(v.shape) < 4 else 3))]
    c = graph.constant(np.full(shape, value, dtype="float32"))
    args = [c, v] if op in ("multiply", "add") and gen.rng.random() < 0.5 else [v, c]
    return gen.add(graph.apply(op, args), gen.b(v))


def _constant_chain(gen, v):
    """A subgraph fed only by constants (folded at O1), then combined with v."""
    shape = gen.sub_shape(v.shape)
    c = gen.const(shape[::-1])
    if len(shape) > 1:
        c = graph.transpose(c, tuple(range(len(shape)))[::-1])
    c = graph.tanh(graph.multiply(c, gen.const((), 0.5, 1.0)))
    if gen.rng.random() < 0.5:
        c = graph.reshape(graph.exp(c), shape)
    op = "add" if gen.rng.random() < 0.5 else "multiply"
    return gen.add(graph.apply(op, [v, c]), gen.b(v) * 3.0 if op == "multiply" else
                   gen.b(v) + 3.0)


def _repeated(gen, v):
    """The same node twice (CSE), both results used."""
    op = str(gen.rng.choice(["tanh", "sigmoid", "relu"]))
    a, b = graph.apply(op, [v]), graph.apply(op, [v])
    bound = SAFE_UNARY[op][1](gen.b(v))
    return gen.add(graph.subtract(graph.multiply(a, np.float32(3.0)), b), 4.0 * bound)


def _reduce(gen, v):
    op = str(gen.rng.choice(list(REDUCE_BOUND)))
    n_axes = int(gen.rng.integers(1, len(v.shape) + 1))
    axes = sorted(gen.rng.choice(len(v.shape), n_axes, replace=False).tolist())
    count = size_of([v.shape[a] for a in axes])
    if op == "reduce_prod":
        if count > 16:
            return None
        v = gen.add(graph.tanh(v) if gen.rng.random() < 0.5 else graph.sigmoid(v), 1.0)
    # te declares no 0-d tensor: reducing every axis keeps them
    keepdims = bool(gen.rng.random() < 0.5) or n_axes == len(v.shape)
    if gen.rng.random() < 0.3:  # negative axes in the call
        axes = [a - len(v.shape) for a in axes]
    out = graph.REDUCE_FUNCTIONS[op](v, axis=axes, keepdims=keepdims)
    return gen.add(out, REDUCE_BOUND[op](gen.b(v), count))


def _softmax(gen, v):
    if len(v.shape) < 2:  # te's softmax refuses a vector (ONNX allows it)
        return None
    axis = int(gen.rng.integers(-len(v.shape), len(v.shape)))
    if gen.rng.random() < 0.7:
        return gen.add(graph.nn.softmax(v, axis), 1.0)
    n = v.shape[axis]
    return gen.add(graph.nn.log_softmax(v, axis), 2.0 * gen.b(v) + np.log(n))


def _transpose(gen, v):
    perm = tuple(gen.rng.permutation(len(v.shape)).tolist())
    out = gen.add(graph.transpose(v, perm), gen.b(v))
    if gen.rng.random() < 0.3:  # a chain: back to v's order, or on to another one
        back = tuple(np.argsort(perm).tolist()) if gen.rng.random() < 0.5 else tuple(
            gen.rng.permutation(len(v.shape)).tolist())
        out = gen.add(graph.transpose(out, back), gen.b(v))
    return out


def _reshape(gen, v):
    kind = int(gen.rng.integers(3))
    if kind == 0 and len(v.shape) < 4:
        out = graph.unsqueeze(v, int(gen.rng.integers(len(v.shape) + 1)))
    elif kind == 1 and 1 in v.shape:
        out = graph.squeeze(v)
    else:
        out = graph.reshape(v, gen.random_shape(size_of(v.shape)))
    if gen.rng.random() < 0.3:  # a chain
        out = graph.reshape(out, gen.random_shape(size_of(v.shape)))
    return gen.add(out, gen.b(v))


def _slice(gen, v):
    axes = [a for a in range(len(v.shape)) if v.shape[a] >= 2]
    if not axes:
        return None
    axes = sorted(gen.rng.choice(axes, int(gen.rng.integers(1, min(2, len(axes)) + 1)),
                                 replace=False).tolist())
    starts, ends, steps = [], [], []
    for a in axes:
        d = v.shape[a]
        if gen.rng.random() < 0.15:  # reversed
            starts.append(-1)
            ends.append(-d - 1)
            steps.append(-1)
            continue
        b = int(gen.rng.integers(0, d - 1))
        e = int(gen.rng.integers(b + 1, d + 1))
        starts.append(b - d if gen.rng.random() < 0.3 else b)
        ends.append(e)
        steps.append(int(gen.rng.choice([1, 2])))
    return gen.add(graph.slice(v, starts, ends, axes, steps), gen.b(v))


def _concat(gen, v):
    axis = int(gen.rng.integers(len(v.shape)))
    fits = [u for u in gen.pool if u is not v and len(u.shape) == len(v.shape)
            and all(a == b for k, (a, b) in enumerate(zip(u.shape, v.shape)) if k != axis)]
    if fits and gen.rng.random() < 0.5:
        u = fits[int(gen.rng.integers(len(fits)))]
    elif gen.rng.random() < 0.5:  # a diamond: v and a function of v
        u = gen.add(graph.tanh(v), 1.0)
    else:
        shape = list(v.shape)
        shape[axis] = int(gen.rng.choice(ODD))
        u = gen.const(tuple(shape))
    out = graph.concatenate([v, u] if gen.rng.random() < 0.5 else [u, v], axis)
    if size_of(out.shape) > MAX_ELEMENTS:
        return None
    return gen.add(out, max(gen.b(v), gen.b(u)))


def _split(gen, v):
    axes = [a for a in range(len(v.shape)) if v.shape[a] >= 2]
    if not axes:
        return None
    axis = int(gen.rng.choice(axes))
    first = int(gen.rng.integers(1, v.shape[axis]))
    a, b = graph.split(v, (first, v.shape[axis] - first), axis)
    out = gen.add(b if gen.rng.random() < 0.5 else a, gen.b(v))
    if gen.rng.random() < 0.5:  # both pieces read
        gen.add(a, gen.b(v))
    return out


def _expand(gen, v):
    if len(v.shape) >= 4:
        return None
    shape = (int(gen.rng.choice(ODD)),) + tuple(
        int(gen.rng.choice(ODD)) if d == 1 else d for d in v.shape)
    if size_of(shape) > MAX_ELEMENTS:
        return None
    return gen.add(graph.expand(v, shape), gen.b(v))


def _where(gen, v):
    """where(x > c, v, u) on a graph input x: the condition is exact at every level."""
    xs = [x for x in gen.inputs if broadcasts_to(x.shape, v.shape)]
    x = xs[int(gen.rng.integers(len(xs)))] if xs else gen.new_input(gen.sub_shape(v.shape))
    cond = graph.greater(x, np.float32(gen.rng.uniform(-0.5, 0.5)))
    u = gen.partner(v)
    return gen.add(graph.where(cond, v, u), max(gen.b(v), gen.b(u)))


def _pad_or_clip(gen, v):
    if gen.rng.random() < 0.5:
        lo = float(gen.rng.uniform(-1.0, 0.0))
        hi = None if gen.rng.random() < 0.3 else float(gen.rng.uniform(0.1, 1.0))
        return gen.add(graph.clip(v, lo, hi), max(abs(lo), hi or gen.b(v)))
    before = [int(gen.rng.integers(0, 3)) for _ in v.shape]
    after = [int(gen.rng.integers(0, 3)) for _ in v.shape]
    value = float(gen.rng.choice([0.0, 0.5]))
    out = graph.pad(v, before, after, value)
    if size_of(out.shape) > MAX_ELEMENTS:
        return None
    return gen.add(out, max(gen.b(v), value))


# kind -> (weight, step); a step returns None where it does not fit the value
STEPS = {
    "unary": (4, _unary), "guarded": (2, _guarded), "binary": (5, _binary),
    "neutral": (4, _neutral), "constant_chain": (3, _constant_chain), "repeated": (1, _repeated),
    "reduce": (3, _reduce), "softmax": (2, _softmax), "transpose": (2, _transpose),
    "reshape": (2, _reshape), "slice": (2, _slice), "concat": (2, _concat), "split": (1, _split),
    "expand": (1, _expand), "where": (1, _where), "matmul": (3, nn_steps.matmul),
    "gemm": (1, nn_steps.gemm), "conv": (1, nn_steps.conv), "pool": (1, nn_steps.pool),
    "batch_norm": (1, nn_steps.batch_norm), "layer_norm": (1, nn_steps.layer_norm),
    "pad_or_clip": (1, _pad_or_clip),
}


def random_graph(seed: int, n_steps: int = 10):
    """A random graph.Graph of `n_steps` steps (a step adds 1 to 4 nodes) with 2 or 3
    outputs: the last value, then values nothing reads, else earlier ones."""
    gen = Generator(seed)
    rank = int(gen.rng.integers(1, 5))
    gen.new_input(tuple(int(gen.rng.choice(ODD)) for _ in range(rank)))
    kinds = list(STEPS)
    weights = np.array([STEPS[k][0] for k in kinds], dtype=float)
    made = 0
    while made < n_steps:
        kind = str(gen.rng.choice(kinds, p=weights / weights.sum()))
        if STEPS[kind][1](gen, gen.tame(gen.pick())) is not None:
            made += 1
    last = gen.pool[-1]
    # the other outputs: values nothing reads first, then any made value
    made = [u for u in gen.unread() if u.node is not None and u is not last][::-1]
    made += [u for u in gen.pool if u.node is not None and u is not last and u not in made]
    n_more = min(len(made), int(gen.rng.integers(1, 3)))
    return graph.Graph([last] + made[:n_more], name=f"random_{seed}")
