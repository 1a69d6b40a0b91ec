"""The callable kernel module: a native entry point plus its KernelSignature.

Takes a CpuLibrary (JIT) or a shared library path; gives Module (check arguments, call through
ctypes, time, show source, export a .so) and load_module(). An exported .so carries its own
signature (`__te_signature`, JSON) and IR text (`__te_source_ll`): the file alone is enough.
Reads and writes regular files only. Imports numpy, runtime (runtime.cpu only to export).
"""

from __future__ import annotations

import ctypes
import errno
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from typing import Any, Callable, NoReturn, Protocol

from . import elf, threadpool
from .checker import ArgumentChecker
from .errors import RuntimeBuildError
from . import packed
from .packed import PACKED_STATUS
from .signature import BOUNDS_STATUS, RECORD_FIELDS, ArgSpec, KernelSignature, ScalarSpec
from .timer import TimeResult, check_timing_parameters, time_function

__all__ = ["Module", "SharedLibrary", "link_shared", "load_module", "ArgSpec", "ScalarSpec",
           "KernelSignature"]

SIGNATURE_SYMBOL = "__te_signature"
SOURCE_SYMBOL = "__te_source_ll"


class Library(Protocol):
    def get_function_address(self, name: str) -> int: ...


class SharedLibrary:
    """A shared library opened with ctypes, kept open as long as this object lives.

    A file is opened through a private copy (written, dlopened, unlinked): dlopen would hand
    back an already loaded library of the same path, stale after a re-export, and a mapped
    file must never be rewritten in place. `image` keeps the bytes for export_library.
    """

    def __init__(self, path: str, image: bytes | None = None) -> None:
        """`image`: the file's bytes when the caller has read (and checked) them already;
        they are loaded, and `path` only names them in messages."""
        # A bare name ("libfoo.so") goes through the loader's search path, like dlopen.
        self.path = os.path.abspath(path) if os.sep in path else path
        self.image: bytes | None = None
        where = f"cannot load shared library '{self.path}'"
        if image is not None:
            path = self.path = os.path.abspath(path)
        if os.sep not in path:
            try:
                self._dll = ctypes.CDLL(self.path)
            except OSError as error:
                raise RuntimeBuildError(f"{where}: {error}") from None
            return
        self.image = _read_regular_file(self.path, where) if image is None else bytes(image)
        problem = elf.image_problem(self.image)
        if problem is not None:
            raise RuntimeBuildError(f"{where}: {problem}")
        self._dll = _dlopen_private_copy(self.image, where)

    def __del__(self) -> None:
        """Unmap the library once nothing holds it: ctypes never closes what it opened, and
        a process that loads thousands of kernels (a conformance run, a long tuning session)
        would run out of memory mappings (vm.max_map_count) and abort. Whatever calls into
        the library holds this object (a runtime.Module its library, an O2 entry its
        steps' kernels), so no code of it runs after this. A bare name loaded through the
        search path (a system library) is left open, as is everything at interpreter exit."""
        dll = getattr(self, "_dll", None)
        if dll is None or os.sep not in self.path or sys.is_finalizing():
            return
        self._dll = None
        _dlclose(dll._handle)

    def __reduce__(self) -> NoReturn:
        # A copy would share the mapping and unmap it when collected, under the original.
        raise TypeError(f"cannot copy or pickle the loaded library '{self.path}': it is one "
                        f"mapping in this process; share the object instead")

    def get_function_address(self, name: str) -> int:
        try:
            return ctypes.cast(getattr(self._dll, name), ctypes.c_void_p).value
        except AttributeError:
            raise KeyError(f"function '{name}' is not defined in '{self.path}'") from None

    def read_string(self, symbol: str) -> str | None:
        """The NUL-terminated string stored at global `symbol`, or None when it is absent."""
        try:
            first = ctypes.c_char.in_dll(self._dll, symbol)
        except ValueError:
            return None
        return ctypes.string_at(ctypes.addressof(first)).decode("utf-8")


