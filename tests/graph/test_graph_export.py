"""An O2 module's export_library and graph.load_module (graph/export.py, graph/loaded.py):
the model runs again in a fresh process that imports neither te nor onnx nor llvmlite,
bit-identical to the O2 module, with the same feed checks; a missing, truncated, corrupt or
foreign weights file or library is refused with a message naming it; the weights are a
read-only mapping of the sidecar; the process's resident memory after load and one run is
the plan's (weights + arena) and a small constant, its private memory at load a small
constant."""
import importlib
import json
import mmap
import os
import subprocess
import sys
import threading
from importlib.util import find_spec

import numpy as np
import pytest

import graph
import runtime
import te

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# what a process that only loads a model must not have imported: the compiler (all of te,
# graph's compiling half, the JIT) and onnx
COMPILER = ("te", "onnx", "llvmlite")
COMPILER_GRAPH = ("graph.api", "graph.compile", "graph.o2", "graph.export", "runtime.cpu")


def _model(seed: int = 1):
    """Every kind of output: fresh, a view of an intermediate, of a feed, of another
    output, a constant."""
    rng = np.random.default_rng(seed)
    x = graph.input("x", (6, 10))
    w = graph.constant(rng.standard_normal((10, 10)).astype(np.float32), name="w")
    h = graph.relu(graph.add(graph.nn.matmul(x, w), graph.constant(
        rng.standard_normal(10).astype(np.float32))), name="h")
    r = graph.reshape(h, (60,), name="r")
    s = graph.nn.softmax(graph.exp(graph.tanh(h)), axis=1, name="s")
    u = graph.add(graph.sigmoid(graph.reshape(s, (10, 6))), graph.reshape(x, (10, 6)),
                  name="u")
    return graph.Graph([u, r, graph.reshape(x, (60,), name="xv"), w,
                        graph.reshape(r, (6, 10), name="rr")], name="tricky")


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """(O2 module, path of its library) exported once for the module's tests."""
    m = graph.compile(_model(), level="O2")
    path = str(tmp_path_factory.mktemp("export") / "model.so")
    m.export_library(path)
    return m, path


def _python(code: str) -> str:
    env = dict(os.environ, PYTHONPATH=ROOT)
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT)
    assert done.returncode == 0, done.stderr
    return done.stdout


_CHECK_IMPORTS = f"""
banned = sorted(n for n in sys.modules if n.split(".")[0] in {COMPILER!r}
                or n in {COMPILER_GRAPH!r})
assert not banned, banned
"""


def test_round_trip_in_a_fresh_process(exported, tmp_path):
    m, path = exported
    rng = np.random.default_rng(0)
    feeds = [rng.standard_normal((6, 10)).astype(np.float32) for _ in range(2)]
    np.save(tmp_path / "x.npy", np.stack(feeds))
    out = _python(f"""
import sys
import numpy as np
import graph
m = graph.load_module({path!r})
xs = np.load({str(tmp_path / 'x.npy')!r})
runs = [m.run({{"x": x}}) for x in xs]   # the arena is reused: each run its own feeds
got = runs[-1]
assert np.shares_memory(got[1], got[4]) and not np.shares_memory(got[2], xs[1])
again = m.run({{"x": xs[1]}})
again[3][0, 0] = 7.0                       # a constant's copy: the next run is not changed
assert m.run({{"x": xs[1]}})[3][0, 0] != 7.0
np.savez({str(tmp_path / 'got.npz')!r}, *[a for r in runs for a in r])
print(m)
print(m.input_names, m.output_names)
{_CHECK_IMPORTS}""")
    got = np.load(tmp_path / "got.npz")
    want = [a for x in feeds for a in m.run({"x": x})]
    assert len(got.files) == len(want) == 10
    for k, b in enumerate(want):
        a = got[f"arr_{k}"]
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)   # bit-identical
    assert out.startswith(f"module tricky (level O2, loaded from '{path}', {len(m.calls)} "
                          f"calls, arena {m.memory_plan.arena_bytes} bytes, weights ")
    assert "['x'] ['u', 'r', 'xv', 'w', 'rr']" in out


