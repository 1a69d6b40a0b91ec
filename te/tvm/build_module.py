"""tvm.build and tvm.lower with TVM's calling conventions, over te.build and te.lower.

Takes what TVM code passes: a schedule and its argument tensors, a target given as a string,
a te.target.Target (with or without a host) or None (the `with target:` block's, else
"llvm"), and TVM's keywords; gives te's runtime modules and lowered functions. Imports
te.build and te.target.
"""
from __future__ import annotations

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
    return te_build(inputs, args, target=_target(target, target_host, "tvm.build"),
                          name=name)


def lower(inp, args=None, name: str = "main", binds=None, simple_mode: bool = False):
    """tvm.lower(s, args, simple_mode=True): the lowered function; print() shows its loop IR
    (our one readable form, whatever simple_mode says)."""
    if binds is not None:
        raise BuildError("tvm.lower: the binds argument is not supported (expected None)")
    target = Target.current() or "llvm"
    return te_lower(inp, args, name=name, simple_mode=simple_mode, target=target)
