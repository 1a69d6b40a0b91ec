"""Robustness of built modules: fork()ed children, aliasing and read-only outputs, int32 index
limits, failed heap allocations, unsupported targets and names, export/reload and timing
parameters. Crash-prone cases run in a subprocess that must exit 0 within a timeout.

Imports te, runtime, llvmlite (the host's CPU features), numpy and pytest.
"""
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import llvmlite.binding as llvm
import numpy as np
import pytest

import runtime
import te
from te.errors import BuildError

REPO_ROOT = Path(__file__).resolve().parents[1]


def run_script(source: str, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run `source` in a fresh interpreter; a hang or a crash fails the calling test."""
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT), OMP_WAIT_POLICY="passive")
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(source)], env=env,
                            capture_output=True, text=True, timeout=timeout)
    assert result.returncode == 0, f"rc={result.returncode}\n{result.stdout}\n{result.stderr}"
    return result


def add_module(n=8, name="main"):
    A = te.placeholder((n,), name="A")
    B = te.placeholder((n,), name="B")
    C = te.compute((n,), lambda i: A[i] + B[i], name="C")
    return te.build(te.create_schedule(C.op), [A, B, C], name=name)


def test_parallel_kernel_runs_in_forked_children():
    result = run_script("""
        import multiprocessing as mp
        import numpy as np
        import te
        n = 1 << 16
        A = te.placeholder((n,), name="A")
        B = te.compute((n,), lambda i: A[i] * 2.0, name="B")
        s = te.create_schedule(B.op)
        s[B].parallel(B.op.axis[0])
        m = te.build(s, [A, B])
        a = np.ones(n, np.float32)
        m(a, np.zeros(n, np.float32))  # the parent's pool has run

        def child(_):
            out = np.zeros(n, np.float32)
            m(a, out)
            return float(out.sum())

        if __name__ == "__main__":
            with mp.get_context("fork").Pool(2) as pool:
                print(pool.map(child, range(4)))
    """, timeout=60)
    assert result.stdout.strip() == "[131072.0, 131072.0, 131072.0, 131072.0]"


def test_signature_marks_computed_arguments_as_outputs():
    m = add_module()
    assert [arg.output for arg in m.signature.args] == [False, False, True]
    again = runtime.KernelSignature.from_json(m.signature.to_json())
    assert again == m.signature


def test_old_signature_json_without_output_field_loads():
    text = ('{"args": [{"dtype": "float32", "name": "A", "shape": [8]}], "name": "k", '
            '"scalars": [], "version": 1}')
    sig = runtime.KernelSignature.from_json(text)
    assert sig.args[0].output is False and sig.heap_buffers == ()


def test_read_only_output_is_rejected():
    m = add_module()
    a = np.ones(8, np.float32)
    read_only = np.frombuffer(bytes(32), dtype=np.float32)
    with pytest.raises(runtime.ArgumentError, match=r"^argument 'C': expected a writeable array "
                       r"\(it is an output\), got a read-only array$"):
        m(a, a, read_only)
    m(read_only, read_only, np.zeros(8, np.float32))  # read-only inputs are fine


def test_output_aliasing_an_input_is_rejected():
    m = add_module(16)
    x = np.ones(16, np.float32)
    b = np.ones(16, np.float32)
    message = (r"^argument 'C' overlaps argument 'A' in memory; outputs must not alias inputs "
               r"\(kernel parameters are noalias\)$")
    with pytest.raises(runtime.ArgumentError, match=message):
        m(x, b, x)
    big = np.zeros(32, np.float32)
    with pytest.raises(runtime.ArgumentError, match=r"argument 'C' overlaps argument 'B'"):
        m(x, big[8:24], big[:16])  # partial overlap
    m(x, big[16:], big[:16])  # adjacent, not overlapping
    m(x, x, b)  # two inputs may share memory


def test_symbolic_argument_beyond_int32_index_range_is_rejected():
    n = te.var("n")
    A = te.placeholder((n,), name="A", dtype="int8")
    B = te.compute((n,), lambda i: A[i] + te.const(1, "int8"), name="B")
    m = te.build(te.create_schedule(B.op), [A, B])
    # A contiguous-looking view over 1 byte: rejected before any memory is touched.
    huge = np.lib.stride_tricks.as_strided(np.zeros(1, np.int8), (2**31 - 1,), (1,),
                                           writeable=False)
    with pytest.raises(runtime.ArgumentError, match=r"^argument 'A': 2147483647 elements "
                       r"exceed the int32 index range of this kernel$"):
        m(huge, huge)


def test_static_argument_beyond_int32_index_range_is_a_build_error():
    A = te.placeholder((2**16 + 8, 2**15 + 8), name="A", dtype="int8")
    B = te.compute((2**15 + 8, 2**16 + 8), lambda j, i: A[i, j], name="B")
    with pytest.raises(BuildError, match=r"^te.build: argument 'A' has 2148270144 elements, "
                       r"beyond the int32 index range; int64 indexing is not supported yet$"):
        te.build(te.create_schedule(B.op), [A, B])


def test_symbolic_intermediate_beyond_int32_index_range_raises_memory_error():
    result = run_script("""
        import numpy as np
        import te
        n = te.var("n")
        A = te.placeholder((n,), name="A")
        B = te.placeholder((n,), name="B")
        T = te.compute((n, n), lambda i, j: A[i] * B[j], name="T")
        k = te.reduce_axis((0, n), name="k")
        C = te.compute((n,), lambda i: te.sum(T[i, k], axis=k), name="C")
        s = te.create_schedule(C.op)
        s[T].parallel(T.op.axis[0])
        mod = te.build(s, [A, B, C])
        a = np.ones(131072, np.float32)  # T: 2^34 floats
        try:
            mod(a, a, np.zeros(131072, np.float32))
        except MemoryError as error:
            print(error)
    """)
    assert result.stdout.strip() == ("kernel 'main': buffer 'T' needs more elements than the "
                                     "int32 index range of this kernel")


def test_failed_heap_allocation_raises_memory_error():
    # Under an address-space limit aligned_alloc returns NULL: in the entry function, in a
    # serial loop and in a parallel body. Each module still works afterwards.
    result = run_script("""
        import resource, sys
        import numpy as np
        import te

        def build(where):
            n, m = te.var("n"), te.var("m")
            A = te.placeholder((n,), name="A")
            B = te.placeholder((m,), name="B")
            T = te.compute((n, m, m), lambda i, j, k: A[i] * B[j] * B[k], name="T")
            j = te.reduce_axis((0, m), name="j")
            k = te.reduce_axis((0, m), name="k")
            C = te.compute((n,), lambda i: te.sum(T[i, j, k], axis=[j, k]), name="C")
            s = te.create_schedule(C.op)
            if where != "root":
                s[T].compute_at(s[C], C.op.axis[0])
            if where == "parallel":
                s[C].parallel(C.op.axis[0])
            return te.build(s, [A, B, C])

        mods = {w: build(w) for w in ("root", "serial", "parallel")}
        a = np.ones(4, np.float32)
        small = np.ones(8, np.float32)
        c = np.zeros(4, np.float32)
        for mod in mods.values():
            mod(a, small, c)
            assert c[0] == 64, c
        with open("/proc/self/status") as f:
            vm = next(int(line.split()[1]) for line in f if line.startswith("VmSize")) * 1024
        resource.setrlimit(resource.RLIMIT_AS, (vm + (1 << 30), resource.RLIM_INFINITY))
        b = np.ones(30000, np.float32)  # T: 9e8 floats per row (3.6 GB) > the 1 GiB left
        for where, mod in mods.items():
            rows = 1 if where == "root" else 4  # root: T is rows * 9e8 floats, within int32 range
            try:
                mod(a[:rows], b, c[:rows])
            except MemoryError as error:
                print(where, error)
            else:
                sys.exit(f"{where}: no MemoryError")
            mod(a, small, c)  # still usable; nothing leaked into a broken state
            assert c[0] == 64, c
    """)
    assert result.stdout.splitlines() == [
        f"{where} kernel 'main': could not allocate memory for buffer 'T'"
        for where in ("root", "serial", "parallel")
    ]


def small_schedule():
    A = te.placeholder((8,), name="A")
    B = te.compute((8,), lambda i: A[i] + 1.0, name="B")
    return te.create_schedule(B.op), [A, B]


@pytest.mark.parametrize("target, message", [
    ("llvm -mcpu=notacpu", "te.build: unknown -mcpu 'notacpu'"),
    ("llvm -opt-level=x", "te.build: target option -opt-level: expected 0, 1, 2 or 3, got 'x'"),
    ("llvm -num-cores=0", "te.build: target option -num-cores: expected an integer >= 1, "
                          "got '0'"),
    ('llvm -mcpu="skylake', "te.build: target 'llvm -mcpu=\"skylake' cannot be split into "
                            "words: No closing quotation"),
    ("llvm -mattr=+notafeature", "te.build: unknown -mattr feature '+notafeature' (expected "
                                 "+name or -name of a feature LLVM knows, such as +avx2)"),

    # LLVM aborts the process on these (a fatal error), so they never reach it
    ("llvm -mattr=-64bit", "te.build: -mattr cannot turn off '64bit': the x86-64 calling "
                           "convention the generated functions use needs it"),
    ("llvm -mattr=+avx2,-sse", "te.build: -mattr cannot turn off 'sse': the x86-64 calling "
                               "convention the generated functions use needs it"),
])
def test_bad_target_options_are_build_errors(target, message):
    sch, args = small_schedule()
    with pytest.raises(BuildError) as info:
        te.build(sch, args, target=target)
    assert str(info.value) == message


# Extensions no CPU has all of: AMD's (XOP, FMA4, SSE4a) and Intel's newest (AVX-512 FP16
# on a server core, SHA-512); each test host lacks at least one.
RARE_FEATURES = ("xop", "fma4", "sse4a", "avx512fp16", "sha512")


def test_features_the_host_lacks_build_but_refuse_to_run(tmp_path):
    host = llvm.get_host_cpu_features()
    lacking = next(name for name in RARE_FEATURES if not host.get(name, True))
    sch, args = small_schedule()
    m = te.build(sch, args, target=f"llvm -mattr=+{lacking}")
    a = np.ones(8, np.float32)
    message = (rf"^kernel 'main': module was built for CPU features this host lacks "
               rf"\(\+{lacking}\); export it or rebuild with target='llvm'$")
    with pytest.raises(RuntimeError, match=message):
        m(a, np.zeros(8, np.float32))
    with pytest.raises(RuntimeError, match=message):
        m.time_evaluator(number=1, repeat=1)(a, np.zeros(8, np.float32))
    m.export_library(tmp_path / "k.so")  # for another machine: legitimate


@pytest.mark.parametrize("name, message", [
    ("free", "te.build: name 'free' clashes with a runtime function; choose another"),
    ("GOMP_parallel", "te.build: name 'GOMP_parallel' clashes with a runtime function; "
                      "choose another"),
    ("tanhf", "te.build: name 'tanhf' clashes with a runtime function; choose another"),
    ("__te_signature", "te.build: name '__te_signature' clashes with a runtime function; "
                       "choose another"),
    ("caf\u00e9", "te.build: name must be an ASCII identifier, got 'caf\u00e9'"),
])
def test_kernel_names_must_not_clash_with_runtime_symbols(name, message):
    sch, args = small_schedule()
    with pytest.raises(BuildError) as info:
        te.build(sch, args, name=name)
    assert str(info.value) == message


def test_prim_func_name_is_checked_too():
    sch, args = small_schedule()
    func = te.lower(sch, args, name="malloc")
    with pytest.raises(BuildError, match=r"^te.build: name 'malloc' clashes"):
        te.build(func)
