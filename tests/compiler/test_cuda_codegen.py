"""The CUDA renderer (``ember.compiler.codegen.cuda``) where there is no GPU.

The kernels ``ember.jit`` lowers for CUDA — for every op of the op tables (forward in
float32 and float16, gradients in float32) and for whole training steps of the mlp, cnn
and gpt workloads of DESIGN.md (float32, float16, bfloat16) — are rendered into one
module, compiled with one ``nvcc`` call (syntax and types checked; skipped where
nvcc is absent). The graphs are lowered as for CUDA (half types fused, composites
decomposed), while their kernels run their NumPy steps: the losses must equal eager
mode's. A sample of the kernels then runs in a CPU emulation of CUDA (``cuda_emulator``:
g++, one OS thread per GPU thread) against their steps' NumPy forwards. A few rendered
sources are checked by content, and the launch shapes by value. Nothing here runs on a
GPU.

nvcc makes PTX (``--ptx``: the C++ front end and NVVM, as NVRTC runs them; several
times faster than a cubin, which adds ptxas), with every warning an error."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time

import numpy as np
import pytest

import ember
from ember import dtypes as dt
from ember.compiler import codegen
from ember.compiler.codegen import cuda
from ember.compiler.fused import FusedKernel, Step
from ember.compiler.trace import TraceError
from ember.ops.registry import OPS, AbstractValue, infer
from tests.compiler import cuda_emulator
from tests.compiler.test_op_table import CASES, forward_of, gradient_of
from tests.compiler.test_workloads import _setup
from tests.ops.optable import _samples

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "bench"))
from training import step_function  # noqa: E402

NVCC = shutil.which("nvcc")
SUM_LAST = {"dims": (1,), "keepdim": True, "dtype": None}  # sum's params: over dim 1 of 2
ARCH = "sm_80"  # the oldest GPU with bfloat16 arithmetic


class _Recorder:
    """Stands in for the CUDA renderer: keeps the kernels the jit lowers for CUDA and
    runs them with their steps' NumPy forwards (there is no GPU to launch them on)."""
    name = "cuda"

    def __init__(self, kernels: list):
        self.kernels = kernels

    def render(self, kernel):
        return cuda.render_module([kernel])

    def prepare(self, kernels, compile_now=False, extra=()):
        for k in kernels:
            self.kernels.append(k)
            k.bind(k.evaluate, "numpy")


def _op_table() -> None:
    for case in CASES:
        for dtype in ("float32", "float16"):
            if dtype not in case.dtypes:
                continue
            for sample in _samples(case, dtype):
                _forward(case, sample, dtype)
                if dtype == "float32" and case.grad:
                    _gradient(case, sample)


def _forward(case, sample, dtype):
    args, _, tensors, fn = forward_of(case, sample)
    try:
        ember.jit(fn)(*[args[i] for i in tensors])
    except (TraceError, ember.EmberError):
        pass  # data-dependent shapes, samples that check an error: nothing to lower


def _gradient(case, sample):
    pos, args, grads = gradient_of(case, sample, ember.ones_like)
    if not pos:
        return
    try:
        ember.jit(grads)(*[args[i].detach().requires_grad_() for i in pos])
    except (TraceError, ember.EmberError):
        pass


def _workload_losses(workload: str, dtype, compiled: bool) -> list:
    step = step_function(*_setup(workload, dtype, rows=4)[1:])
    step = ember.jit(step) if compiled else step
    return [float(step()) for _ in range(2)]


WORKLOAD_DTYPES = [ember.float32, ember.float16] + \
    ([ember.bfloat16] if ember.bfloat16.np is not None else [])


