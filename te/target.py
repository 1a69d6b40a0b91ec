"""A target parsed once: its kind, options, the CPU features code may use, and what the
lowering and code generation below te.build need to know about it.

Takes a target string ("llvm", "llvm -mcpu=NAME -mattr=+f1,-f2 -opt-level=N -num-cores=N",
"cuda", "cuda -arch=sm_80 -fast-math") or a Target; gives a frozen Target that travels down
the one road (te/lower/pipeline.py, te/codegen/) as a parameter. The numbers it carries (the index
limit, CUDA's launch limits and C types) are defined once, in runtime/, which checks them
again at call time; te/lower/ and te/codegen/ never import runtime for them. Imports
llvmlite (the host's CPU features) and runtime.
"""
from __future__ import annotations

import dataclasses
import functools
import re
import shlex
import threading
from dataclasses import dataclass, field
from types import MappingProxyType

import llvmlite.binding as llvm

import runtime
from runtime import cuda as rt_cuda
from runtime.checker import INDEX_LIMIT

from .errors import BuildError

# The options each target kind takes (-key=value).
TARGET_OPTIONS = {"llvm": ("mcpu", "mattr", "num-cores", "opt-level"),
                  "cuda": ("arch", "fast-math")}
# Of those, the on/off ones: a bare -key turns one on (TVM's "llvm -fast-math" spelling), or
# -key=true|false|1|0; the parsed value is "true" or "false".
FLAG_OPTIONS = ("fast-math",)

AVX512_PREREQUISITES = {"avx2", "fma", "f16c", "avx", "sse4.2", "sse4.1", "ssse3", "sse3",
                        "sse2", "sse"}

# Without these LLVM cannot compile an x86-64 function at all, and says so by aborting the
# process (a fatal error, not an exception).
ABI_FEATURES = ("64bit", "sse")


class TargetKind(str):
    """A target's kind ("llvm" or "cuda"): a string, with TVM's `kind.name` spelling."""

    @property
    def name(self) -> str:
        return str(self)


# Per thread, the targets of the `with target:` blocks being run, innermost last
# (Target.current()); a thread starts with none, as in TVM.
_SCOPES = threading.local()


def _current_stack() -> list:
    if not hasattr(_SCOPES, "stack"):
        _SCOPES.stack = []
    return _SCOPES.stack


