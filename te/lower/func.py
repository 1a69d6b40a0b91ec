"""PrimFunc: a lowered function, the unit that lower() gives and the code generators take.

Takes loop IR statements and buffers (ir.py); its text form is printer.py's. It lives apart
from ir.py because printing a function needs the printer, which reads ir's nodes. Imports
ir and printer.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from .ir import Stmt
from .printer import print_func


@dataclass(frozen=True, eq=False)
class PrimFunc:
    """A lowered function: buffer arguments, then the scalar size variables they use.

    `params` are the Buffers for the user's argument tensors in order; `scalar_params` are
    the symbolic size Vars (te.var) in first-appearance order, passed after the buffers.
    """
    name: str
    params: tuple
    scalar_params: tuple
    body: Stmt
    attrs: dict = field(default_factory=dict)
    # Target 'cuda': the host/device split's DevicePlan of this body (pipeline.py's
    # split_host_device pass), which te/codegen/cuda reads; None before it runs.
    device_plan: object = None

    __hash__ = object.__hash__

    def __str__(self) -> str:
        return print_func(self)

    def script(self) -> str:
        return str(self)
