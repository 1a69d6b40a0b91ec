"""The tutorial notebooks run top to bottom in a real Jupyter kernel and are committed run.

Each tutorials/*.ipynb is executed through nbclient by the `python3` kernel of this
interpreter's environment (ipykernel's kernelspec, which jupyter_client starts with
sys.executable), from the repository root with this tree first on PYTHONPATH; a cell that
raises fails the test with the cell's traceback. The committed files must hold the outputs
of one run top to bottom, so a reader on the web sees them without running anything.
`python tests/tutorials/test_notebooks.py tutorials/NN_name.ipynb ...` runs notebooks the same
way and writes them back with their outputs. Imports nbclient, nbformat and pytest.
"""
from __future__ import annotations

import os
import pathlib
import re
import sys

import nbclient
import nbformat
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TUTORIALS = sorted((ROOT / "tutorials").glob("*.ipynb"))
KERNEL = "python3"
CELL_TIMEOUT_S = 300
# Notebooks are read on the web and diffed in review: outputs stay small (modest PNGs).
MAX_NOTEBOOK_BYTES = 512 * 1024


def kernel_env() -> dict:
    """The kernel's environment: this tree first on the path, a passive OpenMP pool (the
    kernels' threads must not spin against numpy's), matplotlib left to ipykernel's inline
    backend so that plots become PNG outputs."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(ROOT), env.get("PYTHONPATH")) if p)
    env["OMP_WAIT_POLICY"] = "passive"
    env.pop("MPLBACKEND", None)
    return env


def execute(nb):
    """Run every cell of `nb` (a NotebookNode) in a fresh kernel; returns it with outputs.
    A cell error raises nbclient's CellExecutionError, whose text holds the traceback."""
    client = nbclient.NotebookClient(nb, timeout=CELL_TIMEOUT_S, kernel_name=KERNEL,
                                     record_timing=False)
    client.execute(cwd=str(ROOT), env=kernel_env())
    return nb


def run_or_fail(nb, name: str):
    """execute(nb); a cell error fails the test with the cell, its traceback in plain text."""
    try:
        return execute(nb)
    except nbclient.exceptions.CellExecutionError as err:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(err))   # IPython colours its tracebacks
        pytest.fail(f"{name}: a cell raised\n{text}", pytrace=False)


def code_cells(nb) -> list:
    return [c for c in nb.cells if c.cell_type == "code"]


def cells_missing_plots(nb) -> list:
    """Indices of code cells that show a figure (plt.show()) but hold no PNG output: the
    plot went to a non-inline backend, and a reader on the web would see nothing."""
    return [k for k, c in enumerate(code_cells(nb)) if "plt.show()" in c.source and
            not any("image/png" in o.get("data", {}) for o in c.outputs)]


def test_there_are_tutorials():
    assert len(TUTORIALS) >= 6, [p.name for p in TUTORIALS]


def test_the_kernel_is_this_interpreter_importing_this_tree():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("import sys, te\nprint(sys.executable)\n"
                                              "print(te.__file__)"))
    out = execute(nb).cells[0].outputs
    lines = "".join(o.get("text", "") for o in out if o.output_type == "stream").split()
    assert lines[0] == sys.executable, f"the python3 kernel runs {lines[0]}, not this " \
        f"interpreter ({sys.executable}): is another python3 kernelspec found first?"
    assert pathlib.Path(lines[1]) == ROOT / "te" / "__init__.py", \
        f"the kernel imports te from {lines[1]}, not from this tree ({ROOT})"


def test_a_failing_cell_fails_with_its_traceback():
    nb = nbformat.v4.new_notebook()
    nb.cells.append(nbformat.v4.new_code_cell("def f():\n    return 1 / 0\nf()"))
    with pytest.raises(pytest.fail.Exception, match=r"(?s)bad.ipynb: a cell raised.*"
                       r"----> 2     return 1 / 0.*ZeroDivisionError: division by zero"):
        run_or_fail(nb, "bad.ipynb")


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_notebook_runs_in_a_kernel(path):
    nb = run_or_fail(nbformat.read(path, as_version=4), path.name)
    assert code_cells(nb)
    assert not cells_missing_plots(nb), f"{path.name}: code cells without their plot"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_notebook_is_committed_with_its_outputs(path):
    """Every code cell executed once, in order, in one kernel, none with an error; so a
    notebook saved without running it (or with its outputs cleared) fails here."""
    assert path.stat().st_size <= MAX_NOTEBOOK_BYTES, f"{path.name} is too large"
    nb = nbformat.read(path, as_version=4)
    nbformat.validate(nb)
    cells = code_cells(nb)
    counts = [c.execution_count for c in cells]
    assert counts == list(range(1, len(cells) + 1)), \
        f"{path.name}: execution counts {counts}: run it top to bottom and save it " \
        f"(python tests/tutorials/test_notebooks.py {path.relative_to(ROOT)})"
    errors = [k for k, c in enumerate(cells) if any(o.output_type == "error"
                                                    for o in c.outputs)]
    assert not errors, f"{path.name}: code cells {errors} hold errors"
    missing = cells_missing_plots(nb)
    assert not missing, f"{path.name}: code cells {missing} show no plot"
    assert sum(len(c.outputs) for c in cells) >= len(cells) // 2, \
        f"{path.name}: most code cells show nothing"


def coalesce_streams(nb) -> None:
    """Merge adjacent outputs of one stream: the kernel splits a cell's prints into
    chunks wherever its output buffer happened to be flushed, which would make every
    re-run of a notebook a diff (nbconvert's coalesce_streams does the same)."""
    for cell in code_cells(nb):
        merged: list = []
        for out in cell.outputs:
            last = merged[-1] if merged else None
            if last and out.output_type == last.output_type == "stream" and \
                    out.name == last.name:
                last.text += out.text
            else:
                merged.append(out)
        cell.outputs = merged


def main(paths: list) -> None:
    """Execute the given notebooks and write them back with their outputs."""
    for name in paths:
        path = pathlib.Path(name).resolve()
        nb = execute(nbformat.read(path, as_version=4))
        coalesce_streams(nb)
        nbformat.write(nb, path)
        print(f"{path.relative_to(ROOT)}: {len(code_cells(nb))} code cells run")


if __name__ == "__main__":
    main(sys.argv[1:] or [str(p) for p in TUTORIALS])
