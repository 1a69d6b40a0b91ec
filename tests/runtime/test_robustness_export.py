"""export_library / load_module robustness: atomic replacement (a new inode), private copies
so re-exported files reload fresh, exporting onto the loaded file, and clear errors for files
that are not kernel libraries. Imports runtime, numpy, pytest and the test kernels."""

import os
import shutil
import subprocess

import numpy as np
import pytest

import runtime
from runtime import RuntimeBuildError

needs_cc = pytest.mark.skipif(shutil.which("cc") is None and shutil.which("gcc") is None,
                              reason="no C compiler to link shared libraries")


def f32(n):
    return np.ones(n, np.float32)


@needs_cc
def test_reexported_file_reloads_fresh_and_loaded_ones_survive(tmp_path, add_module,
                                                               scale2d_module):
    path = tmp_path / "k.so"
    add_module.export_library(path)
    first = runtime.load_module(path)
    inode = os.stat(path).st_ino
    scale2d_module.export_library(path)
    assert os.stat(path).st_ino != inode  # replaced, never rewritten in place
    second = runtime.load_module(path)
    assert second.entry_name == scale2d_module.entry_name
    out = np.zeros(4, np.float32)
    first(f32(4), f32(4), out)  # the first library is still mapped and intact
    np.testing.assert_array_equal(out, 2.0)
    assert [p.name for p in tmp_path.iterdir()] == ["k.so"]  # no temporary files left


@needs_cc
def test_export_loaded_module_onto_its_own_path(tmp_path, add_module):
    path = tmp_path / "k.so"
    add_module.export_library(path)
    loaded = runtime.load_module(path)
    loaded.export_library(path)
    again = runtime.load_module(path)
    out = np.zeros(3, np.float32)
    loaded(f32(3), f32(3), out)
    again(f32(3), f32(3), out)
    np.testing.assert_array_equal(out, 2.0)


@needs_cc
def test_export_replaces_a_file_mapped_by_another_module(tmp_path, add_module):
    double, other = tmp_path / "d.so", tmp_path / "o.so"
    add_module.export_library(double)
    add_module.export_library(other)
    kd = runtime.load_module(double)
    runtime.load_module(other).export_library(double)
    out = np.zeros(2, np.float32)
    kd(f32(2), f32(2), out)
    np.testing.assert_array_equal(out, 2.0)


def _shared_library(tmp_path, source: str):
    c_file = tmp_path / "lib.c"
    c_file.write_text(source)
    so = tmp_path / "lib.so"
    subprocess.run([shutil.which("cc") or "gcc", "-shared", "-fPIC", "-o", str(so),
                    str(c_file)], check=True)
    return so


@needs_cc
@pytest.mark.parametrize("source, message", [
    ("int f(void) { return 0; }\n",
     "has no __te_signature symbol; it was not written by Module.export_library"),
    ('const char __te_signature[] = "not json";\n', "invalid __te_signature"),
    ('const char __te_signature[] = "{\\"version\\": 1}";\n',
     "invalid __te_signature (missing field 'name')"),
    ('const char __te_signature[] = "{\\"version\\": 1, \\"name\\": \\"k\\", \\"args\\": []}";\n',
     "function 'k' is not defined in"),
])
def test_load_module_of_a_foreign_library_names_the_path(tmp_path, source, message):
    so = _shared_library(tmp_path, source)
    with pytest.raises(RuntimeBuildError) as info:
        runtime.load_module(so)
    assert str(info.value).startswith(f"load_module: '{so}'")
    assert message in str(info.value)


def test_load_module_of_a_missing_file_names_the_path(tmp_path):
    missing = tmp_path / "absent.so"
    with pytest.raises(RuntimeBuildError, match=f"cannot load shared library '{missing}'"):
        runtime.load_module(missing)
