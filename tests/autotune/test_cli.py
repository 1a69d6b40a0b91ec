"""`python -m te tune` and `python -m te demo` as a user runs them: a fresh process, the
printed result, the log it leaves, and usage errors (exit code 2, no traceback)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from te.autotune.cli import numpy_blas, ratio_text
from te.autotune.tune import CONFIRM_ROUNDS, CONFIRM_TOP

REPO_ROOT = Path(__file__).resolve().parents[2]


def _te(*argv, cwd):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_WAIT_POLICY="passive")
    return subprocess.run([sys.executable, "-m", "te", *argv], capture_output=True, text=True,
                          env=env, cwd=cwd, timeout=300)


def test_tune_prints_the_best_schedule_and_a_table_against_numpy(tmp_path):
    log = tmp_path / "mm.jsonl"
    run = _te("tune", "matmul", "--shape", "33", "20", "17", "--trials", "4", "--log",
              str(log), "--seed", "1", cwd=tmp_path)
    assert run.returncode == 0, run.stderr
    out = run.stdout
    assert "best config after 4 trials" in out
    assert "@matmul(A: float32[33, 17], B: float32[17, 20]" in out   # the lowered IR
    table = [line.split() for line in out.splitlines() if line.lstrip().startswith("matmul ")]
    assert len(table) == 1 and table[0][-1].endswith("x") and float(table[0][-1][:-1]) > 0
    assert "the tuned kernel matches numpy" in out and "BLAS:" in out
    records = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(records) == 4 + CONFIRM_TOP * CONFIRM_ROUNDS          # 4 trials, then the leaders again
    assert len({json.dumps(r["config"], sort_keys=True) for r in records}) == 4
    # a second run resumes from the log: nothing new to measure for the same 4 trials
    again = _te("tune", "matmul", "--shape", "33", "20", "17", "--trials", "4", "--log",
                str(log), "--no-ir", cwd=tmp_path)
    assert again.returncode == 0, again.stderr
    assert "@matmul" not in again.stdout
    assert len(log.read_text().splitlines()) == 4 + CONFIRM_TOP * CONFIRM_ROUNDS


@pytest.mark.parametrize("argv, message", [
    (("tune", "matmull"), "te tune: unknown operator 'matmull'; choose one of matmul"),
    (("tune", "matmul", "--shape", "8", "8"), "te tune: matmul takes --shape M N K, got 2 "
                                              "numbers"),
    (("demo", "--size", "0"), "--size must be a positive integer, got 0"),
])
def test_usage_errors_name_the_problem_without_a_traceback(tmp_path, argv, message):
    run = _te(*argv, cwd=tmp_path)
    assert run.returncode == 2
    assert message in run.stderr
    assert "Traceback" not in run.stderr


def test_numpy_blas_names_the_kernel_family():
    name = numpy_blas()
    assert name == "unknown" or (name.startswith("OpenBLAS ") and len(name) > 9)


@pytest.mark.parametrize("ratio, text", [(1.456, "1.46x"), (0.1, "0.10x"), (0.0999, "0.1x"),
                                         (0.00337, "0.0034x"), (123.4, "123.40x")])
def test_ratio_text_keeps_a_slow_kernel_s_ratio_above_zero(ratio, text):
    # CI once printed "0.00x" for a tiny parallel kernel timed while a neighbour held a core
    assert ratio_text(ratio) == text
