"""benchmarks/graph_run.py's bookkeeping, never timings: the ratio is the median of the
per-round ratios, every level graph.compile offers is run, bad --models is refused by
name, and the table is markdown with one row per (model, threads, level)."""
import importlib
import os
import sys

import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks"))
import graph_run  # noqa: E402


def test_rows_take_the_median_of_per_round_ratios():
    result = {"model": "m", "threads": 2, "ort": [0.010, 0.030, 0.020],
              "levels": {"O0": {"times": [0.020, 0.010, 0.040], "compile_s": 1.25,
                                "err": 3e-7, "kernels": 5}}}
    (row,) = graph_run.rows_of(result)
    # per-round ratios 0.5, 3.0, 0.5 -> 0.5 (the ratio of the medians would be 1.0)
    assert row == ["m", "2", "O0", "1.2", "20.0", "150%", "20.0", "0.50x", "5", "3.0e-07"]
    table = graph_run.markdown([row]).splitlines()
    assert table[0].startswith("| model | thr | level |") and len(table) == 3


def test_every_level_of_graph_compile_is_run():
    levels = graph_run.available_levels()
    assert levels == tuple(importlib.import_module("graph.compile").LEVELS)
    assert "O0" in levels


def test_unknown_models_are_refused_by_name(capsys):
    with pytest.raises(SystemExit):
        graph_run.main(["--models", "resnet50,lenet"])
    assert "--models: unknown ['lenet']" in capsys.readouterr().err
