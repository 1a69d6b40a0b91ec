"""tvm.build and tvm.lower with TVM's calling conventions, over te.build and te.lower.

Takes what TVM code passes: a schedule and its argument tensors, a target given as a string,
a te.target.Target (with or without a host) or None (the `with target:` block's, else
"llvm"), and TVM's keywords; gives te's runtime modules and lowered functions. A 'cuda'
module built where no GPU can be opened runs in the CUDA emulator, with a warning (once per
process): TVM code written for a GPU then runs, slowly, on a CPU machine. Imports te.build,
te.target and runtime.
"""
from __future__ import annotations

import warnings

from runtime.cuda import CudaModule
from runtime.devices import cuda

from ..build import build as te_build
from ..build import lower as te_lower
from ..errors import BuildError
from ..target import Target, parse_target


def _target(target, target_host, who: str) -> Target:
    if target is None:
        target = Target.current() or "llvm"
    if isinstance(target, dict):  # TVM's {"cuda": schedule} form
        raise BuildError(f"{who}: a dict of targets is not supported; build each target "
                         f"with its own {who} call")
    parsed = parse_target(target, who=who)
    return parsed if target_host is None else parsed.with_host(target_host)


def build(inputs, args=None, target=None, target_host=None, runtime=None, name="default_function",
          binds=None):
    """tvm.build(s, [A, B, C], target, name=...): te.build under TVM's defaults (the
    function is named "default_function" unless `name` says otherwise)."""
    if runtime is not None or binds is not None:
        given = "runtime" if runtime is not None else "binds"
        raise BuildError(f"tvm.build: the {given} argument is not supported (expected None)")
    mod = te_build(inputs, args, target=_target(target, target_host, "tvm.build"), name=name)
    if isinstance(mod, CudaModule) and not cuda(0).exist:
        _warn_emulated()
        return _one_call_per_round(mod.emulator())
    return mod


def _one_call_per_round(mod: CudaModule) -> CudaModule:
    """`mod` (emulated) whose time_evaluator makes one call per round, whatever `number`
    says (min_repeat_ms still adds calls), with TVM's default of one round: an emulated
    call takes seconds and its time is not a GPU's, so the tutorials' number=400 would
    only repeat the same CPU emulation for minutes."""
    timer = mod.time_evaluator

    def time_evaluator(func_name=None, dev=None, number=10, repeat=1, min_repeat_ms=0):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            evaluator = timer(func_name, dev, number=1, repeat=repeat,
                              min_repeat_ms=min_repeat_ms)
        for w in caught:   # the module's own warnings, pointing at the caller
            warnings.warn(w.message, stacklevel=2)
        return evaluator
    mod.time_evaluator = time_evaluator
    return mod


_warned = False


def _warn_emulated() -> None:
    global _warned
    if not _warned:
        _warned = True
        warnings.warn(EMULATED, RuntimeWarning, stacklevel=3)


EMULATED = ("tvm.build: target 'cuda': no CUDA device (or no cuda-python or pycuda) on this "
            "machine, so the module runs in the CUDA emulator on the CPU "
            "(te's runtime/cuda_emulator.py): "
            "its results are checked as on a GPU, but its time_evaluator times are CPU "
            "emulation times, not GPU times (one call per round, whatever number says); use "
            "te.build(..., target='cuda') for a module "
            "that refuses to run without a GPU")


def lower(inp, args=None, name: str = "main", binds=None, simple_mode: bool = False):
    """tvm.lower(s, args, simple_mode=True): the lowered function; print() shows its loop IR
    (our one readable form, whatever simple_mode says)."""
    if binds is not None:
        raise BuildError("tvm.lower: the binds argument is not supported (expected None)")
    target = Target.current() or "llvm"
    return te_lower(inp, args, name=name, simple_mode=simple_mode, target=target)
