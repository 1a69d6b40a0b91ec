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
