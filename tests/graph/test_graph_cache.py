"""The compile cache (graph/cache.py over te/cache.py): a second compile loads every kernel,
in this process and in a fresh one, and shares kernels across models; what keys an entry;
corrupt, partial and foreign entries are rebuilt, never loaded; two processes racing on one
model; an unwritable directory; cache=False; info and clear (API and CLI).
Every test has its own TE_CACHE_DIR under tmp_path (tests/conftest.py keeps the cache off
and away from ~/.cache for every other test)."""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import time
import warnings

import numpy as np
import pytest

import graph
import runtime
import te
from te import cache as te_cache
from runtime import cache_sizes

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
KERNELS_O1 = 4   # conv2d+bias+relu, global_avg_pool2d, gemm, softmax (the flatten is a view)


def small_model(seed: int = 0, channels: int = 5, size: tuple = (11, 9)):
    """(graph, weights) of a small CNN with odd sizes and seeded random weights."""
    rng = np.random.default_rng(seed)
    w = {"w": rng.standard_normal((channels, 3, 3, 3)).astype("float32"),
         "b": rng.standard_normal(channels).astype("float32"),
         "fc": rng.standard_normal((4, channels)).astype("float32")}
    x = graph.input("x", (1, 3) + size)
    conv = graph.nn.conv2d(x, graph.constant(w["w"], name="w"), graph.constant(w["b"], name="b"),
                           padding=1)
    pooled = graph.nn.global_avg_pool2d(graph.relu(conv))
    logits = graph.nn.dense(graph.flatten(pooled), graph.constant(w["fc"], name="fc"))
    return graph.Graph([graph.nn.softmax(logits)]), w


def reference(x, w):
    """numpy's result of small_model on input x."""
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    h, wd = x.shape[2], x.shape[3]
    conv = np.zeros((1, w["w"].shape[0], h, wd))
    for i in range(3):
        for j in range(3):
            conv += np.einsum("nchw,oc->nohw", xp[:, :, i:i + h, j:j + wd], w["w"][:, :, i, j])
    act = np.maximum(conv + w["b"][None, :, None, None], 0)
    logits = act.mean(axis=(2, 3)) @ w["fc"].T
    e = np.exp(logits - logits.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def feed(size=(11, 9)):
    return np.random.default_rng(42).standard_normal((1, 3) + size).astype("float32")


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    path = tmp_path / "cache"
    monkeypatch.setenv("TE_CACHE_DIR", str(path))
    monkeypatch.setenv("TE_CACHE", "1")
    return path


@pytest.fixture
def count_builds(monkeypatch):
    """A list that gets one entry per te.build call."""
    calls = []
    build = te.build

    def counting(*args, **kwargs):
        calls.append(kwargs.get("name"))
        return build(*args, **kwargs)
    monkeypatch.setattr(te, "build", counting)
    return calls


def stats():
    return graph.cache.stats()


def delta(before: dict) -> dict:
    return {k: v - before[k] for k, v in stats().items()}


def test_second_compile_loads_every_kernel_with_the_same_results(cache_dir, count_builds):
    g, w = small_model()
    x = feed()
    before = stats()
    first = graph.compile(g, level="O1")
    assert len(count_builds) == KERNELS_O1
    assert delta(before) == {"hits": 0, "misses": KERNELS_O1, "stored": KERNELS_O1,
                             "rejected": 0, "failed": 0}
    assert graph.cache_info()["entries"] == KERNELS_O1
    before = stats()
    second = graph.compile(small_model()[0], level="O1")
    assert len(count_builds) == KERNELS_O1          # nothing built the second time
    assert delta(before)["hits"] == KERNELS_O1 and delta(before)["misses"] == 0
    out1, out2 = first.run({"x": x})[0], second.run({"x": x})[0]
    np.testing.assert_allclose(out1, reference(x, w), rtol=1e-4, atol=1e-6)
    np.testing.assert_array_equal(out1, out2)
    assert [s.kernel_name for s in first.steps] == [s.kernel_name for s in second.steps]


def test_o0_kernels_are_cached_too(cache_dir, count_builds):
    g, w = small_model()
    graph.compile(g, level="O0")
    built = len(count_builds)
    m = graph.compile(small_model()[0], level="O0")
    assert len(count_builds) == built
    np.testing.assert_allclose(m.run({"x": feed()})[0], reference(feed(), w), rtol=1e-4,
                               atol=1e-6)


def test_kernels_shared_by_two_models_are_compiled_once(cache_dir, count_builds):
    # other weights are the same kernels (constants are arguments, not code); a model with
    # another conv width shares only its softmax (same 1x4 input)
    graph.compile(small_model(seed=1)[0], level="O1")
    assert len(count_builds) == KERNELS_O1
    g2, w2 = small_model(seed=2)
    m2 = graph.compile(g2, level="O1")
    assert len(count_builds) == KERNELS_O1
    np.testing.assert_allclose(m2.run({"x": feed()})[0], reference(feed(), w2), rtol=1e-4,
                               atol=1e-6)
    before = stats()
    g3, w3 = small_model(seed=3, channels=7)
    m3 = graph.compile(g3, level="O1")
    assert delta(before)["hits"] == 1 and delta(before)["misses"] == KERNELS_O1 - 1
    np.testing.assert_allclose(m3.run({"x": feed()})[0], reference(feed(), w3), rtol=1e-4,
                               atol=1e-6)


def test_a_fresh_process_loads_every_kernel(cache_dir):
    graph.compile(small_model()[0], level="O1")
    child = _child(cache_dir, "print(json.dumps(graph.cache.stats()))")
    done = subprocess.run(child, capture_output=True, text=True, env=_env(cache_dir))
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout.splitlines()[-1]) == {
        "hits": KERNELS_O1, "misses": 0, "stored": 0, "rejected": 0, "failed": 0}


