"""Device memory and launches through NVIDIA's cuda-python (`cuda.bindings.driver`), which
the [cuda] extra installs as binary wheels that load the driver only when a module runs.

Takes a CudaModule's PTX and kernels; gives CudaPythonBackend, cuda.PycudaBackend's
interface on the first GPU's primary context. Imports numpy (cuda.bindings lazily).
"""
from __future__ import annotations

import numpy as np


def cuda_python_installed() -> bool:
    try:
        import cuda.bindings.driver  # noqa: F401
    except ImportError:
        return False
    return True


class CudaPythonBackend:
    """A GPU module of `ptx` with `kernels` through cuda.bindings.driver."""

    def __init__(self, ptx: str, kernels: tuple, no_device_hint: str = "") -> None:
        from cuda.bindings import driver
        self.driver = driver
        try:
            self._call("cuInit", 0)
            dev = self._call("cuDeviceGet", 0)
            self.context = self._call("cuDevicePrimaryCtxRetain", dev)
        except Exception as err:   # no driver library, no device: the driver's own words
            raise RuntimeError(f"no CUDA device could be opened: {err}"
                               f"{no_device_hint}") from None
        self._current()
        self.module = self._call("cuModuleLoadData", ptx.encode() + b"\0")
        self.functions = {k.name: self._call("cuModuleGetFunction", self.module,
                                             k.name.encode()) for k in kernels}

    def _call(self, name: str, *args):
        """driver.name(*args), its error code checked; its result, if any."""
        result = getattr(self.driver, name)(*args)
        err, rest = result[0], result[1:]
        if err != self.driver.CUresult.CUDA_SUCCESS:
            text = self.driver.cuGetErrorString(err)[1]
            raise RuntimeError(f"{name} failed: "
                               f"{text.decode() if isinstance(text, bytes) else err}")
        return rest[0] if len(rest) == 1 else None

    def _current(self) -> None:
        # the calling thread may differ from the one that opened the module
        self._call("cuCtxSetCurrent", self.context)

    def upload(self, array: np.ndarray):
        handle = self.empty(array.nbytes)
        if array.nbytes:
            host = np.ascontiguousarray(array)
            self._call("cuMemcpyHtoD", handle, host.ctypes.data, host.nbytes)
        return handle

    def empty(self, nbytes: int):
        self._current()
        return self._call("cuMemAlloc", max(1, nbytes))

    def download(self, handle, array: np.ndarray) -> None:
        if array.nbytes:
            self._current()
            self._call("cuMemcpyDtoH", array.ctypes.data, handle, array.nbytes)

    def scalar(self, dtype: str, value: int):
        return np.array(value, dtype=dtype)

    def launch(self, name: str, params: list, grid: tuple, block: tuple) -> None:
        # kernelParams: an array of pointers, one to each argument's value (a device
        # pointer's 64 bits, or the scalar); the driver copies them at the launch
        values = [p if isinstance(p, np.ndarray) else np.array([int(p)], np.uint64)
                  for p in params]
        pointers = np.array([v.ctypes.data for v in values] or [0], np.uint64)
        self._current()
        self._call("cuLaunchKernel", self.functions[name], *grid, *block, 0, 0,
                   pointers.ctypes.data, 0)

    def synchronize(self) -> None:
        self._current()
        self._call("cuCtxSynchronize")

    def release(self, handles: list) -> None:
        self._current()
        for handle in handles:
            self._call("cuMemFree", handle)