class Module:
    """A compiled kernel: call it with numpy arrays or NDArrays, one per ArgSpec."""

    def __init__(
        self, library: Library, signature: KernelSignature, sources: dict[str, str] | None = None,
        unavailable: str | None = None,
    ) -> None:
        """`unavailable`, when given, says why this host must not run the code (e.g. CPU
        features it lacks): calls then raise RuntimeError with it; export still works. It
        stays readable as `unavailable` (for callers that call the entry point by address)."""
        self.library = library
        self.signature = signature
        self.unavailable = unavailable
        self._sources = dict(sources or {})
        self._checker = ArgumentChecker(signature)
        self._bounds_checked = bool(signature.checked_buffers)
        argtypes = list(self._checker.ctypes_argtypes)
        if self._bounds_checked:  # the error record of a failed bounds check
            argtypes.append(ctypes.c_void_p)
        prototype = ctypes.CFUNCTYPE(ctypes.c_int32, *argtypes)
        self._cfunc = prototype(library.get_function_address(signature.name))
        # `entry` hands this out alone: it keeps the library mapped (SharedLibrary.__del__)
        self._cfunc.library = library
        if unavailable is not None:
            self._cfunc = _refuse(f"kernel '{signature.name}': {unavailable}")

    @property
    def entry_name(self) -> str:
        return self.signature.name

    def __call__(self, *args: Any) -> None:
        raw = self._checker.convert(args)
        record = None
        if self._bounds_checked:  # one record per call: calls may run in several threads
            record = (ctypes.c_int64 * RECORD_FIELDS)()
            raw.append(ctypes.addressof(record))
        status = self._cfunc(*raw)
        if status:
            self.raise_status(status, record)

    @property
    def entry(self) -> Callable[..., int]:
        """The native entry point without argument checks, for callers that checked once
        (a graph run over a planned arena): call it with each buffer's data address (ints),
        then the scalars, then, when `signature.checked_buffers`, the address of an error
        record of RECORD_FIELDS int64; it returns the status, 0 on success (raise_status
        raises the error of another). A module that must not run here refuses (see
        `unavailable`)."""
        return self._cfunc

    def raise_status(self, status: int, record=None) -> NoReturn:
        """Raise the error that a nonzero status of the entry point stands for; `record`:
        the error record's RECORD_FIELDS values, for a bounds-checked kernel."""
        if status == PACKED_STATUS:  # a Python function it called (call_packed) raised
            raise packed.take_error()
        if status == BOUNDS_STATUS and record is not None:
            code, index, extent = record
            k, store = divmod(code, 2)
            names = self.signature.checked_buffers
            buffer = names[k] if 0 <= k < len(names) else f"#{k}"
            access = "store to" if store else "load from"
            raise IndexError(f"kernel '{self.entry_name}': {access} buffer '{buffer}' at "
                             f"index {index} out of range [0, {extent})")
        if status <= -2:  # heap buffer k: -2 - 2k allocation failed, -3 - 2k too many elements
            k, too_many = divmod(-2 - status, 2)
            names = self.signature.heap_buffers
            buffer = names[k] if k < len(names) else f"#{k}"
            if too_many:
                raise MemoryError(f"kernel '{self.entry_name}': buffer '{buffer}' needs more "
                                  "elements than the int32 index range of this kernel")
            raise MemoryError(
                f"kernel '{self.entry_name}': could not allocate memory for buffer '{buffer}'"
            )
        raise RuntimeError(
            f"kernel '{self.entry_name}' failed a runtime check (status code {status})"
        )

    def time_evaluator(
        self, func_name: str | None = None, dev: Any = None, number: int = 10, repeat: int = 3,
        min_repeat_ms: float = 0,
    ) -> Callable[..., TimeResult]:
        """A function f(*args) -> TimeResult that times this kernel on `args`.

        Arguments are checked once; the timed loop is the bare native call. `dev` is accepted
        for TVM compatibility and ignored (this module runs on the host CPU).
        """
        if func_name is not None and func_name != self.entry_name:
            raise ValueError(
                f"func_name: expected '{self.entry_name}' (or None), got {func_name!r}"
            )
        check_timing_parameters(number, repeat, min_repeat_ms)  # before any kernel runs

        def evaluate(*args: Any) -> TimeResult:
            raw = self._checker.convert(args)
            record = None
            if self._bounds_checked:
                record = (ctypes.c_int64 * RECORD_FIELDS)()
                raw.append(ctypes.addressof(record))
            cfunc = self._cfunc
            status = cfunc(*raw)
            if status:
                self.raise_status(status, record)
            return time_function(
                lambda: cfunc(*raw), number=number, repeat=repeat, min_repeat_ms=min_repeat_ms
            )

        return evaluate

    def get_source(self, fmt: str = "ll") -> str:
        """The optimized LLVM IR ("ll") or assembly ("asm" or "s") of this module."""
        if fmt == "ll":
            return self._source_ll()
        if fmt in ("asm", "s"):
            if _is_jit(self.library):
                return self.library.asm
            from . import cpu
            return cpu.emit_assembly(self._source_ll())
        raise ValueError(f"fmt: expected 'll', 'asm' or 's', got {fmt!r}")

    def _source_ll(self) -> str:
        if _is_jit(self.library):
            return self.library.ll
        if "ll" in self._sources:
            return self._sources["ll"]
        raise ValueError(f"the LLVM IR of module '{self.entry_name}' is not available")

    @property
    def imported_modules(self) -> list:
        """TVM's device modules of a host module: a CPU module has none."""
        return []

    def save(self, path: str | os.PathLike, fmt: str = "") -> None:
        """Write this module as an object file (".o", with the signature and IR that
        load_module reads once create_shared or a linker made a .so of it), LLVM IR (".ll")
        or assembly (".s"); `fmt` ("o", "ll", "s") overrides the file's suffix."""
        path = os.fspath(path)
        fmt = fmt or os.path.splitext(path)[1].lstrip(".")
        if fmt == "ll":
            _write_file(path, self._source_ll().encode("utf-8"))
        elif fmt in ("s", "asm"):
            _write_file(path, self.get_source("asm").encode("utf-8"))
        elif fmt in ("o", "obj"):
            _write_file(path, self._object_with_metadata())
        else:
            raise ValueError(f"save: expected a path ending in .o, .ll or .s (or fmt='o', 'll' "
                             f"or 's'), got {path!r}")

    def _object_with_metadata(self) -> bytes:
        if not _is_jit(self.library):
            raise TypeError(f"cannot write an object file of a module backed by "
                            f"{type(self.library).__name__}; export_library copies its library")
        metadata_ll = _string_globals_ir({
            SIGNATURE_SYMBOL: self.signature.to_json(), SOURCE_SYMBOL: self.library.ll,
        })
        from . import cpu
        lib = self.library
        return cpu.emit_object(lib.ll + "\n" + metadata_ll, lib.cpu, lib.features, lib.opt_level)

    def export_library(self, path: str | os.PathLike) -> None:
        """Write a shared library that load_module(path) turns back into this module."""
        # Written next to `path` and renamed over it: a process that has the old file mapped
        # keeps its inode, and readers never see a half-written library.
        path = os.path.abspath(os.fspath(path))
        kind = _non_regular_kind(path)
        if kind is not None:  # rename would replace a device, fifo or socket by a library
            raise ValueError(f"export_library: '{path}' is {kind}, not a regular file; give the "
                             "path of a regular file or of a new one")
        if isinstance(self.library, SharedLibrary):
            if self.library.image is None:
                raise TypeError(f"cannot export library '{self.library.path}' opened by name")
            _replace_atomically(path, lambda tmp_path: _write_file(tmp_path, self.library.image))
            return
        if not _is_jit(self.library):
            raise TypeError(f"cannot export a module backed by {type(self.library).__name__}")
        from . import cpu
        metadata_ll = _string_globals_ir({
            SIGNATURE_SYMBOL: self.signature.to_json(), SOURCE_SYMBOL: self.library.ll,
        })
        with tempfile.TemporaryDirectory(prefix="te_export_") as tmp:
            objects = []
            for stem, data in (("kernel", self.library.emit_object()),
                               ("metadata", cpu.emit_object(metadata_ll))):
                objects.append(os.path.join(tmp, f"{stem}.o"))
                _write_file(objects[-1], data)
            _replace_atomically(path, lambda tmp_path: _link_shared(objects, tmp_path, path))

    def __repr__(self) -> str:
        args = ", ".join(f"{arg.name}: {arg.dtype}{list(arg.shape)}" for arg in self.signature.args)
        return f"Module({self.entry_name}({args}))"

    def __reduce__(self) -> NoReturn:
        # The native code lives in this process only; ctypes would say just "ctypes objects
        # containing pointers cannot be pickled".
        raise TypeError(
            f"cannot pickle module '{self.entry_name}': it holds native code loaded in this "
            "process; write it with module.export_library(path) and load it with "
            "runtime.load_module(path) instead"
        )


