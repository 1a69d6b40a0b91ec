"""Model importers: from_onnx. The `onnx` package is imported only inside
graph.frontend.onnx's functions, when a model is imported."""
from .onnx import from_onnx

__all__ = ["from_onnx"]
