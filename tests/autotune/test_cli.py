"""`python -m te tune` and `python -m te demo` as a user runs them: a fresh process, the
printed result, the log it leaves, and usage errors (exit code 2, no traceback)."""
import json
import os
import re
import resource
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from te.autotune import records as R
from te.autotune.cli import numpy_blas, ratio_text
from te.autotune.result import CONFIRM_ROUNDS, CONFIRM_TOP

REPO_ROOT = Path(__file__).resolve().parents[2]


ENV = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_WAIT_POLICY="passive")


def _te(*argv, cwd, **kwargs):
    return subprocess.run([sys.executable, "-m", "te", *argv], capture_output=True, text=True,
                          env=ENV, cwd=cwd, timeout=300, **kwargs)


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
    # 4 trials, then the leaders again
    assert len(records) == 4 + CONFIRM_TOP * CONFIRM_ROUNDS
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
    (("tune", "matmul", "--trials", "0"), "te.autotune: trials must be a positive int, got 0"),
    (("tune", "matmul", "--tuner", "bayes"), ("te.autotune: tuner must be one of random, "
                                              "grid, xgb, optuna, ga, got 'bayes'")),
    (("demo", "--size", "0"), "--size must be a positive integer, got 0"),
    (("demo", "--size", "50000"), "te.build: argument 'A' has 2500000000 elements, beyond the "
                                  "int32 index range"),
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


def _address_space_3gib():
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))


@pytest.mark.parametrize("argv, option", [
    (("tune", "softmax", "--shape", "40000", "40000", "--trials", "1"), "--shape"),
    (("demo", "--size", "40000", "--no-ir"), "--size"),
])
def test_running_out_of_memory_is_a_one_line_error(tmp_path, argv, option):
    # a 40000^2 float32 input (6 GiB) in a process that may map 3 GiB
    run = _te(*argv, cwd=tmp_path, preexec_fn=_address_space_3gib)
    assert run.returncode == 1, run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"python -m te {argv[0]}: error: out of memory \(Unable to allocate "
                        rf"5.96 GiB for an array with shape \(40000, 40000\) and data type "
                        rf"float32\); try a smaller {option}", last), last
    assert "Traceback" not in run.stderr


def _children(pid: int) -> list:
    out = subprocess.run(["ps", "-o", "pid=", "--ppid", str(pid)], capture_output=True,
                         text=True).stdout
    return [int(p) for p in out.split()]


def _default_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_the_ctrl_c_test_starts_its_command_with_sigint_as_a_terminal_does():
    # a pytest run as a shell's background job (`pytest ... &`, nohup) ignores SIGINT, and a
    # Python that inherits that installs no KeyboardInterrupt handler
    ignored = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        run = subprocess.run([sys.executable, "-c", "import signal; print(signal.getsignal("
                              "signal.SIGINT) is signal.default_int_handler)"],
                             capture_output=True, text=True, timeout=60,
                             preexec_fn=_default_sigint)
        inherited = subprocess.run([sys.executable, "-c", "import signal; print(signal."
                                    "getsignal(signal.SIGINT) == signal.SIG_IGN)"],
                                   capture_output=True, text=True, timeout=60)
    finally:
        signal.signal(signal.SIGINT, ignored)
    assert run.stdout == "True\n", run.stderr
    assert inherited.stdout == "True\n", inherited.stderr   # what _default_sigint undoes


