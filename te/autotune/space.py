"""Search spaces made by running a space generator: knobs, ConfigSpace and ConfigEntity.

A generator (a template, or the automatic space in auto_space.py) receives a config object.
In collect mode (ConfigSpace) `cfg.define_split(...)` records a knob and every
`cfg[name]` returns the knob's first option, so the generator runs to the end; in apply mode
(ConfigEntity) define_* is a no-op and `cfg[name]` returns the chosen value. A config is a
plain dict {knob name: value} that round-trips JSON. Imports te.schedule and te.compute only.
"""
from __future__ import annotations

import itertools
import json
import math
from dataclasses import dataclass

from ..compute.tensor import IterVar
from ..errors import ScheduleError
from .split import SplitEntity, apply_split, split_options


def _extent(axis) -> int:
    if isinstance(axis, int):
        return axis
    if isinstance(axis, IterVar):
        ext = axis.dom.extent
        if hasattr(ext, "value"):
            return int(ext.value)
        raise ScheduleError(f"define_split: axis '{axis.var.name}' has a symbolic extent; "
                            f"tuning needs constant shapes")
    raise ScheduleError(f"define_split: axis must be an IterVar or an int, got "
                        f"{type(axis).__name__}")


# -- knobs: the options of one decision, and how a chosen value acts on a schedule ------------

@dataclass(frozen=True)
class SplitKnob:
    """Split one axis into num_outputs loops; a value is [-1, s1, ..., s_{n-1}], the loops'
    extents outermost first (split.py: TVM's SplitEntity)."""
    name: str
    extent: int
    options: tuple

    def apply(self, value, s, stage, axis) -> list:
        return apply_split(value, s, stage, axis)


@dataclass(frozen=True)
class OtherKnob:
    """A choice among plain values (ints, strings, bools)."""
    name: str
    options: tuple


@dataclass(frozen=True)
class ReorderKnob:
    """A permutation of a list of axes; a value is a list of positions."""
    name: str
    options: tuple


@dataclass(frozen=True)
class AnnotateKnob:
    """One annotation ('none', 'vec', 'unroll', 'parallel') per axis; a value is a list."""
    name: str
    options: tuple


class OtherOptionEntity:
    """A define_knob value (AutoTVM's name): `.val`; a fallback config may be given one."""

    def __init__(self, val):
        self.val = val

    def __repr__(self):
        return str(self.val)


def _chosen(knob, value):
    """What `cfg[name]` gives: a SplitEntity for a split knob, else a _Chosen."""
    if isinstance(knob, SplitKnob):
        return SplitEntity(value)
    return _Chosen(knob, value)


class _Chosen:
    """What `cfg[name]` gives: the value, with `.apply` for reorders/annotations."""

    def __init__(self, knob, value):
        self.knob, self.val = knob, value

    @property
    def size(self) -> list:
        return list(self.val)

    def __getitem__(self, k):
        return self.val[k]

    def __iter__(self):
        return iter(self.val)

    def __len__(self):
        return len(self.val)

    def __repr__(self):
        return f"{self.knob.name}={self.val!r}"

    def apply(self, s, stage, axes, **_):
        st = stage if hasattr(stage, "leaf_iter_vars") else s[stage]
        if isinstance(self.knob, ReorderKnob):
            new = [axes[k] for k in self.val]
            st.reorder(*new)
            return new
        if isinstance(self.knob, AnnotateKnob):
            act = {"vec": st.vectorize, "unroll": st.unroll, "parallel": st.parallel}
            for ann, ax in zip(self.val, axes):
                if ann != "none":
                    act[ann](ax)
            return axes
        raise ScheduleError(f"config: knob '{self.knob.name}' has no apply()")


def _position(name: str, axes, axis) -> int:
    for k, a in enumerate(axes):
        if a is axis:
            return k
    raise ScheduleError(f"define_reorder '{name}': a candidate names an axis that is not "
                        f"among `axes`")


