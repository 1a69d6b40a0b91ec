"""The errors the graph layer raises on purpose, all te.TEError subclasses.

Imports te.errors and runtime.errors only.
"""
from runtime.errors import ArgumentError
from te.errors import TEError


class GraphError(TEError, ValueError):
    """A graph that cannot be built: a bad attribute, shapes that do not fit an op."""


class UnsupportedError(GraphError):
    """A model using ops or attributes the graph layer does not implement; `items` lists
    every (op, attribute or '', node name, reason) found, so one error reports them all;
    `constant_inputs` names the graph inputs some node needs as constants (a Reshape's
    shape fed as an input): binding them to values (from_onnx's constants=) lifts those."""

    def __init__(self, message: str, items=(), constant_inputs=()):
        super().__init__(message)
        self.items = list(items)
        self.constant_inputs = list(constant_inputs)


class FeedError(GraphError, ArgumentError):
    """Inputs given to a compiled graph's run(): a missing or unknown name, a wrong shape or
    dtype. A runtime.ArgumentError too: a model loaded by graph.load_module (which imports
    no te) raises that class, with the same messages."""