@pytest.mark.parametrize("change", ["shape", "target", "compiler", "l2"])
def test_what_decides_the_code_is_in_the_key(cache_dir, count_builds, monkeypatch, change):
    graph.compile(small_model()[0], level="O1")
    before = stats()
    target, g, size = "llvm", small_model()[0], (11, 9)
    if change == "shape":
        size = (12, 9)
        g = small_model(size=size)[0]
    elif change == "target":
        target = "llvm -opt-level=2"
    else:  # a change of te's sources (or its version, or LLVM's)
        fields = dict(te_cache.compiler_fields(), sources="0" * 64)
        monkeypatch.setattr(te_cache, "compiler_fields", lambda: fields)
    if change == "l2":   # another host's L2 size: schedules block loops by it
        half = cache_sizes.l2_bytes() // 2
        monkeypatch.setattr(cache_sizes, "l2_bytes", lambda: half)
    m = graph.compile(g, level="O1", target=target)
    # "shape": the gemm and softmax keep their shapes
    hits = {"shape": 2, "target": 0, "compiler": 0, "l2": 0}[change]
    assert delta(before)["hits"] == hits
    assert delta(before)["misses"] == KERNELS_O1 - hits
    np.testing.assert_allclose(m.run({"x": feed(size)})[0],
                               reference(feed(size), small_model()[1]), rtol=1e-4, atol=1e-6)


def test_the_tuning_record_applied_is_in_the_key(cache_dir, tmp_path, count_builds):
    from te.autotune import records as R
    from te.autotune.auto_space import auto_schedule as generate
    from te.autotune.space import ConfigSpace
    from te.autotune.workload import graph_key, package_version
    from graph.ops import OPS, build_compute

    x = graph.input("x", (3, 37))
    g = graph.Graph([graph.nn.softmax(x)])
    node = g.nodes[0]
    ins, outs = build_compute(OPS[node.op], [(v.dtype, v.shape) for v in node.inputs],
                              node.attr)
    space = ConfigSpace()
    generate(space, outs, ins + outs)
    assert space.size > 1
    log = str(tmp_path / "tune.jsonl")
    config = space.get(space.size - 1).to_json_dict()
    R.append_record(log, R.Record(graph_key(outs), "llvm", package_version(), config,
                                  R.MeasureResult(costs=(1e-6,))))
    data = np.random.default_rng(3).standard_normal((3, 37)).astype("float32")
    e = np.exp(data - data.max(axis=1, keepdims=True))
    want = e / e.sum(axis=1, keepdims=True)

    graph.compile(g)                                   # untuned: an entry with no record
    with te.autotune.apply_history_best(log):
        tuned = graph.compile(g)                       # another entry: the record's
        assert len(count_builds) == 2
        graph.compile(g)
        assert len(count_builds) == 2                  # ... found again under the log
    graph.compile(g)
    assert len(count_builds) == 2
    np.testing.assert_allclose(tuned.run({"x": data})[0], want, rtol=1e-5, atol=1e-7)
    keys = [json.loads(p.read_text())["key"] for p in (cache_dir / "kernels").glob("*.json")]
    assert sorted(len(k["records"]) for k in keys) == [0, 1]


