"""The random-graph steps of the nn ops (tests/graph/random_graphs.py): matmul (batched,
broadcast), gemm, conv2d, pools, batch_norm and layer_norm, each with the bound of its
result. Imports numpy, graph and random_graph_core.
"""
from __future__ import annotations

import numpy as np
from random_graph_core import MAX_ELEMENTS, ODD, broadcasts_to, size_of

import graph


def matmul(gen, v):
    """v @ w: w a constant, an input or a made value; batch axes broadcast either way."""
    if not v.shape:
        return None
    k, n = v.shape[-1], int(gen.rng.choice(ODD))
    batch = tuple(v.shape[:-2])
    roll = gen.rng.random()
    if len(v.shape) == 1 or roll < 0.4:
        wshape = (k, n)                                   # a weight matrix
    elif roll < 0.7 and len(v.shape) < 4:
        wshape = (int(gen.rng.choice(ODD)),) + (1,) * len(batch) + (k, n)  # lhs broadcasts
    else:
        wshape = gen.sub_shape(batch) + (k, n)            # rhs broadcasts
    fits = [u for u in gen.pool if len(u.shape) >= 2 and u.shape[-2] == k
            and broadcasts_to(u.shape[:-2], batch)]
    if fits and gen.rng.random() < 0.3:
        w = fits[int(gen.rng.integers(len(fits)))]
    elif gen.rng.random() < 0.7:
        w = gen.const(wshape)
    else:
        w = gen.new_input(wshape)
    out = graph.nn.matmul(v, w)
    if size_of(out.shape) > MAX_ELEMENTS:
        return None
    return gen.add(out, k * gen.b(v) * gen.b(w))


def gemm(gen, v):
    if len(v.shape) != 2:
        return None
    k, n = v.shape[1], int(gen.rng.choice(ODD))
    trans_b = bool(gen.rng.random() < 0.5)
    w = gen.const((n, k) if trans_b else (k, n))
    c = gen.const(((n,), (1, n), (v.shape[0], n))[int(gen.rng.integers(3))])
    alpha, beta = float(gen.rng.choice([1.0, 0.5])), float(gen.rng.choice([1.0, -2.0]))
    out = graph.nn.gemm(v, w, c, alpha=alpha, beta=beta, trans_b=trans_b)
    return gen.add(out, abs(alpha) * k * gen.b(v) * 1.5 + abs(beta) * 1.5)


def image(gen, v):
    """A rank-4 NCHW value with spatial sizes >= 3: v itself, or a new input."""
    if len(v.shape) == 4 and min(v.shape[2:]) >= 3 and v.shape[1] <= 8:
        return v
    return gen.new_input((int(gen.rng.integers(1, 3)), int(gen.rng.choice([2, 3, 4])),
                          int(gen.rng.choice(ODD + (9,))), int(gen.rng.choice(ODD + (8,)))))


def conv(gen, v):
    x = image(gen, v)
    c = x.shape[1]
    groups = c if gen.rng.random() < 0.3 else 1
    oc = c if groups > 1 else int(gen.rng.choice([2, 3, 4]))
    kh, kw = int(gen.rng.choice([1, 3])), int(gen.rng.choice([1, 3]))
    dilation = int(gen.rng.choice([1, 2])) if min(x.shape[2:]) >= 5 else 1
    padding = int(gen.rng.integers(0, 2))
    if min(x.shape[2:]) + 2 * padding < dilation * 2 + 1:
        dilation = 1
    w = gen.const((oc, c // groups, kh, kw))
    bias = gen.const((oc,)) if gen.rng.random() < 0.5 else None
    out = graph.nn.conv2d(x, w, bias, strides=int(gen.rng.choice([1, 2])), padding=padding,
                          dilation=dilation, groups=groups)
    return gen.add(out, (c // groups) * kh * kw * gen.b(x) * 1.5 + 1.5)


def pool(gen, v):
    x = image(gen, v)
    k = int(gen.rng.choice([2, 3]))
    kind = int(gen.rng.integers(3))
    if kind == 2:
        return gen.add(graph.nn.global_avg_pool2d(x), gen.b(x))
    pool = graph.nn.max_pool2d if kind == 0 else graph.nn.avg_pool2d
    return gen.add(pool(x, k, strides=int(gen.rng.choice([1, 2])),
                        padding=int(gen.rng.integers(0, k))), gen.b(x))


def batch_norm(gen, v):
    if len(v.shape) < 2:
        return None
    c = v.shape[1]
    scale, shift, mean = gen.const((c,)), gen.const((c,)), gen.const((c,))
    var = gen.const((c,), 0.5, 2.0)
    if var.data.min() < 0:
        var = graph.constant(np.abs(var.data))
        gen.bound[id(var)] = 2.0
    return gen.add(graph.nn.batch_norm(v, scale, shift, mean, var),
                   (gen.b(v) + 1.5) * 1.5 / np.sqrt(0.5) + 1.5)


def layer_norm(gen, v):
    if len(v.shape) < 2:  # te's layer_norm keeps one axis unnormalized (ONNX need not)
        return None
    first = int(gen.rng.integers(1, len(v.shape)))
    if size_of(v.shape[first:]) < 2:  # one element: its deviation is 0 (ill-posed)
        return None
    trailing = tuple(v.shape[first:])
    out = graph.nn.layer_norm(v, gen.const(trailing), gen.const(trailing),
                              axis=first - len(v.shape) if gen.rng.random() < 0.5 else first)
    return gen.add(out, 1.5 * np.sqrt(size_of(trailing)) + 1.5)
