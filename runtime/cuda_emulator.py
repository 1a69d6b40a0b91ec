"""Runs CUDA C kernels on the CPU, to check them without a GPU; blocks run one at a time.

Takes te's CUDA source and kernels' C parameter types; gives EmulatorBackend (numpy copies).
Barrier-free kernels run threads in turn; __syncthreads() kernels run a block's threads as
fibers switching at each barrier, order reversed every other block, over NaN-poisoned shared
memory (a missing barrier shows as NaN); warp shuffles run as pthreads at a real barrier.
"""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import tempfile
import threading

import numpy as np

from .errors import RuntimeBuildError
from .cuda_emulator_half import HALF_PRELUDE
from .cuda_emulator_wmma import WMMA_PRELUDE

HALF_INCLUDE = "#include <cuda_fp16.h>\n"
WMMA_INCLUDE = "#include <mma.h>\n"   # nvcuda::wmma: cuda_emulator_wmma.py

# A block's threads share __shared__ arrays as function statics: blocks run one at a time.
PRELUDE = """\
#include <math.h>
#include <stdint.h>
#include <pthread.h>
#include <string.h>
struct te_dim3 { unsigned int x, y, z; };
static thread_local te_dim3 threadIdx;
static te_dim3 blockIdx, blockDim, gridDim;
static pthread_barrier_t te_barrier;
#define __global__
#define __device__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
/* CUDA's vector types (their alignment left out: host arrays need not have it) */
struct float2 { float x, y; };
struct float4 { float x, y, z, w; };
struct int2 { int x, y; };
struct int4 { int x, y, z, w; };
struct double2 { double x, y; };
#define __syncthreads() te_syncthreads()
/* Each __shared__ array registers once; before every block they are all filled with 0xFF
   bytes (NaN as float), so a read of shared memory no thread of the block wrote shows. */
static void* te_shared_ptr[256];
static unsigned long te_shared_size[256];
static int te_shared_count, te_shared_overflow;
static bool te_register_shared(void* p, unsigned long n) {
  memset(p, 0xFF, n);
  if (te_shared_count < 256) {
    te_shared_ptr[te_shared_count] = p;
    te_shared_size[te_shared_count++] = n;
  } else {
    te_shared_overflow = 1;   /* reported as a failed launch: never poison silently less */
  }
  return true;
}
/* the start gate of a block's threads: 0 closed, 1 run, -1 leave */
static pthread_mutex_t te_start_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t te_start_cond = PTHREAD_COND_INITIALIZER;
static int te_start;
static bool te_wait_for_start() {
  pthread_mutex_lock(&te_start_lock);
  while (te_start == 0) pthread_cond_wait(&te_start_cond, &te_start_lock);
  bool run = te_start > 0;
  pthread_mutex_unlock(&te_start_lock);
  return run;
}
static void te_open_start(int state) {
  pthread_mutex_lock(&te_start_lock);
  te_start = state;
  pthread_cond_broadcast(&te_start_cond);
  pthread_mutex_unlock(&te_start_lock);
}
static void te_poison_shared() {
  for (int k = 0; k < te_shared_count; ++k) memset(te_shared_ptr[k], 0xFF, te_shared_size[k]);
}
/* Warp shuffles, warp-synchronous as on the GPU: every lane named in the mask stores its
   value, the lanes meet, each reads its source lane's value, and they meet again before
   the slots are reused. A lane outside the mask that calls, or a mask naming lanes the
   block does not have, fails the launch; an inactive source lane's value is undefined
   (NaN bytes here), as CUDA documents. Kernels that shuffle run as threads (the
   threaded launcher). */
static unsigned long long te_warp_slots[1024];
static int te_warp_arrived[32];
static unsigned long te_warp_round[32];
static pthread_mutex_t te_warp_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t te_warp_cond = PTHREAD_COND_INITIALIZER;
static int te_shuffle_failed;
static void te_warp_meet(int warp, int count) {
  pthread_mutex_lock(&te_warp_lock);
  unsigned long round = te_warp_round[warp];
  if (++te_warp_arrived[warp] == count) {
    te_warp_arrived[warp] = 0;
    ++te_warp_round[warp];
    pthread_cond_broadcast(&te_warp_cond);
  } else {
    while (round == te_warp_round[warp]) pthread_cond_wait(&te_warp_cond, &te_warp_lock);
  }
  pthread_mutex_unlock(&te_warp_lock);
}
template <typename T> static T te_shuffle(unsigned mask, T v, int src) {
  int tid = threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z);
  int lane = tid & 31, warp = tid >> 5;
  int lanes = (int)(blockDim.x * blockDim.y * blockDim.z) - (warp << 5);
  unsigned exist = lanes >= 32 ? 0xffffffffu : (1u << lanes) - 1u;
  if (!((mask >> lane) & 1u) || (mask & ~exist)) te_shuffle_failed = 1;
  mask &= exist;
  int count = __builtin_popcount(mask);
  memcpy(&te_warp_slots[tid], &v, sizeof(T));
  te_warp_meet(warp, count);
  T out;
  if ((mask >> src) & 1u) memcpy(&out, &te_warp_slots[(warp << 5) + src], sizeof(T));
  else memset(&out, 0xFF, sizeof(T));
  te_warp_meet(warp, count);
  return out;
}
static inline int te_lane() {
  return (threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z)) & 31;
}
template <typename T> static T __shfl_sync(unsigned mask, T v, int src, int width = 32) {
  int lane = te_lane();
  return te_shuffle(mask, v, (lane & ~(width - 1)) + (src & (width - 1)));
}
template <typename T> static T __shfl_down_sync(unsigned mask, T v, unsigned d, int width = 32) {
  int lane = te_lane();
  return te_shuffle(mask, v, (lane & (width - 1)) + (int)d < width ? lane + (int)d : lane);
}
template <typename T> static T __shfl_up_sync(unsigned mask, T v, unsigned d, int width = 32) {
  int lane = te_lane();
  return te_shuffle(mask, v, (lane & (width - 1)) >= (int)d ? lane - (int)d : lane);
}
template <typename T> static T __shfl_xor_sync(unsigned mask, T v, int m, int width = 32) {
  int lane = te_lane(), src = lane ^ m;
  return te_shuffle(mask, v, (src & ~(width - 1)) == (lane & ~(width - 1)) ? src : lane);
}
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline double rsqrt(double x) { return 1.0 / sqrt(x); }
"""

