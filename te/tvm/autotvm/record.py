"""tvm.autotvm.record: load_from_file and pick_best over te's tuning logs.

load_from_file yields (record, result) pairs: te.autotune.records.Record (workload,
target, config) and its MeasureResult (costs, error), where TVM yields its MeasureInput and
MeasureResult. pick_best writes each workload's best record to a new log. Imports
te.autotune.records.
"""
from __future__ import annotations

import os

from ...autotune import records as R


def load_from_file(filename):
    for rec in R.load_records(os.fspath(filename))[0]:
        yield rec, rec.result


def pick_best(in_file, out_file) -> None:
    """Write the best record of every workload and target in `in_file` to `out_file`."""
    best = {}
    for rec in R.load_records(os.fspath(in_file))[0]:
        best.setdefault((rec.workload, rec.target, rec.version), []).append(
            (rec.config, rec.result, rec))
    for measured in best.values():
        ranked = R.rank_by_config(measured)
        if ranked:
            R.append_record(os.fspath(out_file), ranked[0][1])
