"""tvm.autotvm.callback: log_to_file and progress_bar, as options of our tuning run.

Tuner.tune reads them: log_to_file(path) appends each measurement to `path` in te's
tuning-log format (JSON lines; apply_history_best reads it; a log that already holds
records of the task resumes the run), progress_bar shows te's progress line. Other
callback functions are refused by Tuner.tune.
"""
from __future__ import annotations

import os

from ...errors import ArgumentError


class log_to_file:  # noqa: N801 - TVM's name
    """Record every measurement in `file_out` (te's JSON-lines tuning log)."""

    def __init__(self, file_out, protocol: str = "json"):
        if not isinstance(file_out, (str, os.PathLike)):
            raise ArgumentError(f"autotvm.callback.log_to_file: file_out must be a file "
                                f"path, got {file_out!r}")
        self.path = os.fspath(file_out)


class progress_bar:  # noqa: N801 - TVM's name
    """Show the tuning progress (te's progress line on stderr)."""

    def __init__(self, total, prefix: str = "", si_prefix: str = "G"):
        self.total, self.prefix = total, prefix