# CUDA's fast-math intrinsics (what call_pure_extern("float32", "__expf", x) calls) as their
# exact C counterparts: the hardware's versions differ by a few ulp, within the tolerance a
# float result is checked with. Macros, as glibc's math.h declares some of these names for
# its own (unexported) functions.
FAST_MATH = {
    "__expf(x)": "expf(x)", "__exp10f(x)": "exp10f(x)", "__logf(x)": "logf(x)",
    "__log2f(x)": "log2f(x)", "__log10f(x)": "log10f(x)", "__sinf(x)": "sinf(x)",
    "__cosf(x)": "cosf(x)", "__tanf(x)": "tanf(x)", "__powf(x, y)": "powf(x, y)",
    "__fdividef(x, y)": "((x) / (y))", "__fdiv_rn(x, y)": "((x) / (y))",
    "__fadd_rn(x, y)": "((x) + (y))", "__fmul_rn(x, y)": "((x) * (y))",
    "__fmaf_rn(x, y, z)": "fmaf(x, y, z)", "__frcp_rn(x)": "(1.0f / (x))",
    "__fsqrt_rn(x)": "sqrtf(x)", "__frsqrt_rn(x)": "rsqrtf(x)",
    "__saturatef(x)": "fminf(fmaxf(x, 0.0f), 1.0f)",
    "__sincosf(x, s, c)": "(*(s) = sinf(x), *(c) = cosf(x), (void)0)",
}
PRELUDE += "".join(f"#define {call} {body}\n" for call, body in FAST_MATH.items())

