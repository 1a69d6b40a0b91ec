"""The README's Python examples run as written, in order, in one namespace.

A README whose examples no longer match the API misleads every newcomer first; this reads
the ```python blocks of README.md and runs them in a temporary directory (the autotuning
example writes its log to the current directory). Imports pathlib, re and pytest.
"""
import pathlib
import re

README = pathlib.Path(__file__).parents[1] / "README.md"


def python_blocks(text: str) -> list:
    return re.findall(r"^```python\n(.*?)^```", text, flags=re.S | re.M)


def test_the_readme_has_examples():
    assert len(python_blocks(README.read_text())) >= 5


def test_the_readme_examples_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    namespace: dict = {"__name__": "__readme__"}
    for k, block in enumerate(python_blocks(README.read_text())):
        exec(compile(block, f"README.md[python block {k}]", "exec"), namespace)  # noqa: S102
    out = capsys.readouterr().out
    assert "@main(A: float32[n, 64]" in out            # te.lower printed the loop IR
    assert "__global__" in out                          # the CUDA C was printed
    assert (tmp_path / "matmul.jsonl").stat().st_size > 0
