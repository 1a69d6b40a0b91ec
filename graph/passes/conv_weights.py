"""Pass pack_conv_weights: a conv2d with a constant weight reads it pre-packed.

TVM's AlterOpLayout for the weights: where the conv2d strategy picks its GEMM form
(te.autotune.conv2d_weight_tile gives the register tile's mr for the conv's shapes and
geometry), conv2d(x, W, b) becomes conv2d_packed(x, conv2d_pack_weight(W), b), which reads
the mr weights of one register tile next to each other (te.compute.ops.conv2d_pack_weight's
layout). The pack node is fed by a
constant only, so the fold_constants run after this pass computes it once, at compile time,
and the conv kernel reads the packed constant. Convs that take a direct form, and weights
computed at run time, stay conv2d. Imports te's public API and graph.passes.rewrite.
"""
from __future__ import annotations

import te

from ..ir import Graph
from .rewrite import rebuild


def _rule(rw, node, ins):
    if node.op != "conv2d" or not ins[1].is_constant:
        return None
    groups = node.attr["groups"]
    mr = te.autotune.conv2d_weight_tile(ins[0].shape, ins[1].shape, groups, ins[0].dtype,
                                        node.attr["strides"], node.attr["padding"],
                                        node.attr["dilation"])
    if mr is None:
        return None
    packed = rw.apply("conv2d_pack_weight", [ins[1]], {"groups": groups, "mr": mr},
                      base=f"{ins[1].name}/packed")
    attrs = {**node.attr, "kernel_shape": tuple(ins[1].shape)}
    return [rw.apply("conv2d_packed", [ins[0], packed, *ins[2:]], attrs,
                     name=node.outputs[0].name)]


def pack_conv_weights(g: Graph) -> Graph:
    """g with each GEMM-form conv2d of a constant weight reading it through a
    conv2d_pack_weight node (folded by the next fold_constants)."""
    return rebuild(g, _rule)
