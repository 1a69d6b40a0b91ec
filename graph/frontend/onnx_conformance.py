"""The ONNX conformance suite on the graph layer's backend (graph.frontend.onnx_backend).

    python -m graph.frontend.onnx_conformance [--level O0] [--kind node ...] [--filter RE]

runs onnx's node cases (onnx.backend.test.case.node.collect_testcases()) and the
pytorch-converted / pytorch-operator model cases of onnx/backend/test/data, and prints the
pass / refused / failed counts overall and per op, the failures with their messages, the
whole run's time and the slowest cases. A case passes when every data set matches its
expected outputs under onnx's own check (Runner.assert_similar_outputs: same shape and
dtype, allclose with the case's rtol/atol, 1e-3 / 1e-7 by default); it is refused when
import raises graph.UnsupportedError; anything else fails: a wrong answer (the check's
AssertionError) or another exception. Exit status 1 when a case fails.
Imports numpy, onnx, graph.errors and graph.frontend.onnx_backend.
"""
from __future__ import annotations

import argparse
import glob
import os
import re
import sys
import time
import warnings
from dataclasses import dataclass

import numpy as np

KINDS = ("node", "pytorch-converted", "pytorch-operator")
# The ops issue #16 lists: every case of these must pass or be refused, never fail.
ISSUE_OPS = frozenset("""Abs Add And ArgMax AveragePool BatchNormalization Cast Ceil Clip
Concat Constant ConstantOfShape Conv ConvTranspose Div Dropout Elu Equal Erf Exp Expand
Flatten Floor Gather Gelu Gemm GlobalAveragePool GlobalMaxPool Greater HardSigmoid HardSwish
Identity InstanceNormalization LayerNormalization LeakyRelu Less Log LogSoftmax LRN MatMul
Max MaxPool Mean Min Mul Neg Not Or Pad Pow PRelu Reciprocal ReduceL2 ReduceMax ReduceMean
ReduceMin ReduceProd ReduceSum ReduceSumSquare Relu Reshape Resize Selu Shape Sigmoid Sign
Slice Softmax Softplus Softsign Split Sqrt Squeeze Sub Sum Tanh Tile Transpose Unsqueeze
Where""".split())


# Ops imported as ONNX's function bodies (graph.frontend.onnx_function) whose cases CI runs;
# Attention's 236 cases take CI's time for one mechanism, which tests/graph/
# test_onnx_functions.py checks on its own cases
FUNCTION_CI_OPS = frozenset("""NegativeLogLikelihoodLoss SoftmaxCrossEntropyLoss
CenterCropPad SwiGLU HannWindow HammingWindow BlackmanWindow DynamicQuantizeLinear""".split())


def ci_ops() -> frozenset:
    """The ops of the CI subset: the listed ones, those of graph.frontend.onnx_math,
    onnx_composite, onnx_index, onnx_einsum, onnx_sample, onnx_quant and onnx_rnn (added
    for this suite), and FUNCTION_CI_OPS."""
    from .onnx_composite import COMPOSITE_CONVERTERS
    from .onnx_einsum import EINSUM_CONVERTERS
    from .onnx_index import INDEX_CONVERTERS
    from .onnx_math import MATH_CONVERTERS
    from .onnx_quant import QUANT_CONVERTERS
    from .onnx_rnn import RNN_CONVERTERS
    from .onnx_sample import SAMPLE_CONVERTERS
    return (ISSUE_OPS | frozenset(MATH_CONVERTERS) | frozenset(COMPOSITE_CONVERTERS)
            | frozenset(INDEX_CONVERTERS) | frozenset(EINSUM_CONVERTERS)
            | frozenset(SAMPLE_CONVERTERS) | frozenset(QUANT_CONVERTERS)
            | frozenset(RNN_CONVERTERS)
            | frozenset(("ConvInteger", "QLinearConv")) | FUNCTION_CI_OPS)


@dataclass
class Case:
    name: str
    kind: str
    op: str            # the ONNX op the case tests (see case_op)
    model: object      # onnx.ModelProto
    data_sets: list    # [(inputs, expected outputs)] as numpy arrays (or lists: sequences)
    rtol: float
    atol: float


