"""Tuning tasks: what te.autotune tunes, and one config of it turned into a measurement job.

Gives AutoTask (the automatic space over a compute graph, or a strategy's) and TemplateTask (a
template with its arguments), each with a space, instantiate(cfg) -> (schedule, args) and a
reference schedule; compile_job (a config lowered and compiled here, for the workers: to LLVM IR, or
for target 'cuda' to a CUDA module's parts, run on the GPU or in the CUDA emulator), estimate_flops
and random_inputs. Imports te.compute, te.schedule, te.lower, te.build, runtime.devices, auto_space,
conv2d_space, gpu_space, measure, records and workload.
"""
from __future__ import annotations

import functools

from runtime.devices import cuda as cuda_device

from ..build import build, emit_llvm
from ..compute import expr as E
from ..compute.tensor import ComputeOp, PlaceholderOp
from ..errors import ArgumentError, BuildError, ScheduleError
from ..lower.pipeline import lower
from ..schedule.schedule import create_schedule, topo_order
from ..target import parse_target
from . import records as R
from .auto_space import auto_schedule, default_args
from .conv2d_space import conv2d_strategy
from .gpu_space import gpu_strategy
from .measure import Job
from .space import ConfigSpace
from .workload import output_ops, strategy_key


def _check_outputs(outputs) -> None:
    items = outputs if isinstance(outputs, (list, tuple)) else [outputs]
    if not items:
        raise ArgumentError("te.autotune: outputs must name at least one computed tensor, "
                            "got an empty list")
    for o in items:
        op = getattr(o, "op", o)
        if isinstance(op, PlaceholderOp):
            raise ArgumentError(f"te.autotune: outputs must be computed tensors, got "
                                f"placeholder '{op.name}' (an input)")
        if not isinstance(op, ComputeOp):
            raise ArgumentError(f"te.autotune: outputs must be tensors or operations of "
                                f"te.compute, got {type(o).__name__}")


# space generators over a compute graph, by strategy name: (cfg, outputs, args) -> (s, args)
STRATEGIES = {"auto": auto_schedule, "conv2d": conv2d_strategy, "gpu": gpu_strategy}


class AutoTask:
    """A space generator over a compute graph: the automatic space, or the space of a
    named strategy (STRATEGIES), its records filed under strategy_key."""

    def __init__(self, outputs, args=None, strategy: str = "auto"):
        _check_outputs(outputs)
        if strategy not in STRATEGIES:
            raise ArgumentError(f"te.autotune: strategy must be one of {sorted(STRATEGIES)}, "
                                f"got {strategy!r}")
        self.outputs, self.strategy = outputs, strategy
        self.generate = STRATEGIES[strategy]
        self.args = list(args) if args is not None else default_args(outputs)
        self.key = strategy_key(outputs, strategy)
        self.space = ConfigSpace()
        self.generate(self.space, outputs, self.args)
        self.name = "+".join(op.name for op in output_ops(outputs))

    def instantiate(self, cfg):
        return self.generate(cfg, self.outputs, self.args)

    def reference(self):
        return create_schedule(output_ops(self.outputs)), self.args


class TemplateTask:
    """A @te.autotune.template with its (JSON-able) arguments."""

    def __init__(self, template, args):
        self.template, self.targs = template, tuple(args)
        self.key = template.workload_key(self.targs)
        self.space = template.space(*self.targs)
        _, self.args = template.instantiate(self.space, *self.targs)
        self.outputs = [a for a in self.args if not isinstance(a.op, PlaceholderOp)]
        self.name = template.name

    def instantiate(self, cfg):
        return self.template.instantiate(cfg, *self.targs)

    def reference(self):
        return create_schedule(output_ops(self.outputs)), self.args


def compile_job(task, cfg, parallel: bool, target="llvm"):
    """(Job, None) or (None, MeasureResult with the error) for one config, compiled for
    `target` (a string or te.target.Target; workers compile for this host, options.py;
    'cuda': cuda_job)."""
    target = parse_target(target)
    try:
        s, args = task.instantiate(cfg)
    except ScheduleError as err:
        return None, R.MeasureResult(error=R.INSTANTIATION_ERROR, msg=str(err))
    config = cfg.to_json_dict() if cfg is not None else {}
    if target.kind == "cuda":
        return cuda_job(s, args, target, config)
    try:
        func = lower(s, args, target, name="main")
        ll, sig = emit_llvm(func, target, parallel)
        sig = sig.to_json()
    except Exception as err:  # noqa: BLE001 - a lowering bug fails one trial, not the run
        return None, R.MeasureResult(error=R.LOWER_ERROR, msg=f"{type(err).__name__}: {err}")
    return Job(ll, sig, config), None


