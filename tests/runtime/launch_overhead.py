"""Measures the cost of an empty GOMP_parallel launch and of a Module call (not a test).

Run: OMP_WAIT_POLICY=passive PYTHONPATH=. python tests/runtime/launch_overhead.py
Times 10000 calls of a kernel that launches an empty parallel region, minus the same kernel
without the launch, for 1..cores threads; then the per-call cost of a 3-argument Module call.
"""

import os
import time

os.environ.setdefault("OMP_WAIT_POLICY", "passive")

import numpy as np  # noqa: E402
from rt_kernels import ADD_SIGNATURE  # noqa: E402

import runtime  # noqa: E402

LAUNCH_LL = """
declare void @GOMP_parallel(ptr, ptr, i32, i32)

define internal void @empty_body(ptr %data) {
entry:
  ret void
}

define i32 @launch(ptr %X) {
entry:
  call void @GOMP_parallel(ptr @empty_body, ptr %X, i32 0, i32 0)
  ret i32 0
}

define i32 @no_launch(ptr %X) {
entry:
  ret i32 0
}
"""

ADD_ONE_ELEMENT_LL = """
define i32 @add(ptr noalias %A, ptr noalias %B, ptr noalias %C, i32 %n) {
entry:
  ret i32 0
}
"""

CALLS = 10000


def per_call_us(fn, calls: int = CALLS) -> float:
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls)
    return best * 1e6


def main() -> None:
    import ctypes

    library = runtime.compile_llvm(LAUNCH_LL)
    prototype = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_void_p)
    launch = prototype(library.get_function_address("launch"))
    no_launch = prototype(library.get_function_address("no_launch"))
    default_threads = runtime.num_threads()
    for threads in sorted({1, 2, default_threads}):
        runtime.set_num_threads(threads)
        with_launch = per_call_us(lambda: launch(None))
        without = per_call_us(lambda: no_launch(None))
        print(f"threads={threads}: empty GOMP_parallel launch {with_launch - without:.2f} us "
              f"(call with launch {with_launch:.2f} us, without {without:.2f} us)")
    runtime.set_num_threads(default_threads)

    module = runtime.Module(runtime.compile_llvm(ADD_ONE_ELEMENT_LL), ADD_SIGNATURE)
    a, b, c = (np.zeros(1, np.float32) for _ in range(3))
    raw = module._checker.convert((a, b, c))
    full = per_call_us(lambda: module(a, b, c))
    checks = per_call_us(lambda: module._checker.convert((a, b, c)))
    print(f"Module call, 3 arguments (checks + ctypes): {full:.2f} us")
    print(f"  argument checks only: {checks:.2f} us")
    print(f"  bare ctypes call: {per_call_us(lambda: module._cfunc(*raw)):.2f} us")


if __name__ == "__main__":
    main()
