"""The compiler-runtime calls LLVM emits for float16 on x86 without F16C (`-mcpu=x86-64`,
`-mattr=-f16c`): `__extendhfsf2`, `__truncsfhf2`. Nothing here defines the first (libgcc_s has
only truncations, from GCC 12), and MCJIT linked a missing one to address 0: a segfault.
JIT-compiled once for the host, whose F16C makes each one instruction, and registered.

Takes nothing; register() is called once by runtime.cpu. Imports llvmlite only.
"""
# (float64 -> float16 casts never call __truncdfhf2: te's codegen builds them from the two
# conversions, te/codegen/llvm/half.py.)
from __future__ import annotations

import llvmlite.binding as llvm

LIBCALLS_LL = """
define float @__extendhfsf2(half %x) {
  %r = fpext half %x to float
  ret float %r
}
define half @__truncsfhf2(float %x) {
  %r = fptrunc float %x to half
  ret half %r
}
"""
NAMES = ("__extendhfsf2", "__truncsfhf2")
_engine = None  # keeps the functions' code alive for the life of the process


def register() -> bool:
    """Define the NAMES that the process lacks; False (nothing done) on a host without
    F16C, where the functions themselves would call the libcalls they define."""
    global _engine
    features = llvm.get_host_cpu_features()
    missing = [name for name in NAMES if llvm.address_of_symbol(name) is None]
    if not missing or not features.get("f16c"):
        return False
    target = llvm.Target.from_default_triple()
    tm = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                      features=features.flatten(), opt=2, jit=True)
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(LIBCALLS_LL), tm)
    engine.finalize_object()
    for name in missing:
        llvm.add_symbol(name, engine.get_function_address(name))
    _engine = engine
    return True
