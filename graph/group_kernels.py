"""One compiled kernel per fused group (level O1): the group's te compute, scheduled by its
anchor's schedule family, identical workloads compiled once.

The compute calls each node's OpDef.compute on the te tensors of the nodes before it, with
placeholders for the group's external inputs only. How each family is scheduled:
  'conv2d'  the epilogue (every stage after the conv's own output) is inlined into ONE
            elementwise stage reading the conv's output and the other inputs, which is what
            graph.schedule.schedule_conv2d takes;
  'auto'    one te.autotune.auto_schedule of the whole compute: a reduction (softmax,
            layer_norm, a sum) with its producers, an injective chain (its default inlines
            a producer read once and computes one read several times once per row), or a
            matmul with its elementwise epilogue (bias, GELU, a residual add: computed as
            the matmul's register tile is stored).
Imports te's public API and graph.{fuse,kernels,ops,schedule}.
"""
from __future__ import annotations

import te
from te.compute import expr as E
from te.compute.tensor import PlaceholderOp

from .fuse import Group
from .kernels import build_kernel, check_static, compile_node
from .ops import OPS, placeholders

# Inlining copies a stage's expression into every read of it: a stage read many times
# through diamonds could make the expression grow exponentially; past this many nodes the
# stage stays a stage of its own.
MAX_INLINED_NODES = 4096


def group_workload(group: Group) -> tuple:
    """What decides a group's kernel: per node its op, attributes and where each input comes
    from (an external input's dtype and shape, or an earlier node's output)."""
    where = {id(v): ("in", k, v.dtype, tuple(map(str, v.shape)))
             for k, v in enumerate(group.inputs)}
    key = []
    for j, node in enumerate(group.nodes):
        key.append((node.op, node.attrs, tuple(where[id(v)] for v in node.inputs)))
        where.update((id(v), ("node", j, i)) for i, v in enumerate(node.outputs))
    return tuple(key) + (tuple(where[id(v)] for v in group.outputs),)


def compile_group(group: Group, target: str, cache: dict):
    """The kernel of `group`: a lone node's is its O0 kernel (shared through `cache`)."""
    if len(group.nodes) == 1:
        return compile_node(group.nodes[0], target, cache)
    key = ("group",) + group_workload(group)
    kernel = cache.get(key)
    if kernel is None:
        name = f"k{len(cache)}_fused_" + "_".join(dict.fromkeys(group.ops))[:48]
        kernel = _build_group(group, target, name)
        cache[key] = kernel
    return kernel


def _build_group(group: Group, target: str, name: str):
    family, ins, outs = group_compute(group)
    return build_kernel(name, family, ins, outs, target, workload=_disk_key(group))


def group_compute(group: Group) -> tuple:
    """(schedule family, input placeholders, [output]) of a fused group's kernel: what
    build_kernel schedules (graph.autotune tunes the same compute)."""
    check_static(group.inputs + group.outputs)
    anchor = group.anchor
    family = OPS[anchor.op].schedule if anchor is not None else "auto"
    ins, env = _compute(group.nodes, group.inputs)
    out = env[id(group.outputs[0])]
    if family == "conv2d":
        core = _conv_core(env[id(anchor.outputs[0])])
        if out != core:
            out = inline_into_one_stage(out, {core.op})
    return family, ins, [out]


def _disk_key(group: Group) -> tuple:
    """The group's compile-cache key (graph/cache.py): its workload and anchor."""
    anchor = next((j for j, n in enumerate(group.nodes) if n is group.anchor), None)
    return ("group", anchor) + group_workload(group)


def _conv_core(t):
    """The conv's own output under its bias stage (graph.ops.nn._with_bias, '<op>_bias'):
    the bias joins the epilogue stage, so schedule_conv2d gets one stage over the conv."""
    while not t.op.is_reduction and t.op.name.endswith("_bias") and t.op.input_tensors:
        t = t.op.input_tensors[0]
    return t


def _compute(nodes: list, inputs: list) -> tuple:
    """(placeholders of `inputs`, value id -> te tensor) of `nodes` computed in order."""
    ins = placeholders([(v.dtype, v.shape) for v in inputs])
    env = {id(v): t for v, t in zip(inputs, ins)}
    for node in nodes:
        outs = OPS[node.op].compute([env[id(v)] for v in node.inputs], **node.attr)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        env.update((id(v), t) for v, t in zip(node.outputs, outs))
    return ins, env


def inline_into_one_stage(out, keep: set):
    """`out` as one te.compute stage: every injective stage it reads (but the ops in `keep`,
    placeholders and reductions) substituted into its expression."""
    def rewrite(x):
        if not isinstance(x, E.TensorLoad):
            return None
        op = x.tensor.op
        if op in keep or isinstance(op, PlaceholderOp) or op.is_reduction:
            return None
        body = op.body[x.tensor.value_index]
        body = E.substitute(body, {iv.var: i for iv, i in zip(op.axis, x.indices)})
        new = E.transform(body, rewrite)
        if len(E.post_order(new)) > MAX_INLINED_NODES:
            return None
        return new

    op = out.op
    body = E.transform(op.body[out.value_index], rewrite)
    axis = [iv.var for iv in op.axis]
    return te.compute(out.shape, lambda *i: E.substitute(body, dict(zip(axis, i))),
                      name=op.name, tag=op.tag)

