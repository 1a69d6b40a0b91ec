"""Schedule: the stages of a compute graph and the steps that made them.

Takes the compute graph (te.compute), gives a Schedule with one Stage (stage.py) per
operation, producers first; the loop primitives live on Stage, the ones that rewrite the
dataflow graph (cache_read, cache_write, rfactor) in dataflow.py, and replay applies
recorded steps (steps.py). Imports te.compute, stage, dataflow and steps.
"""
from __future__ import annotations

from ..compute.scan_extern import ScanOp
from ..compute.tensor import IterVar, Operation, Tensor
from ..errors import ScheduleError
from . import dataflow
from . import steps as S
from .stage import INLINE, SCOPE, Stage


class Schedule:
    """The stages of a compute graph in producer-before-consumer order, and the steps."""

    def __init__(self, outputs: list):
        self.outputs = list(outputs)
        self.stages: list = []
        self.stage_map: dict = {}
        self.steps: list = []
        for op in topo_order(self.outputs):
            self._add_stage(op)
        for op in self.outputs:
            self.stage_map[op].is_output = True
        self._attach_scan_bodies()

    def _attach_scan_bodies(self) -> None:
        """Each scan's body stages run once per time step: inside the scan's loop (TVM
        attaches them so at create_schedule too; compute_at may move one deeper)."""
        for st in self.stages:
            if isinstance(st.op, ScanOp):
                for op in st.op.body_ops():
                    body_stage = self.stage_map[op]
                    body_stage.attach_type = SCOPE
                    body_stage.attach_stage, body_stage.attach_ivar = st, st.op.scan_axis

    def _add_stage(self, op, position: int | None = None) -> Stage:
        st = Stage(op, self)
        if position is None:
            self.stages.append(st)
        else:
            self.stages.insert(position, st)
        self.stage_map[op] = st
        return st

    def __getitem__(self, key) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        st = self.stage_map.get(op)
        if st is None:
            raise ScheduleError(f"schedule: '{getattr(op, 'name', key)}' is not part of this "
                                f"schedule's compute graph")
        return st

    def consumes(self, reader: Stage, producer: Stage) -> bool:
        """Does `reader` read `producer`'s output, directly or through inlined stages?"""
        def inlined(op) -> bool:
            st = self.stage_map.get(op)
            return st is not None and st.attach_type == INLINE
        return self._reaches(reader, producer, inlined)

    def depends_on(self, reader: Stage, producer: Stage) -> bool:
        """Does `reader` use `producer`'s output through any chain of stages? (Bound
        inference later checks that every stage in between runs inside the attach loop.)"""
        return self._reaches(reader, producer, lambda op: True)

    @staticmethod
    def _reaches(reader: Stage, producer: Stage, through) -> bool:
        """Is `producer`'s op among `reader`'s inputs, or those of the ops in between for
        which through(op) holds?"""
        todo = [t.op for t in reader.op.input_tensors]
        seen = set()
        while todo:
            op = todo.pop()
            if op is producer.op:
                return True
            if id(op) not in seen:
                seen.add(id(op))
                if through(op):
                    todo.extend(t.op for t in op.input_tensors)
        return False

    def cache_read(self, tensor: Tensor, scope: str, readers) -> Tensor:
        return dataflow.cache_read(self, tensor, scope, readers)

    def cache_write(self, tensor, scope: str):
        return dataflow.cache_write(self, tensor, scope)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0):
        return dataflow.rfactor(self, tensor, axis, factor_axis)

    def to_json(self) -> str:
        """The recorded steps as JSON; `create_schedule(ops).replay(text)` rebuilds it."""
        return S.to_json(self.steps)

    def replay(self, steps) -> "Schedule":
        """Apply recorded steps (a to_json() string or Step objects) to this fresh schedule
        of the same compute definition; returns self."""
        if self.steps:
            raise ScheduleError("replay: the schedule already has steps; replay onto a fresh "
                                "te.create_schedule(...)")
        return dataflow.apply_steps(self, S.as_steps(steps))

    def __repr__(self):
        return "schedule(" + ", ".join(st.name for st in self.stages) + ")"


def topo_order(output_ops: list) -> list:
    """Operations reachable from the outputs, every producer before its consumers."""
    order, state = [], {}

    def visit(op):
        mark = state.get(id(op))
        if mark == "done":
            return
        stack = [(op, iter(op.input_tensors))]
        state[id(op)] = "active"
        while stack:
            node, it = stack[-1]
            nxt = next(it, None)
            if nxt is None:
                stack.pop()
                state[id(node)] = "done"
                order.append(node)
            elif state.get(id(nxt.op)) is None:
                state[id(nxt.op)] = "active"
                stack.append((nxt.op, iter(nxt.op.input_tensors)))
    for op in output_ops:
        visit(op)
    return order


def create_schedule(ops) -> Schedule:
    """te.create_schedule(op or [ops]): a schedule with one stage per operation."""
    if not isinstance(ops, (list, tuple)):
        ops = [ops]
    out = []
    for o in ops:
        op = o.op if isinstance(o, Tensor) else o
        if not isinstance(op, Operation):
            raise ScheduleError(f"create_schedule: expected operations or tensors, got "
                                f"{type(o).__name__}")
        if op not in out:
            out.append(op)
    return Schedule(out)
