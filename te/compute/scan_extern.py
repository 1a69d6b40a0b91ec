"""The two operations whose body is not one expression per element: ScanOp (a recurrence
over the first axis, TVM's te.scan) and ExternOp (a statement given by the user, TVM's
te.extern), and te.scan itself (te.extern needs buffers: te/lower/extern_api.py).

Takes tensors (tensor.py); gives operations that te/schedule makes stages of and
te/lower/scan_extern.py lowers. Imports expr, tensor and te.errors only; an ExternOp's
statement and buffers are loop IR objects that this layer holds without looking inside.
"""
from __future__ import annotations

from . import expr as E
from ..errors import ComputeError
from .expr import Const, Var
from .tensor import DATA_PAR, IterVar, Operation, PlaceholderOp, Range, Tensor


class ScanOp(Operation):
    """Outputs k: state[k] over time, where rows [0, init_len) are init[k] and each row t
    from init_len on is update[k] at t, which reads earlier rows through the placeholder
    state[k]. scan_axis (its one loop) runs over [init_len, time extent)."""

    def __init__(self, name: str, tag: str, attrs: dict, scan_axis: IterVar, init: tuple,
                 update: tuple, state: tuple, inputs: tuple):
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.scan_axis = scan_axis
        self.init, self.update, self.state = tuple(init), tuple(update), tuple(state)
        self.inputs = tuple(inputs)

    @property
    def num_outputs(self) -> int:
        return len(self.update)

    def output_shape(self, index: int) -> tuple:
        return self.state[index].shape

    def output_dtype(self, index: int) -> str:
        return self.update[index].dtype

    @property
    def input_tensors(self) -> list:
        return list(self.init) + list(self.update)

    def body_ops(self) -> list:
        """The operations computed once per time step (TVM's scan body): those on a path
        from a state placeholder to an update tensor, update ops included."""
        states = {t.op for t in self.state}
        memo: dict = {}

        def reads_state(op) -> bool:
            if id(op) not in memo:
                memo[id(op)] = False  # the graph is acyclic; this only stops revisits
                memo[id(op)] = any(t.op in states or reads_state(t.op)
                                   for t in op.input_tensors)
            return memo[id(op)]
        found: dict = {}
        todo = [t.op for t in self.update]
        while todo:
            op = todo.pop()
            if op in found or op in states or not reads_state(op):
                continue
            found[op] = None
            todo.extend(t.op for t in op.input_tensors)
        return list(found)

    def __repr__(self):
        return f"scan({self.name}, states={len(self.state)})"


class ExternOp(Operation):
    """Outputs computed by `body`, a statement over buffers: `input_buffers[k]` holds
    inputs[k] and `output_buffers[k]` output k, whole tensors each."""

    def __init__(self, name: str, tag: str, attrs: dict, inputs: tuple, input_buffers: tuple,
                 output_buffers: tuple, body):
        self.name, self.tag, self.attrs = name, tag, dict(attrs or {})
        self.inputs = tuple(inputs)
        self.input_buffers, self.output_buffers = tuple(input_buffers), tuple(output_buffers)
        self.body = body

    @property
    def num_outputs(self) -> int:
        return len(self.output_buffers)

    def output_shape(self, index: int) -> tuple:
        return tuple(self.output_buffers[index].shape)

    def output_dtype(self, index: int) -> str:
        return self.output_buffers[index].dtype

    @property
    def input_tensors(self) -> list:
        return list(self.inputs)

    def __repr__(self):
        return f"extern({self.name}, outputs={self.num_outputs})"


def _as_list(x, who: str, param: str) -> list:
    items = list(x) if isinstance(x, (list, tuple)) else [x]
    for k, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise ComputeError(f"{who}: {param}[{k}] must be a tensor, got {type(t).__name__}")
    return items


def _same_dim(a, b) -> bool:
    if isinstance(a, Const) and isinstance(b, Const):
        return int(a.value) == int(b.value)
    return E.structural_equal(a, b)


def _dim_str(d) -> str:
    return str(int(d.value)) if isinstance(d, Const) else getattr(d, "name", repr(d))


