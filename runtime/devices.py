"""Devices as TVM names them: Device("cpu"|"cuda", index), with `exist`.

Takes a device name ("cpu", "llvm", "cuda", "gpu") or TVM's numeric type (1 cpu, 2 cuda) and
an index; gives the frozen Device that NDArrays carry and time_evaluator accepts, and
device()/cpu()/cuda(). Imports stdlib only (pycuda or cuda-python lazily, to answer
`exist` for a GPU).
"""
from __future__ import annotations

from dataclasses import dataclass

# TVM's DLDeviceType codes of the kinds we run on, and the names that mean them.
DEVICE_CODES = {"cpu": 1, "cuda": 2}
DEVICE_ALIASES = {"cpu": "cpu", "llvm": "cpu", "c": "cpu", "cuda": "cuda", "gpu": "cuda",
                  "nvptx": "cuda"}


@dataclass(frozen=True)
class Device:
    """A device kind ("cpu" or "cuda") and its index."""
    kind: str
    index: int = 0

    @property
    def device_type(self) -> int:
        return DEVICE_CODES[self.kind]

    @property
    def device_id(self) -> int:
        return self.index

    @property
    def exist(self) -> bool:
        """Whether this device is present: the CPU always, a GPU when pycuda or cuda-python
        finds it."""
        if self.kind == "cpu":
            return self.index == 0
        return self.index < _cuda_device_count()

    def sync(self) -> None:
        """Wait for the device's work: modules return when their kernels are done."""

    def __str__(self) -> str:
        return f"{self.kind}({self.index})"


def device(dev_type: str | int, dev_id: int = 0) -> Device:
    """Device("cpu"/"llvm" or "cuda"/"gpu", dev_id); TVM's numeric codes 1 and 2 too."""
    if isinstance(dev_id, bool) or not isinstance(dev_id, int) or dev_id < 0:
        raise ValueError(f"dev_id: expected an integer >= 0, got {dev_id!r}")
    if isinstance(dev_type, int) and not isinstance(dev_type, bool):
        names = {code: name for name, code in DEVICE_CODES.items()}
        if dev_type not in names:
            raise ValueError(f"dev_type: expected one of {sorted(names)} (cpu, cuda), got "
                             f"{dev_type}")
        return Device(names[dev_type], dev_id)
    if isinstance(dev_type, str):
        # a target string names its device by its first word ("llvm -mcpu=x" -> cpu)
        words = dev_type.split()
        kind = DEVICE_ALIASES.get(words[0] if words else "")
        if kind is not None:
            return Device(kind, dev_id)
    raise ValueError(f"dev_type: expected one of {', '.join(sorted(DEVICE_ALIASES))}, got "
                     f"{dev_type!r}")


def cpu(dev_id: int = 0) -> Device:
    return device("cpu", dev_id)


def cuda(dev_id: int = 0) -> Device:
    return device("cuda", dev_id)


def _cuda_device_count() -> int:
    try:
        import pycuda.driver as drv
        drv.init()
        return drv.Device.count()
    except Exception:  # no pycuda, no driver or no GPU: cuda-python may still find one
        pass
    try:
        from cuda.bindings import driver
        if driver.cuInit(0)[0] != driver.CUresult.CUDA_SUCCESS:
            return 0
        err, count = driver.cuDeviceGetCount()
        return count if err == driver.CUresult.CUDA_SUCCESS else 0
    except Exception:  # no cuda-python, no driver or no GPU: none to run on
        return 0
