"""export_library / load_module against the file system: truncated libraries, paths that are
not regular files, directories that cannot be written, a temporary directory that cannot hold
executable code, and pickling. Errors name the user's path, never a temporary copy, and no
temporary file is left behind. Imports runtime, numpy, pytest and the test kernels."""

import ctypes
import errno
import json
import os
import pickle
import re
import shutil
import struct
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import numpy as np
import pytest

import runtime
from runtime import RuntimeBuildError

REPO_ROOT = Path(__file__).resolve().parents[2]
needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler to link shared libraries")

# Loads every path it is given and prints what happened, one entry per path: a truncated
# library used to kill the process (SIGBUS inside dlopen), so the loads run in a child.
LOAD_EACH = textwrap.dedent("""
    import json, sys
    import numpy as np
    import runtime

    results = []
    for path in sys.argv[1:]:
        try:
            module = runtime.load_module(path)
        except runtime.RuntimeBuildError as error:
            results.append(str(error))
            continue
        a = np.arange(7, dtype=np.float32)
        c = np.zeros(7, np.float32)
        module(a, a, c)
        results.append("loaded" if (c == 2 * a).all() else "wrong result")
    print(json.dumps(results))
""")


def _without_section_headers(image: bytes) -> bytes:
    """The library with e_shoff, e_shnum and e_shstrndx cleared: the loader does not need
    sections, so only the segments say where the file must reach."""
    stripped = bytearray(image)
    struct.pack_into("<Q", stripped, 0x28, 0)
    struct.pack_into("<HH", stripped, 0x3C, 0, 0)
    return bytes(stripped)


@needs_cc
def test_truncated_libraries_are_refused_and_leave_no_copy(tmp_path, add_module):
    add_module.export_library(tmp_path / "whole.so")
    image = (tmp_path / "whole.so").read_bytes()
    assert image[4] == 2 and image[5] == 1, "the test edits a 64-bit little-endian ELF header"
    stripped = _without_section_headers(image)
    half = len(image) // 2
    cases = {
        "empty.so": (b"", r"the file is empty$"),
        "ten.so": (image[:10], r"the ELF header needs 64 bytes but the file has only 10 bytes"),
        "headers.so": (image[:100], (r"its program header table ends at byte \d+ but the "
                                     r"file has only 100 bytes")),
        "half.so": (image[:half], (rf"its (segment \d+ \(PT_LOAD\)|section header table) ends "
                                   rf"at byte \d+ but the file has only {half} bytes")),
        "last_byte.so": (image[:-1], (rf"ends at byte {len(image)} but the file has only "
                                      rf"{len(image) - 1} bytes")),
        "stripped_half.so": (stripped[:half], (rf"its segment \d+ \(PT_LOAD\) ends at byte "
                                               rf"\d+ but the file has only {half} bytes")),
    }
    for name, (data, _) in cases.items():
        (tmp_path / name).write_bytes(data)
    (tmp_path / "stripped.so").write_bytes(stripped)  # whole: it loads and runs
    paths = [str(tmp_path / name) for name in [*cases, "stripped.so"]]
    copies = tmp_path / "tmp"
    copies.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), TMPDIR=str(copies))
    result = subprocess.run([sys.executable, "-c", LOAD_EACH, *paths], capture_output=True,
                            text=True, env=env, timeout=120, check=False)
    assert result.returncode == 0, f"exit code {result.returncode}: {result.stderr[-2000:]}"
    *refusals, stripped_result = json.loads(result.stdout)
    for (name, (_, pattern)), message in zip(cases.items(), refusals):
        prefix = f"cannot load shared library '{tmp_path / name}': the file is "
        assert message.startswith(prefix) and re.search(pattern, message), (name, message)
    assert stripped_result == "loaded"
    assert list(copies.iterdir()) == []


def test_load_module_refuses_files_that_are_not_elf(tmp_path):
    text = tmp_path / "notes.so"
    text.write_text("not a library\n")
    with pytest.raises(RuntimeBuildError, match=(
            rf"^cannot load shared library '{text}': it is not an ELF shared library \(it does "
            r"not start with the ELF magic bytes\)$")):
        runtime.load_module(text)


@pytest.mark.parametrize("make, kind", [
    (os.mkfifo, "a named pipe \\(fifo\\)"),
    (os.mkdir, "a directory"),
])
def test_export_and_load_refuse_paths_that_are_not_regular_files(tmp_path, add_module, make,
                                                                 kind):
    target = tmp_path / "special"
    make(target)
    mode = os.stat(target).st_mode
    with pytest.raises(ValueError, match=(
            rf"^export_library: '{target}' is {kind}, not a regular file; give the path of a "
            r"regular file or of a new one$")):
        add_module.export_library(target)
    assert os.stat(target).st_mode == mode  # not replaced by a library
    with pytest.raises(RuntimeBuildError, match=(
            rf"^cannot load shared library '{target}': it is {kind}, not a regular file$")):
        runtime.load_module(target)  # a fifo would have blocked the read
    assert [p.name for p in tmp_path.iterdir()] == ["special"]


