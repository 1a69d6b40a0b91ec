"""Fusion: partition a graph's nodes into groups, one kernel each (TVM's FuseOps rules).

Each node has a pattern kind (graph.ops.Pattern). A node fuses with its immediate
post-dominator (the first node every path from it to the graph's outputs passes) when every
node on those paths has a fusable kind, in three phases as in TVM:
  -. producers of a reduction join it (before the epilogues take them);
  0. conv/matmul-like anchors (OUT_ELEMWISE_FUSABLE) take their elementwise/broadcast
     consumers as an epilogue;
  1. elementwise/broadcast nodes join an injective chain, a reduction (producer side) or
     an anchor's epilogue;
  2. injective nodes join an injective chain or a reduction (producer side).
Nothing fuses across an opaque node. A graph output is used by a virtual sink, so it ends
its group; a group has one output value, all its other values are used inside it, and at
most one anchor (a conv/matmul-like or reduction node). Imports graph.{errors,ir,ops}.
"""
from __future__ import annotations

from dataclasses import dataclass

from .errors import GraphError
from .ir import Graph, Node
from .ops import OPS, Pattern

# Reshape-like nodes run as numpy views in the executor (no kernel, no copy); fusing them
# would turn a free view into index arithmetic inside a kernel, so they stay alone.
VIEW_OPS = frozenset({"reshape"})
MAX_GROUP_NODES = 256  # as TVM's max_fuse_depth: bounds the size of one kernel's compute


@dataclass
class Group:
    """Nodes (in graph order) compiled as one kernel; `anchor` is the conv/matmul-like or
    reduction node that picks the schedule (None: an elementwise/injective chain)."""
    nodes: list
    anchor: Node | None
    inputs: list   # the values read from outside the group, in first-use order (a lone
    #                node's inputs as they are, repeats included: its O0 kernel takes them)
    outputs: list  # the values used after the group (one, except a lone multi-output node)

    @property
    def is_view(self) -> bool:
        return len(self.nodes) == 1 and self.nodes[0].op in VIEW_OPS

    @property
    def ops(self) -> list:
        return [n.op for n in self.nodes]

    @property
    def is_slices_concat(self) -> bool:
        return len(self.nodes) == 1 and slices_concat(self.nodes[0])


def slices_concat(node: Node) -> bool:
    """Whether `node` concatenates two or more distinct, non-empty values each of which is
    one contiguous block of its output (every dim before the axis is 1, row-major), so
    that their producers may write them there (graph.plan) and the copy is not needed."""
    if node.op != "concatenate" or len(node.inputs) < 2 or \
            len({id(v) for v in node.inputs}) != len(node.inputs):
        return False
    axis = node.attr["axis"]
    shape = node.outputs[0].shape
    return all(d == 1 for d in shape[:axis]) and \
        all(all(isinstance(d, int) and d > 0 for d in v.shape) for v in node.inputs)


def fusion_pattern(node: Node) -> Pattern:
    """The node's kind for fusion: its op's kind, but OPAQUE (kept alone) for views and for
    multi-output nodes (split): a fused kernel computes exactly one output value."""
    if node.op in VIEW_OPS or len(node.outputs) != 1:
        return Pattern.OPAQUE
    return OPS[node.op].pattern


def fuse(g: Graph) -> list:
    """The graph's nodes partitioned into Groups, in an order that runs producers first."""
    return _Fuser(g).run()