# A block's threads as fibers on the launching thread (a stack switch of our own on x86-64,
# ucontext elsewhere): __syncthreads() switches to the next fiber, so the barrier costs a
# few instructions instead of a wake-up of every thread through the OS scheduler (which on
# a loaded machine made kernels with a barrier in their reduction loop take minutes).
FIBERS = """\
#include <sys/mman.h>
#if !defined(__x86_64__)
#include <ucontext.h>
#endif
static const unsigned long te_fiber_stack = 2ul << 20;   /* te allows 512 KiB per thread */
static int te_fiber_mode;
static unsigned te_fiber_n, te_fiber_cur;   /* fibers 0..n-1; slot n is the launcher */
static te_dim3* te_fiber_tid;
static unsigned long* te_fiber_syncs;
static void** te_fiber_args;
#if defined(__x86_64__)
/* te_fiber_jump(save, load): push the callee-saved registers, store the stack pointer in
   *save, take `load` as the stack pointer and pop its registers. ucontext's swapcontext
   also saves the signal mask, a system call per switch, which made kernels with a barrier
   in their inner loop take minutes. (Not shadow-stack aware: CET is off for Python.) */
extern "C" void te_fiber_jump(void** save, void* load);
asm(".text\\n.globl te_fiber_jump\\n.hidden te_fiber_jump\\n.type te_fiber_jump, @function\\n"
    "te_fiber_jump:\\n"
    "  pushq %rbp\\n  pushq %rbx\\n  pushq %r12\\n  pushq %r13\\n  pushq %r14\\n  pushq %r15\\n"
    "  movq %rsp, (%rdi)\\n  movq %rsi, %rsp\\n"
    "  popq %r15\\n  popq %r14\\n  popq %r13\\n  popq %r12\\n  popq %rbx\\n  popq %rbp\\n"
    "  ret\\n");
static void** te_fiber_sp;
/* fiber k's stack (its guard page at `stack`) made to "return" into entry when first run */
static void te_fiber_make(unsigned k, char* stack, void (*entry)()) {
  void** top = (void**)(stack + te_fiber_stack);   /* 16-byte aligned */
  top[-1] = 0;                                      /* entry's own return address: none */
  top[-2] = (void*)entry;
  for (int r = 3; r <= 8; ++r) top[-r] = 0;         /* the six registers popped */
  te_fiber_sp[k] = top - 8;
}
static void te_fiber_go(unsigned from, unsigned to) {
  te_fiber_jump(&te_fiber_sp[from], te_fiber_sp[to]);
}
static bool te_fiber_slots(unsigned n) { return (te_fiber_sp = new void*[n + 1]) != 0; }
static void te_fiber_slots_free() { delete[] te_fiber_sp; }
#else
static ucontext_t* te_fiber_ctx;
static void te_fiber_make(unsigned k, char* stack, void (*entry)()) {
  getcontext(&te_fiber_ctx[k]);
  te_fiber_ctx[k].uc_stack.ss_sp = stack + 4096;
  te_fiber_ctx[k].uc_stack.ss_size = te_fiber_stack - 4096;
  te_fiber_ctx[k].uc_link = 0;
  makecontext(&te_fiber_ctx[k], entry, 0);
}
static void te_fiber_go(unsigned from, unsigned to) {
  swapcontext(&te_fiber_ctx[from], &te_fiber_ctx[to]);
}
static bool te_fiber_slots(unsigned n) { return (te_fiber_ctx = new ucontext_t[n + 1]) != 0; }
static void te_fiber_slots_free() { delete[] te_fiber_ctx; }
#endif
static void te_fiber_switch(unsigned next) {
  unsigned me = te_fiber_cur;
  te_fiber_cur = next;
  if (next < te_fiber_n) threadIdx = te_fiber_tid[next];
  te_fiber_go(me, next);
}
static void te_syncthreads() {
  if (!te_fiber_mode) {
    pthread_barrier_wait(&te_barrier);
    return;
  }
  ++te_fiber_syncs[te_fiber_cur];
  if (te_fiber_n > 1) te_fiber_switch(te_fiber_cur + 1 == te_fiber_n ? 0 : te_fiber_cur + 1);
}
/* a fiber whose kernel returned: the next one finishes, the last returns to the launcher
   (resumed again only when barriers were passed unevenly: it passes on again) */
static void te_fiber_done() {
  for (;;) te_fiber_switch(te_fiber_cur + 1 < te_fiber_n ? te_fiber_cur + 1 : te_fiber_n);
}
/* stacks for n fibers, a guard page under each, and n + 1 slots; 0 when out of memory */
static char* te_fiber_alloc(unsigned n) {
  size_t bytes = (size_t)n * te_fiber_stack;
  void* stacks = mmap(0, bytes, PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (stacks == MAP_FAILED) return 0;
  for (unsigned k = 0; k < n; ++k) mprotect((char*)stacks + k * te_fiber_stack, 4096, PROT_NONE);
  te_fiber_slots(n);
  te_fiber_tid = new te_dim3[n];
  te_fiber_syncs = new unsigned long[n];
  return (char*)stacks;
}
static void te_fiber_free(char* stacks, unsigned n) {
  munmap(stacks, (size_t)n * te_fiber_stack);
  te_fiber_slots_free();
  delete[] te_fiber_tid;
  delete[] te_fiber_syncs;
}
"""

