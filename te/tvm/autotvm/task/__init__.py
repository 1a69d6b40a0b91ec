"""tvm.autotvm.task: `create(name, args, target)` -> a Task over a registered template.

A Task wraps our TemplateTask (te.autotune.task): `config_space` (printable, len()),
`instantiate(config)`, `workload`, `flop`. Template arguments that are tensors are passed
as TVM serializes them, ("TENSOR", shape, dtype), so the workload key stays JSON (topi's
registered computes rebuild placeholders from them). Imports te.autotune.
"""
from __future__ import annotations

from ....autotune import dispatch
from ....autotune.space import ConfigEntity, ConfigSpace
from ....autotune.task import TemplateTask, estimate_flops
from ....compute.tensor import Tensor
from ....errors import ArgumentError
from . import space
from .space import OtherOptionEntity, SplitEntity


def serialize_args(args) -> tuple:
    """Template arguments as JSON-able values: a tensor becomes ("TENSOR", shape, dtype)."""
    out = []
    for a in args:
        if isinstance(a, Tensor):
            shape = []
            for d in a.shape:
                if not hasattr(d, "value"):
                    raise ArgumentError(f"autotvm.task.create: tensor '{a.op.name}' has a "
                                        f"symbolic shape; tuning needs constant shapes")
                shape.append(int(d.value))
            out.append(["TENSOR", shape, a.dtype])
        elif isinstance(a, (list, tuple)):
            out.append(list(serialize_args(a)))
        else:
            out.append(a)
    return tuple(out)


def target_name(target) -> str:
    """The text of a tuning target: "llvm" (this CPU) or a "cuda" target (the GPU, or the
    CUDA emulator where none is present), given as a string or a Target."""
    text = target if isinstance(target, str) else getattr(target, "text", None)
    kind = text.split()[0] if isinstance(text, str) and text.split() else None
    if kind not in ("llvm", "cuda"):
        raise ArgumentError(f"autotvm: target must be 'llvm' (tuning on this CPU) or 'cuda' "
                            f"(on the GPU, or in the CUDA emulator where none is present), "
                            f"got {target!r}")
    return "llvm" if kind == "llvm" else text


class Task:
    """A tuning task: template `name` with `args` on `target` (AutoTVM's Task)."""

    def __init__(self, name: str, args, target="llvm"):
        template = dispatch.TEMPLATES.get(name) if isinstance(name, str) else name
        if not isinstance(template, dispatch.Template):
            known = ", ".join(sorted(dispatch.TEMPLATES)) or "none"
            raise ArgumentError(f"autotvm.task.create: no template named {name!r} (register "
                                f"one with @autotvm.template(name); known: {known})")
        self.name = template.name
        self.args = serialize_args(args)
        self.target = target_name(target)
        self.inner = TemplateTask(template, self.args)
        self.config_space = self.inner.space
        self.workload = (self.name,) + self.args
        self.flop = self.config_space.flop or estimate_flops(self.inner.outputs)

    def instantiate(self, config):
        """(schedule, tensors) of this task with `config` (a ConfigEntity)."""
        return self.inner.instantiate(config)

    def __repr__(self):
        return f"Task(func_name={self.name}, args={self.args}, workload={self.workload})"


def create(task_name, args, target="llvm", target_host=None) -> Task:
    """autotvm.task.create("name", args=(...), target="llvm" or "cuda"); target_host is
    ignored (the host is this CPU)."""
    return Task(task_name, args, target)


__all__ = ["ConfigEntity", "ConfigSpace", "OtherOptionEntity", "SplitEntity", "Task",
           "create", "serialize_args", "space"]