def test_ctrl_c_says_how_many_trials_are_saved_and_how_to_resume(tmp_path):
    log = tmp_path / "mm.jsonl"
    # Ctrl-C in a terminal signals the whole process group: the workers get it too
    proc = subprocess.Popen([sys.executable, "-m", "te", "tune", "matmul", "--shape", "24",
                             "20", "16", "--trials", "2000", "--log", str(log)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=ENV,
                            cwd=tmp_path, start_new_session=True,
                            # as from a terminal: a shell's background job (CI run with `&`)
                            # inherits SIGINT ignored, and Python then never raises
                            # KeyboardInterrupt
                            preexec_fn=_default_sigint)
    try:
        deadline = time.time() + 240
        while time.time() < deadline and proc.poll() is None and \
                (not log.exists() or len(log.read_text().splitlines()) < 3):
            time.sleep(0.2)
        workers = _children(proc.pid)
        assert workers, "no measurement worker was running"
        os.killpg(proc.pid, signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    # killed by SIGINT, as Python ends on Ctrl-C (a shell reports 130)
    assert proc.returncode == -signal.SIGINT, err
    assert "Traceback" not in err
    last = err.strip().splitlines()[-1]
    m = re.fullmatch(r"python -m te tune: interrupted: (\d+) trials saved in '(.*)'; run the "
                     r"same command to resume", last)
    assert m and m.group(2) == str(log), last
    lines = log.read_text().splitlines()
    assert int(m.group(1)) == len(lines) >= 3
    assert all(json.loads(line)["v"] == R.RECORD_VERSION for line in lines)
    time.sleep(1)
    assert not [p for p in workers if os.path.exists(f"/proc/{p}")], "workers outlived the run"


def test_a_full_disk_ends_the_tune_command_with_a_one_line_error(tmp_path):
    log = tmp_path / "mm.jsonl"
    script = (
        "import errno, os, sys\n"
        "from te.autotune import records as R\n"
        "real, calls = R.append_record, []\n"
        "def append(path, record):\n"
        "    calls.append(1)\n"
        "    if len(calls) > 2:\n"
        "        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))\n"
        "    real(path, record)\n"
        "R.append_record = append\n"
        "from te.__main__ import main\n"
        "sys.exit(main(sys.argv[1:]))\n")
    run = subprocess.run([sys.executable, "-c", script, "tune", "matmul", "--shape", "24", "20",
                          "16", "--trials", "6", "--log", str(log)], capture_output=True,
                         text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    assert re.fullmatch(rf"python -m te tune: error: te.autotune: cannot append to the log "
                        rf"'{re.escape(str(log))}' \(No space left on device\); it holds 2 whole "
                        rf"trials of T_matmul, which a run with the same log resumes from; best "
                        rf"so far [0-9.e+-]+ ms \([0-9.]+ GFLOP/s\), config {{.*}}", last), last
    assert len(log.read_text().splitlines()) == 2


# The tuned kernel, built again in the command's process, made wrong after it runs: one
# element of its output off by 0.5 (the workers, which do not run this script, measured the
# right kernel), or every element NaN.
_WRONG_KERNEL = (
    "import sys\n"
    "import te\n"
    "real, mode = te.build, sys.argv.pop(1)\n"
    "def build(*args, **kwargs):\n"
    "    mod = real(*args, **kwargs)\n"
    "    def call(*arrays):\n"
    "        mod(*arrays)\n"
    "        if mode == 'nan':\n"
    "            arrays[-1][...] = float('nan')\n"
    "        else:\n"
    "            arrays[-1][5, 3] += 0.5\n"
    "    call.time_evaluator = mod.time_evaluator\n"
    "    return call\n"
    "te.build = build\n"
    "from te.__main__ import main\n"
    "sys.exit(main(sys.argv[1:]))\n")


@pytest.mark.parametrize("mode, error, count", [("off", r"0\.5 at \(5, 3\)", 1),
                                                ("nan", r"nan at \(0, 0\)", 24 * 20)])
@pytest.mark.parametrize("with_log", [True, False])
def test_a_tuned_kernel_that_disagrees_with_numpy_is_a_one_line_error(tmp_path, mode, error,
                                                                      count, with_log):
    log = tmp_path / "mm.jsonl"
    argv = ["tune", "matmul", "--shape", "24", "20", "16", "--trials", "2", "--no-ir"]
    if with_log:
        argv += ["--log", str(log)]
    run = subprocess.run([sys.executable, "-c", _WRONG_KERNEL, mode, *argv], check=False,
                         capture_output=True, text=True, env=ENV, cwd=tmp_path, timeout=300)
    assert run.returncode == 1, run.stderr
    assert "Traceback" not in run.stderr
    last = run.stderr.strip().splitlines()[-1]
    where = f"in the log '{re.escape(str(log))}'" if with_log else r"of this run \(no --log\)"
    assert re.fullmatch(rf"python -m te tune: error: the tuned matmul kernel does not match "
                        rf"numpy: max error {error}, where the tolerance is 0\.001 \+ 0\.001 \* "
                        rf"\|numpy\| \({count} of 480 elements beyond it\); the kernel is the "
                        rf"best config {where}: {{.*}}", last), last
    assert "the tuned kernel matches numpy" not in run.stdout
