"""python -m graph show / run on a small ONNX model: the printed graph, the run summary with
the comparison against onnxruntime, and the usage errors."""
import re

import pytest

from graph.__main__ import main
from onnx_cases import Const, make_model, onnx, rand


@pytest.fixture
def model_path(tmp_path):
    model, _ = make_model("Conv", [rand(1, 3, 9, 7), Const(rand(4, 3, 3, 3))],
                          {"pads": [1, 1, 1, 1]})
    path = tmp_path / "conv.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_show_prints_the_graph(model_path, capsys):
    assert main(["show", model_path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0] == "graph case(%in0: float32[1, 3, 9, 7]) {"
    assert out[2].startswith("  %out0: float32[1, 4, 9, 7] = conv2d(%in0, %in1; ")


@pytest.fixture
def conv_relu_path(tmp_path):
    x = onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 9, 7])
    y = onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)
    w = onnx.numpy_helper.from_array(rand(4, 3, 3, 3), "w")
    nodes = [onnx.helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
             onnx.helper.make_node("Relu", ["c"], ["y"])]
    model = onnx.helper.make_model(onnx.helper.make_graph(nodes, "cr", [x], [y], [w]),
                                   opset_imports=[onnx.helper.make_opsetid("", 13)])
    path = tmp_path / "conv_relu.onnx"
    onnx.save(model, str(path))
    return str(path)


def test_show_prints_the_fused_groups(conv_relu_path, capsys):
    assert main(["show", conv_relu_path]) == 0
    out = capsys.readouterr().out.splitlines()
    k = out.index("fused groups at O1 (1, 1 kernels) {")
    assert out[k + 1:k + 3] == ["  kernel: conv2d_packed, relu -> %y: float32[1, 4, 9, 7]", "}"]


def test_show_prints_the_memory_plan(conv_relu_path, capsys):
    assert main(["show", conv_relu_path]) == 0
    out = capsys.readouterr().out.splitlines()
    k = [line.startswith("memory plan: 1 steps") for line in out].index(True)
    assert "arena 0 B" in out[k]   # the one value is the output: no arena
    assert out[k + 2].split() == ["tensor", "type", "bytes", "steps", "offset", "note"]
    assert out[k + 3].split() == ["y", "float32[1,", "4,", "9,", "7]", "1008", "0-0",
                                  "output", "output", "0"]


def test_run_at_o1_runs_the_fused_kernel(conv_relu_path, capsys):
    assert main(["run", conv_relu_path, "--level", "O1"]) == 0
    out = capsys.readouterr().out
    assert "compiled at O1 in " in out and "1 steps, 1 kernels" in out
    assert "conv2d_packed+relu" in out
    diff = float(re.search(r"max \|ours - onnxruntime\| per output: (\S+)", out).group(1))
    assert diff < 1e-4


def test_run_at_o2_times_the_native_call(conv_relu_path, capsys):
    assert main(["run", conv_relu_path, "--level", "O2"]) == 0
    out = capsys.readouterr().out
    assert "compiled at O2 in " in out and "1 steps, 1 kernels" in out
    assert re.search(r"O2 run: [0-9.]+ ms \(one native call, median of 5\)", out)
    diff = float(re.search(r"max \|ours - onnxruntime\| per output: (\S+)", out).group(1))
    assert diff < 1e-4


def test_run_compiles_runs_profiles_and_compares(model_path, capsys):
    assert main(["run", model_path, "--level", "O0", "--seed", "3"]) == 0
    out = capsys.readouterr().out
    assert "compiled at O0 in " in out and "1 steps, 1 kernels" in out
    assert "output out0: float32[1, 4, 9, 7] min " in out
    assert re.search(r"k0_conv2d\s+conv2d\s+out0\s+[0-9.]+\s+100\.0%", out)
    diff = float(re.search(r"max \|ours - onnxruntime\| per output: (\S+)", out).group(1))
    assert diff < 1e-4


def test_errors(model_path, capsys):
    assert main(["run", model_path, "--level", "O7"]) == 2
    assert "error: graph.compile: level must be one of ['O0', 'O1', 'O2'], got 'O7'" in \
        capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["show", model_path, "--shape", "in0"])
    assert "--shape must look like name=1,3,224,224, got 'in0'" in capsys.readouterr().err
    assert main(["show", model_path, "--shape", "in0=1,3,9"]) == 2
    assert "shapes['in0'] must have 4 dims" in capsys.readouterr().err
