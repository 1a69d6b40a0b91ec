"""Every tutorial notebook runs top to bottom (its code cells, in order, in one namespace).

Notebooks are JSON; this runs their code cells without Jupyter, so a tutorial that no longer
matches the API fails here. Imports json, pathlib and pytest.
"""
import json
import pathlib

import pytest

TUTORIALS = sorted((pathlib.Path(__file__).parents[2] / "tutorials").glob("*.ipynb"))


def test_there_are_tutorials():
    assert TUTORIALS, "tutorials/ has no notebooks"


@pytest.mark.parametrize("path", TUTORIALS, ids=lambda p: p.name)
def test_notebook_runs(path, capsys):
    cells = json.loads(path.read_text())["cells"]
    namespace: dict = {"__name__": "__notebook__"}
    code_cells = [c for c in cells if c["cell_type"] == "code"]
    assert code_cells
    for k, cell in enumerate(code_cells):
        source = "".join(cell["source"])
        exec(compile(source, f"{path.name}[cell {k}]", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "Traceback" not in out
