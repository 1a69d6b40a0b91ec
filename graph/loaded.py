"""graph.load_module: an O2 model exported by export_library (graph/export.py), run again.

The library holds the kernels and graph_run (the O2 driver, over an arena and the weights
given as arguments) and its description (`__graph_model`, JSON); the weights, a sidecar
`<library>.weights`, are mapped read-only (never copied, shared between processes) and
checked against the size and SHA-256 the library records. Imports numpy and runtime only: a
process that loads a model imports neither te nor onnx nor LLVM.
"""
from __future__ import annotations

import ctypes
import hashlib
import json
import mmap
import os
import threading

import numpy as np

from runtime import threadpool
from runtime.errors import ArgumentError, RuntimeBuildError
from runtime.module import SharedLibrary

from .entry_call import call_entry, fast_inputs

MODEL_SYMBOL = "__graph_model"
FORMAT = "te-graph-o2"
VERSION = 1
ENTRY = "graph_run"
WEIGHTS_SUFFIX = ".weights"
WEIGHTS_MAGIC = b"te graph weights"  # 16 bytes, then the payload's size (u64), padding
WEIGHTS_HEADER = 64                   # bytes before the payload (its offsets are aligned)
ALIGNMENT = 64
RECORD_FIELDS = 3  # a bounds-checked kernel's error record (runtime.signature)
# i32 graph_run(ptr inputs, ptr outputs, ptr failed, ptr arena, ptr weights, ptr records)
_ENTRY_TYPE = ctypes.CFUNCTYPE(ctypes.c_int32, *[ctypes.c_void_p] * 6)


def load_module(path) -> "LoadedModule":
    """The model a graph O2 module's export_library(path) wrote, ready to run(feeds)."""
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"graph.load_module: path must be a str or os.PathLike, got "
                        f"{type(path).__name__}")
    return LoadedModule(os.path.abspath(os.fspath(path)))


def weights_path(path: str) -> str:
    return path + WEIGHTS_SUFFIX


def aligned_array(nbytes: int) -> np.ndarray:
    """A zeroed uint8 array of `nbytes` starting at an ALIGNMENT boundary."""
    raw = np.zeros(nbytes + ALIGNMENT, np.uint8)
    start = -raw.ctypes.data % ALIGNMENT
    return raw[start:start + nbytes]


class LoadedModule:
    """A model loaded by graph.load_module: run(feeds) as graph's O2 Module's run (the same
    checks and messages; bad feeds raise runtime.ArgumentError, which graph.FeedError
    subclasses), one native call per run over this module's own arena."""

    def __init__(self, path: str):
        threadpool.load()  # libgomp with the default thread count, before any kernel runs
        where = f"graph.load_module: '{path}'"
        self.path = path
        self._library = SharedLibrary(path)
        text = self._library.read_string(MODEL_SYMBOL)
        if text is None:
            raise RuntimeBuildError(f"{where} is not a model written by graph's "
                                    f"export_library (it has no {MODEL_SYMBOL} symbol; a "
                                    f"single kernel's library loads with runtime.load_module)")
        try:
            meta = json.loads(text)
            version = (meta.get("format"), meta.get("version"))
        except (ValueError, AttributeError) as error:
            raise RuntimeBuildError(f"{where}: invalid {MODEL_SYMBOL} ({error})") from None
        if version != (FORMAT, VERSION):
            raise RuntimeBuildError(f"{where} was written in format {version[0]!r} version "
                                    f"{version[1]!r}; this runtime reads {FORMAT!r} version "
                                    f"{VERSION}: export it again")
        try:
            self._describe(meta)
        except (KeyError, IndexError, TypeError, ValueError) as error:
            raise RuntimeBuildError(f"{where}: invalid {MODEL_SYMBOL} "
                                    f"({type(error).__name__}: {error})") from None
        self._weights = _map_weights(path, self.weights_bytes, self._sha256)
        self._constants = [self._weights[o:o + d.itemsize * int(np.prod(s, dtype=np.int64))]
                           .view(d).reshape(s) for o, d, s in self._constant_specs]
        self.arena = aligned_array(self.arena_bytes)
        self._records = np.zeros((max(1, len(self._calls)), RECORD_FIELDS), np.int64)
        n_in, n_out = len(self._specs), len(self._outputs)
        self._pointers = (ctypes.c_void_p * max(1, n_in + n_out))()
        self._failed = ctypes.c_int32(-1)
        base = ctypes.addressof(self._pointers)
        self._entry_args = (base, base + n_in * ctypes.sizeof(ctypes.c_void_p),
                            ctypes.addressof(self._failed), self.arena.ctypes.data,
                            self._weights.ctypes.data, self._records.ctypes.data)
        self._entry = _ENTRY_TYPE(self._library.get_function_address(self._entry_name))
        self._lock = threading.Lock()

    def _describe(self, meta: dict) -> None:
        """The model's description (__graph_model) as this module's fields."""
        self.name = str(meta["name"])
        self._entry_name = str(meta["entry"])
        self.arena_bytes = int(meta["arena_bytes"])
        self.weights_bytes = int(meta["weights"]["bytes"])
        self._sha256 = str(meta["weights"]["sha256"])
        self._calls = [(str(name), bool(checked)) for name, checked in meta["calls"]]
        self._inputs_meta = meta["inputs"]  # [(name, dtype, shape, type text)]
        self._specs = [(name, np.dtype(dtype), tuple(shape))
                       for name, dtype, shape, _ in self._inputs_meta]
        self._constant_specs = [(int(offset), np.dtype(dtype), tuple(shape))
                                for offset, dtype, shape in meta["constants"]]
        self._outputs = [(str(name), tuple(shape), _how(how))
                         for name, shape, how in meta["outputs"]]  # [(name, shape, how)]

    @property
    def input_names(self) -> list:
        return [name for name, _, _ in self._specs]

    @property
    def output_names(self) -> list:
        return [name for name, _, _ in self._outputs]

    def run(self, feeds: dict) -> list:
        """The outputs, fresh arrays in the graph's output order."""
        return call_entry(self, self._inputs(feeds),
                          [(shape, how) for _, shape, how in self._outputs])

    def _inputs(self, feeds) -> list:
        inputs = fast_inputs(feeds, self._specs)
        return inputs if inputs is not None else self._check(feeds)

    def _check(self, feeds) -> list:
        """The feeds checked with graph.executor.Module._check's messages (a test pins that
        both say the same)."""
        if not isinstance(feeds, dict):
            raise ArgumentError(f"run: feeds must be a dict of input name -> array, got "
                                f"{type(feeds).__name__}")
        names = [m[0] for m in self._inputs_meta]
        unknown = [k for k in feeds if k not in names]
        if unknown:
            raise ArgumentError(f"run: unknown input {unknown[0]!r}; the graph's inputs are "
                                f"{names}")
        out = []
        for name, dtype, shape, type_text in self._inputs_meta:
            if name not in feeds:
                raise ArgumentError(f"run: missing input '{name}' ({type_text}); the graph's "
                                    f"inputs are {names}")
            a = np.asarray(feeds[name])
            if a.dtype.name != dtype:
                raise ArgumentError(f"run: input '{name}' must have dtype {dtype}, got "
                                    f"{a.dtype.name}")
            if a.shape != tuple(shape):
                want = "(" + ", ".join(str(d) for d in shape) + ")"
                raise ArgumentError(f"run: input '{name}' must have shape {want}, got "
                                    f"{a.shape}")
            # the other byte order has the same values (its dtype.name is the same): the
            # kernels read native ones
            native = a.dtype if a.dtype.isnative else a.dtype.newbyteorder("=")
            out.append(a if a.dtype is native and a.flags.c_contiguous
                       else np.array(a, dtype=native, order="C"))
        return out

    def _raise(self, status: int) -> None:
        k = self._failed.value
        name, checked = self._calls[k]
        detail = ""
        if checked:
            code, index, extent = (int(x) for x in self._records[k])
            detail = f" (bounds record: code {code}, index {index}, extent {extent})"
        raise RuntimeError(f"graph O2 run: kernel '{name}' (call {k} of {len(self._calls)}) "
                           f"failed with status {status}{detail}")

    def __str__(self) -> str:
        return (f"module {self.name} (level O2, loaded from '{self.path}', {len(self._calls)} "
                f"calls, arena {self.arena_bytes} bytes, weights {self.weights_bytes} bytes)")