# A block's threads as fibers (FIBERS), for kernels with __syncthreads() and no shuffles.
# Returns 2 when the threads of a block passed different numbers of barriers (a barrier
# only some reached: on a GPU, a hang or undefined behaviour).
FIBER_LAUNCHER = """\
static void te_fiber_main_{name}() {{
  void** a = te_fiber_args;
  {name}({args});
  te_fiber_done();
}}
extern "C" int te_emulate_{name}(void** a, const unsigned int* d) {{
  gridDim = te_dim3{{d[0], d[1], d[2]}};
  blockDim = te_dim3{{d[3], d[4], d[5]}};
  unsigned n = d[3] * d[4] * d[5];
  char* stacks = te_fiber_alloc(n);
  if (!stacks) return 1;
  te_fiber_args = a;
  te_fiber_n = n;
  te_fiber_mode = 1;
  int failed = te_shared_overflow;
  unsigned long block = 0;
  for (unsigned int bz = 0; bz < d[2] && !failed; ++bz)
  for (unsigned int by = 0; by < d[1] && !failed; ++by)
  for (unsigned int bx = 0; bx < d[0] && !failed; ++bx, ++block) {{
    blockIdx = te_dim3{{bx, by, bz}};
    te_poison_shared();
    for (unsigned k = 0; k < n; ++k) {{
      unsigned t = block % 2 ? n - 1 - k : k;   /* every other block in reverse order */
      te_fiber_tid[k] = te_dim3{{t % d[3], (t / d[3]) % d[4], t / (d[3] * d[4])}};
      te_fiber_syncs[k] = 0;
      te_fiber_make(k, stacks + k * te_fiber_stack, te_fiber_main_{name});
    }}
    te_fiber_cur = n;
    te_fiber_switch(0);
    for (unsigned k = 1; k < n; ++k)
      if (te_fiber_syncs[k] != te_fiber_syncs[0]) failed = 2;
    failed = failed ? failed : te_shared_overflow;
  }}
  te_fiber_mode = 0;
  te_fiber_free(stacks, n);
  return failed;
}}
"""

