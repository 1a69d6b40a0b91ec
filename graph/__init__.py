"""graph: the dataflow-graph layer on top of te (DESIGN.md "Graph").

Build a Graph in Python (graph.input, graph.constant, graph.add, graph.nn.conv2d, ...) or
import one from ONNX (graph.from_onnx), print it, compile it (graph.compile; its kernels
are kept in a compile cache on disk: graph.cache_info, graph.clear_cache) and run it
(m.run(feeds)); an O2 module's export_library(path) writes it for graph.load_module(path);
graph.autotune tunes its kernels for the model's time (graph.compile(..., tuning_log=)).
`import graph` itself imports only load_module's side (graph.loaded: numpy and runtime, no
te, no LLVM); every other name comes from graph.api, imported (with te) on first use.
"""
import sys
import types
from importlib import import_module
from importlib.util import find_spec

from .loaded import load_module


# graph.api's names that are also submodules' names (tests/graph/test_graph_export.py
# checks the list): graph.<name> is graph.api's, never the submodule.
API_OVER_SUBMODULE = ("compile",)


class _Package(types.ModuleType):
    """The graph package: a submodule's name gives the submodule, any other name graph.api's
    (imported then, with te)."""

    def __getattr__(self, name: str):
        if name == "__all__":  # `from graph import *`: the public names, as before graph was lazy
            api = import_module("graph.api")
            value = sorted({k for k in dir(api) if not k.startswith("_")} | {"load_module"})
            types.ModuleType.__setattr__(self, name, value)
            return value
        if name.startswith("__") or "." in name:   # a dotted name is never an attribute
            raise AttributeError(f"module 'graph' has no attribute {name!r}")
        if name not in API_OVER_SUBMODULE and find_spec(f"graph.{name}") is not None:
            value = import_module(f"graph.{name}")  # `from . import cache` in graph itself
        else:
            try:
                value = getattr(import_module("graph.api"), name)
            except AttributeError:
                raise AttributeError(f"module 'graph' has no attribute {name!r}") from None
        types.ModuleType.__setattr__(self, name, value)
        return value

    def __setattr__(self, name: str, value) -> None:
        # importing submodule graph.compile sets graph.compile to it: the function of
        # that name (graph.api's) must stay what graph.compile gives
        if name in API_OVER_SUBMODULE and isinstance(value, types.ModuleType):
            return
        types.ModuleType.__setattr__(self, name, value)

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(dir(import_module("graph.api"))))


sys.modules[__name__].__class__ = _Package