def test_a_model_without_kernels(tmp_path):
    """No calls, no arena: outputs that are a feed's view, the feed, an int64 constant."""
    x = graph.input("x", (3, 4))
    c = graph.constant(np.arange(6, dtype=np.int64).reshape(2, 3), name="c")
    m = graph.compile(graph.Graph([graph.reshape(x, (12,), name="v"), c, x], name="none"),
                      level="O2")
    assert not m.calls and m.memory_plan.arena_bytes == 0
    m.export_library(tmp_path / "none.so")           # a PathLike works too
    loaded = graph.load_module(tmp_path / "none.so")
    xa = np.random.default_rng(5).standard_normal((3, 4)).astype(np.float32)
    got, want = loaded.run({"x": xa}), m.run({"x": xa})
    for a, b in zip(got, want):
        assert a.dtype == b.dtype and a.shape == b.shape
        np.testing.assert_array_equal(a, b)
    assert not np.shares_memory(got[2], xa) and not np.shares_memory(got[0], xa)


BAD_FEEDS = [
    [("x", np.zeros((6, 10), np.float32))],                     # not a dict
    {"y": np.zeros((6, 10), np.float32)},                       # unknown name
    {},                                                         # missing
    {"x": np.zeros((6, 10), np.float64)},                       # dtype
    {"x": np.zeros((10, 6), np.float32)},                       # shape
]


@pytest.mark.parametrize("feeds", BAD_FEEDS, ids=["list", "unknown", "missing", "dtype",
                                                  "shape"])
def test_loaded_module_checks_feeds_as_graph_does(exported, feeds):
    m, path = exported
    loaded = graph.load_module(path)
    with pytest.raises(graph.FeedError) as want:
        m.run(feeds)
    with pytest.raises(runtime.ArgumentError) as got:
        loaded.run(feeds)
    assert str(got.value) == str(want.value)
    assert isinstance(want.value, runtime.ArgumentError)  # one except clause for both


def test_loaded_module_takes_what_graph_converts(exported):
    m, path = exported
    loaded = graph.load_module(path)
    x = np.random.default_rng(3).standard_normal((10, 6)).astype(np.float32).T  # strided
    for a, b in zip(loaded.run({"x": x}), m.run({"x": np.ascontiguousarray(x)})):
        np.testing.assert_array_equal(a, b)


def test_feeds_in_the_other_byte_order_are_read_as_their_values(exported):
    """A big-endian float32 feed holds float32 values (dtype.name is 'float32'): the O0,
    O2 and loaded modules convert it, never pass its bytes to kernels reading native ones."""
    m, path = exported
    loaded = graph.load_module(path)
    x = np.random.default_rng(8).standard_normal((6, 10)).astype(np.float32)
    swapped = x.astype(x.dtype.newbyteorder())
    assert not swapped.dtype.isnative and np.array_equal(swapped, x)
    want = m.run({"x": x})
    modules = [m, loaded, graph.compile(_model(), level="O0")]
    for module in modules:
        for a, b in zip(module.run({"x": swapped}), want):
            np.testing.assert_array_equal(a, b)


def test_loaded_module_runs_from_threads(exported):
    m, path = exported
    loaded = graph.load_module(path)
    rng = np.random.default_rng(6)
    xs = [rng.standard_normal((6, 10)).astype(np.float32) for _ in range(4)]
    wants = [m.run({"x": x}) for x in xs]
    failures = []

    def work(k):
        for _ in range(5):
            got = loaded.run({"x": xs[k]})
            if not all(np.array_equal(a, b) for a, b in zip(got, wants[k])):
                failures.append(k)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures


