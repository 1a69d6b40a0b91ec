"""Schedule steps: one frozen dataclass per primitive, plain data that round-trips JSON.

Takes nothing but Python values; gives Step classes, to_json/from_json. A schedule records
each primitive as a Step naming its stage (index in the schedule's stage list, and the
name for readers) and its axes (index in the stage's iter-var list, and the name), so a
schedule replays exactly on a fresh compute graph. Imports te.errors only.
"""
from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass

from ..errors import ScheduleError


# Storage scopes of a stage's buffer (TVM's names): set_scope, cache_read and cache_write.
SCOPES = ("global", "shared", "local", "warp", "wmma.accumulator")


@dataclass(frozen=True)
class AxisRef:
    """An iter var of a stage: its position in stage.all_iter_vars, and its name."""
    index: int
    name: str


@dataclass(frozen=True)
class StageRef:
    index: int
    name: str


@dataclass(frozen=True)
class Split:
    stage: StageRef
    axis: AxisRef
    factor: int | None
    nparts: int | None


@dataclass(frozen=True)
class Fuse:
    stage: StageRef
    axes: tuple


@dataclass(frozen=True)
class Reorder:
    stage: StageRef
    axes: tuple


@dataclass(frozen=True)
class Annotate:
    """vectorize / unroll / parallel on one axis."""
    stage: StageRef
    axis: AxisRef
    kind: str


@dataclass(frozen=True)
class Bind:
    stage: StageRef
    axis: AxisRef
    thread_tag: str


@dataclass(frozen=True)
class ComputeAt:
    stage: StageRef
    parent: StageRef
    axis: AxisRef


@dataclass(frozen=True)
class ComputeWith:
    """Fuse the stage's loops with `parent`'s, outermost down to `parent`'s loop `axis`."""
    stage: StageRef
    parent: StageRef
    axis: AxisRef


@dataclass(frozen=True)
class Pipeline:
    """Software-pipeline loop `axis`; with_stage/with_axis: the loop it interleaves with."""
    stage: StageRef
    axis: AxisRef
    with_stage: StageRef | None = None
    with_axis: AxisRef | None = None


@dataclass(frozen=True)
class ComputeInline:
    stage: StageRef


@dataclass(frozen=True)
class ComputeRoot:
    stage: StageRef


@dataclass(frozen=True)
class StorageAlign:
    stage: StageRef
    axis: AxisRef
    factor: int
    offset: int


@dataclass(frozen=True)
class Pragma:
    stage: StageRef
    axis: AxisRef
    key: str
    value: int | float | bool | str | None


@dataclass(frozen=True)
class StorePredicate:
    """Stage.set_store_predicate: the stage stores where the index of each thread tag in
    `tags` (comma-separated) is 0."""
    stage: StageRef
    tags: str


@dataclass(frozen=True)
class Tensorize:
    """Loops from `axis` inward replaced by tensor intrinsic `intrin` (its name: the
    intrinsic itself holds statements, which JSON does not carry)."""
    stage: StageRef
    axis: AxisRef
    intrin: str


@dataclass(frozen=True)
class Prefetch:
    """In loop `axis`, prefetch what iteration axis + offset reads of a tensor: output
    `value_index` of stage `tensor`, with LLVM's temporal-locality hint (0-3)."""
    stage: StageRef
    tensor: StageRef
    value_index: int
    axis: AxisRef
    offset: int
    locality: int = 3  # absent from schedules saved before it existed


@dataclass(frozen=True)
class CacheRead:
    stage: StageRef  # the stage whose output is cached
    value_index: int
    scope: str
    readers: tuple  # StageRefs


@dataclass(frozen=True)
class CacheWrite:
    stage: StageRef
    scope: str


@dataclass(frozen=True)
class SetScope:
    """Stage.set_scope: the storage scope of the stage's buffer."""
    stage: StageRef
    scope: str


@dataclass(frozen=True)
class RFactor:
    stage: StageRef
    axis: AxisRef
    factor_axis: int


STEP_TYPES = {cls.__name__: cls for cls in (Split, Fuse, Reorder, Annotate, Bind, ComputeAt,
                                            ComputeWith, Pipeline, ComputeInline, ComputeRoot,
                                            StorageAlign, Pragma, Tensorize, Prefetch, CacheRead,
                                            CacheWrite, RFactor, StorePredicate, SetScope)}
_REF_TYPES = {"AxisRef": AxisRef, "StageRef": StageRef}


def _encode(value):
    if dataclasses.is_dataclass(value):
        out = {"type": type(value).__name__}
        for f in dataclasses.fields(value):
            out[f.name] = _encode(getattr(value, f.name))
        return out
    if isinstance(value, tuple):
        return [_encode(v) for v in value]
    return value


# What a field of a step may hold, beyond its annotation: the element type of tuple
# fields, and the closed set of values of a string field.
_TUPLE_OF = {"axes": AxisRef, "readers": StageRef}
_CHOICES = {(Annotate, "kind"): ("vectorized", "unrolled", "parallel"),
            (SetScope, "scope"): SCOPES}
_SCALARS = {"int": int, "float": float, "bool": bool, "str": str}
_JSON_NAMES = {"int": "int", "float": "number", "bool": "bool", "str": "string",
               "None": "null"}


