"""CUDA C of an ir.ThreadAllreduce: warp shuffles within a warp, shared memory across warps.

Takes the kernel generator (codegen.py's _KernelGen), the statement and its AllreducePlan
(te/lower/passes/thread_allreduce.py); gives the lines. Each thread starts from its
partial value; a warp combines its lanes with __shfl_xor_sync where every group fills
whole warps (all lanes end with the warp's total), else with __shfl_down_sync, where a
lane takes the value `off` lanes above only if that lane is in its group and its warp.
A group spanning several warps then leaves one value per warp in a __shared__ array,
combined by the first warp (one group per block) or by the group's first thread. The
first thread of each group runs the statement's body. Imports te.lower's ir.
"""
from __future__ import annotations

from ...lower import ir

OFFSETS = (16, 8, 4, 2, 1)
FULL_MASK = "0xffffffffu"
# the types CUDA's __shfl_*_sync take as they are; others go through int
_SHUFFLED = {"float", "double", "int", "unsigned int", "long long", "unsigned long long"}


def allreduce_lines(gen, s: ir.ThreadAllreduce, depth: int) -> list:
    plan = gen.part.allreduces[id(s)]
    gen.uses_barriers = True  # the threads of a block meet: the emulator runs them together
    pad, inner = "  " * depth, "  " * (depth + 1)
    types = [gen.c_type(v.dtype) for v in s.results]

    def local(hint: str) -> str:
        return gen.name((id(s), hint), hint)
    tid, r, lane, mask = local("red_tid"), local("red_r"), local("red_lane"), local("red_mask")
    acc = [local(f"red_acc{k}") for k in range(len(types))]
    x, y, _ = plan.extents
    number = "(int)threadIdx.x" if plan.threads == x else \
        f"(int)threadIdx.x + {x} * ((int)threadIdx.y + {y} * (int)threadIdx.z)"
    lines = [f"{pad}{{  // allreduce {s.combiner.name} over {', '.join(s.tags)}: "
             f"{plan.groups} group(s) of {plan.size} threads",
             f"{inner}const int {tid} = {number};",
             f"{inner}const int {r} = {tid}{'' if plan.groups == 1 else f' % {plan.size}'};",
             f"{inner}const int {lane} = {tid} & 31;"]
    last = plan.threads % 32   # lanes of the block's last warp, if not a whole one
    lane_mask = FULL_MASK if last == 0 else \
        f"(({tid} >> 5) == {plan.threads // 32} ? {hex((1 << last) - 1)}u : {FULL_MASK})"
    lines.append(f"{inner}const unsigned {mask} = {lane_mask};")
    lines += [f"{inner}{t} {a} = {gen.expr(v)};" for t, a, v in zip(types, acc, s.values)]
    if plan.full_warps:
        for off in OFFSETS:
            lines += _shuffle_step(gen, s, types, acc, "xor", mask, off, None, inner)
    else:
        for off in (o for o in OFFSETS if o < plan.size):
            cond = f"{r} + {off} < {plan.size}"
            if 32 % plan.size:   # groups may cross warp boundaries
                cond = f"{lane} + {off} < 32 && {cond}"
            lines += _shuffle_step(gen, s, types, acc, "down", mask, off, cond, inner)
    if plan.segments > 1:
        lines += _across_warps(gen, s, plan, types, acc, (tid, r, lane), inner)
    lines.append(f"{inner}if ({r} == 0) {{")
    lines += [f"{inner}  const {t} {gen.name(v, v.name)} = {a};"
              for t, a, v in zip(types, acc, s.results)]
    lines += gen.stmt(s.body, depth + 2)
    return lines + [f"{inner}}}", f"{pad}}}"]


