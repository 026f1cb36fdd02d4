"""Running the CUDA renderer's kernels on the CPU, for tests on machines without a GPU.

The rendered module is compiled as C++ (g++) after a header that stands in for the CUDA
built-ins the kernels use: ``threadIdx``/``blockIdx``/``blockDim``/``gridDim``, a block
barrier (``__syncthreads``, ``__syncthreads_or``), ``__shfl_down_sync`` within a warp,
``__shared__`` memory, and the half types' conversions. A launch runs one block at a
time, each thread of the block an OS thread, so the kernels' index arithmetic, passes,
grid-stride loops and block reductions run as written. It says nothing about NVRTC,
the GPU's memory model or speed.

:class:`Emulator` runs kernels given as :class:`FusedKernel` objects; :class:`FakeCuPy`
is enough of CuPy's API (``RawModule``, ``cuda.Device``) for ember's own launch path
(``codegen/cuda_launch.py``) to compile and launch a module of NumPy arrays here.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess

import numpy as np

from ember.compiler.codegen import cuda

GXX = shutil.which("g++")

_HEADER = r"""
#include <atomic>
#include <barrier>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <math.h>
#include <thread>
#include <vector>
using std::isfinite; using std::isinf; using std::isnan;

#define __global__
#define __device__
#define __forceinline__ inline
#define __shared__ static  /* one block runs at a time: its threads share these */
struct dim3 { unsigned x; };
static thread_local dim3 threadIdx, blockIdx;
static dim3 blockDim, gridDim;
static std::barrier<> *emu_block;
static std::vector<std::barrier<> *> emu_warps;
static uint64_t emu_lanes[32][32];
static std::atomic<int> emu_flag;

static inline void __syncthreads() { emu_block->arrive_and_wait(); }
static inline int __syncthreads_or(int x)
{
    __syncthreads();
    if (threadIdx.x == 0) emu_flag = 0;
    __syncthreads();
    if (x) emu_flag |= 1;
    __syncthreads();
    return emu_flag.load();
}
template <typename T> static inline T __shfl_down_sync(unsigned, T v, int offset)
{
    const unsigned warp = threadIdx.x >> 5, lane = threadIdx.x & 31u;
    std::memcpy(&emu_lanes[warp][lane], &v, sizeof(T));
    emu_warps[warp]->arrive_and_wait();
    T r = v;
    if (lane + offset < 32) std::memcpy(&r, &emu_lanes[warp][lane + offset], sizeof(T));
    emu_warps[warp]->arrive_and_wait();
    return r;
}
static inline float __int_as_float(int i) { float f; std::memcpy(&f, &i, 4); return f; }
static inline int __float_as_int(float f) { int i; std::memcpy(&i, &f, 4); return i; }

struct __half { _Float16 v; };
static inline float __half2float(__half h) { return (float)h.v; }
static inline __half __float2half_rn(float f) { return __half{(_Float16)f}; }
struct __nv_bfloat16 { uint16_t bits; };
static inline float __bfloat162float(__nv_bfloat16 b)
{
    uint32_t u = (uint32_t)b.bits << 16; float f; std::memcpy(&f, &u, 4); return f;
}
static inline __nv_bfloat16 __float2bfloat16_rn(float f)
{
    uint32_t u; std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return {(uint16_t)((u >> 16) | 0x40u)};
    u += 0x7fffu + ((u >> 16) & 1u);
    return {(uint16_t)(u >> 16)};
}

static void emu_launch(int blocks, int threads, const std::function<void()> &body)
{
    gridDim.x = blocks; blockDim.x = threads;
    std::barrier<> block(threads);
    emu_block = &block;
    emu_warps.clear();
    for (int w = 0; w < threads / 32; w++) emu_warps.push_back(new std::barrier<>(32));
    for (int b = 0; b < blocks; b++) {
        std::vector<std::thread> pool;
        for (int t = 0; t < threads; t++)
            pool.emplace_back([&, b, t] { blockIdx.x = b; threadIdx.x = t; body(); });
        for (auto &th : pool) th.join();
    }
    for (auto *w : emu_warps) delete w;
}
"""


def available(workdir: str) -> bool:
    """Whether g++ can build the emulator here (it needs C++20's ``<barrier>`` and
    ``_Float16``: g++ 12 or later on x86-64)."""
    if GXX is None:
        return False
    probe = os.path.join(workdir, "probe.cpp")
    with open(probe, "w") as f:
        f.write(_HEADER + "int main() { return 0; }\n")
    done = subprocess.run([GXX, "-std=c++20", "-fsyntax-only", "-pthread", probe],
                          capture_output=True, text=True)
    return done.returncode == 0


class Emulator:
    """The kernels' module compiled for the CPU; :meth:`run` launches one of them."""

    def __init__(self, kernels, workdir: str):
        self.kernels = list(kernels)
        self.names = [cuda.render_function(k)[0] for k in self.kernels]
        source = cuda.render_module(self.kernels)
        source = "\n".join(line for line in source.splitlines()
                           if not line.startswith("#include <cuda_"))
        source = source.replace('extern "C" __global__', 'extern "C"')
        wrappers = [self._wrapper(i, k, n) for i, (k, n) in
                    enumerate(zip(self.kernels, self.names))]
        path = os.path.join(workdir, "emulated.cpp")
        with open(path, "w") as f:
            f.write(_HEADER + source + "\n".join(wrappers))
        library = os.path.join(workdir, "emulated.so")
        done = subprocess.run([GXX, "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread",
                               "-w", "-o", library, path], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"g++ failed on the emulated kernels ({path}):\n"
                               f"{done.stderr[-4000:]}")
        self.lib = ctypes.CDLL(library)

    @staticmethod
    def _wrapper(index: int, kernel, name: str) -> str:
        args = [f"sizes[{d}]" for d in range(len(kernel.layout.sizes))]
        args += [f"(const {cuda.MEMORY_TYPES[d.name]} *)in[{i}]"
                 for i, (_, d) in enumerate(kernel.inputs)]
        args += [f"({cuda.MEMORY_TYPES[kernel.avals[v][1].name]} *)out[{j}]"
                 for j, v in enumerate(kernel.outputs)]
        return (f'extern "C" void launch_{index}(int blocks, int threads, '
                f"const long long *sizes, void **in, void **out)\n"
                f"{{ emu_launch(blocks, threads, [&] {{ {name}({', '.join(args)}); }}); }}\n")

    def run(self, index: int, arrays, blocks: int, threads: int) -> list:
        """Launch kernel ``index`` on ``arrays`` with ``blocks`` x ``threads``;
        returns its outputs."""
        kernel = self.kernels[index]
        arrays = [np.ascontiguousarray(a, dtype=d.np) for a, (_, d) in zip(arrays, kernel.inputs)]
        outs = [np.full(kernel.avals[v][0], 7, kernel.avals[v][1].np) for v in kernel.outputs]
        sizes = (ctypes.c_longlong * max(1, len(kernel.layout.sizes)))(*kernel.layout.sizes)
        ins = (ctypes.c_void_p * max(1, len(arrays)))(*[a.ctypes.data for a in arrays])
        out = (ctypes.c_void_p * len(outs))(*[o.ctypes.data for o in outs])
        getattr(self.lib, f"launch_{index}")(blocks, threads, sizes, ins, out)
        return outs


