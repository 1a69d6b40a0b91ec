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
whose bound grows large is rescaled. random_feeds(g, seed) gives inputs never near zero.
Imports numpy and graph.
"""
from __future__ import annotations

import numpy as np

import graph

MAX_ELEMENTS = 2048   # per value: kernels stay quick to run, compile time dominates
MAX_BOUND = 64.0      # a larger value is rescaled by a constant first
ODD = (3, 5, 7)

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


def _size(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class _Generator:
    def __init__(self, seed: int):
        self.rng = np.random.default_rng(seed)
        self.pool: list = []      # float32 values made by nodes (and the inputs)
        self.bound: dict = {}     # id(value) -> an upper bound of |value|
        self.inputs: list = []
        self.read: set = set()    # ids of the values some node reads

    # -- values ---------------------------------------------------------------------------

    def add(self, v, bound: float):
        """Record v's bound; v may be an operand of later steps unless it is 0-d (an
        abs(c) + 0.5 on a scalar constant): te declares no 0-d tensor, so the steps that
        reduce or move axes have nothing to work on."""
        self.bound[id(v)] = float(bound)
        if v.node is not None:
            self.read.update(id(u) for u in v.node.inputs)
        if v.shape:
            self.pool.append(v)
        return v

    def new_input(self, shape):
        v = graph.input(f"x{len(self.inputs)}", tuple(shape))
        self.inputs.append(v)
        return self.add(v, 2.0)

    def const(self, shape, low: float = 0.25, high: float = 1.5):
        """A constant of random sign, |c| in [low, high)."""
        data = self.rng.uniform(low, high, shape) * self.rng.choice([-1.0, 1.0], shape)
        v = graph.constant(np.asarray(data, dtype="float32"))
        self.bound[id(v)] = high
        return v

    def b(self, v) -> float:
        return self.bound[id(v)]

    def unread(self) -> list:
        """The values no node reads yet (the graph keeps only what reaches an output)."""
        return [u for u in self.pool if id(u) not in self.read]

    def pick(self):
        """The latest unread value mostly (a chain that keeps the steps alive), any value
        sometimes (a diamond)."""
        unread = self.unread()
        if unread and self.rng.random() < 0.7:
            return unread[-1 - int(self.rng.integers(min(2, len(unread))))]
        return self.pool[int(self.rng.integers(len(self.pool)))]

    def tame(self, v, limit: float = MAX_BOUND):
        """v itself, or v rescaled by a constant when its bound passed `limit`."""
        if self.b(v) <= limit:
            return v
        return self.add(graph.multiply(v, np.float32(1.0 / self.b(v))), 1.0)

    def sub_shape(self, shape) -> tuple:
        """A shape that broadcasts to `shape`: leading axes dropped, some axes 1."""
        shape = tuple(shape)[int(self.rng.integers(len(shape) + 1)):]
        return tuple(1 if self.rng.random() < 0.4 else d for d in shape)

    def partner(self, v, same_shape: bool = False):
        """A second operand for v: a made value that broadcasts with it (no bigger than v),
        else a constant or a new input of a shape broadcasting to v's."""
        fits = [u for u in self.pool if u is not v and (
            u.shape == v.shape if same_shape else _broadcasts_to(u.shape, v.shape))]
        roll = self.rng.random()
        if fits and roll < 0.5:
            return fits[int(self.rng.integers(len(fits)))]
        shape = v.shape if same_shape else self.sub_shape(v.shape)
        if roll < 0.8 or not shape:
            return self.const(shape)
        return self.new_input(shape)

    def positive(self, v, c: float = 0.5):
        """abs(v) + c: a value safely inside the domain of log, sqrt, reciprocal, divide."""
        a = self.add(graph.abs(v), self.b(v))
        return self.add(graph.add(a, np.float32(c)), self.b(v) + c)

    def random_shape(self, size: int) -> tuple:
        """A random shape of rank 1 to 4 with `size` elements."""
        factors = [p for p in _prime_factors(size)]
        self.rng.shuffle(factors)
        dims = [1] * int(self.rng.integers(1, 5))
        for p in factors:
            dims[int(self.rng.integers(len(dims)))] *= p
        return tuple(dims)


def _prime_factors(n: int) -> list:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def _broadcasts_to(small, big) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(small[::-1], big[::-1]))


def random_feeds(g, seed: int) -> dict:
    """Inputs of random sign with |x| in [0.25, 2): never zero."""
    rng = np.random.default_rng(seed + 10_000)
    return {v.name: np.asarray(rng.uniform(0.25, 2.0, v.shape)
                               * rng.choice([-1.0, 1.0], v.shape), dtype=v.dtype)
            for v in g.inputs}


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
    count = _size([v.shape[a] for a in axes])
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
        out = graph.reshape(v, gen.random_shape(_size(v.shape)))
    if gen.rng.random() < 0.3:  # a chain
        out = graph.reshape(out, gen.random_shape(_size(v.shape)))
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
    if _size(out.shape) > MAX_ELEMENTS:
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
    if _size(shape) > MAX_ELEMENTS:
        return None
    return gen.add(graph.expand(v, shape), gen.b(v))