@dataclass
class Result:
    case: Case
    status: str        # "pass" | "refused" | "wrong" | "error"
    detail: str
    seconds: float
    bound: bool = False  # passed with inputs bound to their values (see onnx_backend)


def collect(kinds=KINDS, pattern: str | None = None) -> list:
    """The cases of `kinds` whose name matches the regular expression `pattern`."""
    import onnx
    from onnx.backend.test import loader
    from onnx.backend.test.case import node as node_cases

    want = re.compile(pattern) if pattern else None
    schemas = _schema_names(onnx)
    cases = []
    if "node" in kinds:
        with warnings.catch_warnings():  # the case generators overflow casts on purpose
            warnings.simplefilter("ignore")
            found = node_cases.collect_testcases()
        for c in found:
            if want and not want.search(c.name):
                continue
            data = [([_array(onnx, a) for a in ins], [_array(onnx, a) for a in outs])
                    for ins, outs in c.data_sets]
            cases.append(Case(c.name, "node", case_op(c.name, c.model, schemas), c.model,
                              data, c.rtol, c.atol))
    for kind in kinds:
        if kind == "node":
            continue
        for c in loader.load_model_tests(kind=kind):
            if want and not want.search(c.name):
                continue
            model = onnx.load(os.path.join(c.model_dir, "model.onnx"))
            cases.append(Case(c.name, kind, case_op(c.name, model, schemas), model,
                              _model_data(onnx, c.model_dir), c.rtol, c.atol))
    return cases


def case_op(name: str, model, schemas: list) -> str:
    """The op a case tests: a one-node model's op; else (an expanded function, a model)
    the longest ONNX op name that starts the case name, underscores and case ignored."""
    ops = {n.op_type for n in model.graph.node}
    if len(model.graph.node) == 1:
        return model.graph.node[0].op_type
    key = name.removeprefix("test_").replace("_", "").lower()
    for op in schemas:  # longest first
        if key.startswith(op.lower()):
            return op
    return "+".join(sorted(ops)) if len(ops) <= 2 else "(model)"


def run_case(case: Case, level: str) -> Result:
    from onnx.backend.test.runner import Runner

    from ..errors import UnsupportedError
    from .onnx_backend import GraphBackend

    start = time.perf_counter()
    try:
        rep = GraphBackend.prepare(case.model, level=level)
        for inputs, expected in case.data_sets:
            outs = rep.run(inputs)
            Runner.assert_similar_outputs(expected, outs, case.rtol, case.atol)
    except UnsupportedError as e:
        return Result(case, "refused", _first_line(e), time.perf_counter() - start)
    except AssertionError as e:
        return Result(case, "wrong", _first_line(e, 6), time.perf_counter() - start)
    except Exception as e:  # noqa: BLE001 - every other exception is a failure to report
        return Result(case, "error", f"{type(e).__name__}: {_first_line(e, 3)}",
                      time.perf_counter() - start)
    return Result(case, "pass", "", time.perf_counter() - start, bool(rep.bound))


def run_all(cases: list, level: str, progress=None) -> list:
    results = []
    for k, case in enumerate(cases):
        results.append(run_case(case, level))
        if progress:
            progress(k + 1, len(cases), results[-1])
    return results


def counts(results: list) -> dict:
    """{op: {"pass", "refused", "failed", "bound"}} with an "(all)" row."""
    table: dict = {}
    for r in results:
        for key in (r.case.op, "(all)"):
            row = table.setdefault(key, dict.fromkeys(("pass", "refused", "failed",
                                                       "bound"), 0))
            row["pass" if r.status == "pass" else r.status if r.status == "refused"
                else "failed"] += 1
            row["bound"] += r.bound
    return table


