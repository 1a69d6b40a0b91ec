"""The random-graph generator's state (tests/graph/random_graphs.py): the values made so
far with an upper bound of each one's magnitude, which values no node reads yet, constants
and inputs of odd sizes, and random_feeds (inputs never near zero). Imports numpy and graph.
"""
from __future__ import annotations

import numpy as np

import graph

MAX_ELEMENTS = 2048   # per value: kernels stay quick to run, compile time dominates
MAX_BOUND = 64.0      # a larger value is rescaled by a constant first
ODD = (3, 5, 7)

def size_of(shape) -> int:
    return int(np.prod(shape, dtype=np.int64))


class Generator:
    """One graph being grown: its values, their bounds, its inputs."""

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
            u.shape == v.shape if same_shape else broadcasts_to(u.shape, v.shape))]
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
        factors = [p for p in prime_factors(size)]
        self.rng.shuffle(factors)
        dims = [1] * int(self.rng.integers(1, 5))
        for p in factors:
            dims[int(self.rng.integers(len(dims)))] *= p
        return tuple(dims)


def prime_factors(n: int) -> list:
    out, p = [], 2
    while p * p <= n:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out + ([n] if n > 1 else [])


def broadcasts_to(small, big) -> bool:
    if len(small) > len(big):
        return False
    return all(s in (1, b) for s, b in zip(small[::-1], big[::-1]))


def random_feeds(g, seed: int) -> dict:
    """Inputs of random sign with |x| in [0.25, 2): never zero."""
    rng = np.random.default_rng(seed + 10_000)
    return {v.name: np.asarray(rng.uniform(0.25, 2.0, v.shape)
                               * rng.choice([-1.0, 1.0], v.shape), dtype=v.dtype)
            for v in g.inputs}