class _Fuser:
    def __init__(self, g: Graph):
        self.g = g
        self.nodes = g.nodes
        self.index = {id(n): k for k, n in enumerate(self.nodes)}
        outs = {id(v) for v in g.outputs}
        self.users = {id(n): [] for n in self.nodes}
        self.sink = set()  # nodes with a value read by the graph's outputs
        for n in self.nodes:
            for v in n.inputs:
                if v.node is not None and n not in self.users[id(v.node)]:
                    self.users[id(v.node)].append(n)
            if any(id(v) in outs for v in n.outputs):
                self.sink.add(id(n))
        self.parent = list(range(len(self.nodes)))
        self.pattern = [fusion_pattern(n) for n in self.nodes]
        self.anchor = [n if p in (Pattern.COMM_REDUCE, Pattern.OUT_ELEMWISE_FUSABLE) else None
                       for n, p in zip(self.nodes, self.pattern)]
        self.size = [1] * len(self.nodes)
        self.ipdom = self._post_dominators()

    # -- post-dominator tree (None: the virtual sink after the graph's outputs) ----------

    def _post_dominators(self) -> list:
        ipdom: list = [None] * len(self.nodes)
        depth = [0] * len(self.nodes)
        for k in range(len(self.nodes) - 1, -1, -1):
            n = self.nodes[k]
            users = self.users[id(n)]
            if id(n) in self.sink or not users or len(n.outputs) != 1:
                ipdom[k], depth[k] = None, 1
                continue
            dom = self.index[id(users[0])]
            for u in users[1:]:
                dom = self._lca(dom, self.index[id(u)], ipdom, depth)
                if dom is None:
                    break
            ipdom[k] = dom
            depth[k] = 1 if dom is None else depth[dom] + 1
        return ipdom

    @staticmethod
    def _lca(a, b, ipdom, depth):
        while a is not None and b is not None and a != b:
            if depth[a] >= depth[b]:
                a = ipdom[a]
            else:
                b = ipdom[b]
        return a if a == b else None

    # -- groups (union-find; a root holds the group's pattern, anchor and size) ----------

    def find(self, k: int) -> int:
        while self.parent[k] != k:
            self.parent[k] = self.parent[self.parent[k]]
            k = self.parent[k]
        return k

    def _path(self, src: int, dst: int) -> list:
        """The nodes on the paths from src (excluded) to its post-dominator dst (included)."""
        seen, todo, out = set(), [src], []
        while todo:
            k = todo.pop()
            for u in self.users[id(self.nodes[k])]:
                j = self.index[id(u)]
                if j in seen:
                    continue
                seen.add(j)
                out.append(j)
                if j != dst:
                    todo.append(j)
        return out

    def _try_fuse(self, src: int, dst: int, edge_ok, node_ok, sink_ok) -> None:
        path = self._path(src, dst)
        if not edge_ok(max(self.pattern[j] for j in path)):
            return
        for j in path:
            p = self.pattern[self.find(j)]
            if not (sink_ok(p) if j == dst else node_ok(p)):
                return
        roots = {self.find(j) for j in path} | {self.find(src)}
        anchors = {id(self.anchor[r]) for r in roots if self.anchor[r] is not None}
        if len(anchors) > 1 or sum(self.size[r] for r in roots) > MAX_GROUP_NODES:
            return
        target = self.find(dst)
        for r in roots - {target}:
            self.parent[r] = target
            self.pattern[target] = max(self.pattern[target], self.pattern[r])
            self.anchor[target] = self.anchor[target] or self.anchor[r]
            self.size[target] += self.size[r]

    def run(self) -> list:
        # first, producers of a reduction (softmax, layer_norm, a sum) join it, last producer
        # first so that whole chains follow: an attention's scale and mask then go with its
        # softmax, which reads them once per row, not into the scores matmul's epilogue
        for k in range(len(self.nodes) - 1, -1, -1):
            dst = self.ipdom[k]
            if (dst is not None and self.find(k) != self.find(dst)
                    and self.pattern[self.find(k)] <= Pattern.INJECTIVE):
                self._try_fuse(k, dst, _reduce_or_le(Pattern.INJECTIVE),
                               _le(Pattern.INJECTIVE), lambda p: p == Pattern.COMM_REDUCE)
        for phase in range(3):
            for k in range(len(self.nodes)):
                dst = self.ipdom[k]
                if dst is None or self.find(k) == self.find(dst):
                    continue
                kind = self.pattern[self.find(k)]
                if phase == 0 and kind == Pattern.OUT_ELEMWISE_FUSABLE:
                    # the epilogue of a conv/matmul: elementwise and broadcast nodes only
                    self._try_fuse(k, dst, _le(Pattern.BROADCAST), _le(Pattern.BROADCAST),
                                   _le(Pattern.BROADCAST))
                elif phase == 1 and kind <= Pattern.BROADCAST:
                    # into an anchor's epilogue only through elementwise/broadcast nodes
                    # (the conv schedule takes one elementwise stage over the conv's output)
                    into_anchor = self.pattern[self.find(dst)] == Pattern.OUT_ELEMWISE_FUSABLE
                    inner = _le(Pattern.BROADCAST if into_anchor else Pattern.INJECTIVE)
                    self._try_fuse(k, dst, _reduce_or_le(Pattern.INJECTIVE), inner,
                                   lambda p: p != Pattern.OPAQUE)
                elif phase == 2 and kind == Pattern.INJECTIVE:
                    self._try_fuse(k, dst, _reduce_or_le(Pattern.INJECTIVE),
                                   _le(Pattern.INJECTIVE), _reduce_or_le(Pattern.INJECTIVE))
        return self._groups()

    def _groups(self) -> list:
        members: dict = {}
        for k in range(len(self.nodes)):
            members.setdefault(self.find(k), []).append(k)
        outs = {id(v) for v in self.g.outputs}
        groups = []
        for root, ks in sorted(members.items(), key=lambda item: item[1][-1]):
            nodes = [self.nodes[k] for k in ks]
            inside = {id(n) for n in nodes}
            made = {id(v) for n in nodes for v in n.outputs}
            inputs, seen = [], set()
            for n in nodes:
                for v in n.inputs:
                    if id(v) not in made and id(v) not in seen:
                        seen.add(id(v))
                        inputs.append(v)
            used = [v for n in nodes for v in n.outputs
                    if id(v) in outs or any(id(u) not in inside
                                            for u in self.users[id(n)] if v in u.inputs)]
            if len(used) != 1 and len(nodes) > 1:
                raise GraphError(f"graph.fuse: group {[n.name for n in nodes]} has "
                                 f"{len(used)} output values, expected 1 (a fusion bug)")
            if len(nodes) == 1:  # runs the node's own (O0) kernel: its inputs as they are
                groups.append(Group(nodes, self.anchor[root], list(nodes[0].inputs),
                                    list(nodes[0].outputs)))
            else:
                groups.append(Group(nodes, self.anchor[root], inputs, used))
        return groups


def _le(kind: Pattern):
    return lambda p: p <= kind


def _reduce_or_le(kind: Pattern):
    return lambda p: p <= kind or p == Pattern.COMM_REDUCE