# -- corrupt, partial and foreign entries -----------------------------------------------

@pytest.fixture(scope="module")
def filled(tmp_path_factory):
    """A cache directory holding small_model's O1 kernels."""
    path = tmp_path_factory.mktemp("filled") / "cache"
    old = {k: os.environ.get(k) for k in ("TE_CACHE_DIR", "TE_CACHE")}
    os.environ.update(TE_CACHE_DIR=str(path), TE_CACHE="1")
    try:
        graph.compile(small_model()[0], level="O1")
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    assert len(list((path / "kernels").glob("*.json"))) == KERNELS_O1
    return path


def _rewrite_meta(edit):
    def corrupt(so, meta):
        data = json.loads(meta.read_text())
        edit(data)
        meta.write_text(json.dumps(data))
    return corrupt


def _write(path, data: bytes):
    path.write_bytes(data)


CORRUPTIONS = {
    # a crash, a full disk or a copy cut the library short
    "truncated library": (lambda so, meta: _write(so, so.read_bytes()[:len(so.read_bytes()) // 2]),
                          r"its library has \d+ bytes, its metadata says \d+"),
    "garbage library": (lambda so, meta: _write(so, os.urandom(len(so.read_bytes()))),
                        "its library's sha256 differs from its metadata's"),
    "foreign library": (lambda so, meta: shutil.copyfile(sys.executable, so),
                        r"its library has \d+ bytes"),
    "missing library": (lambda so, meta: so.unlink(), "cannot read its library"),
    "garbage metadata": (lambda so, meta: _write(meta, b"\x00\xffnot json{"),
                         "its metadata is not JSON"),
    "truncated metadata": (lambda so, meta: _write(meta, meta.read_bytes()[:100]),
                           "its metadata is not JSON"),
    "other key": (_rewrite_meta(lambda d: d["key"].update(workload="('node', 'relu')")),
                  "its metadata's key fields differ from the ones asked for"),
    "other format": (_rewrite_meta(lambda d: d.update(format=99)),
                     "metadata format 99, expected 1"),
    "no checksum": (_rewrite_meta(lambda d: d["library"].pop("sha256")),
                    "its metadata lacks the library's size and sha256"),
}


@pytest.mark.parametrize("kind", list(CORRUPTIONS))
def test_a_corrupt_entry_is_rebuilt_never_loaded(filled, tmp_path, monkeypatch, kind):
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    monkeypatch.setenv("TE_CACHE_DIR", str(cache))
    monkeypatch.setenv("TE_CACHE", "1")
    corrupt, reason = CORRUPTIONS[kind]
    for meta in (cache / "kernels").glob("*.json"):
        corrupt(meta.with_suffix(".so"), meta)
    loaded = []
    load = runtime.load_module
    monkeypatch.setattr(runtime, "load_module", lambda *a: loaded.append(a) or load(*a))
    before = stats()
    g, w = small_model()
    with pytest.warns(te_cache.CacheWarning, match=f"is corrupt \\({reason}") as caught:
        m = graph.compile(g, level="O1")
    assert len([c for c in caught if "is corrupt" in str(c.message)]) == KERNELS_O1
    assert loaded == []                        # nothing of the corrupt entries was loaded
    assert delta(before) == {"hits": 0, "misses": KERNELS_O1, "stored": KERNELS_O1,
                             "rejected": KERNELS_O1, "failed": 0}
    np.testing.assert_allclose(m.run({"x": feed()})[0], reference(feed(), w), rtol=1e-4,
                               atol=1e-6)
    before = stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph.compile(small_model()[0], level="O1")   # the rebuilt entries are whole
    assert delta(before)["hits"] == KERNELS_O1


def test_a_consistent_but_swapped_entry_is_refused_by_its_signature(filled, tmp_path,
                                                                    monkeypatch):
    # someone swaps two entries' libraries and fixes up the checksums: the library loads,
    # but names another function than its metadata, and is not used
    cache = tmp_path / "cache"
    shutil.copytree(filled, cache)
    monkeypatch.setenv("TE_CACHE_DIR", str(cache))
    monkeypatch.setenv("TE_CACHE", "1")
    a, b = sorted((cache / "kernels").glob("*.json"))[:2]
    images = {a: a.with_suffix(".so").read_bytes(), b: b.with_suffix(".so").read_bytes()}
    for meta, other in ((a, b), (b, a)):
        meta.with_suffix(".so").write_bytes(images[other])
        data = json.loads(meta.read_text())
        data["library"].update(bytes=len(images[other]),
                               sha256=hashlib.sha256(images[other]).hexdigest())
        meta.write_text(json.dumps(data))
    before = stats()
    g, w = small_model()
    with pytest.warns(te_cache.CacheWarning, match=r"its library defines 'k\d_\w+', its "
                                                   r"metadata says 'k\d_\w+'"):
        m = graph.compile(g, level="O1")
    assert delta(before)["rejected"] == 2 and delta(before)["hits"] == KERNELS_O1 - 2
    np.testing.assert_allclose(m.run({"x": feed()})[0], reference(feed(), w), rtol=1e-4,
                               atol=1e-6)


CRASHES = {
    # the process dies while writing the library's temporary file
    "during the library": """
def crash(path, data):
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=os.path.dirname(path))
    os.write(fd, data[:len(data) // 2])
    os._exit(3)
""",
    # ... or once the library is in place, before the metadata is
    "between library and metadata": """
def crash(path, data):
    if path.endswith(".json"):
        os._exit(3)
    write(path, data)
""",
}


@pytest.mark.parametrize("when", list(CRASHES))
def test_a_crash_mid_write_leaves_no_entry_and_the_next_compile_builds_it(cache_dir, when):
    code = ("import tempfile\nwrite = te_cache._write_atomically\n" + CRASHES[when]
            + "te_cache._write_atomically = crash\n")
    done = subprocess.run(_child(cache_dir, "", before=code), capture_output=True, text=True,
                          env=_env(cache_dir))
    assert done.returncode == 3, done.stderr
    left = sorted(os.listdir(cache_dir / "kernels"))
    assert not any(n.endswith(".json") for n in left) and left   # debris, no entry
    before = stats()
    g, w = small_model()
    with warnings.catch_warnings():
        warnings.simplefilter("error")   # a partial entry is no entry: no corrupt warning
        m = graph.compile(g, level="O1")
    assert delta(before) == {"hits": 0, "misses": KERNELS_O1, "stored": KERNELS_O1,
                             "rejected": 0, "failed": 0}
    np.testing.assert_allclose(m.run({"x": feed()})[0], reference(feed(), w), rtol=1e-4,
                               atol=1e-6)
    assert graph.cache_info()["entries"] == KERNELS_O1
    graph.clear_cache()
    assert os.listdir(cache_dir / "kernels") == []   # the debris went too


def test_two_processes_compiling_one_model_at_once_both_succeed(cache_dir, tmp_path):
    start = time.time() + 3   # both wait for this moment: their compiles overlap
    body = ("np.save(sys.argv[1], m.run({'x': feed()})[0])\n"
            "print(json.dumps(graph.cache.stats()))")
    wait = f"time.sleep(max(0.0, {start} - time.time()))\n"
    procs = [subprocess.Popen(_child(cache_dir, body, before=wait) + [str(tmp_path / f"{k}.npy")],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=_env(cache_dir)) for k in range(2)]
    results = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    for out, err, code in results:
        assert code == 0, err
        counts = json.loads(out.splitlines()[-1])
        assert counts["hits"] + counts["misses"] == KERNELS_O1 and counts["failed"] == 0
    stored = sum(json.loads(out.splitlines()[-1])["stored"] for out, _, _ in results)
    assert stored == KERNELS_O1   # per kernel one writer; the other found its entry
    w = small_model()[1]
    for k in range(2):
        np.testing.assert_allclose(np.load(tmp_path / f"{k}.npy"), reference(feed(), w),
                                   rtol=1e-4, atol=1e-6)
    assert graph.cache_info()["entries"] == KERNELS_O1
    before = stats()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        graph.compile(small_model()[0], level="O1")
    assert delta(before)["hits"] == KERNELS_O1   # one valid entry per kernel


def _env(cache_dir) -> dict:
    return dict(os.environ, TE_CACHE_DIR=str(cache_dir), TE_CACHE="1",
                PYTHONPATH=os.pathsep.join([ROOT, HERE]))


def _child(cache_dir, body: str, before: str = "") -> list:
    """A python command that compiles small_model at O1 (after `before`), then runs `body`."""
    code = ("import json, os, sys, time\nimport numpy as np\nimport graph\n"
            "from te import cache as te_cache\n"
            "from test_graph_cache import small_model, feed\n" + before
            + "m = graph.compile(small_model()[0], level='O1')\n" + body + "\n")
    return [sys.executable, "-c", code]


# -- switches, unwritable directories, info and clear -----------------------------------

def test_cache_false_neither_reads_nor_writes(cache_dir, count_builds):
    graph.compile(small_model()[0], level="O1", cache=False)
    assert not cache_dir.exists()
    graph.compile(small_model()[0], level="O1")
    built = len(count_builds)
    graph.compile(small_model()[0], level="O1", cache=False)
    assert len(count_builds) == built + KERNELS_O1


def test_te_cache_0_turns_the_default_off_and_cache_true_on(cache_dir, monkeypatch):
    monkeypatch.setenv("TE_CACHE", "0")
    graph.compile(small_model()[0], level="O1")
    assert not cache_dir.exists()
    graph.compile(small_model()[0], level="O1", cache=True)
    assert graph.cache_info()["entries"] == KERNELS_O1


def test_cache_argument_is_checked():
    with pytest.raises(graph.GraphError, match=r"graph.compile: cache must be True, False or "
                                               r"None \(the default: on unless TE_CACHE=0\), "
                                               r"got 'yes'"):
        graph.compile(small_model()[0], cache="yes")


def test_an_unwritable_cache_directory_warns_once_and_compiles(tmp_path, monkeypatch):
    blocker = tmp_path / "a_file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("TE_CACHE_DIR", str(blocker / "cache"))
    monkeypatch.setenv("TE_CACHE", "1")
    before = stats()
    g, w = small_model()
    with pytest.warns(te_cache.CacheWarning, match=r"cannot write to '.*a_file/cache' \(Not a "
                                                   r"directory\); compiling without caching") \
            as caught:
        m = graph.compile(g, level="O1")
    assert len(caught) == 1
    assert delta(before)["failed"] == KERNELS_O1
    np.testing.assert_allclose(m.run({"x": feed()})[0], reference(feed(), w), rtol=1e-4,
                               atol=1e-6)


def test_info_and_clear_from_the_api_and_the_command_line(cache_dir):
    graph.compile(small_model()[0], level="O1")
    info = graph.cache_info()
    assert info["directory"] == str(cache_dir) and info["entries"] == KERNELS_O1
    assert info["bytes"] == sum(p.stat().st_size for p in (cache_dir / "kernels").iterdir())
    (cache_dir / "kernels" / "notes.txt").write_text("not ours")
    cli = [sys.executable, "-m", "graph", "cache"]
    done = subprocess.run(cli + ["info"], capture_output=True, text=True, env=_env(cache_dir))
    assert done.stdout == (f"compile cache {cache_dir}: {KERNELS_O1} entries, "
                           f"{info['bytes'] + 8} bytes\n")
    done = subprocess.run(cli + ["clear"], capture_output=True, text=True, env=_env(cache_dir))
    assert done.stdout.startswith(f"removed {KERNELS_O1} entries (")
    assert os.listdir(cache_dir / "kernels") == ["notes.txt"]   # only the cache's files go
    assert graph.cache_info()["entries"] == 0
    assert graph.clear_cache() == 0


def test_default_directory(monkeypatch, tmp_path):
    monkeypatch.delenv("TE_CACHE_DIR")
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert te_cache.cache_dir() == str(tmp_path / ".cache" / "te")
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert te_cache.cache_dir() == str(tmp_path / "xdg" / "te")
    monkeypatch.setenv("TE_CACHE_DIR", "~/elsewhere")
    assert te_cache.cache_dir() == str(tmp_path / "elsewhere")


def test_code_this_host_must_not_run_is_not_cached(cache_dir):
    # the module te.build makes refuses calls; a library loaded from the cache would not
    import llvmlite.binding as llvm
    host = llvm.get_host_cpu_features()
    missing = [f for f in ("sse4a", "xop", "fma4", "tbm", "avx512fp16", "amx-fp16")
               if f in host and not host[f]]
    assert missing, "this host has every feature the test could turn on"
    x = graph.input("x", (3, 5))
    m = graph.compile(graph.Graph([graph.relu(x)]), target=f"llvm -mattr=+{missing[0]}")
    assert graph.cache_info()["entries"] == 0
    with pytest.raises(RuntimeError, match="built for CPU features this host lacks"):
        m.run({"x": np.ones((3, 5), "float32")})
