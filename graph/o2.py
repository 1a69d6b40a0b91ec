"""Level O2: the O1 kernels run over one preallocated arena from one native entry point.

O2Module takes the O1 steps (a kernel or a view each), plans their memory (graph.plan:
order, lifetimes, offsets) and generates, with the LLVM JIT of runtime,
one function `i32 graph_run(ptr inputs, ptr outputs, ptr failed)` that calls every kernel's
native entry point by address with its arguments' addresses: arena + offset, a constant's
data, or an input's / output's pointer read from the two arrays given. A status other than 0
stops the run; the call's index is stored at `failed`.
run(feeds) checks the feeds once, allocates each output (the caller owns it; nothing else
is allocated per run) and makes one call. The arena is the module's own: runs of one module
are serialized by a lock. run(feeds, keep=True) and profile() run the steps from Python as at
O1 (the values inside the arena do not outlive a native run).
export_library writes the model for graph.load_module (graph/export.py, graph/loaded.py).
Imports numpy, runtime (the JIT, data_pointer) and graph.{errors,executor,export,kernels,
memory,plan}.
"""
from __future__ import annotations

import ctypes
import threading
from dataclasses import dataclass

import numpy as np

import runtime

from .entry_call import call_entry, fast_inputs
from .errors import GraphError
from .executor import Module
from .export import export_library
from .kernels import Kernel
from .memory import kernel_plan_step
from .plan import ALIGNMENT, PlanStep, plan

ENTRY = "graph_run"
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p, ctypes.c_void_p,
                               ctypes.c_void_p)
RECORD_FIELDS = 3  # a bounds-checked kernel's error record (runtime.signature)


@dataclass(frozen=True)
class Call:
    """One native call: `kernel` (a graph.kernels.Kernel) reads `inputs`, writes `outputs`."""
    kernel: Kernel
    inputs: tuple
    outputs: tuple