@needs_cc
def test_export_into_a_missing_directory_names_the_users_path(tmp_path, add_module):
    target = tmp_path / "missing" / "k.so"
    with pytest.raises(FileNotFoundError, match=(
            rf"export_library: cannot write '{target}': the directory '{target.parent}' does not "
            r"exist; create it first$")):
        add_module.export_library(target)
    assert list(tmp_path.iterdir()) == []


@needs_cc
def test_export_under_a_regular_file_names_the_file(tmp_path, add_module):
    blocker = tmp_path / "file"
    blocker.write_text("")
    target = blocker / "sub" / "k.so"
    with pytest.raises(NotADirectoryError, match=(
            rf"export_library: cannot write '{target}': '{blocker}' is not a directory$")):
        add_module.export_library(target)


def test_export_into_a_read_only_directory_says_so(tmp_path, add_module, monkeypatch):
    # As root every directory is writable: the refusal the kernel gives others is simulated.
    def refuse(*args, **kwargs):
        raise PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".te_export_x"))

    monkeypatch.setattr(tempfile, "mkstemp", refuse)
    target = tmp_path / "k.so"
    with pytest.raises(PermissionError) as info:
        add_module.export_library(target)
    assert str(info.value) == (
        f"[Errno 13] export_library: cannot write '{target}': the directory '{tmp_path}' is not "
        "writable (Permission denied); export to a directory you can write to")


@needs_cc
def test_a_failed_write_names_the_path_and_removes_the_temporary(tmp_path, add_module,
                                                                 monkeypatch):
    add_module.export_library(tmp_path / "k.so")
    loaded = runtime.load_module(tmp_path / "k.so")

    def disk_full(path, data):
        Path(path).write_bytes(data[:10])
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(runtime.module, "_write_file", disk_full)
    target = tmp_path / "copy.so"
    with pytest.raises(OSError, match=(
            rf"^\[Errno 28\] export_library: cannot write '{target}': No space left on device$")):
        loaded.export_library(target)
    assert [p.name for p in tmp_path.iterdir()] == ["k.so"]


@needs_cc
@pytest.mark.parametrize("noexec, message", [
    (True, ("the temporary directory '{tmp}', where it is copied to be loaded, is on a file "
            "system mounted noexec; set TMPDIR to a directory on a file system that allows "
            "executable mappings (failed to map segment from shared object)")),
    (False, "failed to map segment from shared object"),
])
def test_a_temporary_directory_without_exec_is_named_with_a_remedy(tmp_path, add_module,
                                                                   monkeypatch, noexec, message):
    path = tmp_path / "k.so"
    add_module.export_library(path)
    copies = tmp_path / "tmp"
    copies.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(copies))

    def dlopen_on_noexec(name, *args, **kwargs):  # what glibc says for a noexec mount
        raise OSError(f"{name}: failed to map segment from shared object")

    monkeypatch.setattr(ctypes, "CDLL", dlopen_on_noexec)
    monkeypatch.setattr(runtime.module, "_mounted_noexec", lambda directory: noexec)
    with pytest.raises(RuntimeBuildError) as info:
        runtime.load_module(path)
    assert str(info.value) == (f"cannot load shared library '{path}': "
                               + message.format(tmp=copies))
    assert list(copies.iterdir()) == []


@needs_cc
def test_an_unusable_temporary_directory_is_named(tmp_path, add_module, monkeypatch):
    library = tmp_path / "k.so"
    add_module.export_library(library)
    blocker = tmp_path / "file"
    blocker.write_text("")
    monkeypatch.setattr(tempfile, "tempdir", str(blocker / "tmp"))
    with pytest.raises(RuntimeBuildError, match=(
            rf"^cannot load shared library '{library}': cannot write its private copy to "
            rf"'{blocker / 'tmp'}' \(Not a directory\); set TMPDIR to a writable directory$")):
        runtime.load_module(library)


@needs_cc
def test_pickling_a_module_says_to_export_it(tmp_path, add_module):
    add_module.export_library(tmp_path / "k.so")
    for module in (add_module, runtime.load_module(tmp_path / "k.so")):
        with pytest.raises(TypeError, match=(
                r"^cannot pickle module 'add': it holds native code loaded in this process; "
                r"write it with module.export_library\(path\) and load it with "
                r"runtime.load_module\(path\) instead$")):
            pickle.dumps(module)
    a = np.ones(3, np.float32)
    c = np.zeros(3, np.float32)
    add_module(a, a, c)  # still usable
    np.testing.assert_array_equal(c, 2.0)
