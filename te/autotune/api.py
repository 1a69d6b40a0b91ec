"""te.autotune: the public entry point, a callable that also carries the template API.

Gives `autotune(outputs, trials=500, ...)` plus `autotune.template`, `.get_config`,
`.apply_history_best` (`.history_active`, `.trace_lookups`: which records schedules took),
`.auto_schedule`, `.schedule_gpu` (the GPU space's, target 'cuda'), `.load_best`, `.upgrade_log`
(old logs), the option classes TuneOptions and MeasureOptions, SplitEntity / OtherOptionEntity, and
the micro-kernel for templates, `.define_matmul_like` / `.schedule_matmul_like` (and `.panel_width`,
the layout of weights packed ahead), and the conv2d strategy, `.conv2d_compute` / `.schedule_conv2d`
(`.conv2d_tile`, per conv `.conv2d_gemm_form`, `.conv2d_gemm_tile` and `.conv2d_weight_tile`;
its knobs `.conv2d_space`, its records' key `.conv2d_key`),
and the pooling schedules `.schedule_pool2d` and `.schedule_pool_nd`; `.session` runs a
tuning loop in steps (over a `.LocalRunner`'s shared workers), and `.graph_key` is the workload
key records of a compute graph are filed under (`.strategy_key`: under a strategy's space,
`strategy="conv2d"` in te.autotune and .session). Stays light at import time (no numpy-heavy,
optuna or xgboost imports): `import te` must stay fast; the tuning loop is imported when a
tuning run starts. Imports conv2d, conv2d_space, pool, dispatch, gpu_space (when called),
measure, micro_kernel, options, space, split, upgrade, workload.
"""
from __future__ import annotations

from ..errors import ArgumentError, TuningInterrupted, TuningLogError
from . import dispatch
from .measure import LocalRunner, MeasureOptions
from .conv2d import (conv2d_compute, conv2d_gemm_form, conv2d_gemm_tile, conv2d_tile,
                     conv2d_weight_tile)
from .conv2d_space import conv2d_key, conv2d_space, schedule_conv2d
from .pool import schedule_pool2d, schedule_pool_nd
from .micro_kernel import define_matmul_like, panel_width, schedule_matmul_like
from .options import TuneOptions, options_from_keywords
from .space import ConfigEntity, ConfigSpace, OtherOptionEntity
from .split import SplitEntity
from .upgrade import upgrade_log
from .workload import graph_key, strategy_key


def auto_schedule(outputs, args=None):
    """(schedule, args) for a compute graph: the best recorded config of the automatic
    space under apply_history_best, else the space's default config."""
    from .auto_space import auto_schedule as generate
    space = ConfigSpace()
    generate(space, outputs, args)
    rec = dispatch.dispatch_lookup(graph_key(outputs), space)
    cfg = space.default() if rec is None else ConfigEntity.from_json_dict(space, rec.config)
    return generate(cfg, outputs, args)


def schedule_gpu(outputs, args=None):
    """(schedule, args) for target 'cuda' from the automatic GPU space (gpu_space.py): the
    best recorded config under apply_history_best (for 'cuda'), else its default config."""
    from .gpu_space import STRATEGY, gpu_strategy
    space = ConfigSpace()
    gpu_strategy(space, outputs, args)
    rec = dispatch.dispatch_lookup(strategy_key(outputs, STRATEGY), space)
    cfg = space.default() if rec is None else ConfigEntity.from_json_dict(space, rec.config)
    return gpu_strategy(cfg, outputs, args)


def load_best(log: str, outputs, args=None, target: str = "llvm"):
    """(schedule, args) of the best config in `log` for this graph (or template): the
    automatic space of `target`'s kind (the GPU space for 'cuda')."""
    with dispatch.apply_history_best(log, target=target):
        if isinstance(outputs, dispatch.Template):
            return outputs(*(args or ()))
        if _is_cuda(target):
            return schedule_gpu(outputs, args)
        return auto_schedule(outputs, args)


def _is_cuda(target) -> bool:
    return str(target).split()[0] == "cuda"


def _strategy_for(strategy: str, options: TuneOptions) -> str:
    """The automatic space of the target: "auto" is the GPU space ("gpu") for 'cuda'."""
    return "gpu" if strategy == "auto" and _is_cuda(options.target) else strategy


