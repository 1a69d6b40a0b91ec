"""Issue 3's targets checked against a benchmark run, and the RESULTS.md text.

Takes the Rows of benchmarks/run.py and the overhead measurements; gives evaluate() ->
[(target, measured, met)], verdict_lines() and results_markdown(). The analysis of missed
targets (what limits them, with evidence) lives in benchmarks/ANALYSIS.md and is appended.
Imports stdlib only.
"""
from __future__ import annotations

import os

HERE = os.path.dirname(os.path.abspath(__file__))


def _rows(rows, kernel, threads=None, shape=None):
    return [r for r in rows if r.kernel == kernel and (threads is None or r.threads == threads)
            and (shape is None or r.shape == shape)]


def _ratio_target(out, rows, ref, minimum, label):
    for r in rows:
        got = r.ratios.get(ref)
        measured = "n/a" if got is None else f"{got:.2f}x"
        out.append((f"{label} {r.shape} {r.threads} thr >= {minimum}x {ref}", measured,
                    None if got is None else got >= minimum))


def evaluate(rows: list, over: list, quick: bool) -> list:
    out = []
    chain = [r for r in rows if r.kernel.startswith("gemm chain: ")]
    for prev, cur in zip(chain, chain[1:]):
        out.append((f"{cur.kernel} faster than {prev.kernel.split(': ')[1]}",
                    f"{cur.te_s * 1e3:.1f} ms vs {prev.te_s * 1e3:.1f} ms", cur.te_s < prev.te_s))
    if chain:
        _ratio_target(out, chain[-1:], "numpy", 0.6, "gemm chain: parallel")
    best = _rows(rows, "matmul best")
    if best:
        big = best[0].shape
        _ratio_target(out, [r for r in best if r.shape == big], "numpy", 0.85, "matmul best")
        _ratio_target(out, [r for r in best if r.shape != big], "numpy", 0.7, "matmul best")
    for r in rows:
        if r.kernel.startswith("conv2d"):
            _ratio_target(out, [r], "onnxruntime", 0.8, r.kernel)
    for r in rows:
        if r.unit != "GB/s" or r.kernel == "copy":
            continue
        _ratio_target(out, [r], "numpy", 3.0, r.kernel)
        _ratio_target(out, [r], "onnxruntime", 1.0, r.kernel)
        copies = _rows(rows, "copy", r.threads, r.shape)
        if copies:
            c = copies[0]
            if "yardstick" in r.ratios:
                # copy timed in the same rounds on this row's own arrays (run.py)
                frac = r.ratios["yardstick"] * r.work / c.work
                copy_rate = (r.work / r.te_s) / frac
                where = "copy in the same rounds"
            else:
                copy_rate = c.work / c.te_s
                if "numpy" in c.ref_s:
                    copy_rate = max(copy_rate, c.work / c.ref_s["numpy"])
                frac = (r.work / r.te_s) / copy_rate
                where = "the copy row"
            out.append((f"{r.kernel} {r.shape} {r.threads} thr >= 70% of copy bandwidth",
                        f"{frac * 100:.0f}% of {copy_rate / 1e9:.1f} GB/s ({where})",
                        frac >= 0.7))
    for name, value, unit, target in over:
        out.append((f"{name} < {target:g} {unit}", f"{value:.3g} {unit}", value < target))
    return out


def _mark(met) -> str:
    return "n/a" if met is None else ("met" if met else "MISSED")


def verdict_lines(verdicts: list) -> list:
    met = sum(1 for v in verdicts if v[2])
    lines = [f"{_mark(m):6s}  {t}: {g}" for t, g, m in verdicts]
    return lines + [f"{met} of {len(verdicts)} targets met"]


def results_markdown(command: str, info: str, table: list, over: list, verdicts: list,
                     choices: tuple = ()) -> str:
    """choices: lines saying which hand-written form of a kernel ran fastest here (in
    brackets in the table) and what each form took, timed before that kernel's rows."""
    met = sum(1 for v in verdicts if v[2])
    parts = [
        "# Benchmark results", "",
        f"Command: `{command}` (from the repository root; `OMP_WAIT_POLICY=passive` is set by "
        "the script).", "",
        f"Machine: {info}", "",
        "Each te figure is the median over alternating rounds (te, then numpy, then "
        "onnxruntime in a separate worker process with the same thread count) of the best of "
        "3 timed batches; `spread` is (max - min) / median of te's rounds. Ratios are "
        "reference time / te time, the median of the per-round ratios (> 1: te is faster). "
        "GB/s counts the bytes that must move at the least (read the input once, write the "
        "output once).", "",
        "```", *table, "```", "",
        *(["Kernels with several hand-written forms (benchmarks/kernels.py VARIANTS) run "
           "the form that was fastest here, 5 alternating rounds of each, medians:", "",
           *[f"- {c}" for c in choices], ""] if choices else []),
        "## Fixed costs", "",
        *[f"- {name}: {value:.3g} {unit} (target < {target:g} {unit})"
          for name, value, unit, target in over], "",
        f"## Targets ({met} of {len(verdicts)} met)", "",
        "| target | measured | |", "|---|---|---|",
        *[f"| {t} | {g} | {_mark(m)} |" for t, g, m in verdicts], "",
    ]
    graph = os.path.join(HERE, "graph_results.md")   # benchmarks/graph_run.py's last table
    if os.path.exists(graph):
        with open(graph) as f:
            parts += [f.read()]
    analysis = os.path.join(HERE, "ANALYSIS.md")
    if os.path.exists(analysis):
        with open(analysis) as f:
            parts += [f.read()]
    return "\n".join(parts) + "\n"
