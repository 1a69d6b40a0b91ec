"""The one rewriting helper of the graph passes: rebuild a graph node by node.

`rebuild(g, rule)` walks g's nodes in order. Each node's inputs are first mapped to their
new values; `rule(rw, node, ins)` then returns None (copy the node onto the new inputs) or
the new Values standing for the node's outputs (existing values, constants, or nodes made
with rw.apply). Every node of the result is a new object: the input graph is never mutated.
The result keeps the graph inputs (same Values, same order) and the outputs' names, order,
dtypes and shapes; see `Rewriter.finish` for an output that became an input, a constant or
another output. Imports numpy and graph.{builder,errors,ir}.
"""
from __future__ import annotations

import itertools

from ..builder import apply
from ..errors import GraphError
from ..ir import Graph, Node, Value, format_dim


def same_shape(a: tuple, b: tuple) -> bool:
    """Shapes equal dim by dim; symbolic dims compare by name (te expressions build a new
    expression on ==, they do not answer it)."""
    return len(a) == len(b) and all(format_dim(x) == format_dim(y) for x, y in zip(a, b))


class Rewriter:
    """The state of one rebuild: `env` maps id(old value) -> new value (inputs and constants
    map to themselves unless a pass says otherwise), `names` every name in use."""

    def __init__(self, g: Graph):
        self.g = g
        self.env: dict = {}
        self.names = {v.name for v in g.values()}
        self._uses: dict = {}
        for n in g.nodes:
            for v in n.inputs:
                self._uses[id(v)] = self._uses.get(id(v), 0) + 1
        for v in g.outputs:
            self._uses[id(v)] = self._uses.get(id(v), 0) + 1

    def uses(self, old: Value) -> int:
        """How many node input slots of the old graph read `old`, plus one per graph output
        it is."""
        return self._uses.get(id(old), 0)

    def new(self, old: Value) -> Value:
        return self.env.get(id(old), old)

    def fresh(self, base: str) -> str:
        """A name no value of the old or the new graph has: base, else base/1, base/2, ..."""
        name = base
        for k in itertools.count(1):
            if name not in self.names:
                break
            name = f"{base}/{k}"
        self.names.add(name)
        return name

    def constant(self, data, base: str) -> Value:
        """A new constant Value holding `data` (kept as given: dtype and shape)."""
        return Value(self.fresh(base), data.dtype.name, tuple(data.shape), data=data)

    def apply(self, op: str, inputs, attrs: dict, name: str | None = None,
              base: str | None = None) -> Value:
        """A new single-output node. `name` is for a value that takes the place of an old
        one (keeping its name); otherwise a fresh name from `base` (default the op)."""
        name = name if name is not None else self.fresh(base or op)
        self.names.add(name)
        return apply(op, inputs, attrs, name)

    def copy(self, node: Node, ins: list) -> tuple:
        """`node` on new inputs, outputs keeping their names, dtypes and shapes."""
        for k, (a, b) in enumerate(zip(ins, node.inputs)):
            if a.dtype != b.dtype or not same_shape(a.shape, b.shape):
                raise GraphError(f"graph pass: input {k} of node '{node.name}' ({node.op}) "
                                 f"changed type from {b.type_str} to {a.type_str}; a "
                                 f"rewrite must keep the types of the values it replaces")
        new = Node(node.op, tuple(ins), node.attrs, node.name)
        new.outputs = tuple(Value(v.name, v.dtype, v.shape, new, v.index)
                            for v in node.outputs)
        return new.outputs

    def run(self, rule) -> Graph:
        for node in self.g.nodes:
            ins = [self.new(v) for v in node.inputs]
            outs = rule(self, node, ins)
            if outs is None:
                outs = self.copy(node, ins)
            if len(outs) != len(node.outputs):
                raise GraphError(f"graph pass: the rewrite of node '{node.name}' gave "
                                 f"{len(outs)} values for {len(node.outputs)} outputs")
            for old, v in zip(node.outputs, outs):
                if v is not None:
                    self.env[id(old)] = v
        return self.finish()

    def finish(self) -> Graph:
        """The new Graph. An output keeps its name: a node value the pass made is renamed
        (its old name belonged to a value that is gone or is not an output); a constant
        output gets a constant Value of that name; an output that became a graph input or
        the value of an earlier output gets an identity node of that name (a Value has one
        name, and the executor returns outputs by position but `keep` by name)."""
        news = [self.new(o) for o in self.g.outputs]
        claimed = {id(n) for n, o in zip(news, self.g.outputs) if n.name == o.name}
        outs, done = [], {}
        for n, o in zip(news, self.g.outputs):
            if id(o) in done:  # the same value listed twice as an output stays so
                outs.append(done[id(o)])
                continue
            if n.name == o.name and not any(m is n for m in outs):
                outs.append(n)
            elif n.is_constant:
                outs.append(Value(o.name, n.dtype, n.shape, data=n.data))
            elif n.node is not None and id(n) not in claimed:
                if n.node.name == n.name:
                    n.node.name = o.name
                n.name = o.name  # a Value this rebuild made (nodes are never reused)
                claimed.add(id(n))
                outs.append(n)
            else:
                outs.append(apply("identity", [n], {}, o.name))
            done[id(o)] = outs[-1]
        return Graph(outs, inputs=list(self.g.inputs), name=self.g.name)


def rebuild(g: Graph, rule) -> Graph:
    """A new graph: each node of `g` rewritten by `rule(rw, node, new_inputs)`."""
    return Rewriter(g).run(rule)
