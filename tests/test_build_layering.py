"""DESIGN.md's layering, enforced by parsing the imports of every module (ast, no import).

runtime imports nothing from te or graph; te never imports graph; inside te, compute <-
schedule <- lower <- codegen <- build <- autotune <- tvm (te.tvm, TVM's names over ours, is
the top; te.target, te.build and te.build_cuda are the build layer, the lowest that imports
runtime; te.errors re-exports runtime's ArgumentError); te.errors and te.dtype are the base.
Function-local imports count too, for the layers and for import cycles (none may appear). An
import under `if TYPE_CHECKING:` counts for the layers but not for cycles: it never runs, so
it cannot take part in one, and it lets a module name in annotations the type of the module
that imports it (dataflow.py's Schedule). Optional heavy dependencies (pycuda, onnx,
onnxruntime) are imported only inside functions. (Named test_build_layering because
tests/runtime/test_layering.py already takes the module name test_layering.)
"""
import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("runtime", "te", "graph")
MODULES = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py")
                 if "__pycache__" not in p.parts)

# (package prefix of the importing module, forbidden module prefixes)
# The layers of te from the bottom; each may import only the ones before it (te.build_cuda
# is te.build's half for target 'cuda'; te.target parses the target both take; te.cache,
# the compile cache of built modules, stays at that layer so te.build may use it).
LAYERS = (("te.errors", "te.dtype"), ("te.compute",), ("te.schedule",), ("te.lower",),
          ("te.codegen",), ("te.target", "te.build", "te.build_cuda", "te.cache"),
          ("te.autotune",), ("te.tvm",))
# Below the build layer nothing imports runtime: the numbers lowering and code generation
# need from it travel in the te.target.Target that te.build hands down (te.errors re-exports
# runtime's ArgumentError, the one class both raise).
NO_RUNTIME = ("te.dtype", "te.compute", "te.schedule", "te.lower", "te.codegen")
RULES = (
    ("runtime", ("te", "graph")),
    ("te", ("graph",)),
) + tuple((owner, ("runtime",)) for owner in NO_RUNTIME) + tuple(
    (owner, tuple(m for upper in LAYERS[k + 1:] for m in upper))
    for k, layer in enumerate(LAYERS) for owner in layer)
# Below the top level, `import te` reaches every layer through attributes (te.lower...).
NO_TOP_PACKAGE = ("te.errors", "te.dtype", "te.compute", "te.schedule", "te.lower",
                  "te.codegen")
OPTIONAL_HEAVY = ("pycuda", "cuda", "onnx", "onnxruntime")


def module_name(path: Path, root: Path = ROOT) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_package(path: Path) -> bool:
    return path.name == "__init__.py"


def _is_type_checking(node) -> bool:
    """Is `node` an `if TYPE_CHECKING:` (or `if typing.TYPE_CHECKING:`) block?"""
    if not isinstance(node, ast.If):
        return False
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def imported_modules(path: Path, root: Path = ROOT, type_checking: bool = True) -> list:
    """(absolute module name, line, inside a function, plain `import`) for every import;
    with type_checking=False, not those under `if TYPE_CHECKING:` (they never run)."""
    tree = ast.parse(path.read_text(), filename=str(path))
    me = module_name(path, root)
    package = me if _is_package(path) else me.rpartition(".")[0]
    out = []

    def visit(node, in_function):
        for child in ast.iter_child_nodes(node):
            nested = in_function or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef,
                                                       ast.Lambda))
            if not type_checking and _is_type_checking(child):
                # its body never runs; an `else:` branch does
                visit(ast.Module(body=child.orelse, type_ignores=[]), nested)
                continue
            if isinstance(child, ast.Import):
                out.extend((a.name, child.lineno, nested, True) for a in child.names)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base_parts = package.split(".")
                    base_parts = base_parts[:len(base_parts) - (child.level - 1)]
                    base = ".".join(base_parts + ([child.module] if child.module else []))
                else:
                    base = child.module or ""
                out.append((base, child.lineno, nested, False))
                # `from pkg import name` may import the submodule pkg.name
                out.extend((f"{base}.{a.name}", child.lineno, nested, False)
                           for a in child.names if a.name != "*")
            visit(child, nested)
    visit(tree, False)
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def test_modules_found():
    names = {module_name(p) for p in MODULES}
    for expected in ("runtime", "te", "te.compute.expr", "te.schedule.schedule",
                     "te.lower.pipeline", "te.codegen.llvm.codegen", "te.codegen.cuda.codegen",
                     "te.build", "te.build_cuda"):
        assert expected in names