def report(results: list, seconds: float, level: str, out=sys.stdout) -> None:
    table = counts(results)
    if not results:  # a filter that matches nothing: say so rather than print empty rows
        print(f"level {level}: no case matches", file=out)
        return
    by_kind: dict = {}
    for r in results:
        by_kind.setdefault(r.case.kind, []).append(r)
    p = lambda *a: print(*a, file=out)  # noqa: E731
    p(f"level {level}: {len(results)} cases in {seconds:.0f} s")
    p(f"{'kind':<20} {'cases':>6} {'pass':>6} {'refused':>8} {'failed':>7} {'(bound)':>8}")
    for kind, rs in list(by_kind.items()) + [("all", results)]:
        c = counts(rs)["(all)"]
        p(f"{kind:<20} {len(rs):>6} {c['pass']:>6} {c['refused']:>8} {c['failed']:>7} "
          f"{c['bound']:>8}")
    p("")
    p(f"{'op':<28} {'pass':>5} {'refused':>8} {'failed':>7}  listed")
    for op in sorted(k for k in table if k != "(all)"):
        c = table[op]
        p(f"{op:<28} {c['pass']:>5} {c['refused']:>8} {c['failed']:>7}  "
          f"{'yes' if op in ISSUE_OPS else ''}")
    failed = [r for r in results if r.status in ("wrong", "error")]
    if failed:
        p(f"\n{len(failed)} failed:")
        for r in failed:
            p(f"  {r.case.name} [{r.case.op}] {r.status}: {r.detail}")
    p("\nslowest cases:")
    for r in sorted(results, key=lambda r: -r.seconds)[:10]:
        p(f"  {r.seconds:7.2f} s  {r.case.name} ({r.status})")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m graph.frontend.onnx_conformance",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--level", default="O0", help="graph.compile level (default O0)")
    ap.add_argument("--kind", nargs="+", choices=KINDS, default=list(KINDS),
                    help="which cases to run (default: all three kinds)")
    ap.add_argument("--filter", help="only the cases whose name matches this regex")
    ap.add_argument("--listed", action="store_true",
                    help="only the cases of the ops issue #16 lists")
    ap.add_argument("--ci", action="store_true", help="only the CI subset's cases (the "
                    "listed ops and those of graph.frontend.onnx_math and onnx_composite)")
    ap.add_argument("--refusals", action="store_true", help="also list every refusal")
    ap.add_argument("-v", "--verbose", action="store_true", help="print each case's result")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    cases = collect(args.kind, args.filter)
    if args.listed or args.ci:
        keep = ISSUE_OPS if args.listed else ci_ops()
        cases = [c for c in cases if c.op in keep]

    def progress(k, n, r):
        if args.verbose:
            print(f"[{k}/{n}] {r.case.name}: {r.status} {r.detail}", flush=True)

    with np.errstate(all="ignore"):
        results = run_all(cases, args.level, progress)
    report(results, time.perf_counter() - start, args.level)
    if args.refusals:
        print("\nrefused:")
        for r in results:
            if r.status == "refused":
                print(f"  {r.case.name} [{r.case.op}]: {r.detail}")
    return 1 if any(r.status in ("wrong", "error") for r in results) else 0


def _first_line(e: Exception, lines: int = 1) -> str:
    text = [t.strip() for t in str(e).strip().splitlines() if t.strip()]
    if len(text) > 1 and text[0].endswith(":"):  # "the model uses N unsupported ...:" + items
        text = text[1:]
    return " | ".join(text[:lines])


def _array(onnx, a):
    if isinstance(a, onnx.TensorProto):
        return onnx.numpy_helper.to_array(a)
    return a


def _model_data(onnx, model_dir: str) -> list:
    data = []
    for d in sorted(glob.glob(os.path.join(model_dir, "test_data_set*"))):
        sets = []
        for prefix in ("input", "output"):
            files = sorted(glob.glob(os.path.join(d, f"{prefix}_*.pb")),
                           key=lambda f: int(re.findall(r"_(\d+)\.pb$", f)[0]))
            sets.append([onnx.numpy_helper.to_array(onnx.load_tensor(f)) for f in files])
        data.append(tuple(sets))
    return data


def _schema_names(onnx) -> list:
    names = {s.name for s in onnx.defs.get_all_schemas() if s.domain in ("", "ai.onnx")}
    return sorted(names, key=len, reverse=True)


if __name__ == "__main__":
    sys.exit(main())