def _is_jit(library) -> bool:
    """Whether `library` is runtime.cpu's CpuLibrary (without importing LLVM to ask: no
    CpuLibrary exists before runtime.cpu is imported)."""
    cpu = sys.modules.get(__package__ + ".cpu")
    return cpu is not None and isinstance(library, cpu.CpuLibrary)


def _refuse(message: str) -> Callable[..., int]:
    def refuse(*raw: Any) -> int:
        raise RuntimeError(message)
    return refuse


def load_module(path: str | os.PathLike, image: bytes | None = None) -> Module:
    """Open a shared library written by Module.export_library and return its Module.
    `image`: the file's bytes, when the caller has read them (a cache that checked their
    checksum loads exactly those bytes, not what the file holds by then)."""
    threadpool.load()  # so that the default thread count applies to the loaded kernels too
    library = SharedLibrary(os.fspath(path), image)
    where = f"load_module: '{library.path}'"
    try:
        signature_json = library.read_string(SIGNATURE_SYMBOL)
    except UnicodeDecodeError:
        signature_json = ""
    if signature_json is None:
        raise RuntimeBuildError(
            f"{where} has no {SIGNATURE_SYMBOL} symbol; it was not written by "
            "Module.export_library"
        )
    try:
        signature = KernelSignature.from_json(signature_json)
        sources = {}
        source_ll = library.read_string(SOURCE_SYMBOL)
        if source_ll is not None:
            sources["ll"] = source_ll
        return Module(library, signature, sources)
    except KeyError as error:
        if isinstance(error.args[0], str) and error.args[0].startswith("function "):
            raise RuntimeBuildError(f"{where}: {error.args[0]}") from None
        raise RuntimeBuildError(f"{where}: invalid {SIGNATURE_SYMBOL} "
                                f"(missing field {error})") from None
    except (ValueError, TypeError, AttributeError) as error:
        raise RuntimeBuildError(f"{where}: invalid {SIGNATURE_SYMBOL} ({error})") from None


