"""tvm.contrib.cc: create_shared(output, objects) links object files into a shared library.

Takes object files (Module.save("x.o") writes one that runtime.load_module reads back once
linked); gives the .so at `output`. Imports runtime.
"""
from __future__ import annotations

from runtime import link_shared


def create_shared(output, objects, options=None, cc=None) -> None:
    """Link `objects` (a path or a list) into the shared library `output`, with the libraries
    generated code calls; `options` are extra compiler flags. `cc` must be None: we link with
    the system's `cc`."""
    if cc is not None:
        raise ValueError(f"cc: choosing the compiler is not supported (expected None, got "
                         f"{cc!r}); the system's cc links")
    link_shared(output, objects, options)


__all__ = ["create_shared"]