class _ConfigBase:
    """define_* methods shared by collect and apply mode."""

    def _define(self, knob) -> None:
        raise NotImplementedError

    flop = 0.0

    def define_split(self, name: str, axis, policy: str = "factors", *, num_outputs: int = 2,
                     max_factor: int | None = None, filter=None,  # noqa: A002 - TVM's name
                     no_tail: bool | None = None, candidate=None) -> None:
        """Split knob for `axis` (an IterVar or an extent) into `num_outputs` loops, as
        AutoTVM's define_split: a value's entry k >= 1 is loop k's extent (split.py);
        `policy` "factors" (divisors, no tail), "power2", "verbose" (both, tails allowed) or
        "candidate" (`candidate`: the size lists); `filter(SplitEntity) -> bool` keeps an
        option."""
        ext = _extent(axis)
        self._define(SplitKnob(name, ext, split_options(
            name, ext, num_outputs, policy, max_factor, no_tail, candidate, filter)))

    def axis(self, var):
        """AutoTVM's cfg.axis: an axis for define_split (here the IterVar or extent itself)."""
        return var

    reduce_axis = axis

    def add_flop(self, flop) -> None:
        """Count `flop` operations for this config (AutoTVM's cfg.add_flop; cfg.flop)."""
        self.flop = self.flop + float(flop)

    def raise_error(self, msg: str):
        """Declare this config invalid (AutoTVM's cfg.raise_error): an instantiation error."""
        raise ScheduleError(f"config: {msg}")

    def define_knob(self, name: str, values) -> None:
        values = tuple(values)
        if not values:
            raise ScheduleError(f"define_knob '{name}': give at least one value")
        self._define(OtherKnob(name, values))

    def define_reorder(self, name: str, axes, policy: str = "all", candidates=None,
                       candidate=None) -> None:
        """Permutations of `axes`: policy 'all', 'identity', or 'candidate' with
        `candidates` (position lists) or, as AutoTVM spells it, `candidate` (axis lists)."""
        n = len(axes)
        if policy == "candidate":
            if candidate is not None:
                candidates = [[_position(name, axes, ax) for ax in c] for c in candidate]
            if not candidates:
                raise ScheduleError(f"define_reorder '{name}': policy 'candidate' needs "
                                    f"candidate=[axis lists] (or candidates=[position lists])")
            opts = tuple(tuple(c) for c in candidates)
        elif policy == "all":
            opts = tuple(itertools.permutations(range(n)))
        elif policy == "identity":
            opts = (tuple(range(n)),)
        else:
            raise ScheduleError(f"define_reorder '{name}': policy must be 'all', 'identity' "
                                f"or 'candidate', got {policy!r}")
        self._define(ReorderKnob(name, opts))

    def define_annotate(self, name: str, axes, policy: str = "try_unroll") -> None:
        """Per-axis annotations: 'try_unroll', 'try_vec', 'try_unroll_vec', 'locate_parallel'."""
        n = len(axes)
        if policy == "try_unroll":
            per = [("none", "unroll")] * n
        elif policy == "try_vec":
            per = [("none",)] * (n - 1) + [("none", "vec")]
        elif policy == "try_unroll_vec":
            per = [("none", "unroll")] * (n - 1) + [("none", "unroll", "vec")]
        elif policy == "locate_parallel":
            per = [("parallel", "none")] + [("none",)] * (n - 1)
        else:
            raise ScheduleError(f"define_annotate '{name}': unknown policy {policy!r}")
        self._define(AnnotateKnob(name, tuple(itertools.product(*per))))


