"""The compiler's half of the graph package: every public name but load_module, re-exported
by graph/__init__.py on first use (importing it imports te). Re-exports only.
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
from .tuning import GraphTuneResult, autotune
from .tuning_tasks import TuningTask, extract_tasks
from .transform import (cast, clip, concatenate, expand, flatten, pad, reshape, slice, split,
                        resize, squeeze, take, tile, transpose, unsqueeze, where)

globals().update(UNARY_FUNCTIONS)    # graph.relu, graph.exp, graph.gelu, ...
globals().update(BINARY_FUNCTIONS)   # graph.add, graph.multiply, graph.less, ...
globals().update(REDUCE_FUNCTIONS)   # graph.reduce_sum, graph.reduce_mean, ...
