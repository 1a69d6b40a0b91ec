"""Converting tuning logs of record format 1 (nested split factors) to today's format.

In format 1 a define_split value [-1, f1, ..., f_{n-1}] split the axis by f1, then the inner
loop by f2, and so on: loop extents [ceil(E/f1), ceil(f1/f2), ..., f_{n-1}]. Today entry k
is loop k's extent (TVM's SplitEntity, split.py), so the same schedule is [-1, f1/f2, ...,
f_{n-1}] when each factor divides the one before; a record where one does not had padded
middle loops that sizes cannot express, and is dropped (counted). Values of two entries mean
the same in both formats. A value is taken as a split when it is a list of ints beginning
with -1 (reorder values are permutations, annotations strings); a define_knob of such lists
would be misread, which no template of ours has. Imports records only.
"""
from __future__ import annotations

import json
import os

from . import records as R


def convert_split(value):
    """The format-2 value of a format-1 knob value, or None when it has no equivalent."""
    if not (isinstance(value, list) and len(value) >= 3 and value[0] == -1 and
            all(isinstance(f, int) and not isinstance(f, bool) and f >= 1 for f in value[1:])):
        return value
    factors = value[1:]
    sizes = []
    for outer, inner in zip(factors, factors[1:]):
        if outer % inner:
            return None
        sizes.append(outer // inner)
    return [-1] + sizes + [factors[-1]]


def upgrade_log(src, dst) -> dict:
    """Write every record of log `src` to the new log `dst`, format-1 records converted;
    returns {"kept": n, "converted": n, "dropped": n} (dropped: no exact equivalent)."""
    src, dst = os.fspath(src), os.fspath(dst)
    if os.path.exists(dst):
        raise ValueError(f"upgrade_log: dst '{dst}' exists; give a new file (src stays as "
                         f"it is)")
    R.check_regular(src)
    counts = {"kept": 0, "converted": 0, "dropped": 0}
    with open(src, "rb") as fh:
        for raw in fh:
            try:
                d = json.loads(raw)
            except ValueError:
                continue
            if not isinstance(d, dict) or d.get("v") not in (R.OLD_SPLIT_FORMAT,
                                                             R.RECORD_VERSION):
                continue
            old = d["v"] == R.OLD_SPLIT_FORMAT
            if old:
                knobs = dict(d.get("config", {}).get("knobs", {}))
                new = {k: convert_split(v) for k, v in knobs.items()}
                if any(v is None for v in new.values()):
                    counts["dropped"] += 1
                    continue
                d = dict(d, config={"knobs": new})
            try:
                rec = R.Record.from_json_dict(d)
            except (ValueError, KeyError, TypeError, AttributeError):
                continue
            R.append_record(dst, rec)
            counts["converted" if old else "kept"] += 1
    return counts
