"""Tuning records: versioned JSON lines, append-only, safe with concurrent writers.

Takes measured configs; gives a log file where each line is one self-contained JSON record
(format version, workload key, target, package version, the config's knob values and the
measurement). Appends write a whole line on an O_APPEND descriptor under an exclusive
flock, so lines from several processes never interleave; a failed append (a full disk) cuts
the file back, and a crash can only cut the last line, which the reader skips with a
warning. No pickle: a log is data. Imports nothing from te.
"""
from __future__ import annotations

import errno
import fcntl
import json
import math
import os
import stat
import statistics
import time
import warnings
from dataclasses import dataclass, field

# Format 2: split knob values mean TVM's SplitEntity sizes (entry k is loop k's extent).
# Format 1 meant nested inner factors; its records are refused (upgrade.py converts them).
RECORD_VERSION = 2
OLD_SPLIT_FORMAT = 1

# Error kinds of a failed trial (AutoTVM's MeasureErrorNo, as readable strings). The first
# four are properties of the config; the last three may pass (load, a bad measure option).
INSTANTIATION_ERROR = "instantiation_error"  # ScheduleError: an illegal config
LOWER_ERROR = "lower_error"                  # lowering or codegen raised
COMPILE_ERROR = "compile_error"              # LLVM compilation in the worker, or te.build
                                             # for 'cuda' (its GPU limits, nvcc) raised
RUNTIME_ERROR = "runtime_error"              # the kernel raised a Python error
WRONG_ANSWER = "wrong_answer"                # result differs from the reference
CRASH = "crash"                              # the worker process died (segfault, abort)
TIMEOUT = "timeout"                          # the worker did not answer in time
ERROR_KINDS = (INSTANTIATION_ERROR, LOWER_ERROR, COMPILE_ERROR, RUNTIME_ERROR, WRONG_ANSWER,
               CRASH, TIMEOUT)
TRANSIENT_ERRORS = (RUNTIME_ERROR, CRASH, TIMEOUT)