def _shuffle_step(gen, s, types, acc, kind: str, mask: str, off: int, cond, pad: str) -> list:
    """acc = combine(acc, the value of lane (lane ^ off) or (lane + off)); every lane
    shuffles (outside `cond`), as __shfl_*_sync requires of the lanes in the mask."""
    other = [gen.name((id(s), f"red_other{k}"), f"red_other{k}") for k in range(len(acc))]
    lines = [f"{pad}{{"]
    for t, a, o in zip(types, acc, other):
        call = f"__shfl_{kind}_sync({mask}, {a}, {off})" if t in _SHUFFLED else \
            f"({t})__shfl_{kind}_sync({mask}, (int){a}, {off})"
        lines.append(f"{pad}  const {t} {o} = {call};")
    body = _combine(gen, s, types, acc, other, pad + ("    " if cond else "  "))
    if cond:
        body = [f"{pad}  if ({cond}) {{"] + body + [f"{pad}  }}"]
    return lines + body + [f"{pad}}}"]


def _combine(gen, s, types, acc, other, pad: str) -> list:
    """acc = the combiner's result of (acc, other)."""
    c = s.combiner
    lines = [f"{pad}{{"]
    for k, t in enumerate(types):
        lines.append(f"{pad}  const {t} {gen.name(c.lhs[k], c.lhs[k].name)} = {acc[k]};")
        lines.append(f"{pad}  const {t} {gen.name(c.rhs[k], c.rhs[k].name)} = {other[k]};")
    lines += [f"{pad}  {a} = {(gen.expr(res))};" for a, res in zip(acc, c.result)]
    return lines + [f"{pad}}}"]


def _across_warps(gen, s, plan, types, acc, names: tuple, pad: str) -> list:
    """The warps' results through shared memory: the first lane of each warp's part of a
    group stores it at the group's slot for that warp; then they are combined."""
    tid, r, lane = names
    bufs = [gen.name((id(s), f"red_buf{k}"), "red_buf") for k in range(len(acc))]
    seg = f"({tid} >> 5) - (({tid} - {r}) >> 5)"
    base = "" if plan.groups == 1 else f"{tid} / {plan.size} * {plan.segments} + "
    lines = [f"{pad}__shared__ {t} {b}[{plan.groups * plan.segments}];"
             for t, b in zip(types, bufs)]
    # the barrier before: a previous combine (this one in a loop) has read the slots
    lines += [f"{pad}__syncthreads();", f"{pad}if ({lane} == 0 || {r} == 0) {{"]
    lines += [f"{pad}  {b}[{base}{seg}] = {a};" for b, a in zip(bufs, acc)]
    lines += [f"{pad}}}", f"{pad}__syncthreads();"]
    if plan.groups == 1 and plan.segments <= 32:   # the first warp, all of its lanes
        lines.append(f"{pad}if ({tid} < 32) {{")
        ident = [(gen.expr(x)) for x in s.combiner.identity]
        lines += [f"{pad}  {a} = {lane} < {plan.segments} ? {b}[{lane}] : {i};"
                  for a, b, i in zip(acc, bufs, ident)]
        for off in (o for o in OFFSETS if o < plan.segments):
            lines += _shuffle_step(gen, s, types, acc, "xor", FULL_MASK, off, None, pad + "  ")
        return lines + [f"{pad}}}"]
    k = gen.name((id(s), "red_k"), "red_k")
    count = f"(({tid} + {plan.size - 1}) >> 5) - ({tid} >> 5) + 1"
    lines += [f"{pad}if ({r} == 0) {{",   # the group's first thread: its first slot is its own
              f"{pad}  for (int {k} = 1; {k} < {count}; ++{k}) {{"]
    slots = [f"{b}[{base}{k}]" for b in bufs]
    slot_names = [gen.name((id(s), f"red_slot{j}"), f"red_slot{j}") for j in range(len(acc))]
    lines += [f"{pad}    const {t} {n} = {x};" for t, n, x in zip(types, slot_names, slots)]
    lines += _combine(gen, s, types, acc, slot_names, pad + "    ")
    return lines + [f"{pad}  }}", f"{pad}}}"]
