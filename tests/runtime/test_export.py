"""export_library + load_module: the .so alone is enough, in this and in a fresh process."""

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
from rt_kernels import EXP_LL, EXP_SIGNATURE

import runtime
from runtime import RuntimeBuildError

REPO_ROOT = Path(__file__).resolve().parents[2]

FRESH_PROCESS_CHECK = textwrap.dedent("""
    import sys
    import numpy as np
    import runtime

    add = runtime.load_module(sys.argv[1])
    fill = runtime.load_module(sys.argv[2])
    assert add.signature.name == "add", add.signature
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1003), dtype=np.float32)
    c = np.zeros_like(a)
    add(a, b, c)
    np.testing.assert_array_equal(c, a + b)
    out, owner, team = np.zeros(101, np.int32), np.zeros(101, np.int32), np.zeros(1, np.int32)
    fill(out, owner, team)
    np.testing.assert_array_equal(out, np.arange(101))
    assert "define" in add.get_source("ll")
    print("ok", team[0])
""")


@pytest.fixture(scope="module")
def exported(tmp_path_factory, add_module, parallel_module):
    folder = tmp_path_factory.mktemp("export")
    add_module.export_library(folder / "add.so")
    parallel_module.export_library(str(folder / "fill.so"))
    return folder


def test_exported_library_loads_in_this_process(exported, add_module):
    loaded = runtime.load_module(exported / "add.so")
    assert loaded.signature == add_module.signature
    assert loaded.entry_name == "add"
    a = np.arange(9, dtype=np.float32)
    c = np.zeros_like(a)
    loaded(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)
    assert loaded.get_source("ll") == add_module.get_source("ll")
    assert "add:" in loaded.get_source("asm")


def test_exported_library_works_in_a_fresh_process(exported):
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_WAIT_POLICY="passive")
    result = subprocess.run(
        [sys.executable, "-c", FRESH_PROCESS_CHECK, str(exported / "add.so"),
         str(exported / "fill.so")],
        capture_output=True, text=True, env=env, timeout=120,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("ok")


def test_libm_kernel_round_trip(tmp_path):
    module = runtime.Module(runtime.compile_llvm(EXP_LL), EXP_SIGNATURE)
    module.export_library(tmp_path / "exp.so")
    loaded = runtime.load_module(tmp_path / "exp.so")
    x = np.linspace(-3, 3, 77, dtype=np.float32)
    y = np.zeros_like(x)
    loaded(x, y)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)
    loaded.export_library(tmp_path / "copy.so")  # a loaded module re-exports its file
    assert (tmp_path / "copy.so").read_bytes() == (tmp_path / "exp.so").read_bytes()


def test_loaded_module_checks_arguments(exported):
    loaded = runtime.load_module(exported / "add.so")
    with pytest.raises(runtime.ArgumentError, match=r"expected 3 arguments \(A, B, C\), got 1"):
        loaded(np.zeros(3, np.float32))


def test_loading_a_foreign_library_is_a_clear_error(tmp_path):
    with pytest.raises(RuntimeBuildError, match="has no __te_signature symbol"):
        runtime.load_module(_find_libm())
    with pytest.raises(RuntimeBuildError, match="cannot load shared library"):
        runtime.load_module(tmp_path / "missing.so")


def test_signature_json_round_trip(add_module, scale2d_module):
    for module in (add_module, scale2d_module):
        text = module.signature.to_json()
        assert runtime.KernelSignature.from_json(text) == module.signature


def _find_libm():
    import ctypes.util

    return ctypes.util.find_library("m") or "libm.so.6"


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="needs Linux's /proc")
def test_a_dropped_library_is_unmapped(exported, add_module):
    """ctypes never closes what it opens: without SharedLibrary closing its copy, a process
    that loads thousands of kernels (a conformance run) exhausts vm.max_map_count and
    aborts. Loading and dropping a module many times must leave the mappings as they were;
    one that is still held keeps working."""
    def mappings():
        with open("/proc/self/maps") as f:
            return sum(1 for _ in f)
    add_path = exported / "add.so"
    held = runtime.load_module(add_path)
    before = mappings()
    for _ in range(40):
        runtime.load_module(add_path)
    assert mappings() - before < 20   # 40 loads kept would add at least 160
    a, b = np.arange(5, dtype=np.float32), np.ones(5, np.float32)
    c = np.zeros_like(a)
    held(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_an_entry_kept_alone_keeps_its_library_and_a_library_is_not_copied(exported):
    """Module.entry is handed out for callers that checked once: it keeps the library
    mapped after its Module is gone; a copy of the library would unmap it twice."""
    import copy
    import gc
    loaded = runtime.load_module(exported / "add.so")
    entry, library = loaded.entry, loaded.library
    del loaded
    gc.collect()
    a, b = np.arange(7, dtype=np.float32), np.full(7, 2, np.float32)
    c = np.zeros_like(a)
    assert entry(a.ctypes.data, b.ctypes.data, c.ctypes.data, 7) == 0
    np.testing.assert_array_equal(c, a + b)
    with pytest.raises(TypeError, match=r"cannot copy or pickle the loaded library .*add"):
        copy.copy(library)
