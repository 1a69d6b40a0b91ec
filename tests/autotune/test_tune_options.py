"""te.autotune.TuneOptions: every option of a tuning run in one frozen dataclass, checked
once when it is made (directly, from te.autotune's keywords, or by dataclasses.replace), and
te.autotune's keyword API building it."""
from __future__ import annotations

import dataclasses
import pathlib

import pytest

import te
from te.autotune import options as O
from te.autotune import records as R
from te.autotune.measure import MeasureOptions

FAST = MeasureOptions(number=1, repeat=2, min_repeat_ms=0)


def _double(n=32):
    A = te.placeholder((n,), name="A")
    return te.compute((n,), lambda i: A[i] * 2.0, name="B")


BAD = [
    (dict(trials=0), r"trials must be a positive int, got 0"),
    (dict(trials=2.0), r"trials must be a positive int, got 2.0"),
    (dict(target="rocm"), r"target must be 'llvm' \(this CPU\) or 'cuda', got 'rocm'"),
    (dict(target=None), r"target must be 'llvm' \(this CPU\) or 'cuda', got None"),
    (dict(log=""), r"log must be a file path \(str or os.PathLike\) or None, got ''"),
    (dict(log=3), r"log must be a file path \(str or os.PathLike\) or None, got 3"),
    (dict(tuner="bayes"), r"tuner must be one of random, grid, xgb, optuna, ga, got 'bayes'"),
    (dict(timeout=float("inf")), (r"timeout must be a positive number of seconds or None, "
                                  r"got inf")),
    (dict(timeout=True), r"timeout must be a positive number of seconds or None, got True"),
    (dict(seed=1.5), r"seed must be an int or None, got 1.5"),
    (dict(early_stopping=-3), r"early_stopping must be a positive int or None, got -3"),
    (dict(verbose=-1), r"verbose must be an int >= 0 or a bool \(0: quiet\), got -1"),
    (dict(verbose="yes"), r"verbose must be an int >= 0 or a bool \(0: quiet\), got 'yes'"),
    (dict(measure_option={"number": 1}), (r"measure_option must be a "
                                          r"te.autotune.MeasureOptions or None, got \{'number'")),
    (dict(batch_size=0), r"batch_size must be a positive int, got 0"),
]


@pytest.mark.parametrize("kwargs, message", BAD)
def test_each_option_is_checked_when_the_options_are_made(kwargs, message):
    with pytest.raises(te.ArgumentError, match="^te.autotune: " + message):
        te.autotune.TuneOptions(**kwargs)


@pytest.mark.parametrize("kwargs, message", BAD)
def test_te_autotune_keywords_are_checked_before_the_outputs(kwargs, message):
    # the options are made first: a bad option is reported even with bad outputs
    with pytest.raises(te.ArgumentError, match="^te.autotune: " + message):
        te.autotune([], **kwargs)


def test_replace_checks_again():
    opts = te.autotune.TuneOptions(trials=3)
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: trials must be a positive int"):
        dataclasses.replace(opts, trials=-1)


def test_every_option_has_a_check():
    assert list(O._CHECKS) == [f.name for f in dataclasses.fields(te.autotune.TuneOptions)]


def test_options_are_frozen_and_defaults_are_those_of_te_autotune():
    opts = te.autotune.TuneOptions()
    assert (opts.trials, opts.target, opts.log, opts.tuner, opts.batch_size, opts.verbose) == \
        (500, "llvm", None, "xgb", 16, 1)
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.trials = 3
    te.autotune.TuneOptions(log=pathlib.Path("x.jsonl"), verbose=False, timeout=2)


def test_an_unknown_keyword_names_the_near_option_and_lists_them_all():
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: unknown option 'trails'; did "
                                               r"you mean 'trials'\? the options are trials, "
                                               r"target, log, tuner, timeout, seed, "
                                               r"early_stopping, verbose, measure_option, "
                                               r"batch_size$"):
        te.autotune(_double(), trails=2)
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: unknown option 'n_parallel'; "
                                               r"the options are trials, "):
        te.autotune(_double(), n_parallel=2)


def test_options_given_positionally_must_be_tune_options():
    with pytest.raises(te.ArgumentError, match=r"^te.autotune: options must be a "
                                               r"te.autotune.TuneOptions \(or give "
                                               r"trials=\.\.\. and the other options as "
                                               r"keywords\), got 8$"):
        te.autotune(_double(), 8)


def test_options_and_keywords_give_the_same_run_and_the_same_log_records(tmp_path):
    log = str(tmp_path / "log.jsonl")
    B = _double(64)
    first = te.autotune(B, trials=3, tuner="grid", verbose=0, log=log, measure_option=FAST)
    assert len(first.history) == 3
    records = R.load_records(log)[0]
    # the same options as one object, with one keyword on top: it resumes from the records
    # the keyword call wrote (same workload, target and version), measuring nothing new
    opts = te.autotune.TuneOptions(trials=2, tuner="grid", verbose=0, measure_option=FAST)
    again = te.autotune(B, opts, log=log, trials=3)
    assert [t.config for t in again.history] == [t.config for t in first.history]
    assert len(R.load_records(log)[0]) == len(records)
    assert opts.trials == 2 and opts.log is None     # the caller's options are not changed
    # one more trial through the options alone
    more = te.autotune(B, dataclasses.replace(opts, trials=4, log=log))
    assert len(more.history) == 4
    assert {r.workload for r in R.load_records(log)[0]} == {records[0].workload}