def test_export_over_a_loaded_model(tmp_path):
    """Exporting over a library that is loaded: the loaded module keeps running what it
    loaded, a new load gets the new model."""
    path = str(tmp_path / "m.so")
    m1 = graph.compile(_model(), level="O2")
    m1.export_library(path)
    first = graph.load_module(path)
    x = graph.input("x", (6, 10))
    m2 = graph.compile(graph.Graph([graph.sigmoid(x, name="y")], name="other"), level="O2")
    m2.export_library(path)
    second = graph.load_module(path)
    xa = np.random.default_rng(7).standard_normal((6, 10)).astype(np.float32)
    assert second.output_names == ["y"] and first.output_names[0] == "u"
    np.testing.assert_array_equal(second.run({"x": xa})[0], m2.run({"x": xa})[0])
    for a, b in zip(first.run({"x": xa}), m1.run({"x": xa})):
        np.testing.assert_array_equal(a, b)


def test_only_o2_exports(tmp_path):
    g = _model()
    for level in ("O0", "O1"):
        with pytest.raises(graph.GraphError, match=rf"export_library: only a module compiled "
                           rf"at level O2 can be exported \(this one is {level}: its kernels "
                           rf"are dispatched from Python\); compile it with graph.compile\(g, "
                           rf"level='O2'\)"):
            graph.compile(g, level=level).export_library(str(tmp_path / "m.so"))
    assert not os.listdir(tmp_path)


def test_export_refuses_a_directory_and_a_missing_one(exported, tmp_path):
    m, _ = exported
    with pytest.raises(graph.GraphError, match=r"export_library: '.*' is a directory"):
        m.export_library(str(tmp_path))
    with pytest.raises(FileNotFoundError, match=r"export_library: cannot write '.*/nope/m.so'"):
        m.export_library(str(tmp_path / "nope" / "m.so"))
    with pytest.raises(graph.GraphError, match="path must be a str or os.PathLike, got int"):
        m.export_library(3)


def _copy(path: str, tmp_path) -> str:
    """A private copy of the exported library and its weights (tests that break one)."""
    target = str(tmp_path / "copy.so")
    for suffix in ("", ".weights"):
        with open(path + suffix, "rb") as src, open(target + suffix, "wb") as dst:
            dst.write(src.read())
    return target


def _load_error(path: str) -> str:
    with pytest.raises(runtime.RuntimeBuildError) as error:
        graph.load_module(path)
    return str(error.value)


def test_missing_truncated_corrupt_or_foreign_weights(exported, tmp_path):
    _, path = exported
    so = _copy(path, tmp_path)
    weights = open(so + ".weights", "rb").read()
    os.unlink(so + ".weights")
    assert _load_error(so) == (f"graph.load_module: '{so}' needs its weights file "
                               f"'{so}.weights', which does not exist (export_library writes "
                               f"it beside the library: copy or move both)")
    open(so + ".weights", "wb").write(weights[:-8])
    assert _load_error(so) == (f"graph.load_module: '{so}': its weights file '{so}.weights' "
                               f"has {len(weights) - 8} bytes, expected {len(weights)}: it is "
                               f"truncated or from another export; export the model again")
    corrupt = bytearray(weights)
    corrupt[-1] ^= 0x10
    open(so + ".weights", "wb").write(bytes(corrupt))
    message = (f"graph.load_module: '{so}': its weights file '{so}.weights' does not match "
               f"the library (SHA-256 differs): it is corrupt or from another export; export "
               f"the model again")
    assert _load_error(so) == message
    other = str(tmp_path / "other.so")    # the same model with other weights: same size
    graph.compile(_model(seed=2), level="O2").export_library(other)
    assert os.path.getsize(other + ".weights") == len(weights)
    os.replace(other + ".weights", so + ".weights")
    assert _load_error(so) == message
    open(so + ".weights", "wb").write(b"\0" * len(weights))
    assert _load_error(so) == (f"graph.load_module: '{so}': '{so}.weights' is not a weights "
                               f"file written by export_library (no 'te graph weights' "
                               f"header)")


