"""benchmarks/targets.py and run.measure: the "% of copy" targets use the copy kernel timed
in the same rounds as the row (its per-round time ratio), falling back to the copy row;
measure() reports that ratio. No timings are asserted, only the arithmetic and wiring.

Imports numpy, pytest, te, runtime and benchmarks/{run,targets,kernels}.
"""
import os
import sys

import numpy as np

import runtime
import te

BENCH = os.path.join(os.path.dirname(__file__), "..", "..", "benchmarks")
sys.path.insert(0, BENCH)
import kernels  # noqa: E402
import run  # noqa: E402
import targets  # noqa: E402

N = 4096
BYTES = 8 * N * N


def _row(kernel, ms, ratios=None, threads=1):
    return run.Row(kernel, f"{N}x{N}", threads, ms / 1e3, 0.0, BYTES, "GB/s",
                   ratios or {}, {})


def _copy_verdict(verdicts, kernel):
    return next(v for v in verdicts if v[0].startswith(kernel) and "of copy" in v[0])


def test_copy_share_comes_from_the_same_rounds_when_measured():
    copy = _row("copy", 4.0)  # a slow copy row: 33.6 GB/s
    fast = _row("softmax", 5.0, {"yardstick": 0.64})  # copy took 0.64 of softmax's time
    slow = _row("layernorm", 5.0, {"yardstick": 0.75})
    verdicts = targets.evaluate([copy, fast, slow], [], quick=False)
    name, text, met = _copy_verdict(verdicts, "softmax")
    assert not met and text == "64% of 41.9 GB/s (copy in the same rounds)", text
    name, text, met = _copy_verdict(verdicts, "layernorm")
    assert met and text == "75% of 35.8 GB/s (copy in the same rounds)", text


def test_copy_share_falls_back_to_the_copy_row():
    verdicts = targets.evaluate([_row("copy", 4.0), _row("softmax", 5.0)], [], quick=False)
    name, text, met = _copy_verdict(verdicts, "softmax")
    assert met and text == "80% of 33.6 GB/s (the copy row)", text


class _NoReferences:
    def time(self, kind, case, params, number, repeat):
        return "n/a"


def test_measure_times_the_yardstick_in_every_round():
    n = 64
    mod = te.build(*kernels.softmax(n, n))
    copy = te.build(*kernels.copy(n, n))
    rng = np.random.default_rng(0)
    x = np.asarray(runtime.array(rng.standard_normal((n, n)).astype("float32")))
    y = np.asarray(runtime.array(np.zeros((n, n), "float32")))
    before = runtime.num_threads()
    try:
        t, spread, ratios, ref_s = run.measure(_NoReferences(), mod, [x, y], "softmax", {},
                                               1, 3, yardstick=(copy, [x, y]))
    finally:
        runtime.set_num_threads(before)
    assert t > 0 and ratios["yardstick"] > 0 and ref_s == {}
    assert set(ratios) == {"yardstick"}


class _FakeModule:
    """Stands for a built kernel whose every batch takes `seconds`; records the order in
    which the candidates were timed."""

    def __init__(self, seconds, log, label):
        self.seconds, self.log, self.label = seconds, log, label

    def time_evaluator(self, number, repeat):
        def timed(*args):
            self.log.append(self.label)
            return type("Result", (), {"median": self.seconds, "min": self.seconds})()
        return timed


def test_pick_variant_keeps_the_fastest_form_and_alternates_which_goes_first():
    log = []
    candidates = [(label, _FakeModule(sec, log, label), []) for label, sec in
                  (("one row", 5.7e-3), ("16 rows side by side", 4.5e-3), ("8 rows", 4.9e-3))]
    label, mod, xs, took = run.pick_variant(candidates, threads=1, rounds=4)
    assert label == "16 rows side by side" and mod is candidates[1][1]
    assert took == ("1 thr: one row 5.700 ms, 16 rows side by side 4.500 ms, 8 rows 4.900 "
                    "ms -> 16 rows side by side")
    rounds = [log[1 + 3 * k:1 + 3 * (k + 1)] for k in range(4)]   # after one sizing call
    assert rounds[0][0] == "one row" and rounds[1][0] == "8 rows"


def test_results_name_the_form_each_kernel_ran():
    row = run.Row("sum", f"{N}x{N}", 1, 4.5e-3, 0.0, BYTES // 2, "GB/s", {}, {},
                  "16 rows side by side")
    table = run.format_table([row])
    assert table[1].startswith("sum [16 rows side by side]  4096x4096  1")
    text = targets.results_markdown("cmd", "machine", table, [], [],
                                    ["sum, 1 thr: one row 5.7 ms, 16 rows 4.5 ms -> 16 rows"])
    assert "- sum, 1 thr: one row 5.7 ms, 16 rows 4.5 ms -> 16 rows" in text
    assert "Kernels with several hand-written forms" not in targets.results_markdown(
        "cmd", "machine", table, [], [])
