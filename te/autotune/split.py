"""Split knobs with TVM's meaning: a value [-1, s1, ..., s_{n-1}] names each loop's extent.

A split of an axis of extent E into n loops is a size list: entry k >= 1 is the extent of
loop k (counted outermost first), and the leading -1 stands for the outermost loop, whose
extent is ceil(E / (s1 * ... * s_{n-1})). apply splits outermost-first by the product of the
sizes inside, so every inner loop has exactly its size and only the outermost may be padded
(a guarded tail when the product does not divide E). This is AutoTVM's SplitEntity, which
TVM templates rely on (thread counts taken from cfg["tile_f"].size[k]).

Options are enumerated as AutoTVM's SplitSpace does: candidate factors by `policy`
("factors": divisors of E, no tail; "power2": powers of two up to E; "verbose": both, tails
allowed), capped by `max_factor`, every tuple whose product is at most E (and divides E when
tails are not allowed), then `filter`. Imports te.errors only.
"""
from __future__ import annotations

import itertools
import math

from ..errors import ScheduleError

POLICIES = ("factors", "power2", "verbose", "candidate")


class SplitEntity:
    """One split: `size` lists each loop's extent, outermost first (-1: the rest)."""

    def __init__(self, size):
        self.size = [int(x) for x in size]

    @property
    def val(self) -> list:
        return list(self.size)

    def apply(self, s, stage, axis, **_) -> list:
        return apply_split(self.size, s, stage, axis)

    def __getitem__(self, k):
        return self.size[k]

    def __iter__(self):
        return iter(self.size)

    def __len__(self):
        return len(self.size)

    def __eq__(self, other):
        return isinstance(other, SplitEntity) and self.size == other.size

    def __hash__(self):
        return hash(tuple(self.size))

    def __repr__(self):
        return str(self.size)


def apply_split(size, s, stage, axis) -> list:
    """Split `axis` of `stage` (a Stage, or an op/tensor of schedule `s`) into len(size)
    loops of extents size[1:] inside an outer loop; returns the loops, outermost first."""
    st = stage if hasattr(stage, "leaf_iter_vars") else s[stage]
    loops = []
    for k in range(1, len(size)):
        outer, axis = st.split(axis, factor=math.prod(int(f) for f in size[k:]))
        loops.append(outer)
    return loops + [axis]


def divisors(n: int) -> list:
    return [d for d in range(1, n + 1) if n % d == 0]


def powers_of_two(n: int) -> list:
    return [1 << k for k in range(max(n, 1).bit_length())]


def split_candidates(extent: int, policy: str = "factors", max_factor: int | None = None) -> list:
    """Candidate sizes of one inner loop: divisors ("factors"), powers of two up to the
    extent ("power2") or both ("verbose"), at most `max_factor`."""
    if policy == "factors":
        cands = divisors(extent)
    elif policy == "power2":
        cands = powers_of_two(extent)
    elif policy == "verbose":
        cands = sorted(set(divisors(extent)) | set(powers_of_two(extent)))
    else:
        raise ScheduleError(f"define_split: policy must be one of {', '.join(POLICIES)}, got "
                            f"{policy!r}")
    return [c for c in cands if max_factor is None or c <= max_factor]


def split_options(name: str, extent: int, num_outputs, policy: str, max_factor=None,
                  no_tail=None, candidate=None, filter=None) -> tuple:  # noqa: A002 - TVM's name
    """The options of split knob `name` (tuples [-1, s1, ...]), in AutoTVM's order: the
    innermost size varies slowest, so option 0 is [-1, 1, ..., 1]."""
    who = f"define_split '{name}'"
    if isinstance(num_outputs, bool) or not isinstance(num_outputs, int) or num_outputs < 1:
        raise ScheduleError(f"{who}: num_outputs must be a positive int, got {num_outputs!r}")
    if max_factor is not None and (isinstance(max_factor, bool) or
                                   not isinstance(max_factor, int) or max_factor < 1):
        raise ScheduleError(f"{who}: max_factor must be a positive int or None, got "
                            f"{max_factor!r}")
    if filter is not None and not callable(filter):
        raise ScheduleError(f"{who}: filter must be a function of a SplitEntity (returning "
                            f"True to keep it), got {filter!r}")
    if policy == "candidate":
        options = _candidates(who, candidate, num_outputs)
    else:
        if candidate is not None:
            raise ScheduleError(f"{who}: candidate= needs policy='candidate', got policy "
                                f"{policy!r}")
        factors = split_candidates(extent, policy, max_factor)
        exact = policy == "factors" if no_tail is None else bool(no_tail)
        options = []
        for inner in itertools.product(factors, repeat=num_outputs - 1):
            prod = math.prod(inner)
            if prod <= extent and (extent % prod == 0 or not exact):
                options.append((-1,) + inner[::-1])
    if filter is not None:
        options = [o for o in options if filter(SplitEntity(o))]
    if not options:
        raise ScheduleError(f"{who}: no option is left for an axis of extent {extent} "
                            f"(policy {policy!r}, max_factor {max_factor}, filter "
                            f"{'given' if filter is not None else 'none'})")
    return tuple(options)


def _candidates(who: str, candidate, num_outputs: int) -> list:
    if not candidate:
        raise ScheduleError(f"{who}: policy 'candidate' needs candidate=[size lists], got "
                            f"{candidate!r}")
    out = []
    for c in candidate:
        size = tuple(int(x) for x in c)
        if len(size) != num_outputs:
            raise ScheduleError(f"{who}: candidate {list(c)} has {len(size)} sizes, expected "
                                f"num_outputs={num_outputs}")
        out.append(size)
    return out
