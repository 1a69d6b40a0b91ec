"""Templates and dispatch: which config a template (or an automatic schedule) runs with.

Takes template functions and tuning logs; gives the @template decorator, get_config() for
use inside a template, and the apply_history_best context. A template call looks up its own
workload in the innermost active context (AutoTVM's DispatchContext), so te.build needs to
know nothing about tuning. Imports space, workload and records only.
"""
from __future__ import annotations

import os

import threading
import warnings

from ..errors import ArgumentError, ScheduleError
from . import records as R
from .space import ConfigEntity, ConfigSpace
from .workload import package_version, template_key

_state = threading.local()
TEMPLATES: dict = {}


def _stack(name: str) -> list:
    if not hasattr(_state, name):
        setattr(_state, name, [])
    return getattr(_state, name)


def get_config():
    """The config of the template now running (ConfigSpace while the space is collected)."""
    cfgs = _stack("configs")
    if not cfgs:
        raise ScheduleError("te.autotune.get_config(): call it inside a function decorated "
                            "with @te.autotune.template(...)")
    return cfgs[-1]


class with_config:
    """Run templates with `cfg` (a ConfigSpace to collect, or a ConfigEntity to apply)."""

    def __init__(self, cfg):
        self.cfg = cfg

    def __enter__(self):
        self.cfg.flop = 0.0   # cfg.add_flop counts the operations of this run only
        _stack("configs").append(self.cfg)
        return self.cfg

    def __exit__(self, *exc):
        _stack("configs").pop()


class Template:
    """A schedule template: f(*args) -> (schedule, tensors), with knobs from get_config()."""

    def __init__(self, name: str, func):
        self.name, self.func = name, func
        self.__doc__ = func.__doc__
        self.__wrapped__ = func

    def workload_key(self, args) -> str:
        return template_key(self.name, args)

    def space(self, *args) -> ConfigSpace:
        space = ConfigSpace()
        with with_config(space):
            self.func(*args)
        return space

    def instantiate(self, cfg, *args):
        with with_config(cfg):
            return self.func(*args)

    def __call__(self, *args):
        """Outside tuning: the best recorded config under apply_history_best, else defaults."""
        space = self.space(*args)
        best = dispatch_lookup(self.workload_key(args), space)
        cfg = space if best is None else ConfigEntity.from_json_dict(space, best.config)
        return self.instantiate(cfg, *args)

    def __repr__(self):
        return f"Template({self.name})"


def template(name: str):
    """@te.autotune.template("name"): register a schedule template under `name`."""
    if callable(name):  # used without arguments
        func = name
        return template(func.__name__)(func)
    if not isinstance(name, str) or not name:
        raise ArgumentError(f"te.autotune.template: name must be a non-empty string, got "
                            f"{name!r}")

    def wrap(func):
        t = Template(name, func)
        TEMPLATES[name] = t
        return t
    return wrap


class apply_history_best:
    """with apply_history_best(log): templates use the fastest recorded config."""

    def __init__(self, log: str, target: str = "llvm"):
        if not isinstance(log, (str, os.PathLike)):
            raise ArgumentError(f"apply_history_best: log must be a file path, got {log!r}")
        if not os.path.exists(log):
            # A mistyped path would otherwise silently give untuned code.
            raise ArgumentError(f"apply_history_best: log '{log}' does not exist")
        try:
            R.check_is_log(log)
        except ValueError as err:
            raise ArgumentError(f"apply_history_best: {err}") from None
        self.log, self.target = log, target
        version = package_version()
        measured: dict = {}
        for rec in R.load_records(log)[0]:
            if rec.target == target and rec.version == version:
                measured.setdefault(rec.workload, []).append((rec.config, rec.result, rec))
        # workload -> one successful Record per config, best config first
        # (R.rank_by_config: re-measured leaders by their re-measurements, then the rest)
        ranked = {k: [rec for _, rec in R.rank_by_config(v)] for k, v in measured.items()}
        self.ranked: dict = {k: v for k, v in ranked.items() if v}
        self.best = {k: v[0] for k, v in self.ranked.items()}
        self._warned: set = set()

    def lookup(self, key: str, space: ConfigSpace | None = None):
        """The fastest record for `key`; with `space`, the fastest whose config is a
        config of that space. Records of an older space of the same workload are
        skipped, not an error; when no record fits, a warning says so once per log and
        workload (the schedule falls back to the default config, which is untuned)."""
        records = self.ranked.get(key, ())
        for rec in records:
            if space is None:
                return rec
            try:
                ConfigEntity.from_json_dict(space, rec.config)
            except ScheduleError:
                continue
            return rec
        if records and key not in self._warned:
            self._warned.add(key)
            warnings.warn(f"apply_history_best: the {len(records)} configs recorded for "
                          f"workload {key} in '{self.log}' do not fit today's search space "
                          f"(its knobs changed since they were tuned); using the default "
                          f"config: tune again to use this log", stacklevel=3)
        return None

    def __enter__(self):
        _stack("dispatch").append(self)
        return self

    def __exit__(self, *exc):
        _stack("dispatch").pop()


def dispatch_lookup(key: str, space: ConfigSpace | None = None):
    """The best Record for `key` (valid in `space`, if given) in the innermost
    apply_history_best context, or None."""
    for ctx in reversed(_stack("dispatch")):
        rec = ctx.lookup(key, space)
        if rec is not None:
            for seen in _stack("traces"):
                seen.append(rec)
            return rec
    return None


def history_active() -> bool:
    """Whether an apply_history_best context is active (in this thread): only then can a
    schedule differ from its defaults."""
    return bool(_stack("dispatch"))


class trace_lookups:
    """with trace_lookups() as applied: `applied` lists the Records that schedules made
    inside took from apply_history_best (what a compile cache keys a kernel by)."""

    def __enter__(self) -> list:
        self.applied: list = []
        _stack("traces").append(self.applied)
        return self.applied

    def __exit__(self, *exc):
        _stack("traces").pop()
