"""What gpu_memory.py measured: per kernel, per buffer and access, requests and their cost.

Takes the counts of the address trace; gives AccessStats (one buffer's loads or stores in
one kernel: every IR site of it, the unrolled copies of one source access together),
KernelMemory and MemoryReport, whose str() is a table, with `coalesced` and
`conflict_free` to check a schedule in a test. Imports stdlib only.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class AccessStats:
    """Warp requests of one buffer's loads or stores. Global: 32-byte sectors and 128-byte
    lines touched, and the fewest the requested bytes need (ideal_*). Shared: wavefronts
    (passes over the 32 banks), and the fewest the requested words need. Counts are sums
    over the requests of the sampled blocks (scaled where loops were sampled)."""
    buffer: str
    scope: str           # "global" or "shared"
    access: str          # "load" or "store"
    dtype: str
    requests: float = 0.0
    lanes: float = 0.0   # active threads, summed over requests
    sectors: float = 0.0
    ideal_sectors: float = 0.0
    lines: float = 0.0
    ideal_lines: float = 0.0
    wavefronts: float = 0.0
    ideal_wavefronts: float = 0.0
    max_ways: float = 0.0
    unresolved: float = 0.0   # requests whose address depends on loaded data
    sites: int = 1            # IR accesses counted together
    example: str = ""         # the first site's access, as the loop IR prints it

    @property
    def efficiency(self) -> float:
        """Global: ideal sectors / sectors (1.0: every sector fetched is all used);
        shared: ideal wavefronts / wavefronts (1.0: no bank conflict)."""
        got, ideal = ((self.sectors, self.ideal_sectors) if self.scope == "global"
                      else (self.wavefronts, self.ideal_wavefronts))
        return ideal / got if got else 1.0

    @property
    def sectors_per_request(self) -> float:
        return self.sectors / self.requests if self.requests else 0.0

    @property
    def ways(self) -> float:
        """Shared: the average bank conflict degree (1.0: none)."""
        return self.wavefronts / self.ideal_wavefronts if self.ideal_wavefronts else 1.0

    def merge(self, other: "AccessStats") -> None:
        for name in ("requests", "lanes", "sectors", "ideal_sectors", "lines", "ideal_lines",
                     "wavefronts", "ideal_wavefronts", "unresolved"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.max_ways = max(self.max_ways, other.max_ways)
        self.sites += other.sites


@dataclass
class KernelMemory:
    """One launch: its shape, what was sampled, and the accesses (grouped by buffer)."""
    name: str
    grid: tuple
    block: tuple
    blocks_run: int
    blocks_total: int
    sampled_iterations: int | None   # serial loops longer than this were sampled
    data_dependent_control: bool     # a branch on loaded data: both sides were counted
    sites: tuple = ()                # AccessStats per IR site
    accesses: tuple = field(init=False)

    def __post_init__(self):
        groups: dict = {}
        for s in self.sites:
            key = (s.scope, s.buffer, s.access)
            if key not in groups:
                groups[key] = AccessStats(s.buffer, s.scope, s.access, s.dtype, sites=0,
                                          example=s.example)
            groups[key].merge(s)
        order = {"global": 0, "shared": 1}
        self.accesses = tuple(sorted(groups.values(), key=lambda a: order[a.scope]))

    @property
    def sampled(self) -> bool:
        return self.blocks_run < self.blocks_total or self.sampled_iterations is not None

    def lines_of_text(self) -> list:
        grid = "x".join(map(str, self.grid))
        block = "x".join(map(str, self.block))
        how = (f"all {self.blocks_total} blocks" if self.blocks_run == self.blocks_total
               else f"sampled {self.blocks_run} of {self.blocks_total} blocks")
        if self.sampled_iterations is not None:
            half = self.sampled_iterations // 2
            how += (f"; loops over {self.sampled_iterations} iterations sampled (first and "
                    f"last {half}), counts scaled")
        out = [f"kernel {self.name}: grid {grid}, block {block} ({how})"]
        if self.data_dependent_control:
            out.append("  a branch depends on loaded data: both sides counted for every thread")
        out.append(f"  {'scope':<7}{'buffer':<14}{'access':<7}{'requests':>10}"
                   f"{'sectors/req':>12}{'efficiency':>11}{'ways avg':>9}{'max':>5}  "
                   f"first site (of n)")
        for a in self.accesses:
            shared = a.scope == "shared"
            per = "" if shared else f"{a.sectors_per_request:.2f}"
            ways = f"{a.ways:.2f}" if shared else ""
            most = f"{a.max_ways:.0f}" if shared else ""
            site = a.example if len(a.example) <= 40 else a.example[:37] + "..."
            out.append(f"  {a.scope:<7}{a.buffer[:13]:<14}{a.access:<7}{a.requests:>10.0f}"
                       f"{per:>12}{a.efficiency:>11.3f}{ways:>9}{most:>5}  {site} "
                       f"({a.sites})")
            if a.unresolved:
                out.append(f"    {a.unresolved:.0f} requests with data-dependent addresses "
                           f"not counted")
        if not self.accesses:
            out.append("  no global or shared memory accesses")
        return out


@dataclass
class MemoryReport:
    """Coalescing and bank conflicts of each kernel of a 'cuda' module, from its address
    trace on the CPU (CudaModule.memory_report): an estimate of the memory traffic, not a
    measurement on a GPU."""
    function: str
    kernels: tuple

    def find(self, buffer: str, access: str = "load", kernel: int | None = None):
        """The AccessStats of `buffer`'s loads or stores (in kernel number `kernel`, or in
        the only kernel that has them); KeyError naming what exists if there is none."""
        found = [a for k, km in enumerate(self.kernels) if kernel in (None, k)
                 for a in km.accesses if a.buffer == buffer and a.access == access]
        if len(found) != 1:
            have = sorted({f"{a.buffer} {a.access}" for km in self.kernels
                           for a in km.accesses})
            what = "no" if not found else f"{len(found)} kernels with"
            raise KeyError(f"memory report of '{self.function}': {what} {access}s of "
                           f"'{buffer}' (pass kernel=); accesses: {', '.join(have)}")
        return found[0]

    @property
    def coalesced(self) -> bool:
        """Every global access uses every sector it fetches (efficiency 1.0); False where
        an address depends on loaded data (unresolved), which cannot be shown coalesced."""
        return all(a.efficiency >= 1.0 - 1e-9 and not a.unresolved for km in self.kernels
                   for a in km.accesses if a.scope == "global")

    @property
    def conflict_free(self) -> bool:
        """No shared access has a bank conflict (nor an address that depends on data)."""
        return all(a.max_ways <= 1.0 + 1e-9 and not a.unresolved for km in self.kernels
                   for a in km.accesses if a.scope == "shared")

    def __str__(self) -> str:
        lines = [f"memory access report of '{self.function}': addresses traced on the CPU, "
                 f"an estimate, not a GPU measurement",
                 "(warps of 32 threads, sectors of 32 bytes, 32 banks of 4 bytes; a "
                 "vectorized loop's consecutive, aligned elements count as one float2/float4 "
                 "access)"]
        for km in self.kernels:
            lines += km.lines_of_text()
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"MemoryReport({self.function}: {len(self.kernels)} kernel(s), coalesced="
                f"{self.coalesced}, conflict_free={self.conflict_free})")