def test_relative_import_resolution():
    api = ROOT / "te" / "compute" / "api.py"
    names = {n for n, _, _, _ in imported_modules(api)}
    assert "te.dtype" in names and "te.compute.expr" in names


def violations(path: Path, root: Path = ROOT) -> list:
    me = module_name(path, root)
    where = path.relative_to(root)
    bad = []
    for name, line, _, plain in imported_modules(path, root):
        for owner, forbidden in RULES:
            if _under(me, owner) and any(_under(name, f) for f in forbidden):
                bad.append(f"{where}:{line} imports {name}")
        if plain and name == "te" and any(_under(me, p) for p in NO_TOP_PACKAGE):
            bad.append(f"{where}:{line} imports the top-level package te")
    return sorted(set(bad))


def test_checker_catches_violations(tmp_path):
    files = {
        "te/compute/bad.py": "from ..lower import ir\ndef f():\n    from .. import build\n",
        "te/schedule/bad.py": "import te\nfrom te.autotune import space\n",
        "te/lower/ok.py": "from ..schedule import schedule\nfrom .. import dtype\n",
        "te/lower/up.py": "def f():\n    from ..codegen.llvm import codegen\n",
        "te/codegen/llvm/ok.py": "from ...lower import ir\nfrom ... import dtype\n",
        "te/codegen/cuda/up.py": "from ... import build_cuda\n",
        "te/lower/passes/rt.py": "def f():\n    from runtime.cuda import MAX_GRID\n",
        "runtime/bad.py": "from te import build\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    found = {rel: violations(tmp_path / rel, tmp_path) for rel in files}
    assert found["te/compute/bad.py"] == ["te/compute/bad.py:1 imports te.lower",
                                          "te/compute/bad.py:1 imports te.lower.ir",
                                          "te/compute/bad.py:3 imports te.build"]
    assert "te/schedule/bad.py:1 imports the top-level package te" in found["te/schedule/bad.py"]
    assert "te/schedule/bad.py:2 imports te.autotune" in found["te/schedule/bad.py"]
    assert found["te/lower/ok.py"] == []
    assert found["te/lower/up.py"] == ["te/lower/up.py:2 imports te.codegen.llvm",
                                       "te/lower/up.py:2 imports te.codegen.llvm.codegen"]
    assert found["te/codegen/llvm/ok.py"] == []
    assert found["te/codegen/cuda/up.py"] == ["te/codegen/cuda/up.py:1 imports te.build_cuda"]
    assert found["te/lower/passes/rt.py"] == ["te/lower/passes/rt.py:2 imports runtime.cuda",
                                              "te/lower/passes/rt.py:2 imports "
                                              "runtime.cuda.MAX_GRID"]
    assert "runtime/bad.py:1 imports te" in found["runtime/bad.py"]


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_layering(path):
    bad = violations(path)
    assert not bad, "layering violations:\n" + "\n".join(bad)


@pytest.mark.parametrize("path", MODULES, ids=module_name)
def test_optional_dependencies_imported_lazily(path):
    eager = [f"{path.relative_to(ROOT)}:{line} imports {name} at module level"
             for name, line, in_function, _ in imported_modules(path)
             if not in_function and any(_under(name, h) for h in OPTIONAL_HEAVY)]
    assert not eager, "\n".join(eager)


# Import cycles that remain, each with why it is not broken yet. Any other cycle fails, and
# so does one of these that is gone, so the list only shrinks. None remain.
KNOWN_CYCLES = set()


def import_graph(paths, root: Path = ROOT) -> dict:
    """module -> {imported project module: line}, module-level and function-local imports
    alike, not those under `if TYPE_CHECKING:`. A module's own packages are left out: Python
    imports them before it anyway."""
    names = {module_name(p, root): p for p in paths}
    graph = {}
    for me, path in names.items():
        edges = {}
        for name, line, _, _ in imported_modules(path, root, type_checking=False):
            while name and name not in names:
                name = name.rpartition(".")[0]
            if name and name != me and not me.startswith(name + "."):
                edges.setdefault(name, line)
        graph[me] = edges
    return graph


def import_cycles(graph: dict) -> list:
    """(modules, 'a:LINE -> b:LINE -> a') for each group of modules that import each other
    (a strongly connected component of more than one), with one cycle through it."""
    order, low, stack, groups = {}, {}, [], []

    def visit(v):
        order[v] = low[v] = len(order)
        stack.append(v)
        for w in graph[v]:
            if w not in order:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], order[w])
        if low[v] == order[v]:
            group = set()
            while not group or v not in group:
                group.add(stack.pop())
            if len(group) > 1:
                groups.append(frozenset(group))
    for v in sorted(graph):
        if v not in order:
            visit(v)
    return sorted(((g, _cycle_text(graph, g)) for g in groups), key=lambda x: x[1])


