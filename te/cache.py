"""te's persistent compile cache: built kernels on disk, keyed by what decides their code.

Takes key fields (the caller's workload; target_fields() and compiler_fields() give what te
knows) and built runtime.Modules; gives KernelCache (load, store, info, clear) over
$TE_CACHE_DIR (default ~/.cache/te). Imports the standard library, llvmlite and runtime.
"""
from __future__ import annotations

import fcntl
import functools
import hashlib
import json
import os
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path

import llvmlite
import llvmlite.binding as llvm

import runtime
from runtime import cache_sizes

FORMAT = 1
_SUFFIXES = (".so", ".json", ".lock")


class CacheWarning(UserWarning):
    """The compile cache cannot be used, or an entry was found corrupt and is rebuilt."""


def enabled() -> bool:
    """False when the environment turns the cache off (TE_CACHE=0, off, false or no)."""
    return os.environ.get("TE_CACHE", "1").strip().lower() not in ("0", "off", "false", "no")


def cache_dir() -> str:
    """$TE_CACHE_DIR, else $XDG_CACHE_HOME/te, else ~/.cache/te."""
    if os.environ.get("TE_CACHE_DIR"):
        return os.path.abspath(os.path.expanduser(os.environ["TE_CACHE_DIR"]))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "te")


@functools.lru_cache(maxsize=None)
def source_digest(*directories: str) -> str:
    """sha256 of every .py file under `directories` (paths and contents): a change to the
    compiler's code changes the keys, so nothing it built before is reused."""
    h = hashlib.sha256()
    for directory in directories:
        root = Path(directory)
        for path in sorted(root.rglob("*.py")):
            if "__pycache__" in path.parts:
                continue
            h.update(str(path.relative_to(root.parent)).encode() + b"\0")
            h.update(path.read_bytes() + b"\0")
    return h.hexdigest()


