"""runtime imports nothing from te or graph, and every module opens with a docstring."""

import ast
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