def _got(value) -> str:
    if isinstance(value, dict):
        return f"an object of type {value.get('type')!r}"
    return f"{type(value).__name__} {value!r}"


def _an(name: str) -> str:
    return ("an " if name[0] in "AEIOU" else "a ") + name


def _decode_ref(cls, value, where: str):
    """A StageRef/AxisRef from its JSON object: exactly index (an int >= 0) and name."""
    if not isinstance(value, dict) or value.get("type") != cls.__name__:
        raise ScheduleError(f"{where} must be {_an(cls.__name__)} object, got {_got(value)}")
    given = sorted(set(value) - {"type"})
    if given != ["index", "name"]:
        raise ScheduleError(f"{where}: {_an(cls.__name__)} has fields ['index', 'name'], "
                            f"got {given}")
    index, name = value["index"], value["name"]
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise ScheduleError(f"{where}: index must be an int >= 0, got {index!r}")
    if not isinstance(name, str):
        raise ScheduleError(f"{where}: name must be a string, got {name!r}")
    return cls(index, name)


def _decode_field(cls, f, value, where: str):
    """One field's value, checked against the field's annotation ("int | None", "AxisRef",
    "tuple", ...; strings, as the module uses postponed annotations)."""
    kinds = [k.strip() for k in f.type.split("|")]
    if value is None and "None" in kinds:
        return None
    for kind in kinds:
        if kind in _REF_TYPES and isinstance(value, dict):
            return _decode_ref(_REF_TYPES[kind], value, where)
        if kind == "tuple":
            item = _TUPLE_OF[f.name]
            if not isinstance(value, list):
                raise ScheduleError(f"{where} must be a list of {item.__name__} objects, got "
                                    f"{_got(value)}")
            return tuple(_decode_ref(item, v, f"{where} item {k}") for k, v in enumerate(value))
        scalar = _SCALARS.get(kind)
        # bool is an int to Python, never to a schedule
        if scalar is not None and isinstance(value, scalar) and \
                (scalar is bool or not isinstance(value, bool)):
            choices = _CHOICES.get((cls, f.name))
            if choices is not None and value not in choices:
                raise ScheduleError(f"{where} must be one of "
                                    f"{', '.join(repr(c) for c in choices)}, got {value!r}")
            return value
    if len(kinds) == 1 and kinds[0] in _REF_TYPES:
        raise ScheduleError(f"{where} must be {_an(kinds[0])} object, got {_got(value)}")
    expected = " or ".join(_JSON_NAMES.get(k, k) for k in kinds)
    raise ScheduleError(f"{where} must be {expected}, got {_got(value)}")


def _decode_step(value, k: int):
    """Step number `k` of a schedule from its JSON object, every field checked."""
    if not isinstance(value, dict) or "type" not in value:
        raise ScheduleError(f"schedule JSON: step {k} must be an object with a \"type\", got "
                            f"{type(value).__name__}")
    kind = value["type"]
    cls = STEP_TYPES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise ScheduleError(f"schedule JSON: unknown step type {kind!r} (step {k}); expected "
                            f"one of {', '.join(STEP_TYPES)}")
    fields = {f.name for f in dataclasses.fields(cls)}
    required = {f.name for f in dataclasses.fields(cls)
                if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING}
    given = set(value) - {"type"}
    if not required <= given <= fields:
        optional = f" (optional: {sorted(fields - required)})" if fields - required else ""
        raise ScheduleError(f"schedule JSON: step {kind} expects fields "
                            f"{sorted(fields)}{optional}, got {sorted(given)}")
    return cls(**{f.name: _decode_field(cls, f, value[f.name],
                                        f"schedule JSON: step {k} ({kind}): field '{f.name}'")
                  for f in dataclasses.fields(cls) if f.name in given})


def to_dicts(steps) -> list:
    return [_encode(s) for s in steps]


def from_dicts(data) -> tuple:
    if not isinstance(data, list):
        raise ScheduleError(f"schedule JSON: expected a list of steps, got "
                            f"{type(data).__name__}")
    return tuple(_decode_step(d, k) for k, d in enumerate(data))


def to_json(steps) -> str:
    return json.dumps(to_dicts(steps), sort_keys=True)


def from_json(text: str | bytes) -> tuple:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ScheduleError(f"schedule JSON: not valid JSON ({err})") from None
    except RecursionError:
        raise ScheduleError("schedule JSON: nested too deeply (a schedule is a list of flat "
                            "steps)") from None
    return from_dicts(data)


def as_steps(steps) -> tuple:
    """Steps from what Schedule.replay takes: a to_json() string (or its bytes), or a
    sequence of Step objects."""
    if isinstance(steps, (str, bytes, bytearray)):
        return from_json(steps)
    if not isinstance(steps, (list, tuple)):
        raise ScheduleError(f"replay: steps must be a to_json() string or a sequence of "
                            f"steps, got {type(steps).__name__}")
    for k, step in enumerate(steps):
        if type(step) not in STEP_TYPES.values():
            raise ScheduleError(f"replay: step {k} must be a step ({', '.join(STEP_TYPES)}), "
                                f"got {type(step).__name__}")
    return tuple(steps)