# One thread after another: for kernels without barriers.
LAUNCHER = """\
extern "C" int te_emulate_{name}(void** a, const unsigned int* d) {{
  gridDim = te_dim3{{d[0], d[1], d[2]}};
  blockDim = te_dim3{{d[3], d[4], d[5]}};
  for (unsigned int bz = 0; bz < d[2]; ++bz)
  for (unsigned int by = 0; by < d[1]; ++by)
  for (unsigned int bx = 0; bx < d[0]; ++bx) {{
  te_poison_shared();
  for (unsigned int tz = 0; tz < d[5]; ++tz)
  for (unsigned int ty = 0; ty < d[4]; ++ty)
  for (unsigned int tx = 0; tx < d[3]; ++tx) {{
    blockIdx = te_dim3{{bx, by, bz}};
    threadIdx = te_dim3{{tx, ty, tz}};
    {name}({args});
  }}
  }}
  return te_shared_overflow;
}}
"""


# A block's threads all at once (a pthread each), for modules with warp shuffles (lanes that
# wait for each other in the middle of an expression).
THREADED_LAUNCHER = """\
struct te_thread_{name} {{ void** a; te_dim3 t; }};
static void* te_thread_main_{name}(void* p) {{
  te_thread_{name}* me = (te_thread_{name}*)p;
  void** a = me->a;
  threadIdx = me->t;
  if (te_wait_for_start()) {name}({args});
  return 0;
}}
extern "C" int te_emulate_{name}(void** a, const unsigned int* d) {{
  gridDim = te_dim3{{d[0], d[1], d[2]}};
  blockDim = te_dim3{{d[3], d[4], d[5]}};
  unsigned int n = d[3] * d[4] * d[5];
  te_shuffle_failed = 0;   /* a bad mask fails its own launch, not the module's next ones */
  te_thread_{name}* work = new te_thread_{name}[n];
  pthread_t* threads = new pthread_t[n];
  pthread_attr_t attr;
  pthread_attr_init(&attr);
  pthread_attr_setstacksize(&attr, 4 << 20);   /* te allows 512 KiB of per-thread arrays */
  int failed = te_shared_overflow;
  for (unsigned int bz = 0; bz < d[2] && !failed; ++bz)
  for (unsigned int by = 0; by < d[1] && !failed; ++by)
  for (unsigned int bx = 0; bx < d[0] && !failed; ++bx) {{
    blockIdx = te_dim3{{bx, by, bz}};
    te_poison_shared();
    pthread_barrier_init(&te_barrier, 0, n);
    te_start = 0;
    unsigned int started = 0;
    for (; started < n; ++started) {{
      work[started].a = a;
      work[started].t = te_dim3{{started % d[3], (started / d[3]) % d[4],
                                 started / (d[3] * d[4])}};
      if (pthread_create(&threads[started], &attr, te_thread_main_{name}, &work[started]))
        break;
    }}
    /* the threads wait at the gate until all exist: if one could not be made, the others
       leave without running the kernel (they would wait at its barrier for ever) */
    failed = started < n;
    te_open_start(failed ? -1 : 1);
    for (unsigned int k = 0; k < started; ++k) pthread_join(threads[k], 0);
    pthread_barrier_destroy(&te_barrier);
    failed = failed || te_shared_overflow || te_shuffle_failed;
  }}
  pthread_attr_destroy(&attr);
  delete[] threads;
  delete[] work;
  return failed;
}}
"""