@pytest.fixture(scope="module")
def lowered():
    """(the kernels lowered for CUDA, {(workload, dtype): (compiled, eager losses)})."""
    kernels: list = []
    losses = {}
    with pytest.MonkeyPatch.context() as m:
        m.setitem(codegen.RENDERERS, "cuda", lambda: _Recorder(kernels))
        m.setattr(codegen, "renderer_for", lambda device: "cuda")
        _op_table()
        for workload in ("mlp", "cnn", "gpt"):
            for dtype in WORKLOAD_DTYPES:
                losses[workload, dtype.name] = _workload_losses(workload, dtype, True)
    for workload, dtype_name in losses:
        eager = _workload_losses(workload, dt.as_dtype(dtype_name), False)
        losses[workload, dtype_name] = (losses[workload, dtype_name], eager)
    return kernels, losses


def test_the_graphs_lowered_for_cuda_compute_what_eager_mode_computes(lowered):
    _, losses = lowered
    for (workload, dtype), (compiled, eager) in losses.items():
        # (float16 Adam overflows to NaN at the second step, eagerly too)
        np.testing.assert_allclose(compiled, eager, rtol=1e-5 if dtype == "float32" else 0,
                                   equal_nan=True, err_msg=f"{workload} {dtype}")


def test_the_kernels_cover_reductions_and_half_types(lowered):
    kernels, _ = lowered
    halves = {d.name for k in kernels for _, d in k.avals} & {"float16", "bfloat16"}
    assert halves == {"float16"} | ({"bfloat16"} if ember.bfloat16.np is not None else set())
    assert sum(cuda.has_reductions(k) for k in kernels) > 50
    assert any(cuda.has_reductions(k) and any(d.name == "float16" for _, d in k.avals)
               for k in kernels)


@pytest.mark.skipif(NVCC is None, reason="nvcc (the CUDA toolkit) is not installed")
def test_every_lowered_kernel_compiles_with_nvcc(lowered, tmp_path):
    kernels, _ = lowered
    source = cuda.render_module(kernels)
    path = tmp_path / "kernels.cu"
    path.write_text(source)
    start = time.perf_counter()
    done = subprocess.run([NVCC, f"-arch={ARCH}", "--ptx", "-Werror", "all-warnings",
                           "-o", str(tmp_path / "kernels.ptx"), str(path)],
                          capture_output=True, text=True, timeout=300)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        pytest.fail(f"nvcc failed on {source.count('__global__')} kernels ({path}):\n"
                    f"{done.stderr[-6000:]}")
    ptx = (tmp_path / "kernels.ptx").read_text()
    assert ptx.count(".entry ember_") == source.count("__global__")
    print(f"nvcc compiled {source.count('__global__')} kernels in {seconds:.1f} s")


def _emulated_sample(kernels) -> list:
    """Kernels to run in the emulator (where a barrier costs an OS thread switch): one
    per function, of at most 70000 elements (and 64 rows, with reductions); those with
    reductions (the widest rows first) and half types, up to a limit, and every eighth
    other."""
    seen, reducing, halves, others = set(), [], [], []
    for k in kernels:
        name = cuda.render_function(k)[0]
        if name in seen or np.prod(k.domain) > 70000 or \
                (cuda.has_reductions(k) and k.layout.rows > 64):
            continue
        seen.add(name)
        if cuda.has_reductions(k):
            reducing.append(k)
        elif any(d.name in ("float16", "bfloat16") for _, d in k.avals):
            halves.append(k)
        else:
            others.append(k)
    reducing.sort(key=lambda k: -k.layout.sizes[-1])
    return reducing[:80] + halves[:30] + others[::8] + _wide_rows()


