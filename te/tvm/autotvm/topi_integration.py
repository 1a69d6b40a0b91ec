"""register_topi_compute / register_topi_schedule: topi-style tunable operators.

A compute `f(cfg, *args)` and a schedule `g(cfg, outs)` registered under one task name
become (1) a template of that name, so autotvm.task.create(name, args=(tensors, ...))
tunes them (tensor arguments travel as ("TENSOR", shape, dtype) and are rebuilt as
placeholders), and (2) the callables `f(*args)` and `g(outs)` without cfg, which take the
config from the innermost apply_history_best (the best record of that workload) or, when
untuned, the space itself as the fallback config (`cfg.is_fallback`; the compute may set
defaults). The compute's outputs remember their config for the schedule. Imports
te.autotune and te.compute.
"""
from __future__ import annotations

import functools
import weakref

from ...autotune import dispatch
from ...autotune.space import ConfigEntity, ConfigSpace
from ...autotune.workload import template_key
from ...compute.api import placeholder
from ...compute.tensor import PlaceholderOp, Tensor
from ...errors import ArgumentError
from .task import serialize_args

_REGISTRY: dict = {}                          # task name -> {"compute": f, "schedule": g}
_CONFIG_OF = weakref.WeakKeyDictionary()      # output operation -> the config it used


def _deserialize(args) -> list:
    out = []
    for k, a in enumerate(args):
        if isinstance(a, list) and len(a) == 3 and a[0] == "TENSOR":
            out.append(placeholder(tuple(a[1]), dtype=a[2], name=f"arg{k}"))
        else:
            out.append(a)
    return out


def _placeholders(outs) -> list:
    seen, order, stack = set(), [], [t.op for t in outs]
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if isinstance(op, PlaceholderOp):
            order.append(op.output(0))
        stack.extend(t.op for t in reversed(getattr(op, "input_tensors", ())))
    return order


def _as_list(out) -> list:
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _make_template(name: str) -> None:
    def template_func(*sargs):
        entry = _REGISTRY[name]
        if "schedule" not in entry:
            raise ArgumentError(f"autotvm task '{name}': no schedule registered (use "
                                f"@autotvm.register_topi_schedule({name!r}))")
        cfg = dispatch.get_config()
        args = _deserialize(sargs)
        outs = _as_list(entry["compute"](cfg, *args))
        s = entry["schedule"](cfg, outs)
        given = [a for a in args if isinstance(a, Tensor)]
        inputs = given + [t for t in _placeholders(outs) if t not in given]
        return s, inputs + outs
    template_func.__name__ = name
    dispatch.template(name)(template_func)


def _config_for(name: str, fcompute, args):
    """The config for a call outside tuning: the best record, else the fallback space."""
    if dispatch._stack("configs"):
        return dispatch.get_config()
    key = template_key(name, serialize_args(args))
    space = ConfigSpace()
    with dispatch.with_config(space):
        fcompute(space, *args)
    rec = dispatch.dispatch_lookup(key, space)
    return space if rec is None else ConfigEntity.from_json_dict(space, rec.config)


def register_topi_compute(task_name: str):
    """@register_topi_compute("dense_pack.x86") on `f(cfg, *args)`."""
    def deco(fcompute):
        _REGISTRY.setdefault(task_name, {})["compute"] = fcompute
        _make_template(task_name)

        @functools.wraps(fcompute)
        def wrapper(*args, **kwargs):
            if kwargs:
                raise ArgumentError(f"{task_name}: pass the arguments positionally (they "
                                    f"are the tuning workload), got keywords {sorted(kwargs)}")
            cfg = _config_for(task_name, fcompute, args)
            out = fcompute(cfg, *args)
            for t in _as_list(out):
                _CONFIG_OF[t.op] = cfg
            return out
        return wrapper
    return deco


def register_topi_schedule(task_name: str):
    """@register_topi_schedule("dense_pack.x86") on `g(cfg, outs)`."""
    def deco(fschedule):
        _REGISTRY.setdefault(task_name, {})["schedule"] = fschedule

        @functools.wraps(fschedule)
        def wrapper(outs):
            outs = _as_list(outs)
            cfg = dispatch.get_config() if dispatch._stack("configs") else _find_config(outs)
            if cfg is None:
                raise ArgumentError(f"{task_name} schedule: its outputs were not made by "
                                    f"the compute registered for '{task_name}'")
            return fschedule(cfg, outs)
        return wrapper
    return deco


def _find_config(outs):
    stack, seen = [t.op for t in outs], set()
    while stack:
        op = stack.pop()
        if id(op) in seen:
            continue
        seen.add(id(op))
        if op in _CONFIG_OF:
            return _CONFIG_OF[op]
        stack.extend(t.op for t in getattr(op, "input_tensors", ()))
    return None