@functools.lru_cache(maxsize=1)
def compiler_fields() -> dict:
    """The compiler's version: the package's, a digest of te's and runtime's sources, and
    the LLVM that compiles the code."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            package = version("te-compiler")
        except PackageNotFoundError:
            package = "source tree"
    except ImportError:  # pragma: no cover
        package = "unknown"
    here = os.path.dirname(os.path.abspath(__file__))
    return {"te": package,
            "sources": source_digest(here, os.path.dirname(os.path.abspath(runtime.__file__))),
            "llvmlite": llvmlite.__version__,
            "llvm": ".".join(map(str, llvm.llvm_version_info))}


def target_fields(target) -> dict:
    """What of `target` (a string or te.Target) and of this host decides the code: the kind
    and options, the CPU features the code may use, the host CPU LLVM tunes for, its L2
    cache size (schedules block loops by it), and whether parallel loops become threads."""
    from .target import parse_target
    t = parse_target(target, who="te.cache")
    cpu = t.kind == "llvm"
    return {"target": [t.kind] + [f"-{k}={v}" for k, v in t.options],
            "features": sorted(t.features),
            "host_cpu": llvm.get_host_cpu_name() if cpu else "",
            "l2_bytes": cache_sizes.l2_bytes() if cpu else 0,
            "parallel": runtime.parallel_available()}


def cacheable(target) -> bool:
    """False for code this host must not run (te.build gives a module that refuses to be
    called, and says why; a library loaded from the cache would not know it)."""
    from .target import parse_target
    return parse_target(target, who="te.cache").unavailable_message() is None


def key_digest(fields: dict) -> str:
    """The entry name of `fields` (JSON-able): sha256 of their canonical JSON."""
    return hashlib.sha256(_canonical(fields).encode()).hexdigest()


def _canonical(fields: dict) -> str:
    return json.dumps(fields, sort_keys=True, separators=(",", ":"))


class KernelCache:
    """The entries in one directory (default cache_dir()). `stats` counts, since this object
    was made: hits, misses, stored, rejected (corrupt entries found) and failed writes.

    An entry is two files under <dir>/kernels: <digest>.so, the library
    Module.export_library writes, and <digest>.json: the format, the key fields, the
    library's size and sha256, its function and signature, the caller's extra fields.
    Entries are data: nothing is unpickled, and a library is loaded only once its checksum
    and key fields match (and runtime.load_module's ELF check passes); anything else is a
    miss, which the caller rebuilds and stores over.

    Writers: each file goes to a temporary file in the same directory and is renamed over
    the entry's (readers see the old file or the new one, whole); a writer holds an flock
    on <digest>.lock while it checks for the entry and writes both files, so two writers
    never pair one's .so with the other's .json, and the second keeps the first's entry.
    The .json is renamed last: a writer that dies before leaves no entry. Readers take no
    lock (the checksum tells whether the .so is the one the .json describes), so they never
    wait for a compile. A directory that cannot be written gives one warning and no entries.
    """

    _warned: set = set()   # directories whose unusability was already reported

    def __init__(self, directory: str | None = None):
        self.directory = os.path.abspath(directory or cache_dir())
        self.kernels = os.path.join(self.directory, "kernels")
        self.stats = {"hits": 0, "misses": 0, "stored": 0, "rejected": 0, "failed": 0}

    def _paths(self, digest: str) -> tuple:
        base = os.path.join(self.kernels, digest)
        return base + ".so", base + ".json", base + ".lock"

    # -- reading -----------------------------------------------------------------------

    def load(self, fields: dict):
        """(runtime.Module, extra dict) of the valid entry for `fields`, else None (a
        corrupt one is reported with a CacheWarning and left for store() to replace)."""
        digest = key_digest(fields)
        so_path, json_path, _ = self._paths(digest)
        found, problem = self._check(digest, fields)
        if found is not None:
            meta, image = found
            try:
                module = runtime.load_module(so_path, image)
                if module.entry_name != meta["function"]:
                    problem = (f"its library defines '{module.entry_name}', its metadata "
                               f"says '{meta['function']}'")
                elif json.loads(module.signature.to_json()) != meta["signature"]:
                    problem = "its library's signature differs from its metadata's"
                else:
                    self.stats["hits"] += 1
                    return module, meta.get("extra", {})
            except runtime.RuntimeBuildError as err:
                problem = str(err)
        self.stats["misses"] += 1
        if problem is not None:
            self.stats["rejected"] += 1
            warnings.warn(f"te compile cache: entry '{json_path}' is corrupt ({problem}); "
                          f"rebuilding it", CacheWarning, stacklevel=2)
        return None

    def _check(self, digest: str, fields: dict) -> tuple:
        """((metadata, library bytes), None) for a valid entry; (None, None) when there is
        none (no .json: never written, or its writer died before the rename); (None, why)
        when it is corrupt."""
        so_path, json_path, _ = self._paths(digest)
        try:
            with open(json_path, "rb") as handle:
                text = handle.read()
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            return None, None   # no entry here (store() reports a directory it cannot use)
        except OSError as err:
            return None, f"cannot read it: {err.strerror}"
        try:
            meta = json.loads(text)
            if not isinstance(meta, dict):
                raise ValueError("not a JSON object")
        except (ValueError, UnicodeDecodeError) as err:
            return None, f"its metadata is not JSON ({err})"
        if meta.get("format") != FORMAT:
            return None, f"metadata format {meta.get('format')!r}, expected {FORMAT}"
        if meta.get("key") != json.loads(_canonical(fields)):
            return None, "its metadata's key fields differ from the ones asked for"
        library = meta.get("library")
        if not isinstance(library, dict) or not {"bytes", "sha256"} <= library.keys():
            return None, "its metadata lacks the library's size and sha256"
        try:
            with open(so_path, "rb") as handle:
                image = handle.read()
        except OSError as err:
            return None, f"cannot read its library: {err.strerror}"
        if len(image) != library["bytes"]:
            return None, (f"its library has {len(image)} bytes, its metadata says "
                          f"{library['bytes']}")
        if hashlib.sha256(image).hexdigest() != library["sha256"]:
            return None, "its library's sha256 differs from its metadata's"
        if not {"function", "signature"} <= meta.keys():
            return None, "its metadata lacks the function's name or signature"
        return (meta, image), None

    # -- writing -----------------------------------------------------------------------

    def store(self, fields: dict, module, extra: dict | None = None) -> bool:
        """Write `module` (a runtime.Module) as the entry of `fields` unless a valid one is
        there already; False (and one CacheWarning per directory) when it cannot be
        written. `extra`: JSON-able data the caller gets back from load()."""
        digest = key_digest(fields)
        so_path, json_path, lock_path = self._paths(digest)
        try:
            os.makedirs(self.kernels, exist_ok=True)
            with _locked(lock_path):
                if self._check(digest, fields)[0] is not None:
                    return True   # another process stored it while we compiled
                image = _export(module, self.kernels)
                meta = {"format": FORMAT, "key": json.loads(_canonical(fields)),
                        "library": {"file": os.path.basename(so_path), "bytes": len(image),
                                    "sha256": hashlib.sha256(image).hexdigest()},
                        "function": module.entry_name,
                        "signature": json.loads(module.signature.to_json()),
                        "extra": extra or {}}
                _write_atomically(so_path, image)
                # the .json last: until it is renamed into place the entry does not exist
                _write_atomically(json_path, (json.dumps(meta, indent=1) + "\n").encode())
        except (OSError, runtime.RuntimeBuildError, TypeError) as err:
            self.stats["failed"] += 1
            if self.directory not in KernelCache._warned:
                KernelCache._warned.add(self.directory)
                reason = getattr(err, "strerror", None) or str(err)
                warnings.warn(f"te compile cache: cannot write to '{self.directory}' "
                              f"({reason}); compiling without caching (set TE_CACHE_DIR to "
                              f"a writable directory, or TE_CACHE=0)", CacheWarning,
                              stacklevel=2)
            return False
        self.stats["stored"] += 1
        return True

    # -- maintenance -------------------------------------------------------------------

    def info(self) -> dict:
        """{'directory', 'entries' (entries with both files), 'bytes' (all files)}."""
        names = _listing(self.kernels)
        stems = {n[:-5] for n in names if n.endswith(".json")}
        entries = sum(1 for s in stems if s + ".so" in names)
        size = 0
        for name in names:
            try:
                size += os.path.getsize(os.path.join(self.kernels, name))
            except OSError:
                pass
        return {"directory": self.directory, "entries": entries, "bytes": size}

    def clear(self) -> int:
        """Remove every entry (and leftover temporary file); returns how many files went.
        Only files this cache writes are touched, whatever else the directory holds."""
        removed = 0
        for name in _listing(self.kernels):
            if name.endswith(_SUFFIXES) or name.startswith(".tmp-"):
                try:
                    os.unlink(os.path.join(self.kernels, name))
                    removed += 1
                except FileNotFoundError:
                    pass
        return removed


def _listing(directory: str) -> list:
    try:
        return os.listdir(directory)
    except (FileNotFoundError, NotADirectoryError):
        return []


@contextmanager
def _locked(path: str):
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)   # closing releases the lock (a killed process's too)


def _export(module, directory: str) -> bytes:
    """The bytes of `module` as a shared library (written and read back in `directory`)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".so", dir=directory)
    os.close(fd)
    try:
        module.export_library(tmp)
        with open(tmp, "rb") as handle:
            return handle.read()
    finally:
        if os.path.lexists(tmp):
            os.unlink(tmp)


def _write_atomically(path: str, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        if os.path.lexists(tmp):
            os.unlink(tmp)
        raise