def _cycle_text(graph: dict, group: frozenset) -> str:
    """The shortest cycle from the group's first module back to it, inside the group."""
    start = min(group)
    came_from = {}
    queue = [start]
    for v in queue:
        for w in sorted(graph[v]):
            if w in group and w not in came_from:
                came_from[w] = v
                queue.append(w)
    path, v = [start], came_from[start]
    while v != start:
        path.append(v)
        v = came_from[v]
    path.append(start)
    path.reverse()
    return " -> ".join(f"{a}:{graph[a][b]}" for a, b in zip(path, path[1:])) + f" -> {start}"


def test_cycle_checker_sees_imports_inside_functions(tmp_path):
    files = {"te/__init__.py": "from .lower import c\n", "te/lower/__init__.py": "",
             "te/lower/a.py": "from . import b\n", "te/lower/c.py": "from . import a\n",
             "te/lower/b.py": "import os\n\n\ndef f():\n    from .a import x\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(sorted(tmp_path.rglob("*.py")), tmp_path)
    assert graph["te.lower.c"] == {"te.lower.a": 1}   # its package te.lower left out
    assert import_cycles(graph) == [(frozenset({"te.lower.a", "te.lower.b"}),
                                     "te.lower.a:1 -> te.lower.b:5 -> te.lower.a")]


def test_type_checking_imports_count_for_layers_not_cycles(tmp_path):
    files = {"te/schedule/a.py": "from . import b\n",
             "te/schedule/b.py": ("from typing import TYPE_CHECKING\n"
                                  "if TYPE_CHECKING:\n    from .a import X\n"
                                  "    from ..lower import ir\n"
                                  "else:\n    from . import c\n"),
             "te/schedule/c.py": "import typing\nif typing.TYPE_CHECKING:\n    from . import b\n"}
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    graph = import_graph(sorted(tmp_path.rglob("*.py")), tmp_path)
    assert graph["te.schedule.b"] == {"te.schedule.c": 6}  # the else branch runs
    assert graph["te.schedule.c"] == {} and import_cycles(graph) == []
    assert violations(tmp_path / "te/schedule/b.py", tmp_path) == [
        "te/schedule/b.py:4 imports te.lower", "te/schedule/b.py:4 imports te.lower.ir"]


def test_no_import_cycles():
    cycles = dict(import_cycles(import_graph(MODULES)))
    new = [text for group, text in cycles.items() if group not in KNOWN_CYCLES]
    gone = [sorted(group) for group in KNOWN_CYCLES if group not in cycles]
    assert not new, "import cycles (module:line of each import):\n" + "\n".join(new)
    assert not gone, f"no longer cycles, remove them from KNOWN_CYCLES: {gone}"
