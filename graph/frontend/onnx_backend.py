"""onnx.backend.base.Backend on the graph layer: from_onnx -> graph.compile -> Module.run.

GraphBackend.prepare(model, level="O0") imports and compiles a model once. Two kinds of
model are compiled at the first run instead, for the values it is given, and recompiled
when those change: a model whose inputs have symbolic dims (compile needs sizes), and one
whose ops need an input as a constant (a Reshape's shape, a Slice's starts fed as graph
inputs): those inputs are bound to the fed values (from_onnx's constants=), since this
layer fixes every shape at compile time. Everything else the importer refuses raises
graph.UnsupportedError. The classes subclass onnx's Backend and BackendRep, so they are
made when first asked for (a module __getattr__): onnx is imported then, never at import.
Imports numpy and graph's compile, errors and frontend.onnx.
"""
from __future__ import annotations

import functools

import numpy as np

from ..compile import compile as graph_compile
from ..errors import FeedError, UnsupportedError
from .onnx import from_onnx

# Re-importing with more inputs bound can reveal a node that needs yet another one (its
# input came from a refused node); each round binds at least one more input, so a model's
# own input count bounds the rounds.


class _Rep:
    """A prepared model: run(inputs) with a list (in the model's input order) or a dict."""

    def __init__(self, model, level: str, target: str):
        self.model = model
        self.level = level
        self.target = target
        inits = {i.name for i in model.graph.initializer}
        self.input_names = [i.name for i in model.graph.input if i.name not in inits]
        self.symbolic = [i.name for i in model.graph.input if i.name not in inits
                         and _has_symbolic_dims(i)]
        self.bound: list = []   # inputs bound to their fed values at run
        self.modules: dict = {}  # specialization key -> compiled Module
        self.module = None
        if not self.symbolic:
            try:
                self.module = self._compile({}, {})
            except UnsupportedError as e:
                if not e.constant_inputs:
                    raise
                self.bound = list(e.constant_inputs)

    def run(self, inputs, **kwargs) -> list:
        feeds = self._feeds(inputs)
        module = self.module or self._specialized(feeds)
        return module.run({k: v for k, v in feeds.items() if k not in self.bound})

    def _feeds(self, inputs) -> dict:
        if not isinstance(inputs, dict):
            inputs = list(inputs)
            if len(inputs) != len(self.input_names):
                raise FeedError(f"run: the model has {len(self.input_names)} inputs "
                                f"{self.input_names}, got {len(inputs)} arrays")
            inputs = dict(zip(self.input_names, inputs))
        # a list feeds a sequence input, which from_onnx refuses by its type
        return {k: v if isinstance(v, list) else np.asarray(v) for k, v in inputs.items()}

    def _specialized(self, feeds: dict):
        """The module compiled for these feeds' symbolic sizes and bound values."""
        for _ in range(len(self.input_names) + 1):
            missing = [k for k in self.bound + self.symbolic if k not in feeds]
            if missing:
                raise FeedError(f"run: missing input '{missing[0]}'")
            shapes = {k: feeds[k].shape for k in self.symbolic if k not in self.bound}
            consts = {k: feeds[k] for k in self.bound}
            key = (tuple(sorted(shapes.items())),
                   tuple((k, v.dtype.str, v.shape, v.tobytes()) for k, v in consts.items()))
            if key in self.modules:
                return self.modules[key]
            try:
                module = self._compile(shapes, consts)
            except UnsupportedError as e:
                new = [k for k in e.constant_inputs if k not in self.bound]
                if not new:
                    raise
                self.bound += new
                continue
            self.modules[key] = module
            return module
        raise AssertionError("unreachable: every round binds one more input")

    def _compile(self, shapes: dict, consts: dict):
        g = from_onnx(self.model, shapes=shapes or None, constants=consts or None)
        return graph_compile(g, level=self.level, target=self.target)


class _Backend:
    """The graph layer as an ONNX backend (CPU, target llvm); prepare's `level` picks the
    compile level ("O0", "O1", ...)."""

    @classmethod
    def prepare(cls, model, device: str = "CPU", level: str = "O0", target: str = "llvm",
                **kwargs):
        _check_device(device)
        return _classes()["GraphBackendRep"](model, level, target)

    @classmethod
    def run_node(cls, node, inputs, device: str = "CPU", outputs_info=None, **kwargs):
        """Run one NodeProto on `inputs` (arrays in the node's input order; '' inputs are
        skipped): it becomes a one-node model at `opset_version` (default 21)."""
        from onnx import helper

        _check_device(device)
        opset = kwargs.pop("opset_version", 21)
        fed = [(name, np.asarray(a)) for name, a in zip(node.input, inputs) if name]
        g = helper.make_graph(
            [node], "run_node",
            [helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(a.dtype),
                                           a.shape) for name, a in fed],
            [helper.make_empty_tensor_value_info(o) for o in node.output if o])
        model = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
        return cls.prepare(model, device, **kwargs).run([a for _, a in fed])

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return device.upper() == "CPU"


@functools.cache
def _classes() -> dict:
    from onnx.backend.base import Backend, BackendRep

    made = {}
    for name, mine, theirs in (("GraphBackendRep", _Rep, BackendRep),
                               ("GraphBackend", _Backend, Backend)):
        made[name] = type(name, (mine, theirs), {"__module__": __name__,
                                                 "__doc__": mine.__doc__})
    return made


def __getattr__(name: str):
    if name in ("GraphBackend", "GraphBackendRep"):
        return _classes()[name]
    if name in ("prepare", "run_model", "run_node", "supports_device"):
        return getattr(_classes()["GraphBackend"], name)  # onnx's module-level backend API
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _check_device(device: str) -> None:
    if not _Backend.supports_device(device):
        raise UnsupportedError(f"GraphBackend: device must be 'CPU', got {device!r}")


def _has_symbolic_dims(value_info) -> bool:
    """Whether a tensor input's size is unknown until it is fed: a dim without a value, or
    no shape at all."""
    t = value_info.type
    if not t.HasField("tensor_type"):
        return False  # a sequence or map: from_onnx refuses its element type
    if not t.tensor_type.HasField("shape"):
        return True
    return any(not d.HasField("dim_value") for d in t.tensor_type.shape.dim)