_NON_REGULAR = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a named pipe (fifo)"),
                (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
                (stat.S_ISSOCK, "a socket"))


def _non_regular_kind(path: str) -> str | None:
    """What `path` (links followed) is when it exists and is not a regular file, else None."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return None
    for test, kind in _NON_REGULAR:
        if test(mode):
            return kind
    return None if stat.S_ISREG(mode) else "not a regular file"


def _read_regular_file(path: str, where: str) -> bytes:
    kind = _non_regular_kind(path)
    if kind is not None:  # reading a fifo would block, a device might never end
        raise RuntimeBuildError(f"{where}: it is {kind}, not a regular file")
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        raise RuntimeBuildError(f"{where}: {error.strerror}") from None


def _dlclose(handle: int) -> None:
    _libdl.dlclose(ctypes.c_void_p(handle))


_libdl = ctypes.CDLL(None)  # the process's own symbols: dlclose (glibc 2.34+ and libdl)
_libdl.dlclose.argtypes = [ctypes.c_void_p]


def _dlopen_private_copy(image: bytes, where: str) -> ctypes.CDLL:
    """dlopen a private copy of `image` in the temporary directory; errors name the user's
    file (`where`), never the copy, which is removed whatever happens."""
    directory = tmp_path = None
    try:
        directory = tempfile.gettempdir()  # raises when no candidate directory is usable
        fd, tmp_path = tempfile.mkstemp(prefix="te_module_", suffix=".so", dir=directory)
        with os.fdopen(fd, "wb") as handle:
            handle.write(image)
    except OSError as error:
        _remove(tmp_path)
        place = "a temporary directory" if directory is None else f"'{directory}'"
        raise RuntimeBuildError(
            f"{where}: cannot write its private copy to {place} ({error.strerror or error}); "
            "set TMPDIR to a writable directory"
        ) from None
    try:
        return ctypes.CDLL(tmp_path)
    except OSError as error:
        reason = str(error).replace(f"{tmp_path}: ", "").replace(tmp_path, "its private copy")
        if _mounted_noexec(directory):
            raise RuntimeBuildError(
                f"{where}: the temporary directory '{directory}', where it is copied to be "
                "loaded, is on a file system mounted noexec; set TMPDIR to a directory on a "
                f"file system that allows executable mappings ({reason})"
            ) from None
        raise RuntimeBuildError(f"{where}: {reason}") from None
    finally:
        _remove(tmp_path)  # the mapping stays valid; the name is not needed any more


def _mounted_noexec(directory: str) -> bool:
    try:
        return bool(os.statvfs(directory).f_flag & os.ST_NOEXEC)
    except (OSError, AttributeError):  # AttributeError: no ST_NOEXEC on this platform
        return False


def _remove(path: str | None) -> None:
    if path is not None and os.path.lexists(path):
        os.unlink(path)


def _write_file(path: str, data: bytes) -> None:
    with open(path, "wb") as handle:
        handle.write(data)


def _replace_atomically(path: str, write: Callable[[str], None]) -> None:
    """Write `path` through `write(tmp_path)` and a rename; OSErrors name `path`, not the
    temporary file, which is removed whatever happens."""
    tmp_path = None
    try:
        fd, tmp_path = tempfile.mkstemp(prefix=".te_export_", suffix=".so",
                                        dir=os.path.dirname(path))
        os.close(fd)
        write(tmp_path)
        os.chmod(tmp_path, 0o755 & ~_umask())
        os.replace(tmp_path, path)
    except BaseException as error:
        _remove(tmp_path)
        if isinstance(error, OSError):
            raise _export_error(error, path) from None
        raise


def _export_error(error: OSError, path: str) -> OSError:
    """`error` (of the same class) with a message that names `path` and what to do."""
    directory = os.path.dirname(path)
    if error.errno == errno.ENOENT and not os.path.isdir(directory):
        reason = f"the directory '{directory}' does not exist; create it first"
    elif error.errno == errno.ENOTDIR:
        reason = f"'{_first_non_directory(directory)}' is not a directory"
    elif error.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        reason = (f"the directory '{directory}' is not writable ({error.strerror}); export to "
                  "a directory you can write to")
    else:
        reason = error.strerror or str(error)
    message = f"export_library: cannot write '{path}': {reason}"
    return OSError(message) if error.errno is None else type(error)(error.errno, message)


def _first_non_directory(directory: str) -> str:
    """The existing ancestor of `directory` (or itself) that is not a directory."""
    parent = directory
    while not os.path.exists(parent) and os.path.dirname(parent) != parent:
        parent = os.path.dirname(parent)
    return parent


def _umask() -> int:
    # Read, not set-and-restore: os.umask would change it for every thread meanwhile.
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except OSError:
        pass
    return 0o022


# The bytes an LLVM IR string constant cannot hold as they are: all but printable ASCII,
# the quote and the backslash.
_NEEDS_ESCAPE = re.compile(rb'[^\x20\x21\x23-\x5b\x5d-\x7e]')


def _string_globals_ir(strings: dict[str, str]) -> str:
    lines = []
    for symbol, text in strings.items():
        data = text.encode("utf-8") + b"\0"
        # a regex pass, not a loop per byte: the IR text of a big kernel is megabytes
        escaped = _NEEDS_ESCAPE.sub(lambda m: b"\\%02X" % m.group()[0], data).decode("ascii")
        lines.append(f'@{symbol} = constant [{len(data)} x i8] c"{escaped}"')
    return "\n".join(lines) + "\n"


def link_shared(output: str | os.PathLike, objects: list, options: list | None = None) -> None:
    """Link object files (Module.save's among them) into the shared library `output`, with
    the libraries generated code calls (libgomp, libm); `options` go to the compiler."""
    output = os.path.abspath(os.fspath(output))
    if isinstance(objects, (str, os.PathLike)):
        objects = [objects]
    _replace_atomically(output, lambda tmp_path: _link_shared(
        [os.fspath(o) for o in objects], tmp_path, output, list(options or ())))


def _link_shared(objects: list[str], path: str, shown_path: str,
                 options: list | None = None) -> None:
    compiler = shutil.which("cc") or shutil.which("gcc")
    if compiler is None:
        raise RuntimeBuildError(
            "export_library: no C compiler found (looked for 'cc' and 'gcc' on PATH); "
            "one is needed to link the shared library"
        )
    # DT_NEEDED on libgomp lets a fresh process resolve GOMP_parallel without our loader.
    libs = ["-lgomp", "-lm"] if threadpool.parallel_available() else ["-lm"]
    command = [compiler, "-shared", "-o", path, *objects, *(options or ()), *libs]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeBuildError(
            f"export_library: linking '{shown_path}' failed (exit code {result.returncode}): "
            f"{' '.join(command)}\n{result.stderr.strip()}"
        )
