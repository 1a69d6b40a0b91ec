"""compile_llvm: correctness against numpy, libm calls, unresolved symbols, source texts, and
what happens when LLVM's optimizer leaves a module invalid."""

import numpy as np
import pytest
from rt_kernels import ADD_LL, ADD_SIGNATURE, EXP_LL, EXP_SIGNATURE, SELECT_LL, SELECT_SIGNATURE

import runtime
from runtime import RuntimeBuildError

UNRESOLVED_LL = """
declare float @no_such_function_xyz(float)

define i32 @broken(ptr %X) {
entry:
  %x = load float, ptr %X
  %y = call float @no_such_function_xyz(float %x)
  store float %y, ptr %X
  ret i32 0
}
"""


@pytest.mark.parametrize("n", [1, 7, 1001])
def test_add_matches_numpy(add_module, n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((2, n), dtype=np.float32)
    c = np.full(n, np.nan, dtype=np.float32)
    add_module(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_add_accepts_ndarrays(add_module):
    a = runtime.array(np.arange(19, dtype="float32"))
    b = runtime.array(np.ones(19, dtype="float32"))
    c = runtime.empty((19,), "float32")
    add_module(a, b, c)
    np.testing.assert_array_equal(c.numpy(), np.arange(19) + 1)


def test_zero_size_arrays_run(add_module):
    """n = 0 binds, runs no iteration, and returns normally (no native access at all)."""
    empty = np.zeros(0, np.float32)
    out = empty.copy()
    assert add_module(empty, empty, out) is None
    assert out.shape == (0,)


@pytest.mark.parametrize("opt_level", [0, 3])
def test_expf_from_libm(opt_level):
    module = runtime.Module(runtime.compile_llvm(EXP_LL, opt_level=opt_level), EXP_SIGNATURE)
    x = np.random.default_rng(0).uniform(-5, 5, 333).astype(np.float32)
    y = np.empty_like(x)
    module(x, y)
    np.testing.assert_allclose(y, np.exp(x), rtol=1e-6)


def test_bool_mask_and_int32_data():
    module = runtime.Module(runtime.compile_llvm(SELECT_LL), SELECT_SIGNATURE)
    rng = np.random.default_rng(1)
    mask = rng.random(37) < 0.5
    x = rng.integers(-100, 100, 37, dtype=np.int32)
    y = np.zeros(37, np.int32)
    module(mask, x, y)
    np.testing.assert_array_equal(y, np.where(mask, x, -1))


def test_scale2d_static_and_symbolic_dims(scale2d_module):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((5, 17))
    w = rng.standard_normal(17)
    y = np.zeros_like(x)
    scale2d_module(x, w, y)
    np.testing.assert_allclose(y, 2 * x + w)


def test_unresolved_symbol_raises_instead_of_crashing():
    with pytest.raises(RuntimeBuildError, match="unresolved external symbol.*no_such_function_xyz"):
        runtime.compile_llvm(UNRESOLVED_LL)


def test_invalid_ir_raises_build_error():
    with pytest.raises(RuntimeBuildError, match="invalid LLVM IR"):
        runtime.compile_llvm("define i32 @f( {")


def test_bad_opt_level():
    with pytest.raises(ValueError, match=r"opt_level: expected 0, 1, 2 or 3, got 5"):
        runtime.compile_llvm(ADD_LL, opt_level=5)


def test_sources_and_object(add_module):
    ll = add_module.get_source("ll")
    assert "define" in ll and "@add" in ll
    asm = add_module.get_source("asm")
    assert "add:" in asm
    assert add_module.get_source("s") == asm
    assert add_module.library.emit_object()[:4] == b"\x7fELF"
    with pytest.raises(ValueError, match=r"fmt: expected 'll', 'asm' or 's', got 'cuda'"):
        add_module.get_source("cuda")


def test_host_features_reach_the_code():
    # Vectorized code for the host uses wider registers than the SSE2 baseline would.
    asm = runtime.compile_llvm(ADD_LL).asm
    features = runtime.compile_llvm(ADD_LL).features
    if "+avx2" in features:
        assert "ymm" in asm or "zmm" in asm


def test_runtime_check_status_raises():
    from rt_kernels import CHECKED_LL, CHECKED_SIGNATURE

    module = runtime.Module(runtime.compile_llvm(CHECKED_LL), CHECKED_SIGNATURE)
    module(np.zeros(3, np.float32))
    message = r"kernel 'checked' failed a runtime check \(status code 7\)"
    with pytest.raises(RuntimeError, match=message):
        module(np.zeros(4, np.float32))


class _BrokenAfterOptimizing:
    """Makes runtime.cpu see LLVM's optimizer leave the module invalid on the first
    `broken_runs` optimizations (as LLVM 22's SLP vectorizer did on one elementwise
    chain), whatever LLVM version runs the test; records each optimization's
    (opt_level, slp)."""

    def __init__(self, monkeypatch, broken_runs: int):
        import llvmlite.binding as llvm

        import runtime.cpu as cpu
        self.calls, self.left, self._pending = [], broken_runs, False
        real_optimize, real_verify = cpu._optimize, llvm.ModuleRef.verify

        def optimize(module, tm, opt_level, slp=True):
            self.calls.append((opt_level, slp))
            real_optimize(module, tm, opt_level, slp=slp)
            self._pending = self.left > 0
            self.left -= 1

        def verify(module):
            if self._pending:
                self._pending = False
                raise RuntimeError("Instruction does not dominate all uses!\n  %9 = fadd\nx\ny")
            return real_verify(module)
        monkeypatch.setattr(cpu, "_optimize", optimize)
        monkeypatch.setattr(llvm.ModuleRef, "verify", verify)


def test_invalid_ir_after_slp_is_optimized_again_without_it(monkeypatch):
    fake = _BrokenAfterOptimizing(monkeypatch, broken_runs=1)
    with pytest.warns(RuntimeWarning, match=r"^LLVM's SLP vectorizer produced invalid IR for "
                                            r"this kernel \(a bug in LLVM\); it was optimized "
                                            r"without SLP vectorization: Instruction does not "
                                            r"dominate all uses! / %9 = fadd / x$"):
        mod = runtime.Module(runtime.compile_llvm(ADD_LL, opt_level=3), ADD_SIGNATURE)
    assert fake.calls == [(3, True), (3, False)]
    a, b = np.random.default_rng(3).standard_normal((2, 37), dtype=np.float32)
    c = np.full(37, np.nan, dtype=np.float32)
    mod(a, b, c)
    np.testing.assert_array_equal(c, a + b)


def test_invalid_ir_with_and_without_slp_is_a_build_error(monkeypatch):
    fake = _BrokenAfterOptimizing(monkeypatch, broken_runs=2)
    with pytest.raises(RuntimeBuildError, match=r"^LLVM's optimizer produced invalid IR with and "
                                                r"without its SLP vectorizer \(a bug in LLVM\): "
                                                r"Instruction does not dominate all uses! / "
                                                r"%9 = fadd / x; without SLP: Instruction"):
        runtime.compile_llvm(ADD_LL, opt_level=2)
    assert fake.calls == [(2, True), (2, False)]


@pytest.mark.parametrize("opt_level", [0, 1])
def test_invalid_ir_below_opt_level_2_is_not_retried(monkeypatch, opt_level):
    fake = _BrokenAfterOptimizing(monkeypatch, broken_runs=1)   # no SLP at these levels
    with pytest.raises(RuntimeBuildError, match=rf"^LLVM's optimizer \(opt_level {opt_level}\) "
                                                r"produced invalid IR \(a bug in LLVM\): "
                                                r"Instruction does not dominate all uses!"):
        runtime.compile_llvm(ADD_LL, opt_level=opt_level)
    assert fake.calls == [(opt_level, True)]


@pytest.mark.parametrize("features", [None, "-avx512f", "+sse4.2", "-avx2,-fma"])
def test_host_code_changed_by_features_needs_nothing_the_host_lacks(features):
    """Without a cpu the JIT targets this host's features changed by `features`; it took the
    defaults of the host's CPU name instead, which may include features the host lacks (a
    virtual machine hides some: here 'pku')."""
    library = runtime.compile_llvm(ADD_LL, features=features)
    assert runtime.cpu.missing_host_features(library.cpu, library.features) == ()
    module = runtime.Module(library, ADD_SIGNATURE)
    a = np.arange(11, dtype=np.float32)
    c = np.zeros(11, np.float32)
    module(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)
