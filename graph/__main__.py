"""Command line: `python -m graph show model.onnx` prints the imported graph, the fused
groups that level O1 compiles (one line each: the ops, the output value) and the memory plan
of O2 (graph.plan_memory: per tensor its size, lifetime and offset; the totals);
`python -m graph run model.onnx --level O0` compiles it, runs it on seeded random inputs,
prints each output's shape and range, the compile and run times (at O2 also the one native
call's), the per-step profile, and the largest difference from onnxruntime when
onnxruntime is installed;
`python -m graph tune model.onnx --trials N --log x.jsonl` tunes its kernels (graph.autotune,
resuming from the log) and `run ... --tuning-log x.jsonl` builds them with the best records;
`python -m graph export model.onnx -o model.so` compiles it at O2 (`--tuning-log x.jsonl`
for the tuned kernels) and writes export_library's model.so and model.so.weights, which
graph.load_module runs in a process without the compiler;
`python -m graph cache info` and `python -m graph cache clear` show and empty the compile
cache (graph/cache.py; TE_CACHE_DIR, default ~/.cache/te).
Imports graph, numpy and (lazily, for the comparison) onnxruntime.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

import graph
from graph.fuse import fuse
from graph.passes import optimize


EXAMPLES = """examples:
  python -m graph show model.onnx
  python -m graph run model.onnx --level O2 --shape input=1,3,224,224
  python -m graph tune model.onnx --trials 200 --log model.jsonl
  python -m graph export model.onnx -o model.so [--tuning-log model.jsonl]
      writes model.so and model.so.weights; in any process, without the compiler:
      graph.load_module("model.so").run({"input": array})