class EmulatorBackend:
    """Device memory and launches on the CPU (see the module docstring)."""

    def __init__(self, source: str, kernels: tuple, param_types: dict) -> None:
        compiler = shutil.which("c++") or shutil.which("g++")
        if compiler is None:
            raise RuntimeBuildError("the CUDA emulator needs a C++ compiler (c++ or g++) "
                                    "on PATH")
        # cuda_fp16.h's names come with the prelude (cuda_emulator_half.py)
        source = source.replace(HALF_INCLUDE, "").replace(WMMA_INCLUDE, "")
        parts = [PRELUDE, HALF_PRELUDE, WMMA_PRELUDE, FIBERS, _register_shared_arrays(source)]
        shuffles = "__shfl" in source
        for kernel in kernels:
            types = param_types[kernel.name]
            args = ", ".join(f"({t})a[{k}]" if t.endswith("*") else f"*({t}*)a[{k}]"
                             for k, t in enumerate(types))
            launcher = LAUNCHER
            if kernel.uses_barriers or shuffles:
                launcher = THREADED_LAUNCHER if shuffles else FIBER_LAUNCHER
            parts.append(launcher.format(name=kernel.name, args=args))
        self.types = param_types
        with tempfile.TemporaryDirectory(prefix="te_emulate_") as tmp:
            src, lib = os.path.join(tmp, "kernels.cpp"), os.path.join(tmp, "kernels.so")
            with open(src, "w") as handle:
                handle.write("\n".join(parts))
            command = [compiler, "-std=c++17", "-O1", "-shared", "-fPIC", "-pthread", "-o", lib,
                       src, "-lm"]
            result = subprocess.run(command, capture_output=True, text=True)
            if result.returncode != 0:
                raise RuntimeBuildError(f"the CUDA emulator could not compile the kernels "
                                        f"(exit code {result.returncode}): "
                                        f"{result.stderr.strip()[-2000:]}")
            self.library = ctypes.CDLL(lib)  # stays mapped after the file is removed
        self.launchers = {k.name: getattr(self.library, f"te_emulate_{k.name}")
                          for k in kernels}
        # a launch keeps its state in the library's globals (blockIdx, the shared arrays,
        # the barrier, the fibers): launches from several Python threads take turns
        self._launch_lock = threading.Lock()

    def upload(self, array: np.ndarray) -> np.ndarray:
        return np.array(array, copy=True)

    def empty(self, nbytes: int) -> np.ndarray:
        # NaN as float (-1 as int), so a kernel that reads a temporary before writing it shows
        return np.full(max(1, nbytes), 0xFF, np.uint8)

    def download(self, handle: np.ndarray, array: np.ndarray) -> None:
        array.reshape(-1).view(np.uint8)[:] = handle.reshape(-1).view(np.uint8)[:array.nbytes]

    def scalar(self, dtype: str, value: int):
        return np.array(value, dtype=dtype)

    def launch(self, name: str, params: list, grid: tuple, block: tuple) -> None:
        pointers = (ctypes.c_void_p * max(1, len(params)))()
        for k, p in enumerate(params):
            pointers[k] = p.ctypes.data
        dims = (ctypes.c_uint * 6)(*grid, *block)
        with self._launch_lock:
            failed = self.launchers[name](pointers, dims)
        if failed == 2:
            raise RuntimeError(f"the CUDA emulator ran kernel '{name}': the threads of a "
                               f"block passed different numbers of __syncthreads() barriers "
                               f"(a barrier only some threads reach)")
        if failed:
            raise RuntimeError(f"the CUDA emulator could not run kernel '{name}': it could "
                               f"not start the {block} threads of a block, the kernel "
                               f"module has more than 256 shared arrays, or a warp shuffle's "
                               f"mask left out a lane that called it or named lanes the "
                               f"block does not have")

    def synchronize(self) -> None:
        pass   # a launch returns when every block has run

    def release(self, handles: list) -> None:
        pass   # "device" memory is numpy arrays, freed with their last reference


_SHARED_DECLARATION = re.compile(r"^(\s*)__shared__ (.+?) (\w+)\[(\d+)\];$", re.M)


def _register_shared_arrays(source: str) -> str:
    """`__shared__ T a[n];` -> a function-static array (one per process: blocks run one at a
    time) that registers for poisoning once (C++ runs a static initializer once, safely
    across threads)."""
    return _SHARED_DECLARATION.sub(
        r"\1static \2 \3[\4];\n\1static bool te_registered_\3 = "
        r"te_register_shared(\3, sizeof(\3)); (void)te_registered_\3;", source)