class ConfigSpace(_ConfigBase):
    """Collect mode: records knobs in definition order; cfg[name] is the first option."""

    def __init__(self):
        self.knobs: dict = {}
        self.fallback: dict = {}   # name -> entity a template set while untuned
        self.is_fallback = True

    def _define(self, knob) -> None:
        old = self.knobs.get(knob.name)
        if old is not None and old != knob:
            raise ScheduleError(f"config space: knob '{knob.name}' is defined twice with "
                                f"different options")
        self.knobs[knob.name] = knob

    def __getitem__(self, name: str):
        if name in self.fallback:
            return self.fallback[name]
        if name not in self.knobs:
            raise ScheduleError(f"config space: no knob named '{name}' (defined: "
                                f"{', '.join(self.knobs) or 'none'})")
        knob = self.knobs[name]
        return _chosen(knob, knob.options[0])

    def __setitem__(self, name: str, entity) -> None:
        """A template's own default for knob `name` while untuned (AutoTVM's fallback
        config: `if cfg.is_fallback: cfg["tile"] = SplitEntity([-1, 8])`)."""
        if not isinstance(entity, (SplitEntity, OtherOptionEntity, _Chosen)):
            raise ScheduleError(f"config space: cfg['{name}'] = ... takes a SplitEntity or "
                                f"an OtherOptionEntity, got {type(entity).__name__}")
        self.fallback[name] = entity

    def __len__(self) -> int:
        return self.size

    @property
    def size(self) -> int:
        """The number of configs, exact: len() cannot give one past sys.maxsize, which the
        knobs of a few dozen stages (a long chain of fused operators) multiply beyond."""
        return math.prod(len(k.options) for k in self.knobs.values())

    def dims(self) -> list:
        return [len(k.options) for k in self.knobs.values()]

    def get(self, index: int) -> "ConfigEntity":
        """The config at mixed-radix `index` (first knob varies fastest)."""
        if not 0 <= index < self.size:
            raise ScheduleError(f"config space: index {index} out of range 0..{self.size - 1}")
        values = {}
        for name, knob in self.knobs.items():
            index, k = divmod(index, len(knob.options))
            values[name] = _plain(knob.options[k])
        return ConfigEntity(self, values)

    def index_of(self, values: dict) -> int:
        index, scale = 0, 1
        for name, knob in self.knobs.items():
            opts = [_plain(o) for o in knob.options]
            index += opts.index(values[name]) * scale
            scale *= len(opts)
        return index

    def option_index(self, name: str, value) -> int:
        """Position of `value` among knob `name`'s options."""
        return [_plain(o) for o in self.knobs[name].options].index(value)

    def default(self) -> "ConfigEntity":
        return self.get(0)

    def from_json_dict(self, data: dict) -> "ConfigEntity":
        return ConfigEntity.from_json_dict(self, data)

    def __repr__(self):
        rows = [f"  {k}: {len(v.options)} options" for k, v in self.knobs.items()]
        return f"ConfigSpace({self.size} configs)\n" + "\n".join(rows)


def _plain(value):
    """A JSON-shaped copy of a knob option (tuples become lists)."""
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


class ConfigEntity(_ConfigBase):
    """Apply mode: one chosen value per knob; define_* checks the knob exists."""

    def __init__(self, space: ConfigSpace, values: dict):
        self.space = space
        self.values = dict(values)
        self.is_fallback = False

    def _define(self, knob) -> None:
        if knob.name not in self.values:
            raise ScheduleError(f"config: the template defines knob '{knob.name}', which this "
                                f"config does not set (was it tuned with another template?)")

    def __getitem__(self, name: str):
        if name not in self.values:
            raise ScheduleError(f"config: no knob named '{name}'")
        return _chosen(self.space.knobs[name], self.values[name])

    def __setitem__(self, name: str, entity) -> None:
        raise ScheduleError(f"config: cfg['{name}'] = ... sets a default for an untuned "
                            f"template; this config is a tuned one (guard it with "
                            f"`if cfg.is_fallback:`)")

    @property
    def index(self) -> int:
        return self.space.index_of(self.values)

    def to_json_dict(self) -> dict:
        return {"knobs": self.values}

    @staticmethod
    def from_json_dict(space: ConfigSpace, data: dict) -> "ConfigEntity":
        values = data.get("knobs") if isinstance(data, dict) else None
        if not isinstance(values, dict):
            raise ScheduleError(f"config JSON: expected {{'knobs': {{...}}}}, got {data!r}")
        missing = set(space.knobs) - set(values)
        if missing:
            raise ScheduleError(f"config JSON: knobs {sorted(missing)} are missing")
        for name, val in values.items():
            knob = space.knobs.get(name)
            if knob is None or val not in [_plain(o) for o in knob.options]:
                raise ScheduleError(f"config JSON: {name}={val!r} is not an option of this "
                                    f"space")
        return ConfigEntity(space, values)

    def __eq__(self, other):
        return isinstance(other, ConfigEntity) and self.values == other.values

    def __hash__(self):
        return hash(json.dumps(self.values, sort_keys=True))

    def __repr__(self):
        return "Config(" + ", ".join(f"{k}={v}" for k, v in self.values.items()) + ")"