def test_foreign_or_damaged_library(exported, tmp_path):
    _, path = exported
    a = te.placeholder((4,), name="A")
    b = te.compute((4,), lambda i: a[i] + 1.0, name="B")
    kernel = str(tmp_path / "kernel.so")
    te.build(te.create_schedule(b.op), [a, b], name="add_one").export_library(kernel)
    assert _load_error(kernel) == (
        f"graph.load_module: '{kernel}' is not a model written by graph's export_library (it "
        f"has no __graph_model symbol; a single kernel's library loads with "
        f"runtime.load_module)")
    text = str(tmp_path / "text.so")
    open(text, "w").write("not a library")
    assert _load_error(text) == (f"cannot load shared library '{text}': it is not an ELF "
                                 f"shared library (it does not start with the ELF magic bytes)")
    so = _copy(path, tmp_path)
    image = open(so, "rb").read()
    assert image.count(b'"version": 1,') == 1
    open(so, "wb").write(image.replace(b'"version": 1,', b'"version": 9,'))
    assert _load_error(so) == (f"graph.load_module: '{so}' was written in format "
                               f"'te-graph-o2' version 9; this runtime reads 'te-graph-o2' "
                               f"version 1: export it again")
    for old, new, error in ((b'{"format"', b'["format"', "Expecting"),
                            (b'"arena_bytes"', b'"arena_bytez"', "KeyError: 'arena_bytes'")):
        open(so, "wb").write(image.replace(old, new))
        assert _load_error(so).startswith(f"graph.load_module: '{so}': invalid __graph_model "
                                          f"({error}")
    with pytest.raises(runtime.RuntimeBuildError, match="does not exist|No such file"):
        graph.load_module(str(tmp_path / "absent.so"))
    with pytest.raises(TypeError, match="graph.load_module: path must be a str or "
                                        "os.PathLike, got NoneType"):
        graph.load_module(None)


def test_kernels_from_the_compile_cache_export(tmp_path, monkeypatch):
    """A compile whose kernels come from the disk cache (libraries, not the JIT) exports
    their stored IR: the same numbers as the JIT-compiled module."""
    monkeypatch.setenv("TE_CACHE_DIR", str(tmp_path / "cache"))
    jit = graph.compile(_model(), level="O2", cache=True)
    cached = graph.compile(_model(), level="O2", cache=True)
    assert all(isinstance(c.kernel.func.library, runtime.module.SharedLibrary)
               for c in cached.calls)
    cached.export_library(str(tmp_path / "cached.so"))
    loaded = graph.load_module(str(tmp_path / "cached.so"))
    x = np.random.default_rng(4).standard_normal((6, 10)).astype(np.float32)
    for a, b in zip(loaded.run({"x": x}), jit.run({"x": x})):
        np.testing.assert_array_equal(a, b)


def test_graph_names_over_submodules():
    """graph.<name> is graph.api's where a submodule has the same name (API_OVER_SUBMODULE
    lists them: a name added to graph.api over a submodule must be added there)."""
    api = sys.modules["graph.api"] if "graph.api" in sys.modules else graph.api
    clashes = {name for name in dir(api) if not name.startswith("_")
               and find_spec(f"graph.{name}") is not None
               and getattr(api, name) is not sys.modules.get(f"graph.{name}")}
    assert clashes == set(graph.API_OVER_SUBMODULE)
    importlib.import_module("graph.compile")  # the submodule: graph.compile stays the function
    assert graph.compile is api.compile and callable(graph.compile)
    assert graph.fuse is sys.modules["graph.fuse"]
    with pytest.raises(AttributeError, match="module 'graph' has no attribute 'nothing'"):
        graph.nothing
    # a dotted name is no attribute (find_spec would import its parent, or fail with
    # ModuleNotFoundError): getattr's default, as for any module
    assert getattr(graph, "nothing.x", "default") == "default"
    assert not hasattr(graph, "frontend.onnx")


