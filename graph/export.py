"""An O2 module's export_library(path): the model as one shared library plus its weights.

`path` gets every distinct kernel (its symbols prefixed, so kernels compiled apart link
together), graph_run (the O2 driver, taking the arena and the weights as arguments where the
JIT driver has addresses) and the model's description (`__graph_model`, JSON: inputs,
outputs, constants, calls, arena size, the weights' size and SHA-256). The weights go to
the sidecar `path + '.weights'`; graph.load_module (graph/loaded.py) reads both.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading

import numpy as np

import runtime
from runtime import cpu

from .errors import GraphError
from .loaded import (ALIGNMENT, ENTRY, FORMAT, MODEL_SYMBOL, RECORD_FIELDS, VERSION,
                     WEIGHTS_HEADER, WEIGHTS_MAGIC, weights_path)


def export_library(m, path) -> None:
    """Write O2 module `m` to the shared library `path` and its weights to path.weights."""
    if not isinstance(path, (str, os.PathLike)):
        raise GraphError(f"export_library: path must be a str or os.PathLike, got "
                         f"{type(path).__name__}")
    path = os.path.abspath(os.fspath(path))
    if os.path.isdir(path):
        raise GraphError(f"export_library: '{path}' is a directory; give the path of the "
                         f"library to write")
    offsets, payload_bytes = _weight_offsets(m._constants)
    directory = os.path.dirname(path)
    with tempfile.TemporaryDirectory(prefix="graph_export_") as tmp:
        symbols, objects = {}, []
        for call in m.calls:
            func = call.kernel.func
            if id(func) in symbols:
                continue
            prefix = f"__graph_k{len(symbols)}_"
            symbols[id(func)] = prefix + func.entry_name
            objects.append(os.path.join(tmp, f"k{len(symbols)}.o"))
            _write(objects[-1], _kernel_object(call.kernel, prefix))
        digest = hashlib.sha256()
        stem = os.path.join(directory, f".graph_export_{os.getpid()}_{threading.get_ident()}")
        tmp_weights, tmp_library = stem + ".weights", stem + ".so"
        try:
            # mode 0o666 less the umask, as open() gives any file the user writes
            fd = os.open(tmp_weights, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o666)
            with os.fdopen(fd, "wb") as handle:
                _write_weights(handle, m._constants, offsets, payload_bytes, digest)
            meta = _description(m, offsets, payload_bytes, digest.hexdigest())
            objects.append(os.path.join(tmp, "driver.o"))
            _write(objects[-1], cpu.emit_object(_driver_ir(m, symbols, offsets, meta)))
            runtime.link_shared(tmp_library, objects)
            # the weights first: a reader between the two renames sees the old library
            # with the new weights, which its recorded checksum refuses
            os.replace(tmp_weights, weights_path(path))
            os.replace(tmp_library, path)
        except OSError as error:
            raise type(error)(error.errno, f"export_library: cannot write '{path}' or its "
                              f"weights: {error.strerror}") from None
        finally:
            for leftover in (tmp_weights, tmp_library):
                if os.path.exists(leftover):
                    os.unlink(leftover)


def _write(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _kernel_object(kernel, prefix: str) -> bytes:
    """The object code of `kernel` (a graph.kernels.Kernel) with its symbols prefixed: its
    optimized IR, compiled for the CPU, features and opt level it was built for (the
    host's CPU when it came from the compile cache)."""
    func = kernel.func
    library = func.library
    ll = cpu.prefix_symbols(func.get_source("ll"), prefix)
    if isinstance(library, cpu.CpuLibrary):
        return cpu.emit_object(ll, library.cpu, library.features, library.opt_level)
    return cpu.emit_object(ll, opt_level=kernel.opt_level)


def _weight_offsets(constants: list) -> tuple:
    """(offset of each constant in the payload, payload bytes): ALIGNMENT-aligned."""
    offsets, end = [], 0
    for c in constants:
        end = -(-end // ALIGNMENT) * ALIGNMENT
        offsets.append(end)
        end += c.nbytes
    return offsets, end


def _write_weights(handle, constants, offsets, payload_bytes: int, digest) -> None:
    header = WEIGHTS_MAGIC + int(payload_bytes).to_bytes(8, "little")
    handle.write(header.ljust(WEIGHTS_HEADER, b"\0"))
    at = 0
    for c, offset in zip(constants, offsets):
        for chunk in (bytes(offset - at), np.ascontiguousarray(c).tobytes()):
            handle.write(chunk)
            digest.update(chunk)
        at = offset + c.nbytes


def _description(m, offsets, payload_bytes: int, sha256: str) -> dict:
    graph = m.graph
    outputs = []
    for v, how in zip(graph.outputs, m._results):
        if how[0] == "new":
            how = ["new", list(how[1]), how[2].name]
        outputs.append([v.name, [int(d) for d in v.shape], list(how)])
    return {
        "format": FORMAT, "version": VERSION, "name": graph.name, "entry": ENTRY,
        "inputs": [[v.name, v.dtype, [int(d) for d in v.shape], v.type_str]
                   for v in graph.inputs],
        "outputs": outputs,
        "constants": [[o, c.dtype.name, list(c.shape)] for c, o in zip(m._constants, offsets)],
        "calls": [[c.kernel.name, bool(c.kernel.func.signature.checked_buffers)]
                  for c in m.calls],
        "arena_bytes": int(m.memory_plan.arena_bytes),
        "weights": {"bytes": int(payload_bytes), "sha256": sha256},
    }


def _driver_ir(m, symbols: dict, offsets: list, meta: dict) -> str:
    """graph_run as O2Module._driver_ir writes it, with every address relative to the
    arguments (the arena, the weights, the error records) instead of this process's."""
    locations = m.memory_plan.locations
    lines = [f"define i32 @{ENTRY}(ptr %ins, ptr %outs, ptr %failed, ptr %arena, "
             f"ptr %weights, ptr %records) {{", "entry:"]
    loaded: dict = {}
    counter = [0]

    def offset_in(base: str, offset: int) -> str:
        counter[0] += 1
        name = f"%p{counter[0]}"
        lines.append(f"  {name} = getelementptr i8, ptr {base}, i64 {offset}")
        return name

    def address(v) -> str:
        kind, index = locations[id(v)]
        if kind == "arena":
            return offset_in("%arena", index)
        if kind == "constant":
            return offset_in("%weights", offsets[index])
        name = f"%{kind}{index}"
        if name not in loaded:
            loaded[name] = True
            lines.append(f"  {name}.at = getelementptr ptr, ptr "
                         f"{'%ins' if kind == 'input' else '%outs'}, i64 {index}")
            lines.append(f"  {name} = load ptr, ptr {name}.at")
        return name

    declared: dict = {}
    for k, call in enumerate(m.calls):
        func = call.kernel.func
        if func.signature.scalars:
            raise GraphError(f"export_library: kernel '{call.kernel.name}' takes size "
                             f"variables; O2 needs constant shapes")
        args = [address(v) for v in call.inputs + call.outputs]
        if func.signature.checked_buffers:
            args.append(offset_in("%records", k * RECORD_FIELDS * 8))
        callee = symbols[id(func)]
        declared[callee] = len(args)
        lines += [f"  %s{k} = call i32 @{callee}({', '.join('ptr ' + a for a in args)})",
                  f"  %bad{k} = icmp ne i32 %s{k}, 0",
                  f"  br i1 %bad{k}, label %fail{k}, label %ok{k}",
                  f"fail{k}:", f"  store i32 {k}, ptr %failed", f"  ret i32 %s{k}",
                  f"ok{k}:"]
    lines += ["  ret i32 0", "}", ""]
    head = [f"declare i32 @{name}({', '.join(['ptr'] * n)})" for name, n in declared.items()]
    return "\n".join(head + [_string_global(MODEL_SYMBOL, json.dumps(meta))] + lines)


def _string_global(symbol: str, text: str) -> str:
    data = text.encode("utf-8") + b"\0"
    escaped = "".join(chr(b) if 0x20 <= b < 0x7f and b not in (0x22, 0x5c) else f"\\{b:02X}"
                      for b in data)
    return f'@{symbol} = constant [{len(data)} x i8] c"{escaped}"'
