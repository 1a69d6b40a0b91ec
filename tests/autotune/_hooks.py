"""Worker hooks for the isolation tests (loaded by file path inside measurement workers)."""
import ctypes
import os
import time


def misbehave(config):
    mode = config.get("knobs", {}).get("mode")
    if mode == "abort":
        os.abort()
    if mode == "segfault":
        ctypes.string_at(0)
    if mode == "hang":
        time.sleep(1000)


def always_hang(config):
    """Every candidate hangs, the unscheduled reference (no knobs) does not (for the
    resume-after-timeout and orphan-worker tests)."""
    if config and config.get("knobs"):
        time.sleep(1000)


def gpu_is_the_emulator(config):
    """A stand-in GPU for the tuning worker of a 'cuda' run: CUDA modules run their source
    in the emulator through a backend that is not the emulator's own class, so the worker
    takes its GPU path (timed with time_evaluator, no emulated-time warning)."""
    from runtime import cuda as rt_cuda
    from runtime.cuda_emulator import EmulatorBackend
    if getattr(rt_cuda, "_stand_in_gpu", False):
        return
    rt_cuda._stand_in_gpu = True

    class StandInGPU:
        def __init__(self, module):
            self.inner = EmulatorBackend(module.source, module.kernels, module._param_types())

        def __getattr__(self, name):
            return getattr(self.inner, name)

    def get_backend(module):
        if module._backend is None:
            module._backend = StandInGPU(module)
        return module._backend
    rt_cuda.CudaModule._get_backend = get_backend