def test_star_import_gives_the_public_names():
    """`from graph import *` gives graph's public names as before graph was lazy (every
    graph.api name and load_module), not the package's helpers (sys, types, ...)."""
    names = json.loads(_python("from graph import *\nimport json as _json\n"
                               "print(_json.dumps(sorted(k for k in dir() if k[0] != '_')))"))
    api = sys.modules["graph.api"] if "graph.api" in sys.modules else graph.api
    assert set(names) == {k for k in dir(api) if k[0] != "_"} | {"load_module"}
    assert {"compile", "from_onnx", "relu", "Graph", "FeedError", "nn"} <= set(names)


# A model of meaningful size: 20 MiB of weights; the arena holds batch-64 activations.
_RSS_MODEL = """
import numpy as np, graph
rng = np.random.default_rng(0)
x = graph.input("x", (64, 1024))
h = x
for k, (a, b) in enumerate([(1024, 2048), (2048, 1024), (1024, 1024)]):
    w = graph.constant(rng.standard_normal((a, b)).astype(np.float32) / 32, name=f"w{{k}}")
    h = graph.relu(graph.nn.matmul(h, w))
m = graph.compile(graph.Graph([h], name="mlp"), level="O2")
m.export_library({path!r})
x = rng.standard_normal((64, 1024)).astype(np.float32)
np.save({x!r}, x)
np.save({want!r}, m.run({{"x": x}})[0])
"""
SLACK = 4 << 20  # bytes: code, libgomp's threads, what numpy and ctypes allocate once


def test_resident_memory_is_the_plan_and_threads_agree(tmp_path):
    """After load and one run the process has grown by the weights, the arena and the
    output, and less than SLACK more (the weights are read once, never held twice); the
    numbers are the O2 module's at one thread and at two."""
    path, x, want = (str(tmp_path / n) for n in ("mlp.so", "x.npy", "want.npy"))
    _python(_RSS_MODEL.format(path=path, x=x, want=want))
    out = _python(f"""
import json, sys
import numpy as np
import graph, runtime

def rss():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status
                    if line.startswith("VmRSS:"))

def anon():
    with open("/proc/self/status") as status:
        return next(int(line.split()[1]) * 1024 for line in status
                    if line.startswith("RssAnon:"))

x = np.load({x!r})
before, anon_before = rss(), anon()
m = graph.load_module({path!r})
private = anon() - anon_before
y = m.run({{"x": x}})[0]
grown = rss() - before
want = np.load({want!r})
same = []
for threads in (1, 2):
    runtime.set_num_threads(threads)
    same.append(bool(np.array_equal(m.run({{"x": x}})[0], want)))
print(json.dumps(dict(grown=grown, private=private, weights=m.weights_bytes,
                      arena=m.arena_bytes,
                      output=y.nbytes, same=same, first=bool(np.array_equal(y, want)))))
{_CHECK_IMPORTS}""")
    r = json.loads(out)
    assert r["first"] and r["same"] == [True, True]
    assert r["weights"] == (1024 * 2048 * 2 + 1024 * 1024) * 4
    plan = r["weights"] + r["arena"] + r["output"]
    assert r["weights"] <= r["grown"] <= plan + SLACK, r
    assert r["private"] < SLACK, r   # the weights are mapped, not read into private memory


def test_weights_are_a_read_only_mapping(exported):
    """The loaded weights are a view of a read-only mapping of the sidecar (no copy), and
    each constant a view of them."""
    _, path = exported
    loaded = graph.load_module(path)
    weights = loaded._weights
    base = getattr(weights.base, "obj", weights.base)   # numpy may keep a memoryview of it
    assert isinstance(base, mmap.mmap) and not weights.flags.writeable
    assert weights.nbytes == loaded.weights_bytes == os.path.getsize(path + ".weights") - 64
    assert weights.ctypes.data % mmap.PAGESIZE == 64   # after the header, in the first page
    for c in loaded._constants:
        assert np.shares_memory(c, weights) and not c.flags.writeable
        assert c.ctypes.data % 64 == 0
    with pytest.raises(ValueError, match="read-only"):
        loaded._constants[0][...] = 0
