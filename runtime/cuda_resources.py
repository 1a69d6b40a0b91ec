"""What a compiled CUDA kernel needs of an SM, as ptxas reports it, and whether a launch fits.

Takes PTX and its architecture; gives per kernel KernelResources (registers per thread,
static shared memory, spilled bytes) from `ptxas -v`, and check_fits(), which refuses a block
no SM could hold: registers (per warp, in units of 256) beyond a block's 64K, or more static
shared memory than a block may declare. Imports only the standard library.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
from dataclasses import dataclass

# Every architecture nvcc 13 compiles for (sm_75 on) gives a block at most 64K 32-bit
# registers and 48 KiB of static __shared__ memory; registers go to each warp in units of
# 256 (8 per thread).
REGISTERS_PER_BLOCK = 65536
REGISTER_UNIT_PER_WARP = 256
STATIC_SHARED_PER_BLOCK = 48 * 1024
WARP = 32
PTXAS_TIMEOUT_S = 120


@dataclass(frozen=True)
class KernelResources:
    registers: int           # per thread
    shared_bytes: int = 0    # static __shared__ per block
    spill_stores: int = 0    # bytes per thread ptxas moved to local memory
    spill_loads: int = 0
    arch: str = ""

    def registers_per_block(self, threads: int) -> int:
        """The registers a block of `threads` threads takes: a unit-rounded share per warp."""
        per_warp = -(-self.registers * WARP // REGISTER_UNIT_PER_WARP) * REGISTER_UNIT_PER_WARP
        return per_warp * -(-threads // WARP)


def find_ptxas() -> str | None:
    """ptxas from PATH, else the one beside nvcc."""
    found = shutil.which("ptxas")
    nvcc = shutil.which("nvcc")
    if found is None and nvcc is not None:
        beside = os.path.join(os.path.dirname(os.path.realpath(nvcc)), "ptxas")
        found = beside if os.access(beside, os.X_OK) else None
    return found


def resource_usage(ptx: str, arch: str) -> dict | None:
    """kernel name -> KernelResources of `ptx` compiled for `arch`; None without ptxas.
    Raises RuntimeError with ptxas's message where it fails."""
    ptxas = find_ptxas()
    if ptxas is None:
        return None
    with tempfile.TemporaryDirectory(prefix="te_ptxas_") as tmp:
        src = os.path.join(tmp, "kernels.ptx")
        with open(src, "w") as handle:
            handle.write(ptx)
        command = [ptxas, f"-arch={arch}", "-v", "-o", os.path.join(tmp, "kernels.cubin"), src]
        try:
            result = subprocess.run(command, capture_output=True, text=True,
                                    timeout=PTXAS_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            raise RuntimeError(f"ptxas took more than {PTXAS_TIMEOUT_S} s") from None
    if result.returncode != 0:
        raise RuntimeError(f"ptxas failed (exit code {result.returncode}): "
                           f"{result.stderr.strip()[-2000:]}")
    return parse_ptxas_report(result.stdout + result.stderr, arch)


_ENTRY = re.compile(r"Compiling entry function '(\w+)'")
_SPILLS = re.compile(r"(\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")


def parse_ptxas_report(text: str, arch: str) -> dict:
    """`ptxas -v` output -> kernel name -> KernelResources."""
    found: dict = {}
    name, spills = None, (0, 0)
    for line in text.splitlines():
        if m := _ENTRY.search(line):
            name, spills = m.group(1), (0, 0)
        elif (m := _SPILLS.search(line)) and name:
            spills = (int(m.group(1)), int(m.group(2)))
        elif (m := _USED.search(line)) and name:
            smem = _SMEM.search(line)
            found[name] = KernelResources(int(m.group(1)), int(smem.group(1)) if smem else 0,
                                          *spills, arch=arch)
    return found


def check_fits(kernel: str, resources: KernelResources, threads: int) -> None:
    """RuntimeError naming `kernel` (as written into the message), its registers, `threads`
    and the limit when a block of `threads` threads cannot be resident on one SM."""
    need = resources.registers_per_block(threads)
    if need > REGISTERS_PER_BLOCK:
        fit = REGISTERS_PER_BLOCK // resources.registers_per_block(WARP) * WARP
        raise RuntimeError(
            f"kernel {kernel} cannot launch: {resources.registers} registers per thread "
            f"(ptxas, {resources.arch}) x {threads} threads per block need {need} registers, "
            f"more than the {REGISTERS_PER_BLOCK} a block may use; use at most {fit} threads "
            f"per block, or less work per thread")
    if resources.shared_bytes > STATIC_SHARED_PER_BLOCK:
        raise RuntimeError(
            f"kernel {kernel} cannot launch: {resources.shared_bytes} bytes of shared "
            f"memory per block (ptxas, {resources.arch}), more than the "
            f"{STATIC_SHARED_PER_BLOCK} a block may declare")