def _wide_rows() -> list:
    """Reductions over rows many times wider than a block (the op table's rows are
    narrow, and the workloads' have too many rows for the emulator)."""
    def reduce(name, shape, dtype, first=None):  # name(first(x)) over the last dim
        program = [(first, (0,), {})] if first else []
        dims = {"dims": (len(shape) - 1,), "keepdim": True}
        if name == "sum":
            dims["dtype"] = None
        return _kernel([(shape, dtype)], program + [(name, (len(program),), dims)],
                       domain=shape, reduced=(len(shape) - 1,))
    softmax = _kernel([((3, 300), "float32")],
                      [("amax", (0,), {"dims": (1,), "keepdim": True}), ("sub", (0, 1), {}),
                       ("exp", (2,), {}), ("sum", (3,), SUM_LAST),
                       ("div", (3, 4), {})], domain=(3, 300), reduced=(1,))
    return [softmax, reduce("sum", (2, 500), "float16", "exp"),
            reduce("amax", (2, 257), "float64"), reduce("amin", (3, 130), "float16"),
            reduce("sum", (3, 130), "int32"), reduce("sum", (1, 2000), "float32")]


def _random_inputs(kernel, rng) -> list:
    arrays = []
    for shape, dtype in kernel.inputs:
        if dtype.name == "bool":
            a = rng.random(shape) < 0.5
        elif dtype.is_floating_point:
            a = rng.standard_normal(shape).astype(np.float32)
        else:
            a = rng.integers(-5 if dtype.is_signed else 0, 6, shape)
        arrays.append(np.asarray(a).astype(dtype.np))
    return arrays


# (rtol = atol) per output dtype; half types: a few ulps, since a composite rule rounds
# once where NumPy's steps round after each op
EMULATION_TOL = {"float64": 1e-12, "float32": 2e-5, "float16": 1e-2, "bfloat16": 3e-2}


def test_kernels_run_in_a_cpu_emulation_of_cuda_as_their_steps_do(lowered, tmp_path):
    if not cuda_emulator.available(str(tmp_path)):
        pytest.skip("g++ with C++20 <barrier> and _Float16 is needed for the emulator")
    kernels = _emulated_sample(lowered[0])
    print(f"emulating {len(kernels)} kernels")
    assert sum(cuda.has_reductions(k) and k.layout.sizes[-1] > 64 for k in kernels) >= 5
    emulator = cuda_emulator.Emulator(kernels, str(tmp_path))
    rng = np.random.default_rng(0)
    for i, kernel in enumerate(kernels):
        arrays = _random_inputs(kernel, rng)
        # fewer blocks than rows or elements (grid-stride loops), two warps a block
        blocks, threads = min(cuda.launch_shape(kernel, 1)[0], 3), 64
        with np.errstate(all="ignore"):
            expected = kernel.evaluate(np, *arrays)
        expected = [expected] if kernel.n_outputs == 1 else list(expected)
        for j, (got, want) in enumerate(zip(emulator.run(i, arrays, blocks, threads),
                                            expected)):
            dtype = kernel.avals[kernel.outputs[j]][1]
            what = f"output {j} of {kernel.describe()}\nlaunched {blocks} x {threads}"
            if dtype.is_floating_point:
                tol = EMULATION_TOL[dtype.name]
                np.testing.assert_allclose(got.astype(np.float64),
                                           np.asarray(want).astype(np.float64), rtol=tol,
                                           atol=tol, equal_nan=True, err_msg=what)
            else:
                np.testing.assert_array_equal(got, want, err_msg=what)


# Rendered sources, by content ---------------------------------------------------------
def _kernel(inputs, program, outputs=None, domain=None, reduced=()):
    """A kernel over ``inputs`` ((shape, dtype name) pairs) running ``program``, a list
    of ``(op name, argument indices, params)``; returns the last step by default."""
    avals = [(tuple(shape), dt.as_dtype(name)) for shape, name in inputs]
    steps = []
    for name, args, params in program:
        out = infer(OPS[name], *[AbstractValue(*avals[i]) for i in args], **params)
        steps.append(Step(OPS[name], args, params, out.shape, out.dtype))
        avals.append((out.shape, out.dtype))
    outputs = [len(avals) - 1] if outputs is None else outputs
    domain = domain or np.broadcast_shapes(*[a[0] for a in avals])
    return FusedKernel(avals[:len(inputs)], [], steps, outputs, domain, reduced)


