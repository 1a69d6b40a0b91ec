"""Worker hooks for the isolation tests (loaded by file path inside measurement workers)."""
import ctypes
import os
import time


def misbehave(config):
    mode = config.get("knobs", {}).get("mode")
    if mode == "abort":
        os.abort()
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "hang":
        time.sleep(1000)


def always_hang(config):
    """Every candidate hangs, the unscheduled reference (no knobs) does not (for the
    resume-after-timeout and orphan-worker tests)."""
    if config and config.get("knobs"):
        time.sleep(1000)
