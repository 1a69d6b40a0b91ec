"""te.tvm: classic TVM's names over our implementations, so TVM code migrates by rewriting
its imports (`import tvm` -> `import te.tvm as tvm`, `from tvm import te, autotvm, topi` ->
`from te.tvm import te, autotvm, topi`). A thin map, not a second implementation: every
name here is one of ours, re-exported under TVM's spelling, or a small adapter where TVM's
calling convention differs. The top layer of te: it may import every te layer and runtime;
nothing in te imports it. The README's "Migrating from TVM" section lists what is missing.
"""

from runtime.devices import Device, cpu, cuda, device
from runtime.packed import get_global_func, register_func

# autotvm and topi load on `from te.tvm import autotvm, topi`, as in TVM (they pull in the tuner)
from . import contrib, ir, nd, runtime, target, te, testing, tir
from .build_module import build, lower

# TVM's older names of cuda(): one GPU kind here
gpu = cuda

__all__ = ["Device", "build", "contrib", "cpu", "cuda", "device", "get_global_func", "gpu", "ir",
           "lower", "nd", "register_func", "runtime", "target", "te", "testing", "tir"]
