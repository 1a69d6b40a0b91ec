"""Levels O0 and O1 at run time: each step's kernel called from Python over one planned arena.

Dispatch(graph, steps) plans the steps' memory once (graph.plan, the plan O2 runs over: an
order, in-place writes, offsets), allocates the arena and turns every kernel step into one
native call whose argument addresses are fixed (arena + offset, a constant's data) or taken
per run from the feeds and the graph outputs' arrays; a view is no call at all (its address
is its source's). run(inputs) allocates the graph outputs only (fresh arrays the caller
owns) and calls each kernel's unchecked entry point: dtypes and shapes were fixed by the
plan, the feeds checked once by Module. Runs of one Dispatch share its arena: the caller
lets one run at a time in (graph.executor.Module does).
Imports numpy, runtime (data_pointer, RECORD_FIELDS) and graph.{errors,kernels,memory,plan}.
"""
from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from runtime.checker import data_pointer
from runtime.signature import RECORD_FIELDS

from .errors import GraphError
from .kernels import Kernel
from .memory import kernel_plan_step
from .plan import ALIGNMENT, PlanStep, plan


@dataclass(frozen=True)
class Call:
    """One kernel call: `args` are its raw arguments, the entries at `slots` ((position,
    k): the k-th of the run's input and then output addresses) rewritten per run."""
    step: int   # the index of its Step in Module.steps
    kernel: Kernel
    args: list
    slots: tuple
    record: np.ndarray | None   # a bounds-checked kernel's error record


class Dispatch:
    """The planned arena and the calls of one Module (see the module docstring)."""

    def __init__(self, graph, steps: list):
        plan_steps, step_of = [], {}
        for k, step in enumerate(steps):
            if step.kernel is None:
                plan_steps.append(PlanStep(step.inputs, step.outputs, "view", view=True))
                continue
            _check_callable(step)
            ps = kernel_plan_step(step)
            plan_steps.append(ps)
            step_of[id(ps)] = k
        self.memory_plan = plan(plan_steps, graph.inputs, graph.constants, graph.outputs)
        size = self.memory_plan.arena_bytes
        self._arena_buffer = np.zeros(size + ALIGNMENT, np.uint8)
        start = -self._arena_buffer.ctypes.data % ALIGNMENT
        self.arena = self._arena_buffer[start:start + size]
        self._constants = [np.ascontiguousarray(c.data) for c in graph.constants]
        self._n_inputs = len(graph.inputs)
        locations = self.memory_plan.locations
        self._results = _results(graph.outputs, locations)
        self.calls = [self._call(step_of[id(ps)], steps[step_of[id(ps)]], locations)
                      for ps in self.memory_plan.order
                      if id(ps) in step_of and id(ps) not in self.memory_plan.elided]

    def _call(self, index: int, step, locations: dict) -> Call:
        args, slots = [], []
        for v in step.inputs + step.outputs:
            kind, where = locations[id(v)]
            if kind == "arena":
                args.append(self.arena.ctypes.data + where)
            elif kind == "constant":
                args.append(self._constants[where].ctypes.data)
            else:  # the run's k-th input, or its output `where`'s array
                slots.append((len(args), where if kind == "input" else self._n_inputs + where))
                args.append(0)
        record = None
        if step.kernel.func.signature.checked_buffers:
            record = np.zeros(RECORD_FIELDS, np.int64)
            args.append(record.ctypes.data)
        return Call(index, step.kernel, args, tuple(slots), record)

    def run(self, inputs: list, times: list | None = None) -> list:
        """The graph's outputs for `inputs` (checked arrays in the graph's input order);
        with `times` (a list per step), each call's seconds are appended to its step's."""
        outs = [np.empty(shape, where) if kind == "new" else None
                for kind, where, shape in self._results]
        addresses = [data_pointer(a) for a in inputs]
        addresses += [data_pointer(a) if a is not None else 0 for a in outs]
        for call in self.calls:
            args = call.args
            for position, k in call.slots:
                args[position] = addresses[k]
            if times is None:
                status = call.kernel.func.entry(*args)
            else:
                start = time.perf_counter()
                status = call.kernel.func.entry(*args)
                times[call.step].append(time.perf_counter() - start)
            if status:
                record = None if call.record is None else [int(x) for x in call.record]
                call.kernel.func.raise_status(status, record)
        # an output that is a view of another output shares its array; one of an input's or
        # a constant's memory is a copy: the caller owns what run returns
        sources = {"output": outs, "input": inputs, "constant": self._constants}
        for k, (kind, where, shape) in enumerate(self._results):
            if kind != "new":
                a = sources[kind][where].reshape(shape)
                outs[k] = a if kind == "output" else np.array(a)
        return outs


def _results(outputs, locations: dict) -> list:
    """Per graph output (kind, where, shape): ('new', dtype, shape) for the array a run
    allocates, else where it lives: ('output', k) another output's array, ('input' |
    'constant', k) an input's or a constant's memory."""
    results = []
    for k, v in enumerate(outputs):
        kind, where = locations[id(v)]
        if (kind, where) == ("output", k):
            kind, where = "new", np.dtype(v.dtype)
        results.append((kind, where, tuple(v.shape)))
    return results


def _check_callable(step) -> None:
    """Dispatch calls a graph.kernels.Kernel's entry point with addresses only: no size
    variables (compile checked the shapes are constant)."""
    if not isinstance(step.kernel, Kernel):
        raise GraphError(f"graph run: step '{step.name}' runs a {type(step.kernel).__name__}, "
                         f"which cannot be called over the planned arena")
    if step.kernel.func.signature.scalars:
        raise GraphError(f"graph run: kernel '{step.kernel.name}' takes size variables; the "
                         f"planned arena needs constant shapes")