@dataclass(frozen=True)
class Target:
    """A parsed target. Two targets are equal when their kind and options are."""
    kind: TargetKind
    options: tuple                      # ((key, value), ...) in the order given
    text: str = field(compare=False)    # as the user wrote it
    # 'llvm': the CPU features (LLVM names) the code may use; 'cuda': none
    features: frozenset = field(default=frozenset(), compare=False)
    # 'llvm': what the code may use and this host lacks ('+name', ...)
    missing_host_features: tuple = field(default=(), compare=False)
    # Loops and tensors span fewer elements than this (headroom for split loops).
    index_limit: int = field(default=INDEX_LIMIT, compare=False)
    # 'cuda' only (None for 'llvm'): launch limits and te dtype -> C type
    max_threads_per_block: int | None = field(default=None, compare=False)
    max_block: tuple | None = field(default=None, compare=False)
    max_grid: tuple | None = field(default=None, compare=False)
    c_types: MappingProxyType | None = field(default=None, compare=False)
    # TVM's host target (the code that launches a device's kernels): recorded, as our host
    # code always runs on this CPU
    host: Target | None = field(default=None, compare=False)

    @property
    def attrs(self) -> dict:
        """The options as a dict (TVM's `target.attrs["mcpu"]`)."""
        return dict(self.options)

    @property
    def mcpu(self) -> str | None:
        return self.get("mcpu")

    @property
    def arch(self) -> str | None:
        return self.get("arch")

    @property
    def fast_math(self) -> bool:
        """-fast-math: CUDA's fast intrinsics (__expf, ...) and nvcc's --use_fast_math."""
        return self.get("fast-math") == "true"

    def with_host(self, host=None) -> Target:
        """This target with `host` (a string or Target) as its host target."""
        if host is None:
            return dataclasses.replace(self, host=None)
        return dataclasses.replace(self, host=parse_target(host, who="Target host"))

    def __enter__(self) -> Target:
        _current_stack().append(self)
        return self

    def __exit__(self, *exc) -> None:
        _current_stack().pop()

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The target of the innermost `with target:` block being run, else None."""
        stack = _current_stack()
        if stack:
            return stack[-1]
        if not allow_none:
            raise BuildError("Target.current: no `with target:` block is being run")
        return None

    def get(self, key: str, default=None):
        """The value of option -key, or `default`."""
        return dict(self.options).get(key, default)

    def __str__(self) -> str:
        return self.text

    def unavailable_message(self) -> str | None:
        """Why code built for this target must not run on this host, or None when it may."""
        missing = self.missing_host_features
        if not missing:
            return None
        lacks = f"module was built for CPU features this host lacks ({','.join(missing)})"
        if not self.get("mcpu"):
            return f"{lacks}; export it or rebuild with target='llvm'"
        options = " ".join(f"-{key}={self.get(key)}" for key in ("mcpu", "mattr")
                           if self.get(key))
        turn_off = ",".join("-" + feature[1:] for feature in missing)
        return (f"{lacks}, which {options} implies; export it, rebuild with target='llvm', "
                f"or turn them off with -mattr={turn_off}")


def parse_target(target, who: str = "te.build") -> Target:
    """`target` (a string, or a Target returned as it is) as a Target; `who` names the
    function in error messages."""
    if isinstance(target, Target):
        return target
    if not isinstance(target, str) or not target.strip():
        raise BuildError(f"{who}: target must be a string such as 'llvm', got {target!r}")
    return _parse(target, who)


@functools.lru_cache(maxsize=64)   # the host's features are asked of LLVM once per string
def _parse(text: str, who: str) -> Target:
    opts = _options(text, who)
    kind = TargetKind(opts.pop("kind"))
    options = tuple(opts.items())
    if kind == "cuda":
        return Target(kind, options, text, max_threads_per_block=rt_cuda.MAX_THREADS_PER_BLOCK,
                      max_block=rt_cuda.MAX_BLOCK, max_grid=rt_cuda.MAX_GRID,
                      c_types=MappingProxyType(rt_cuda.C_TYPES))
    return Target(kind, options, text, features=_features(opts),
                  missing_host_features=tuple(_missing_host_features(opts, who)))


def _options(target: str, who: str) -> dict:
    """'llvm -mcpu=x -mattr=+a,-b' -> {'kind': 'llvm', 'mcpu': 'x', 'mattr': '+a,-b'}."""
    try:
        words = shlex.split(target)
    except ValueError as err:  # unbalanced quotes
        raise BuildError(f"{who}: target {target!r} cannot be split into words: "
                         f"{err}") from None
    out = {"kind": words[0]}
    if out["kind"] not in TARGET_OPTIONS:
        raise BuildError(f"{who}: unknown target kind {out['kind']!r} (expected 'llvm' or "
                         f"'cuda')")
    allowed = TARGET_OPTIONS[out["kind"]]
    for w in words[1:]:
        if w.startswith("-") and "=" not in w and w.lstrip("-") in FLAG_OPTIONS \
                and w.lstrip("-") in allowed:
            w += "=true"
        if not w.startswith("-") or "=" not in w:
            raise BuildError(f"{who}: target option {w!r} must look like -key=value")
        k, v = w.lstrip("-").split("=", 1)
        if k in FLAG_OPTIONS and k in allowed:
            if v.lower() not in ("true", "false", "1", "0"):
                raise BuildError(f"{who}: target option -{k}: expected true, false, 1 or 0 "
                                 f"(or -{k} alone for true), got {v!r}")
            v = "true" if v.lower() in ("true", "1") else "false"
        if k not in allowed:
            raise BuildError(f"{who}: unknown target option -{k} for '{out['kind']}' "
                             f"(expected {', '.join('-' + a for a in allowed)})")
        out[k] = v
    _check_values(out, who)
    return out


def _check_values(out: dict, who: str) -> None:
    if "arch" in out and not re.fullmatch(r"sm_\d{2,3}[a-z]?", out["arch"]):
        raise BuildError(f"{who}: target option -arch: expected sm_XX such as sm_80, got "
                         f"{out['arch']!r}")
    if "opt-level" in out and out["opt-level"] not in ("0", "1", "2", "3"):
        raise BuildError(f"{who}: target option -opt-level: expected 0, 1, 2 or 3, got "
                         f"{out['opt-level']!r}")
    if "num-cores" in out and not (out["num-cores"].isdigit() and int(out["num-cores"]) > 0):
        raise BuildError(f"{who}: target option -num-cores: expected an integer >= 1, got "
                         f"{out['num-cores']!r}")
    if "mcpu" in out and not runtime.cpu.is_known_cpu(out["mcpu"]):
        raise BuildError(f"{who}: unknown -mcpu {out['mcpu']!r}")


def _features(opts: dict) -> frozenset:
    """The CPU features (LLVM names) code built for `opts` may use: the host's, changed by
    -mattr. With -mcpu only what -mattr turns on is known, so codegen stays generic."""
    host = {} if opts.get("mcpu") else llvm.get_host_cpu_features()
    features = {name for name, on in host.items() if on}
    removed = set()
    for feature in (opts.get("mattr") or "").split(","):
        feature = feature.strip()
        if feature[:1] == "+":
            features.add(feature[1:])
        elif feature[:1] == "-":
            features.discard(feature[1:])
            removed.add(feature[1:])
    # LLVM turns off what depends on a removed feature: AVX-512 needs AVX2, FMA and F16C
    # (and through them AVX and SSE), and every AVX-512 extension needs AVX-512F. Keeping
    # them here would let codegen emit an AVX-512 intrinsic the target cannot select.
    if removed & AVX512_PREREQUISITES or "avx512f" not in features:
        features = {f for f in features if not f.startswith("avx512")}
    return frozenset(features)


def _missing_host_features(opts: dict, who: str) -> list:
    """The features ('+f1', ...) code for the target may use and this host lacks: what -mattr
    turns on and, with -mcpu, what that CPU implies. Unknown -mattr names raise."""
    mattr = opts.get("mattr") or ""
    host = llvm.get_host_cpu_features()
    missing = []
    for feature in mattr.split(","):
        feature = feature.strip()
        if not feature:
            continue
        if feature[0] not in "+-" or feature[1:] not in host:
            raise BuildError(f"{who}: unknown -mattr feature {feature!r} (expected "
                             f"+name or -name of a feature LLVM knows, such as +avx2)")
        if feature[0] == "-" and feature[1:] in ABI_FEATURES:
            raise BuildError(f"{who}: -mattr cannot turn off {feature[1:]!r}: the x86-64 "
                             f"calling convention the generated functions use needs it")
        if feature[0] == "+" and not host[feature[1:]]:
            missing.append(feature)
    if opts.get("mcpu"):
        missing = ["+" + name for name in runtime.cpu.missing_host_features(opts["mcpu"], mattr)]
    return missing


def target_features(target="llvm") -> frozenset:
    """The CPU features code built for `target` (a string or Target) may use."""
    return parse_target(target).features