# Record.to_line sorts its keys, so every record line starts with this: a line cut short
# by a crash while it was written is a prefix of a record line.
LINE_START = '{"config":'
_NOT_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (fifo)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def check_regular(path: str) -> None:
    """Refuse an existing path that is not a regular file, by os.stat alone: opening a
    fifo blocks until someone writes to it, and a device or directory is no log."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return  # missing (a new log) or unreachable: opening it says what is wrong
    for test, what in _NOT_REGULAR:
        if test(mode):
            raise ValueError(f"log: '{path}' is {what}, not a regular file")


def check_log_path(path: str) -> None:
    """Refuse a log that cannot be appended to, or an existing file that is not a tuning log
    (so a mistyped --log never appends JSON to someone's script), before any measurement.
    A file whose only lines are records cut short by a crash is a tuning log."""
    check_is_log(path)
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as err:
        raise ValueError(f"log: cannot append to '{path}': {err.strerror}") from None
    os.close(fd)


def check_is_log(path: str) -> None:
    """Refuse an existing, non-empty file none of whose lines is a te record (an AutoTVM
    log of TVM's own format among them): reading it would silently give no records."""
    check_regular(path)
    if os.path.exists(path) and os.path.getsize(path) > 0:
        records, skipped, cut, old = _read_log(path)
        if not records and skipped > cut + old:
            raise ValueError(f"log: '{path}' is not a te tuning log (none of its lines is a "
                             f"record; logs of TVM's AutoTVM are not read: tune again with "
                             f"te); choose another file")


@dataclass(frozen=True)
class MeasureResult:
    """One trial: run times in seconds (empty if it failed) or an error kind and message."""
    costs: tuple = ()
    error: str | None = None
    msg: str = ""
    compile_s: float = 0.0
    timestamp: float = field(default_factory=time.time)

    @property
    def ok(self) -> bool:
        return self.error is None and bool(self.costs)

    @property
    def median(self) -> float:
        if not self.ok:
            return math.inf
        c = sorted(self.costs)
        n = len(c)
        return c[n // 2] if n % 2 else 0.5 * (c[n // 2 - 1] + c[n // 2])

    def to_json_dict(self) -> dict:
        return {"costs": list(self.costs), "error": self.error, "msg": self.msg[:2000],
                "compile_s": round(self.compile_s, 4), "timestamp": round(self.timestamp, 3)}

    @staticmethod
    def from_json_dict(d: dict) -> "MeasureResult":
        costs = tuple(float(c) for c in d.get("costs", ()))
        if not all(math.isfinite(c) and c > 0 for c in costs):
            raise ValueError(f"a run time must be a positive finite number, got {costs}")
        error = d.get("error")
        if error is not None and error not in ERROR_KINDS:
            raise ValueError(f"unknown error kind {error!r}")
        return MeasureResult(costs, error, str(d.get("msg", "")), float(d.get("compile_s", 0.0)),
                             float(d.get("timestamp", 0.0)))


@dataclass(frozen=True)
class Record:
    workload: str
    target: str
    version: str
    config: dict           # {"knobs": {...}}
    result: MeasureResult
    flops: float = 0.0

    def to_line(self) -> str:
        data = {"v": RECORD_VERSION, "workload": self.workload, "target": self.target,
                "te_version": self.version, "config": self.config,
                "result": self.result.to_json_dict(), "flops": self.flops}
        return json.dumps(data, sort_keys=True, separators=(",", ":")) + "\n"

    @staticmethod
    def from_json_dict(d: dict) -> "Record":
        return Record(d["workload"], d["target"], d["te_version"], d["config"],
                      MeasureResult.from_json_dict(d["result"]), float(d.get("flops", 0.0)))


def append_record(path: str, record: Record) -> None:
    """Append one record as one line; safe against concurrent appenders and crashes. An
    OSError (a full disk) leaves the file as it was."""
    data = record.to_line().encode()
    check_regular(path)
    fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        try:
            size = os.fstat(fd).st_size
            # A writer that died mid-line left no newline: start ours on a fresh line so the
            # broken line stays the only casualty.
            if size and os.pread(fd, 1, size - 1) != b"\n":
                data = b"\n" + data
            _write_whole(fd, data, size)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


def _write_whole(fd: int, data: bytes, size: int) -> None:
    """Write all of `data` at the end of the file, or nothing: when a write fails part way
    (a full disk: a short write, then ENOSPC) or is interrupted (Ctrl-C), cut the file back
    to its `size` before, so the log keeps whole lines only."""
    view = memoryview(data)
    try:
        while view:
            written = os.write(fd, view)
            if written == 0:
                raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
            view = view[written:]
    except BaseException:
        os.ftruncate(fd, size)
        raise


def load_records(path: str) -> tuple:
    """(records, skipped): every readable record in the file, and how many lines were not;
    warns when some of those are records cut short by a crash."""
    records, skipped, cut, old = _read_log(path)
    if cut:
        warnings.warn(f"log '{path}': skipped {cut} line{'s' if cut > 1 else ''} cut short "
                      f"(a crash while it was written)", stacklevel=2)
    if old:
        warnings.warn(old_format_text(path, old), stacklevel=2)
    return records, skipped


def old_format_text(path: str, count: int) -> str:
    return (f"log '{path}': {count} record{'s' if count > 1 else ''} in record format "
            f"{OLD_SPLIT_FORMAT} not used: in that format a define_split value [-1, f1, f2, "
            f"...] meant nested inner factors, now entry k is loop k's extent (TVM's "
            f"SplitEntity). Convert the log with te.autotune.upgrade_log('{path}', "
            f"'new.jsonl') or tune again")


def _read_log(path: str) -> tuple:
    """(records, skipped, cut, old): cut counts the skipped lines that begin as a record
    does, old the skipped records of format 1 (read_old_records reads those)."""
    records, skipped, cut, old = [], 0, 0, 0
    check_regular(path)
    try:
        fh = open(path, "rb")
    except FileNotFoundError:
        return [], 0, 0, 0
    start = LINE_START.encode()
    with fh:
        for raw in fh:
            line = raw.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
            except ValueError:  # not JSON (nor UTF-8): maybe a record cut short
                skipped += 1
                cut += line.startswith(start) or start.startswith(line)
                continue
            try:
                if d.get("v") != RECORD_VERSION:
                    skipped += 1
                    old += d.get("v") == OLD_SPLIT_FORMAT and "config" in d
                    continue
                records.append(Record.from_json_dict(d))
            except (ValueError, KeyError, TypeError, AttributeError):
                skipped += 1
    return records, skipped, cut, old


def config_key(config: dict) -> str:
    """One string per config (its knob values), for grouping repeated measurements."""
    return json.dumps(config, sort_keys=True, separators=(",", ":"))


def rank_by_config(measured: list) -> list:
    """[(cost, fastest item)] per config, best config first, over `measured`: (config dict,
    MeasureResult, item) triples in the order they were measured, failed ones ignored.
    A config's first measurement is its trial; later ones are re-measurements (the tuner
    re-measures its leaders at the end of a run, in turn, so they share the machine's
    state). Re-measured configs rank by the median of their re-measurements, ahead of the
    configs never re-measured, so neither one lucky trial nor a trial taken while the
    machine was faster decides the winner (on a shared VM the same kernel's time moves by
    half between minutes); those follow by their trial. Except: a config never
    re-measured whose trial beats every re-measured config's trial was logged after the
    re-measurement, or by a run stopped before it, and would have led it: those rank
    first, by their trial."""
    groups: dict = {}
    for config, result, item in measured:
        if result.ok:
            groups.setdefault(config_key(config), []).append((result.median, item))
    ranked = []   # (re-measured, cost, trial, fastest item)
    for g in groups.values():
        again = g[1:]
        cost = statistics.median(c for c, _ in again) if again else g[0][0]
        ranked.append((bool(again), cost, g[0][0], min(g, key=lambda x: x[0])[1]))
    first_trial = min((trial for again, _, trial, _ in ranked if again), default=math.inf)

    def tier(again: bool, trial: float) -> int:
        return 1 if again else (0 if trial < first_trial else 2)
    ranked.sort(key=lambda x: (tier(x[0], x[2]), x[1]))
    return [(cost, item) for _, cost, _, item in ranked]


def rank_trials(measured: list) -> list:
    """Like rank_by_config, by each config's trial (first measurement) alone: which
    configs are the leaders to re-measure."""
    seen, trials = set(), []
    for config, result, item in measured:
        key = config_key(config)
        if key not in seen:
            seen.add(key)
            trials.append((config, result, item))
    return rank_by_config(trials)


def best_records(path: str, target: str | None = None, version: str | None = None) -> dict:
    """{workload: the fastest Record of the best config} over a log, optionally for one
    target/version; configs are ranked as rank_by_config does."""
    per_workload: dict = {}
    for rec in load_records(path)[0]:
        if target is not None and rec.target != target:
            continue
        if version is not None and rec.version != version:
            continue
        per_workload.setdefault(rec.workload, []).append((rec.config, rec.result, rec))
    best = {}
    for workload, measured in per_workload.items():
        ranked = rank_by_config(measured)
        if ranked:
            best[workload] = ranked[0][1]
    return best
