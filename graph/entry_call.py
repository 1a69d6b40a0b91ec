"""One call of an O2 entry point from Python, shared by O2Module and a loaded library.

fast_inputs takes the feeds and the inputs' (name, dtype, shape) and gives the arrays in
input order when they need no check or conversion (else None); call_entry writes the feed
and output addresses into the module's pointer array, makes the call, and returns the
outputs. Imports numpy and runtime.checker only (a loaded model imports no compiler).
"""
from __future__ import annotations

import numpy as np

from runtime.checker import data_pointer


def fast_inputs(feeds, specs) -> list | None:
    """The feeds in input order where each is a C-contiguous ndarray of its dtype and
    shape (the common case); None where anything needs the full check."""
    if type(feeds) is not dict or len(feeds) != len(specs):
        return None
    inputs = []
    for name, dtype, shape in specs:
        a = feeds.get(name)
        if (type(a) is not np.ndarray or a.dtype != dtype or a.shape != shape
                or not a.flags.c_contiguous):
            return None
        inputs.append(a)
    return inputs


def call_entry(module, inputs: list, results: list) -> list:
    """Run `module`'s entry over `inputs`; `results`: per graph output (shape, how), how
    ("new", shape, dtype) for a fresh array the call writes, or (kind, index) for a view
    of another output, an input or a constant. `module` has _lock, _pointers, _entry,
    _entry_args, _raise(status) and _constants."""
    outs = [np.empty(how[1], how[2]) if how[0] == "new" else None for _, how in results]
    n_in = len(inputs)
    with module._lock:  # the pointer array and the arena are the module's, one run at once
        pointers = module._pointers
        for k, a in enumerate(inputs):
            pointers[k] = data_pointer(a)
        for k, a in enumerate(outs):
            if a is not None:
                pointers[n_in + k] = data_pointer(a)
        status = module._entry(*module._entry_args)
        if status:
            module._raise(status)
    source = {"output": outs, "input": inputs, "constant": module._constants}
    for k, (shape, how) in enumerate(results):
        if outs[k] is None:
            # a view of another output shares its array; an input's or a constant's
            # memory is copied: the caller owns what run returns
            a = source[how[0]][how[1]].reshape(shape)
            outs[k] = a if how[0] == "output" else np.array(a)
    return outs
