"""The host CPU's cache sizes, read from Linux sysfs (/sys/devices/system/cpu/cpu0/cache).

Gives l2_bytes() (cpu0's level-2 data or unified cache, per core; a fallback where sysfs does
not say) and parse_size() for sysfs's size text ('512K', '2M'). Imports nothing of the
project: te's schedules size their blocks by it, and te.cache keys code by it.
"""
from __future__ import annotations

import functools
import os

CACHE_DIR = "/sys/devices/system/cpu/cpu0/cache"
L2_FALLBACK = 1 << 20     # what the schedules assumed before reading the host (1 MiB)
_UNITS = {"": 1, "K": 1 << 10, "M": 1 << 20, "G": 1 << 30}


def parse_size(text: str) -> int | None:
    """Bytes of a sysfs cache size ('512K', '1024K', '2M', '65536'); None where it is not
    one."""
    text = text.strip().upper().removesuffix("B").removesuffix("I")
    unit = text[-1:] if text[-1:] in _UNITS else ""
    digits = text[:len(text) - len(unit)]
    if not digits.isdigit() or int(digits) == 0:
        return None
    return int(digits) * _UNITS[unit]


def read_l2_bytes(cache_dir: str | None = None) -> int | None:
    """The size of the level-2 Data or Unified cache listed under `cache_dir` (default
    CACHE_DIR; sysfs's index<i>/level, type, size), None where there is none or it cannot
    be read."""
    cache_dir = cache_dir or CACHE_DIR
    try:
        names = sorted(os.listdir(cache_dir))
    except OSError:
        return None
    for name in names:
        if not name.startswith("index"):
            continue
        try:
            fields = {f: _read(os.path.join(cache_dir, name, f))
                      for f in ("level", "type", "size")}
        except OSError:
            continue
        if fields["level"] == "2" and fields["type"] in ("Data", "Unified"):
            return parse_size(fields["size"])
    return None


def _read(path: str) -> str:
    with open(path) as f:
        return f.read().strip()


@functools.lru_cache(maxsize=1)
def l2_bytes() -> int:
    """This host's L2 cache per core in bytes (read once), L2_FALLBACK where unreadable."""
    return read_l2_bytes() or L2_FALLBACK