"""


def _shape_arg(text: str) -> tuple:
    """'name=1,3,224,224' -> ('name', (1, 3, 224, 224))."""
    name, sep, dims = text.rpartition("=")
    try:
        shape = tuple(int(d) for d in dims.split(","))
    except ValueError:
        shape = ()
    if not sep or not name or not shape:
        raise argparse.ArgumentTypeError(f"--shape must look like name=1,3,224,224, got "
                                         f"{text!r}")
    return name, shape


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive int, got {text!r}")
    return value


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m graph", epilog=EXAMPLES,
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                description="Import an ONNX model, then show, run, tune or "
                                            "export it (COMMAND -h: its options).")
    sub = p.add_subparsers(dest="command", required=True)
    for name, what in (("show", "print the imported graph, its fused groups and memory plan"),
                       ("run", "compile, run on random inputs, compare with onnxruntime"),
                       ("tune", "tune the model's kernels for its run time (graph.autotune)"),
                       ("export", "compile at O2, write a library + weights for "
                                  "graph.load_module")):
        c = sub.add_parser(name, help=what)
        c.add_argument("model", help="path to an .onnx file")
        c.add_argument("--shape", action="append", type=_shape_arg, default=[],
                       help="fix an input's shape: name=1,3,224,224 (repeatable)")
        if name in ("run", "tune", "export"):
            default = "O0" if name == "run" else "O2"
            c.add_argument("--level", default=default, help=f"compile level (default "
                                                            f"{default})")
            if name != "export":
                c.add_argument("--seed", type=int, default=0, help="seed of the random "
                               "inputs" if name == "run" else "seed of the tuner")
        if name in ("run", "export"):
            c.add_argument("--tuning-log", default=None,
                           help="build each kernel with its best record in this log")
        if name == "export":
            c.add_argument("-o", "--output", required=True,
                           help="the library to write (its weights go to OUTPUT.weights)")
        if name == "tune":
            c.add_argument("--trials", type=_positive_int, required=True,
                           help="trials in all, those in --log included")
            c.add_argument("--log", required=True,
                           help="JSON-lines log to append to and resume from")
            c.add_argument("--tuner", default="xgb",
                           help="xgb (default), optuna, ga, random or grid")
            c.add_argument("--timeout", type=float, default=None,
                           help="stop after this many seconds")
            c.add_argument("--batch-size", type=_positive_int, default=16,
                           help="trials per round of the task scheduler (default 16)")
    c = sub.add_parser("cache", help="the compile cache: info (entries, bytes) or clear")
    c.add_argument("action", choices=("info", "clear"))
    return p


def _cache(action: str) -> int:
    info = graph.cache_info()
    if action == "clear":
        removed = graph.clear_cache()
        print(f"removed {info['entries']} entries ({removed} files, {info['bytes']} bytes) "
              f"from {info['directory']}")
    else:
        print(f"compile cache {info['directory']}: {info['entries']} entries, "
              f"{info['bytes']} bytes")
    return 0


def _fused_groups(g) -> str:
    """The O1 groups of g (after graph.passes.optimize), as `print(module)` lists them."""
    groups = fuse(optimize(g))
    lines = [f"fused groups at O1 ({len(groups)}, {sum(not gr.is_view for gr in groups)} "
             f"kernels) {{"]
    for gr in groups:
        outs = ", ".join(f"%{v.name}: {v.type_str}" for v in gr.outputs)
        lines.append(f"  {'view' if gr.is_view else 'kernel'}: {', '.join(gr.ops)} -> {outs}")
    return "\n".join(lines + ["}"])


def _random_feeds(g, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    feeds = {}
    for v in g.inputs:
        if v.dtype.startswith("float"):
            feeds[v.name] = rng.standard_normal(v.shape).astype(v.dtype)
        elif v.dtype == "bool":
            feeds[v.name] = rng.random(v.shape) < 0.5
        else:
            feeds[v.name] = rng.integers(0, 4, v.shape).astype(v.dtype)
    return feeds


def _median_run(m, feeds: dict, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        m.run(feeds)
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def _compare(path: str, feeds: dict, outs: list) -> str:
    try:
        import onnxruntime
    except ImportError:
        return "onnxruntime is not installed: no comparison (pip install '.[onnx]')"
    sess = onnxruntime.InferenceSession(path, providers=["CPUExecutionProvider"])
    refs = sess.run(None, feeds)
    diffs = [float(np.abs(o.astype(np.float64) - r).max()) if o.size else 0.0
             for o, r in zip(outs, refs)]
    return "max |ours - onnxruntime| per output: " + ", ".join(f"{d:.3g}" for d in diffs)


def _tune(g, args) -> int:
    result = graph.autotune(g, trials=args.trials, log=args.log, level=args.level,
                            tuner=args.tuner, seed=args.seed, timeout=args.timeout,
                            batch_size=args.batch_size)
    print(result)
    print(f"records in '{args.log}': python -m graph run {args.model} --level {args.level} "
          f"--tuning-log {args.log}")
    return 0


def _export(g, args) -> int:
    """Compile g at args.level (O2: the only level that exports) and export it to
    args.output."""
    if args.level != "O2":
        raise graph.GraphError(f"--level: only O2 can be exported (its one native entry "
                               f"point; O0 and O1 dispatch kernels from Python), got "
                               f"{args.level!r}")
    path = os.path.abspath(args.output)
    directory = os.path.dirname(path)
    # checked before compiling, which may take minutes; export_library checks again
    if os.path.isdir(path):
        raise graph.GraphError(f"-o/--output: '{path}' is a directory; give the path of the "
                               f"library to write")
    if not os.path.isdir(directory) or not os.access(directory, os.W_OK):
        raise graph.GraphError(f"-o/--output: cannot write '{path}': '{directory}' is not a "
                               f"writable directory")
    start = time.perf_counter()
    m = graph.compile(g, level="O2", tuning_log=args.tuning_log)
    compiled = time.perf_counter() - start
    start = time.perf_counter()
    try:
        m.export_library(path)
    except OSError as error:   # export_library's message names the file and the reason
        raise graph.GraphError(f"-o/--output: {error.strerror}") from None
    exported = time.perf_counter() - start
    print(f"compiled at O2 in {compiled:.2f} s ({len(m.calls)} calls), exported in "
          f"{exported:.2f} s: '{path}' ({os.path.getsize(path)} bytes) and its weights "
          f"'{path}.weights' ({os.path.getsize(path + '.weights')} bytes)")
    print(f"run it with graph.load_module({path!r}).run(feeds); inputs: "
          f"{', '.join(f'{v.name}: {v.type_str}' for v in g.inputs)}")
    return 0


def main(argv=None) -> int:
    args = _parser().parse_args(argv)
    if args.command == "cache":
        return _cache(args.action)
    try:
        if not os.path.isfile(args.model):
            raise graph.GraphError(f"model: '{args.model}' is not a file (give the path of "
                                   f"an .onnx model)")
        g = graph.from_onnx(args.model, shapes=dict(args.shape))
        if args.command == "export":
            return _export(g, args)
        if args.command == "show":
            print(g)
            print(_fused_groups(g))
            print(graph.plan_memory(g))
            return 0
        if args.command == "tune":
            return _tune(g, args)
        start = time.perf_counter()
        m = graph.compile(g, level=args.level, tuning_log=args.tuning_log)
        compiled = time.perf_counter() - start
        feeds = _random_feeds(g, args.seed)
        outs = m.run(feeds)
        prof = m.profile(feeds, repeat=3)
    except graph.GraphError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    print(f"compiled at {args.level} in {compiled:.2f} s: {len(m.steps)} steps, "
          f"{m.num_kernels} kernels")
    for v, o in zip(g.outputs, outs):
        print(f"output {v.name}: {o.dtype}{list(o.shape)} min {o.min():.4g} max {o.max():.4g}")
    print(f"run: {prof.total * 1e3:.2f} ms (median per step, summed)")
    if args.level == "O2":  # the profile ran the steps from Python; O2 runs them in one call
        print(f"O2 run: {_median_run(m, feeds) * 1e3:.2f} ms (one native call, median of 5)")
    print(prof)
    print(_compare(args.model, feeds, outs))
    return 0


if __name__ == "__main__":
    sys.exit(main())
