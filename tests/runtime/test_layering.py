"""runtime imports nothing from te or graph, and every module opens with a docstring."""

import ast
import os
from pathlib import Path

import pytest

RUNTIME_DIR = Path(__file__).resolve().parents[2] / "runtime"
MODULES = sorted(RUNTIME_DIR.glob("*.py"))
FORBIDDEN = ("te", "graph")


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_no_imports_from_te_or_graph(path):
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0:
            names = [node.module or ""]
        else:
            continue
        for name in names:
            assert name.split(".")[0] not in FORBIDDEN, f"{path.name} imports {name}"


@pytest.mark.parametrize("path", MODULES, ids=lambda path: path.name)
def test_module_docstring(path):
    docstring = ast.get_docstring(ast.parse(path.read_text()))
    assert docstring, f"{path.name} has no module docstring"
    assert 2 <= len(docstring.splitlines()) <= 6


def test_the_jits_names_load_on_first_use_and_are_listed():
    """runtime imports llvmlite (runtime.cpu) on first use of the JIT's names; dir() and
    help() list those names all the same, as before they were lazy."""
    import pydoc
    import subprocess
    import sys
    code = ("import sys, runtime\n"
            "assert 'llvmlite' not in sys.modules and 'runtime.cpu' not in sys.modules\n"
            "assert {'CpuLibrary', 'compile_llvm', 'cpu'} <= set(dir(runtime))\n"
            "assert 'llvmlite' not in sys.modules\n")
    env = dict(os.environ, PYTHONPATH=str(RUNTIME_DIR.parent))
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env)
    assert done.returncode == 0, done.stderr
    import runtime
    text = pydoc.render_doc(runtime, renderer=pydoc.plaintext)
    assert "compile_llvm(" in text and "class CpuLibrary" in text
