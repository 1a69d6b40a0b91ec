"""python -m graph export: an ONNX model (symbolic batch fixed by --shape) compiled at O2 and
exported from the command line, loaded in a fresh process without the compiler and compared
with onnxruntime on random inputs; the usage errors, their messages and exit codes."""
import os
import subprocess
import sys

import numpy as np
import pytest

from graph.__main__ import main
from onnx_cases import onnx, rand

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture
def model_path(tmp_path):
    """Conv (odd sizes, a symbolic batch N) + bias + Relu, then a spatial mean and a MatMul:
    two outputs."""
    f = onnx.TensorProto.FLOAT
    x = onnx.helper.make_tensor_value_info("x", f, ["N", 3, 9, 7])
    outs = [onnx.helper.make_tensor_value_info(n, f, None) for n in ("y", "z")]
    inits = [onnx.numpy_helper.from_array(a, n) for a, n in
             ((rand(5, 3, 3, 3), "w"), (rand(5), "b"), (rand(5, 11), "g"))]
    nodes = [onnx.helper.make_node("Conv", ["x", "w", "b"], ["c"], pads=[1, 1, 1, 1],
                                   strides=[2, 2]),
             onnx.helper.make_node("Relu", ["c"], ["y"]),
             onnx.helper.make_node("ReduceMean", ["y"], ["f"], axes=[2, 3], keepdims=0),
             onnx.helper.make_node("MatMul", ["f", "g"], ["z"])]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "cli", [x], outs, inits),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    path = tmp_path / "cli.onnx"
    onnx.save(model, str(path))
    return str(path)


def _python(args: list) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable] + args, capture_output=True, text=True, cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=ROOT))


LOAD_AND_RUN = """
import sys
import numpy as np
import graph
m = graph.load_module(sys.argv[1])
x = np.load(sys.argv[2])
np.savez(sys.argv[3], *m.run({"x": x}))
print(m.input_names, m.output_names)
banned = sorted(n for n in sys.modules if n.split(".")[0] in ("te", "onnx", "llvmlite"))
assert not banned, banned
"""


def test_export_then_load_in_a_fresh_process(model_path, tmp_path, capsys):
    so = str(tmp_path / "out" / "cli.so")
    os.mkdir(tmp_path / "out")
    assert main(["export", model_path, "-o", so, "--shape", "x=2,3,9,7"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith("compiled at O2 in ")
    assert out[0].endswith(f"'{so}' ({os.path.getsize(so)} bytes) and its weights "
                           f"'{so}.weights' ({os.path.getsize(so + '.weights')} bytes)")
    assert out[1] == f"run it with graph.load_module('{so}').run(feeds); inputs: " \
                     f"x: float32[2, 3, 9, 7]"
    x = np.random.default_rng(11).standard_normal((2, 3, 9, 7)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    done = _python(["-c", LOAD_AND_RUN, so, str(tmp_path / "x.npy"),
                    str(tmp_path / "got.npz")])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "['x'] ['y', 'z']"
    import onnxruntime
    session = onnxruntime.InferenceSession(model_path, providers=["CPUExecutionProvider"])
    want = session.run(None, {"x": x})
    got = np.load(tmp_path / "got.npz")
    for k, w in enumerate(want):
        assert got[f"arr_{k}"].shape == w.shape
        np.testing.assert_allclose(got[f"arr_{k}"], w, rtol=1e-4, atol=1e-5)


def test_export_errors(model_path, tmp_path, capsys):
    so = str(tmp_path / "m.so")
    missing = str(tmp_path / "missing.onnx")
    assert main(["export", missing, "-o", so]) == 2
    assert capsys.readouterr().err == (f"error: model: '{missing}' is not a file (give the "
                                       f"path of an .onnx model)\n")
    open(tmp_path / "text.onnx", "w").write("not a model")
    assert main(["export", str(tmp_path / "text.onnx"), "-o", so]) == 2
    assert capsys.readouterr().err.startswith(f"error: from_onnx: '{tmp_path}/text.onnx' is "
                                              f"not an ONNX model (")
    with pytest.raises(SystemExit) as exit_:
        main(["export", model_path, "-o", so, "--shape", "x=2x3x9x7"])
    assert exit_.value.code == 2
    assert "--shape must look like name=1,3,224,224, got 'x=2x3x9x7'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["export", model_path])
    assert "the following arguments are required: -o/--output" in capsys.readouterr().err
    nowhere = str(tmp_path / "nope" / "m.so")
    assert main(["export", model_path, "-o", nowhere, "--shape", "x=1,3,9,7"]) == 2
    assert capsys.readouterr().err == (f"error: -o/--output: cannot write '{nowhere}': "
                                       f"'{tmp_path}/nope' is not a writable directory\n")
    assert main(["export", model_path, "-o", str(tmp_path), "--shape", "x=1,3,9,7"]) == 2
    assert capsys.readouterr().err == (f"error: -o/--output: '{tmp_path}' is a directory; "
                                       f"give the path of the library to write\n")
    assert main(["export", model_path, "-o", so, "--level", "O1", "--shape", "x=1,3,9,7"]) == 2
    assert capsys.readouterr().err == ("error: --level: only O2 can be exported (its one "
                                       "native entry point; O0 and O1 dispatch kernels from "
                                       "Python), got 'O1'\n")
    assert main(["export", model_path, "-o", so]) == 2     # N is symbolic: O2 needs it fixed
    assert capsys.readouterr().err == (
        "error: graph.compile: value 'x' has symbolic shape float32[N, 3, 9, 7]; compile needs "
        "constant shapes (give them with from_onnx(..., shapes=...) or graph.input)\n")
    assert sorted(os.listdir(tmp_path)) == ["cli.onnx", "text.onnx"]


def test_export_error_in_a_fresh_process_has_no_traceback(tmp_path):
    done = _python(["-m", "graph", "export", str(tmp_path / "absent.onnx"), "-o",
                    str(tmp_path / "m.so")])
    assert done.returncode == 2
    assert done.stderr == (f"error: model: '{tmp_path}/absent.onnx' is not a file (give the "
                           f"path of an .onnx model)\n")


def test_help_lists_export(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--help"])
    assert exit_.value.code == 0
    out = capsys.readouterr().out
    assert "    export              compile at O2, write a library + weights for" in out
    assert "  python -m graph export model.onnx -o model.so [--tuning-log model.jsonl]" in out
