"""graph: the dataflow-graph layer on top of te (DESIGN.md "Graph").

Build a Graph in Python (graph.input, graph.constant, graph.add, graph.nn.conv2d, ...) or
import one from ONNX (graph.from_onnx), print it, compile it (graph.compile; its kernels
are kept in a compile cache on disk: graph.cache_info, graph.clear_cache) and run it
(m.run(feeds)). Re-exports only; imports te's public API and runtime, never the reverse.
"""
from . import nn
from .builder import (BINARY_FUNCTIONS, REDUCE_FUNCTIONS, UNARY_FUNCTIONS, apply, constant,
                      input)
from .cache import cache_info, clear_cache
from .compile import compile
from .errors import FeedError, GraphError, UnsupportedError
from .frontend import from_onnx
from .ir import Graph, Node, Value
from .memory import plan_memory
from .ops import OPS, OpDef, Pattern
from .transform import (cast, clip, concatenate, expand, flatten, pad, reshape, slice, split,
                        resize, squeeze, take, tile, transpose, unsqueeze, where)

globals().update(UNARY_FUNCTIONS)    # graph.relu, graph.exp, graph.gelu, ...
globals().update(BINARY_FUNCTIONS)   # graph.add, graph.multiply, graph.less, ...
globals().update(REDUCE_FUNCTIONS)   # graph.reduce_sum, graph.reduce_mean, ...
