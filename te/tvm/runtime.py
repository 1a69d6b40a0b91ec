"""tvm.runtime: load_module, NDArray, Module and devices under TVM's names.

Takes a path written by export_library (or linked by contrib.cc.create_shared from
Module.save's object); gives runtime modules. Imports runtime.
"""
from __future__ import annotations

from runtime import Device, Module, NDArray, load_module
from runtime.devices import cpu, cuda, device

from .nd import array, empty

__all__ = ["Device", "Module", "NDArray", "array", "cpu", "cuda", "device", "empty",
           "load_module"]