def _how(how: list) -> tuple:
    """An output's origin: ('new', shape, dtype) for the array a run allocates, else
    ('output' | 'input' | 'constant', index) for the array it is a view or copy of."""
    if how[0] == "new":
        return ("new", tuple(how[1]), np.dtype(how[2]))
    if how[0] not in ("output", "input", "constant"):
        raise ValueError(f"unknown output kind {how[0]!r}")
    return (how[0], int(how[1]))


def _map_weights(path: str, nbytes: int, sha256: str) -> np.ndarray:
    """The payload of `path`'s weights file, mapped read-only (no copy: the pages are the
    file's, shared by every process that loads it) and checked against the size (`nbytes`)
    and SHA-256 the library records. The mapping starts at a page, so the payload at
    WEIGHTS_HEADER and each constant in it keep their ALIGNMENT."""
    wpath = weights_path(path)
    where = f"graph.load_module: '{path}'"
    try:
        handle = open(wpath, "rb")
    except FileNotFoundError:
        raise RuntimeBuildError(f"{where} needs its weights file '{wpath}', which does not "
                                f"exist (export_library writes it beside the library: copy "
                                f"or move both)") from None
    except OSError as error:
        raise RuntimeBuildError(f"{where}: cannot read its weights file '{wpath}' "
                                f"({error.strerror})") from None
    with handle:
        size = os.fstat(handle.fileno()).st_size
        want = WEIGHTS_HEADER + nbytes
        if handle.read(len(WEIGHTS_MAGIC)) != WEIGHTS_MAGIC:
            raise RuntimeBuildError(f"{where}: '{wpath}' is not a weights file written by "
                                    f"export_library (no '{WEIGHTS_MAGIC.decode()}' header)")
        if size != want:
            raise RuntimeBuildError(f"{where}: its weights file '{wpath}' has {size} bytes, "
                                    f"expected {want}: it is truncated or from another "
                                    f"export; export the model again")
        # the mapping outlives the handle; export_library replaces the file (a new inode)
        # rather than writing over it, so a loaded module keeps the weights it checked
        mapped = mmap.mmap(handle.fileno(), size, access=mmap.ACCESS_READ)
    weights = np.frombuffer(mapped, np.uint8, nbytes, WEIGHTS_HEADER)
    if hashlib.sha256(weights).hexdigest() != sha256:
        raise RuntimeBuildError(f"{where}: its weights file '{wpath}' does not match the "
                                f"library (SHA-256 differs): it is corrupt or from another "
                                f"export; export the model again")
    return weights
