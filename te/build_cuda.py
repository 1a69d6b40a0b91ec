"""te.build for target 'cuda': host/device split, CUDA C, PTX, and a runtime.cuda.CudaModule.

Takes a function lowered for 'cuda' (vectorized loops kept as loops; the pipeline's
host/device split run, or run here for a function lowered before), its KernelSignature and
the parsed target (te.target.Target: -arch, launch limits, C types); gives a CudaModule
whose launch plan evaluates the temporaries' sizes and each kernel's grid and block extents
from the size variables of a call. nvcc checks the source at build time when it is on PATH,
and ptxas's resource use (registers, shared memory) is checked against the block size;
without it the module keeps the source, can run emulated on the CPU, and says at a GPU call
that nvcc is missing; its memory_report() traces the kernels' addresses (te/lower/gpu_memory.py).
Imports te.target, te.lower, te.codegen and runtime.
"""
from __future__ import annotations

import functools

import runtime
from runtime import cuda as rt_cuda
from runtime.cuda_resources import check_fits, resource_usage

from .codegen.cuda.codegen import generate_cuda
from .codegen.cuda.vector_access import vector_loop
from .errors import BuildError
from .lower import pipeline
from .lower.func import PrimFunc
from .lower.gpu_memory import memory_report
from .lower.passes.device_split import BLOCK_TAGS, GRID_TAGS, evaluate_on_host
from .target import Target


def build_cuda(func: PrimFunc, signature: runtime.KernelSignature,
               target: Target) -> rt_cuda.CudaModule:
    if func.device_plan is None:   # a function lowered before, without the split
        func = pipeline.split_for_device(func, target)
    plan = func.device_plan
    source = generate_cuda(func, plan, target)
    temporaries = tuple(rt_cuda.CudaTemporary(b.name, b.dtype) for b, _ in plan.temporaries)
    ptx, missing, resources = None, None, {}
    if rt_cuda.find_nvcc() is None:
        missing = "nvcc was not on PATH when it was built (install the CUDA toolkit)"
    else:
        arch = target.get("arch", rt_cuda.DEFAULT_ARCH)
        try:
            ptx = rt_cuda.compile_ptx(source.text, arch, target.fast_math)
            resources = resource_usage(ptx, arch) or {}
        except (runtime.RuntimeBuildError, RuntimeError) as err:
            raise BuildError(f"te.build: target 'cuda': {err}") from None
    for k in source.kernels:
        if k.threads is not None and k.name in resources:
            try:
                check_fits(f"'{func.name}' ({k.name})", resources[k.name], k.threads)
            except RuntimeError as err:
                raise BuildError(f"te.build: target 'cuda': {err}") from None
    kernels = tuple(rt_cuda.CudaKernel(k.name, k.params, k.uses_barriers,
                                       resources.get(k.name)) for k in source.kernels)
    size_vars = func.scalar_params

    def launch_plan(sizes: tuple) -> tuple:
        env = dict(zip(size_vars, sizes))
        counts = [evaluate_on_host(extent, env) for _, extent in plan.temporaries]
        dims = []
        for part in plan.kernels:
            grid, block = ([evaluate_on_host(part.extents[t], env) if t in part.extents
                            else 1 for t in tags] for tags in (GRID_TAGS, BLOCK_TAGS))
            dims.append((tuple(grid), tuple(block)))
        return counts, dims

    module = rt_cuda.CudaModule(signature, source.text, kernels, temporaries, launch_plan,
                                ptx=ptx, ptx_missing=missing)
    module.lowered = func
    module.memory_analysis = functools.partial(memory_report, func, vector_form=vector_loop)
    return module
