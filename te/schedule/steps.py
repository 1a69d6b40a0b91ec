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
    value: int | str | None


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
class RFactor:
    stage: StageRef
    axis: AxisRef
    factor_axis: int


STEP_TYPES = {cls.__name__: cls for cls in (Split, Fuse, Reorder, Annotate, Bind, ComputeAt,
                                            ComputeWith, Pipeline, ComputeInline, ComputeRoot,
                                            StorageAlign, Pragma, Prefetch, CacheRead,
                                            CacheWrite, RFactor)}
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


def _decode(value):
    if isinstance(value, dict):
        kind = value.get("type")
        cls = STEP_TYPES.get(kind) or _REF_TYPES.get(kind)
        if cls is None:
            raise ScheduleError(f"schedule JSON: unknown step type {kind!r}")
        fields = {f.name for f in dataclasses.fields(cls)}
        required = {f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING
                    and f.default_factory is dataclasses.MISSING}
        given = set(value) - {"type"}
        if not required <= given <= fields:
            optional = f" (optional: {sorted(fields - required)})" if fields - required else ""
            raise ScheduleError(f"schedule JSON: step {kind} expects fields "
                                f"{sorted(fields)}{optional}, got {sorted(given)}")
        return cls(**{k: _decode(v) for k, v in value.items() if k != "type"})
    if isinstance(value, list):
        return tuple(_decode(v) for v in value)
    return value


def to_dicts(steps) -> list:
    return [_encode(s) for s in steps]


def from_dicts(data) -> tuple:
    if not isinstance(data, list):
        raise ScheduleError(f"schedule JSON: expected a list of steps, got "
                            f"{type(data).__name__}")
    return tuple(_decode(d) for d in data)


def to_json(steps) -> str:
    return json.dumps(to_dicts(steps), sort_keys=True)


def from_json(text: str) -> tuple:
    try:
        data = json.loads(text)
    except json.JSONDecodeError as err:
        raise ScheduleError(f"schedule JSON: not valid JSON ({err})") from None
    return from_dicts(data)