def test_an_elementwise_kernel_is_a_grid_stride_loop_with_broadcast_offsets():
    k = _kernel([((4, 5), "float32"), ((1, 5), "float32"), ((4, 1), "float32")],
                [("mul", (0, 1), {}), ("add", (3, 2), {})])
    name, code, halves = cuda.render_function(k)
    assert name.startswith("ember_") and f'extern "C" __global__ void {name}(' in code
    assert "e += (int64_t)gridDim.x * blockDim.x" in code
    assert "in0[e]" in code and "in1[i1 * 1]" in code and "in2[i0 * 1]" in code
    assert halves == set() and "__half" not in cuda.render_module([k])
    # sizes are arguments: the same kernel over other shapes is the same function
    other = _kernel([((7, 3), "float32"), ((1, 3), "float32"), ((7, 1), "float32")],
                    [("mul", (0, 1), {}), ("add", (3, 2), {})])
    assert cuda.render_function(other)[0] == name


def test_a_reduction_is_a_block_per_row_with_a_shuffle_tree():
    k = _kernel([((6, 100), "float32")], [("amax", (0,), {"dims": (1,), "keepdim": True}),
                                          ("sub", (0, 1), {}), ("exp", (2,), {}),
                                          ("sum", (3,), SUM_LAST),
                                          ("div", (3, 4), {})], domain=(6, 100), reduced=(1,))
    code = cuda.render_function(k)[1]
    assert "for (int64_t o = blockIdx.x; o < rows; o += gridDim.x)" in code
    assert "for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)" in code
    assert code.count("ember_block_reduce(") == 2
    assert "ember_max()" in code and "ember_sum()" in code
    assert "__syncthreads_or(nan1)" in code  # amax propagates NaN, as NumPy's does
    assert "double acc4" in code             # float32 sums add in double, as in C
    module = cuda.render_module([k])
    assert "__shfl_down_sync" in module and "__shared__ float red1[33]" in code


def test_half_types_are_computed_and_accumulated_in_float():
    k = _kernel([((3, 50), "float16")], [("exp", (0,), {}),
                                         ("sum", (1,), SUM_LAST)],
                domain=(3, 50), reduced=(1,))
    name, code, halves = cuda.render_function(k)
    assert halves == {"float16"}
    assert "const __half *__restrict__ in0" in code and "__half *__restrict__ out0" in code
    assert "float acc2 = 0;" in code                       # a float accumulator
    assert "const float v0 = __half2float(p0[c]);" in code  # loaded into float
    assert "ember_round_f16(ember_expf(v0))" in code       # each op rounds to half
    assert "__float2half_rn(v2)" in code                   # stored as half
    assert cuda.render_module([k]).startswith("#include <cuda_fp16.h>")


def test_launch_shapes():
    elementwise = _kernel([((1000, 1000), "float32")], [("exp", (0,), {})])
    assert cuda.launch_shape(elementwise, 10) == (10 * cuda.BLOCKS_PER_MULTIPROCESSOR, 256)
    small = _kernel([((3,), "float32")], [("exp", (0,), {})])
    assert cuda.launch_shape(small, 10) == (1, 256)
    rows = _kernel([((5, 10), "float32")], [("sum", (0,), SUM_LAST)],
                   domain=(5, 10), reduced=(1,))
    assert cuda.launch_shape(rows, 10) == (5, 32)     # a warp covers a row of 10
    wide = _kernel([((2, 3000), "float32")], [("sum", (0,), SUM_LAST)],
                   domain=(2, 3000), reduced=(1,))
    assert cuda.launch_shape(wide, 10) == (2, cuda.REDUCE_THREADS)


def test_without_cupy_rendering_works_and_compiling_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    k = _kernel([((4,), "float32")], [("exp", (0,), {})])
    assert "__global__" in cuda.CUDARenderer().render(k)
    with pytest.raises(ember.EmberError, match="CUDA kernel renderer needs CuPy"):
        codegen.prepare_kernels([k], renderer="cuda")
    assert k.backend is None