def scan(init, update, state_placeholder, inputs=None, name: str = "scan", tag: str = "",
         attrs: dict | None = None):
    """te.scan: the recurrence of `update` over the first axis, its first rows `init`,
    reading earlier rows through `state_placeholder` (lists of the same length for several
    states). `inputs` is informational, as in TVM. Returns a tensor, or a list of them."""
    who = "te.scan"
    single = not isinstance(update, (list, tuple))
    init = _as_list(init, who, "init")
    update = _as_list(update, who, "update")
    state = _as_list(state_placeholder, who, "state_placeholder")
    if not (len(init) == len(update) == len(state)):
        raise ComputeError(f"{who}: init, update and state_placeholder must have the same "
                           f"length, got {len(init)}, {len(update)} and {len(state)}")
    for k, (i, u, s) in enumerate(zip(init, update, state)):
        _check_state(who, k, i, u, s)
    init_len = init[0].shape[0]
    time = state[0].shape[0]
    for k, i in enumerate(init):
        if not _same_dim(i.shape[0], init_len):
            raise ComputeError(f"{who}: every init must have the same first dimension; "
                               f"init[{k}] has {_dim_str(i.shape[0])}, init[0] has "
                               f"{_dim_str(init_len)}")
    for k, s in enumerate(state):
        if not _same_dim(s.shape[0], time):
            raise ComputeError(f"{who}: every state must have the same first (time) "
                               f"dimension; state_placeholder[{k}] has "
                               f"{_dim_str(s.shape[0])}, state_placeholder[0] has "
                               f"{_dim_str(time)}")
    dtype = time.dtype
    axis = IterVar(Range(E.cast(init_len, dtype) if init_len.dtype != dtype else init_len,
                         time - init_len), Var(f"{name}.idx", dtype), DATA_PAR)
    op = ScanOp(name, tag, attrs, axis, tuple(init), tuple(update), tuple(state),
                tuple(_as_list(inputs or [], who, "inputs")))
    outs = [op.output(k) for k in range(op.num_outputs)]
    return outs[0] if single else outs


def _check_state(who: str, k: int, init: Tensor, update: Tensor, state: Tensor) -> None:
    if not isinstance(state.op, PlaceholderOp):
        raise ComputeError(f"{who}: state_placeholder[{k}] must be a te.placeholder, got "
                           f"'{state.name}' computed by {type(state.op).__name__}")
    if not (init.ndim == update.ndim == state.ndim) or state.ndim == 0:
        raise ComputeError(f"{who}: init[{k}], update[{k}] and state_placeholder[{k}] must "
                           f"have the same number of dimensions (at least 1), got "
                           f"{init.ndim}, {update.ndim} and {state.ndim}")
    for d in range(state.ndim):
        if not _same_dim(update.shape[d], state.shape[d]):
            raise ComputeError(f"{who}: update[{k}] shape[{d}] must equal "
                               f"state_placeholder[{k}]'s, got {_dim_str(update.shape[d])} "
                               f"and {_dim_str(state.shape[d])}")
        if d > 0 and not _same_dim(init.shape[d], state.shape[d]):
            raise ComputeError(f"{who}: init[{k}] shape[{d}] must equal "
                               f"state_placeholder[{k}]'s, got {_dim_str(init.shape[d])} "
                               f"and {_dim_str(state.shape[d])}")
    if not (init.dtype == update.dtype == state.dtype):
        raise ComputeError(f"{who}: init[{k}], update[{k}] and state_placeholder[{k}] must "
                           f"have one dtype, got {init.dtype}, {update.dtype} and "
                           f"{state.dtype}")
    for t, param in ((init, "init"), (update, "update")):
        if isinstance(t.op, PlaceholderOp) or not hasattr(t.op, "axis"):
            raise ComputeError(f"{who}: {param}[{k}] must be a te.compute, got "
                               f"'{t.name}' made by {type(t.op).__name__}")


class TensorIntrin:
    """A tensor intrinsic (te.decl_tensor_intrin): `op`, a compute that says what it does,
    and the statements that do it over the declared buffers of op's inputs and output:
    body (all of it), and for a reduction computed in parts, reset (the identity into the
    output) and update (add one part). Stage.tensorize puts them in place of loops."""

    def __init__(self, name: str, op, input_buffers: tuple, output_buffers: tuple, body,
                 reset, update):
        self.name, self.op = name, op
        self.input_buffers, self.output_buffers = tuple(input_buffers), tuple(output_buffers)
        self.body, self.reset, self.update = body, reset, update

    def __repr__(self):
        return f"TensorIntrin({self.name}, {self.op.name})"
