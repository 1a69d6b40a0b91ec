"""tvm.autotvm: AutoTVM's API over te.autotune (templates, tasks, tuners, logs).

`@autotvm.template("name")` and `autotvm.get_config()` are te.autotune's; task.create gives
a Task whose config_space is our ConfigSpace; measure_option/LocalBuilder/LocalRunner give
our MeasureOptions; tuner.{XGBTuner, GATuner, RandomTuner, GridSearchTuner}(task).tune(...)
runs te.autotune's loop (GATuner: optuna's NSGA-II genetic sampler); callback.log_to_file
writes te's JSON-lines log, which apply_history_best (a context, with .query) reads. Split
knobs have TVM's meaning (SplitEntity sizes are loop extents). GLOBAL_SCOPE.in_tuning stays
False: te measures a template's whole computation (topi's dense_pack includes its weight
packing). Imports te.autotune and te.compute.
"""
from __future__ import annotations

from ...autotune import dispatch as _dispatch
from ...autotune import records as _records
from ...autotune.space import ConfigEntity, ConfigSpace
from ...autotune.workload import template_key as _template_key
from . import callback, measure, record, task, tuner
from .measure import LocalBuilder, LocalRunner, measure_option
from ...target import Target as _Target
from .task import target_name as _target_name
from .task.space import OtherOptionEntity, SplitEntity
from .topi_integration import register_topi_compute, register_topi_schedule

template = _dispatch.template
get_config = _dispatch.get_config


class _GlobalScope:
    """AutoTVM's GLOBAL_SCOPE: in_tuning is False in te (see the module docstring)."""

    def __init__(self):
        self.in_tuning = False
        self.silent = False


GLOBAL_SCOPE = _GlobalScope()


class apply_history_best(_dispatch.apply_history_best):  # noqa: N801 - TVM's name
    """with autotvm.apply_history_best(log): templates (and topi computes) use the best
    config recorded in `log` (te's tuning log, from callback.log_to_file) for the target
    of the enclosing `with tvm.target.Target(...)` ('llvm' outside one), as TVM picks."""

    def __init__(self, records):
        super().__init__(records, target="llvm")
        texts = {rec.target for rec in _records.load_records(self.log)[0]}
        # one context per target the log holds (its text as tuned: "cuda", "llvm", ...)
        self._by_target = {text: _dispatch.apply_history_best(self.log, target=text)
                           for text in sorted(texts) if text != "llvm"}
        self._by_target["llvm"] = None   # this context itself

    def _context(self, target):
        """The context of `target`'s records: the same text, else the same kind."""
        wanted = _target_name(target)
        kind = wanted.split()[0]
        for text in [wanted] + [t for t in self._by_target if t.split()[0] == kind]:
            if text in self._by_target:
                return self._by_target[text] or self
        return None

    def lookup(self, key, space=None):
        ctx = self._context(_Target.current() or "llvm")
        if ctx is None:
            return None
        return _dispatch.apply_history_best.lookup(ctx, key, space)

    def query(self, target, workload):
        """The best config for `workload` ((template name, *args), as Task.workload) on
        `target`; the space itself (is_fallback) when the log has none."""
        ctx = self._context(target)
        name, *args = workload
        template_obj = _dispatch.TEMPLATES.get(name)
        if template_obj is None:
            raise KeyError(f"apply_history_best.query: no template named {name!r}")
        sargs = task.serialize_args(args)
        space = template_obj.space(*sargs)
        rec = None if ctx is None else _dispatch.apply_history_best.lookup(
            ctx, _template_key(name, sargs), space)
        return space if rec is None else ConfigEntity.from_json_dict(space, rec.config)


__all__ = ["ConfigEntity", "ConfigSpace", "GLOBAL_SCOPE", "LocalBuilder", "LocalRunner",
           "OtherOptionEntity", "SplitEntity", "apply_history_best", "callback", "get_config",
           "measure", "measure_option", "record", "register_topi_compute",
           "register_topi_schedule", "task", "template", "tuner"]