def _where(gen, v):
    """where(x > c, v, u) on a graph input x: the condition is exact at every level."""
    xs = [x for x in gen.inputs if _broadcasts_to(x.shape, v.shape)]
    x = xs[int(gen.rng.integers(len(xs)))] if xs else gen.new_input(gen.sub_shape(v.shape))
    cond = graph.greater(x, np.float32(gen.rng.uniform(-0.5, 0.5)))
    u = gen.partner(v)
    return gen.add(graph.where(cond, v, u), max(gen.b(v), gen.b(u)))


def _matmul(gen, v):
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
            and _broadcasts_to(u.shape[:-2], batch)]
    if fits and gen.rng.random() < 0.3:
        w = fits[int(gen.rng.integers(len(fits)))]
    elif gen.rng.random() < 0.7:
        w = gen.const(wshape)
    else:
        w = gen.new_input(wshape)
    out = graph.nn.matmul(v, w)
    if _size(out.shape) > MAX_ELEMENTS:
        return None
    return gen.add(out, k * gen.b(v) * gen.b(w))


def _gemm(gen, v):
    if len(v.shape) != 2:
        return None
    k, n = v.shape[1], int(gen.rng.choice(ODD))
    trans_b = bool(gen.rng.random() < 0.5)
    w = gen.const((n, k) if trans_b else (k, n))
    c = gen.const(((n,), (1, n), (v.shape[0], n))[int(gen.rng.integers(3))])
    alpha, beta = float(gen.rng.choice([1.0, 0.5])), float(gen.rng.choice([1.0, -2.0]))
    out = graph.nn.gemm(v, w, c, alpha=alpha, beta=beta, trans_b=trans_b)
    return gen.add(out, abs(alpha) * k * gen.b(v) * 1.5 + abs(beta) * 1.5)


def _image(gen, v):
    """A rank-4 NCHW value with spatial sizes >= 3: v itself, or a new input."""
    if len(v.shape) == 4 and min(v.shape[2:]) >= 3 and v.shape[1] <= 8:
        return v
    return gen.new_input((int(gen.rng.integers(1, 3)), int(gen.rng.choice([2, 3, 4])),
                          int(gen.rng.choice(ODD + (9,))), int(gen.rng.choice(ODD + (8,)))))


def _conv(gen, v):
    x = _image(gen, v)
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


def _pool(gen, v):
    x = _image(gen, v)
    k = int(gen.rng.choice([2, 3]))
    kind = int(gen.rng.integers(3))
    if kind == 2:
        return gen.add(graph.nn.global_avg_pool2d(x), gen.b(x))
    pool = graph.nn.max_pool2d if kind == 0 else graph.nn.avg_pool2d
    return gen.add(pool(x, k, strides=int(gen.rng.choice([1, 2])),
                        padding=int(gen.rng.integers(0, k))), gen.b(x))


def _batch_norm(gen, v):
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


def _layer_norm(gen, v):
    if len(v.shape) < 2:  # te's layer_norm keeps one axis unnormalized (ONNX need not)
        return None
    first = int(gen.rng.integers(1, len(v.shape)))
    if _size(v.shape[first:]) < 2:  # one element: its deviation is 0 (ill-posed)
        return None
    trailing = tuple(v.shape[first:])
    out = graph.nn.layer_norm(v, gen.const(trailing), gen.const(trailing),
                              axis=first - len(v.shape) if gen.rng.random() < 0.5 else first)
    return gen.add(out, 1.5 * np.sqrt(_size(trailing)) + 1.5)


def _pad_or_clip(gen, v):
    if gen.rng.random() < 0.5:
        lo = float(gen.rng.uniform(-1.0, 0.0))
        hi = None if gen.rng.random() < 0.3 else float(gen.rng.uniform(0.1, 1.0))
        return gen.add(graph.clip(v, lo, hi), max(abs(lo), hi or gen.b(v)))
    before = [int(gen.rng.integers(0, 3)) for _ in v.shape]
    after = [int(gen.rng.integers(0, 3)) for _ in v.shape]
    value = float(gen.rng.choice([0.0, 0.5]))
    out = graph.pad(v, before, after, value)
    if _size(out.shape) > MAX_ELEMENTS:
        return None
    return gen.add(out, max(gen.b(v), value))


# kind -> (weight, step); a step returns None where it does not fit the value
STEPS = {
    "unary": (4, _unary), "guarded": (2, _guarded), "binary": (5, _binary),
    "neutral": (4, _neutral), "constant_chain": (3, _constant_chain), "repeated": (1, _repeated),
    "reduce": (3, _reduce), "softmax": (2, _softmax), "transpose": (2, _transpose),
    "reshape": (2, _reshape), "slice": (2, _slice), "concat": (2, _concat), "split": (1, _split),
    "expand": (1, _expand), "where": (1, _where), "matmul": (3, _matmul), "gemm": (1, _gemm),
    "conv": (1, _conv), "pool": (1, _pool), "batch_norm": (1, _batch_norm),
    "layer_norm": (1, _layer_norm), "pad_or_clip": (1, _pad_or_clip),
}


def random_graph(seed: int, n_steps: int = 10):
    """A random graph.Graph of `n_steps` steps (a step adds 1 to 4 nodes) with 2 or 3
    outputs: the last value, then values nothing reads, else earlier ones."""
    gen = _Generator(seed)
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