@functools.lru_cache(maxsize=1)
def gpu_present() -> bool:
    """Whether a CUDA device can be opened here (asked once: the driver probe is slow)."""
    return cuda_device(0).exist


def cuda_job(s, args, target, config: dict):
    """A config built for 'cuda' by te.build (CUDA C, and PTX when nvcc is on PATH), as the
    worker rebuilds it: the module's source and kernels with the launch sizes of its
    constant shapes, to run on the GPU, or in the CUDA emulator where none is present
    (gpu_present). What te.build refuses (launch or shared-memory limits, nvcc's errors) is
    a compile_error, any other failure a lower_error; the run goes on."""
    try:
        mod = build(s, args, target=target, name="main")
        counts, dims = mod.launch_plan(())
    except (BuildError, ScheduleError) as err:
        return None, R.MeasureResult(error=R.COMPILE_ERROR, msg=str(err))
    except Exception as err:  # noqa: BLE001 - a lowering bug fails one trial, not the run
        return None, R.MeasureResult(error=R.LOWER_ERROR, msg=f"{type(err).__name__}: {err}")
    spec = {"source": mod.source, "ptx": mod.ptx, "emulate": not gpu_present(),
            "kernels": [[k.name, [list(p) for p in k.params], k.uses_barriers]
                        for k in mod.kernels],
            "temporaries": [[t.name, t.dtype] for t in mod.temporaries],
            "counts": [int(n) for n in counts],
            "dims": [[list(map(int, grid)), list(map(int, block))] for grid, block in dims]}
    return Job("", mod.signature.to_json(), config, cuda=spec), None


def estimate_flops(outputs) -> float:
    """Arithmetic operations of the compute definition (a multiply-add counts 2)."""
    total = 0.0
    for op in topo_order(output_ops(outputs)):
        if not isinstance(op, ComputeOp):
            continue
        points = 1.0
        for iv in list(op.axis) + list(op.reduce_axis):
            ext = iv.dom.extent
            points *= float(ext.value) if isinstance(ext, E.Const) else 1.0
        total += points * max(_value_ops(op.body[0]), 1)
    return total


def _value_ops(e) -> int:
    """Arithmetic on values; index arithmetic inside tensor reads is addressing, not work."""
    if isinstance(e, E.TensorLoad):
        return 0
    own = 1 if (isinstance(e, E.Binary) and (e.op in E.ARITH_OPS or e.op in E.BITWISE_OPS)) or \
        (isinstance(e, E.Call) and not e.extern) or isinstance(e, E.Reduce) else 0
    return own + sum(_value_ops(k) for k in E.children(e))


def random_inputs(args: list, seed: int = 0) -> list:
    """Non-zero random inputs for the placeholders among `args`: floats of magnitude 0.5 to
    1.5 and either sign, integers 1 to 9. Made in place in the input's own dtype (float32
    for float16), so an input near the memory limit needs no float64 temporaries."""
    import numpy as np
    rng = np.random.default_rng(seed)
    out = []
    for a in args:
        if not isinstance(a.op, PlaceholderOp):
            continue
        shape = tuple(int(d.value) for d in a.shape)
        dtype = np.dtype(a.dtype)
        if dtype.kind == "f":
            x = rng.random(shape, dtype=np.float64 if dtype.itemsize > 4 else np.float32)
            x *= 2.0
            x -= 1.0                        # [-1, 1)
            negative = x < 0
            x += 0.5                        # [0, 1) -> [0.5, 1.5)
            np.subtract(x, 1.0, out=x, where=negative)   # [-1, 0) -> [-1.5, -0.5)
            out.append(x.astype(dtype, copy=False))
        elif dtype.kind == "b":
            out.append(np.ones(shape, dtype))
        else:
            out.append(rng.integers(1, 10, size=shape, dtype=dtype))
    return out