class _AutotuneAPI:
    """te.autotune(outputs, options=None, *, args=None, trials=500, target="llvm", log=None,
    tuner="xgb", timeout=None, seed=None, early_stopping=None, verbose=1,
    measure_option=None, batch_size=16)

    Tune `outputs` (a tensor, an op or a list; or a @te.autotune.template with args=) in
    the space of `strategy`: "auto" (the automatic space of the target; for 'cuda' the GPU
    space "gpu": block and thread tiles, shared and local caches) or "conv2d" (the conv2d
    strategy's knobs, for a conv2d_compute output or one elementwise stage over it), and
    return a TuneResult (best config, time, GFLOP/s, history, .schedule(), .build()). The
    options are te.autotune.TuneOptions' fields, given as keywords, or as `options` (a
    TuneOptions) that keywords override. Ctrl-C raises te.autotune.TuningInterrupted (a
    KeyboardInterrupt) and a failed append to `log` (a full disk) te.autotune.TuningLogError,
    each once the log holds whole records only, with the TuneResult so far as `.result`;
    the same call resumes.
    """

    template = staticmethod(dispatch.template)
    get_config = staticmethod(dispatch.get_config)
    apply_history_best = dispatch.apply_history_best
    history_active = staticmethod(dispatch.history_active)
    trace_lookups = dispatch.trace_lookups
    auto_schedule = staticmethod(auto_schedule)
    load_best = staticmethod(load_best)
    schedule_gpu = staticmethod(schedule_gpu)
    define_matmul_like = staticmethod(define_matmul_like)
    schedule_matmul_like = staticmethod(schedule_matmul_like)
    panel_width = staticmethod(panel_width)
    conv2d_compute = staticmethod(conv2d_compute)
    conv2d_tile = staticmethod(conv2d_tile)
    conv2d_weight_tile = staticmethod(conv2d_weight_tile)
    conv2d_gemm_tile = staticmethod(conv2d_gemm_tile)
    conv2d_gemm_form = staticmethod(conv2d_gemm_form)
    schedule_pool2d = staticmethod(schedule_pool2d)
    schedule_pool_nd = staticmethod(schedule_pool_nd)
    schedule_conv2d = staticmethod(schedule_conv2d)
    conv2d_space = staticmethod(conv2d_space)
    conv2d_key = staticmethod(conv2d_key)
    strategy_key = staticmethod(strategy_key)
    ConfigSpace = ConfigSpace
    ConfigEntity = ConfigEntity
    SplitEntity = SplitEntity
    OtherOptionEntity = OtherOptionEntity
    upgrade_log = staticmethod(upgrade_log)
    graph_key = staticmethod(graph_key)
    TuneOptions = TuneOptions
    MeasureOptions = MeasureOptions
    LocalRunner = LocalRunner
    TuningInterrupted = TuningInterrupted
    TuningLogError = TuningLogError

    def __call__(self, outputs, options: TuneOptions | None = None, *, args=None,
                 strategy: str = "auto", **keywords):
        from .task import AutoTask, TemplateTask
        from .tune import tune
        options = options_from_keywords(options, keywords)
        if isinstance(outputs, dispatch.Template):
            if args is None:
                raise ArgumentError(f"te.autotune: template '{outputs.name}' needs args=(...) "
                                    f"to call it with")
            task = TemplateTask(outputs, args)
        else:
            task = AutoTask(outputs, args, _strategy_for(strategy, options))
        return tune(task, options)

    def session(self, outputs, options: TuneOptions | None = None, *, args=None,
                workers=None, strategy: str = "auto", **keywords):
        """A te.autotune run in steps (tune.Session: resumed from `log` when made, then
        .measure(n), .finish(), .close(); .result is the TuneResult): what graph.autotune
        interleaves over the kernels of a model. `workers`: a te.autotune.LocalRunner
        whose worker processes the session borrows; `strategy` as te.autotune's."""
        from .task import AutoTask
        from .tune import Session, check_log
        options = options_from_keywords(options, keywords)
        check_log(options.log, "te.autotune")
        return Session(AutoTask(outputs, args, _strategy_for(strategy, options)), options,
                       workers=workers)

    def __repr__(self):
        return "te.autotune"


autotune = _AutotuneAPI()