# Enough of CuPy for ember.compiler.codegen.cuda_launch --------------------------------------
_SIGNATURE = re.compile(r'extern "C" __global__ void (\w+)\(([^)]*)\)')
# launches are clamped to this many blocks of this many threads (the kernels are correct
# for any grid and any block of whole warps; OS threads are slow to start)
MAX_BLOCKS, MAX_THREADS = 2, 64


def _build(code: str, workdir: str):
    """The library of a module's source with a launcher ``launch_<name>(blocks,
    threads, args)`` per function (``args``: the addresses of its arguments)."""
    wrappers = []
    for name, params in _SIGNATURE.findall(code):
        args = []
        for i, param in enumerate(p.strip() for p in params.split(",")):
            if "*" in param:
                args.append(f"({param[:param.rindex('*') + 1].replace('__restrict__', '')})"
                            f"*(void **)args[{i}]")
            else:
                args.append(f"*(const long long *)args[{i}]")
        call = f"{name}({', '.join(args)});"
        wrappers.append(f'extern "C" void launch_{name}(int blocks, int threads, void **args)'
                        f"\n{{ emu_launch(blocks, threads, [&] {{ {call} }}); }}")
    body = "\n".join(line for line in code.splitlines() if not line.startswith("#include <cuda_"))
    source = _HEADER + body.replace('extern "C" __global__', 'extern "C"') + "\n" + \
        "\n".join(wrappers) + "\n"
    digest = hashlib.sha256(source.encode()).hexdigest()[:16]
    path, library = (os.path.join(workdir, f"module_{digest}{ext}") for ext in (".cpp", ".so"))
    if not os.path.exists(library):
        with open(path, "w") as f:
            f.write(source)
        done = subprocess.run([GXX, "-std=c++20", "-O0", "-shared", "-fPIC", "-pthread", "-w",
                               "-o", library, path], capture_output=True, text=True)
        if done.returncode != 0:
            raise RuntimeError(f"g++ failed on {path}:\n{done.stderr[-4000:]}")
    return ctypes.CDLL(library)


class _Kernel:
    def __init__(self, lib, name: str, owner: "FakeCuPy"):
        self.launch = getattr(lib, f"launch_{name}")
        self.owner = owner

    def __call__(self, grid, block, args, **kwargs):
        assert len(grid) == len(block) == 1 and block[0] % 32 == 0 and grid[0] >= 1
        keep = []
        for a in args:  # the address of each argument's value, as CUDA's launch takes
            if isinstance(a, np.ndarray):
                keep.append(ctypes.c_void_p(a.ctypes.data))
            else:
                assert isinstance(a, np.int64), type(a)
                keep.append(ctypes.c_longlong(int(a)))
        argv = (ctypes.c_void_p * len(keep))(*[ctypes.addressof(k) for k in keep])
        self.launch(min(grid[0], MAX_BLOCKS), min(block[0], MAX_THREADS), argv)
        self.owner.launches += 1


class _RawModule:
    def __init__(self, code: str, owner: "FakeCuPy", options=()):
        self.code, self.options, self.owner = code, options, owner
        self.lib = _build(code, owner.workdir)

    def get_function(self, name: str) -> _Kernel:
        return _Kernel(self.lib, name, self.owner)


class FakeCuPy:
    """``cupy`` as ember's CUDA launch path uses it, on the emulator: ``RawModule``
    compiles with g++, ``cuda.Device()`` is one device of one multiprocessor.
    ``modules``: those compiled; ``launches``: the kernel launches so far."""

    def __init__(self, workdir: str):
        self.workdir = workdir
        self.modules: list = []
        self.launches = 0
        self.cuda = _FakeCUDA()

    def RawModule(self, code: str, options=()):  # noqa: N802 (CuPy's name)
        module = _RawModule(code, self, options)
        self.modules.append(module)
        return module


class _FakeDevice:
    id = 0
    attributes = {"MultiProcessorCount": 1}


class _FakeCUDA:
    @staticmethod
    def Device():  # noqa: N802
        return _FakeDevice()

    @staticmethod
    def get_cuda_path():
        return None