class O2Module(Module):
    """What graph.compile(g, level='O2') returns: `run` makes one native call; `calls` are
    the kernels in execution order, `memory_plan` the plan (print it for the table)."""

    def __init__(self, graph, steps: list, target: str):
        super().__init__(graph, steps, "O2", target)
        plan_steps, calls = _plan_steps(steps)
        self.memory_plan = plan(plan_steps, graph.inputs, graph.constants, graph.outputs)
        self.calls = [calls[id(s)] for s in self.memory_plan.order
                      if id(s) in calls and id(s) not in self.memory_plan.elided]
        locations = self.memory_plan.locations
        self._arena_buffer = np.zeros(self.memory_plan.arena_bytes + ALIGNMENT, np.uint8)
        start = -self._arena_buffer.ctypes.data % ALIGNMENT
        self.arena = self._arena_buffer[start:start + self.memory_plan.arena_bytes]
        self._constants = [np.ascontiguousarray(c.data) for c in graph.constants]
        self._records = np.zeros((max(1, len(self.calls)), RECORD_FIELDS), np.int64)
        # per output: ('new', shape, dtype) for the array a run allocates, else where to
        # take it from: ('output', k) a view of output k's array, ('input' | 'constant', k)
        self._results = []
        for k, v in enumerate(graph.outputs):
            kind, index = locations[id(v)]
            if kind == "output" and index == k:
                self._results.append(("new", tuple(v.shape), np.dtype(v.dtype)))
            else:
                self._results.append((kind, index))
        n_in, n_out = len(graph.inputs), len(graph.outputs)
        self._specs = [(v.name, np.dtype(v.dtype), tuple(v.shape)) for v in graph.inputs]
        self._pointers = (ctypes.c_void_p * max(1, n_in + n_out))()
        self._failed = ctypes.c_int32(-1)
        self._entry_args = (ctypes.addressof(self._pointers),
                            ctypes.addressof(self._pointers) + n_in * ctypes.sizeof(
                                ctypes.c_void_p),
                            ctypes.addressof(self._failed))
        self.source = self._driver_ir(locations, n_in)
        self._library = runtime.compile_llvm(self.source, opt_level=1)
        self._entry = _ENTRY_TYPE(self._library.get_function_address(ENTRY))
        self._lock = threading.Lock()

    def run(self, feeds: dict, keep: bool = False):
        """The outputs, fresh arrays in the graph's output order (see Module.run); with
        keep=True the steps run from Python as at O1 and every value is returned."""
        if keep:
            return super().run(feeds, keep=True)
        results = [(tuple(v.shape), how) for v, how in zip(self.graph.outputs, self._results)]
        return call_entry(self, self._inputs(feeds), results)

    def _inputs(self, feeds) -> list:
        """The feeds as arrays in input order: the common case (a dict of C-contiguous
        arrays of the right dtypes and shapes) checked here, anything else by Module._check
        (which converts what it can and names what is wrong)."""
        inputs = fast_inputs(feeds, self._specs)
        return inputs if inputs is not None else self._check(feeds)

    def _raise(self, status: int) -> None:
        k = self._failed.value
        call = self.calls[k]
        detail = ""
        if call.kernel.func.signature.checked_buffers:
            code, index, extent = (int(x) for x in self._records[k])
            detail = f" (bounds record: code {code}, index {index}, extent {extent})"
        raise RuntimeError(f"graph O2 run: kernel '{call.kernel.name}' (call {k} of "
                           f"{len(self.calls)}) failed with status {status}{detail}")

    def _driver_ir(self, locations: dict, n_in: int) -> str:
        """The LLVM IR of graph_run: one call per kernel, arguments by address."""
        base = self.arena.ctypes.data
        lines = [f"define i32 @{ENTRY}(ptr %ins, ptr %outs, ptr %failed) {{", "entry:"]
        loaded: dict = {}

        def address(v) -> str:
            kind, index = locations[id(v)]
            if kind == "arena":
                return _ptr(base + index)
            if kind == "constant":
                return _ptr(self._constants[index].ctypes.data)
            name = f"%{kind}{index}"
            if name not in loaded:
                array = "%ins" if kind == "input" else "%outs"
                loaded[name] = True
                lines.append(f"  {name}.at = getelementptr ptr, ptr {array}, i64 {index}")
                lines.append(f"  {name} = load ptr, ptr {name}.at")
            return name

        for k, call in enumerate(self.calls):
            func = call.kernel.func
            signature = func.signature
            if func.unavailable is not None:
                raise GraphError(f"graph.compile O2: kernel '{call.kernel.name}' must not run "
                                 f"on this host: {func.unavailable}")
            if signature.scalars:
                raise GraphError(f"graph.compile O2: kernel '{call.kernel.name}' takes size "
                                 f"variables; O2 needs constant shapes")
            args = [address(v) for v in call.inputs + call.outputs]
            if signature.checked_buffers:
                args.append(_ptr(self._records[k].ctypes.data))
            callee = _ptr(func.library.get_function_address(func.entry_name))
            lines += [f"  %s{k} = call i32 {callee}({', '.join('ptr ' + a for a in args)})",
                      f"  %bad{k} = icmp ne i32 %s{k}, 0",
                      f"  br i1 %bad{k}, label %fail{k}, label %ok{k}",
                      f"fail{k}:", f"  store i32 {k}, ptr %failed", f"  ret i32 %s{k}",
                      f"ok{k}:"]
        return "\n".join(lines + ["  ret i32 0", "}", ""])

    def export_library(self, path) -> None:
        """Write this model to the shared library `path` and its weights to the sidecar
        `path + '.weights'` (graph/export.py); graph.load_module(path) runs it again, in a
        process that imports neither te nor onnx nor LLVM."""
        export_library(self, path)

    def __str__(self) -> str:
        lines = [f"module {self.graph.name} (level O2, target {self.target}, "
                 f"{len(self.calls)} calls, {self.num_kernels} kernels, arena "
                 f"{self.memory_plan.arena_bytes} bytes) {{"]
        lines += [f"  {c.kernel.name}({', '.join('%' + v.name for v in c.inputs)}) -> "
                  f"{', '.join('%' + v.name for v in c.outputs)}" for c in self.calls]
        return "\n".join(lines + ["}"])


def _ptr(address: int) -> str:
    return f"inttoptr (i64 {address} to ptr)"


def _plan_steps(steps: list) -> tuple:
    """([PlanStep] in the steps' order, {id(PlanStep): Call}): a view is a PlanStep with no
    call, a kernel step one call."""
    plan_steps, calls = [], {}
    for step in steps:
        if step.kernel is None:
            plan_steps.append(PlanStep(step.inputs, step.outputs, "view", view=True))
            continue
        if not isinstance(step.kernel, Kernel):
            raise GraphError(f"graph.compile O2: step '{step.name}' runs a "
                             f"{type(step.kernel).__name__}, which O2 cannot call natively")
        ps = kernel_plan_step(step)
        plan_steps.append(ps)
        calls[id(ps)] = Call(step.kernel, tuple(step.inputs), tuple(step.outputs))
    return plan_steps, calls
