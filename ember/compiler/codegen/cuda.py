"""The CUDA renderer: a :class:`~ember.compiler.fused.FusedKernel` as one CUDA C
``extern "C" __global__`` function, compiled by NVRTC through CuPy's ``RawModule``.

The loops are the C renderer's, spread over threads; the scalar math is the same table
(``scalar.py``), so a kernel computes what its C twin computes:

- no reductions: a grid-stride loop over the flat index of the domain; an input that is
  broadcast along some collapsed dims is read at the offset its pattern gives (the same
  index arithmetic as the C renderer's rows);
- reductions: one block per row of the outer dims (a grid-stride loop over rows), the
  threads striding over the reduced dim; each pass of the C renderer becomes a strided
  loop, then a tree reduction of the threads' partial results (warp shuffles, then one
  value per warp through shared memory), whose result every thread reads.

float16 and bfloat16 values live in memory as ``__half`` and ``__nv_bfloat16`` but are
computed in float: each op converts its operands, computes as for float32 and rounds its
result back (NumPy's float16 loops do the same); their sums accumulate in float.

Sizes are arguments (``s0, s1, ...``), so kernels that differ only in shape share one
function; a function's name is the hash of its code. :meth:`CUDARenderer.prepare`
compiles all the kernels of a graph as one module and binds each kernel to a launcher
on the current stream (``cuda_launch.py``, the only part that needs CuPy).
:func:`render_module` needs no CuPy: the tests compile its output with ``nvcc``.
"""
from __future__ import annotations

import hashlib
import math

from ..fused import INNER, ROW, UNIFORM, FusedKernel
from . import scalar

# Threads per block of an elementwise kernel; a reduction uses the least power of two
# from 32 to REDUCE_THREADS that covers its row.
BLOCK_THREADS = 256
REDUCE_THREADS = 256
# Blocks launched at most, per multiprocessor (grid-stride loops do the rest).
BLOCKS_PER_MULTIPROCESSOR = 32

MEMORY_TYPES = dict(scalar.C_TYPES, float16="__half", bfloat16="__nv_bfloat16")
_TO_FLOAT = {"float16": "__half2float", "bfloat16": "__bfloat162float"}
_ROUND = {"float16": "ember_round_f16", "bfloat16": "ember_round_bf16"}
_HALF_HEADERS = {
    "float16": """\
#include <cuda_fp16.h>
static __device__ __forceinline__ float ember_round_f16(float x)
{
    return __half2float(__float2half_rn(x));
}
""",
    "bfloat16": """\
#include <cuda_bf16.h>
static __device__ __forceinline__ float ember_round_bf16(float x)
{
    return __bfloat162float(__float2bfloat16_rn(x));
}
"""}
_STORE = {"float16": "__float2half_rn", "bfloat16": "__float2bfloat16_rn"}

PRELUDE = """\
/* NVRTC has no <stdint.h>: the scalar rules' fixed-width names stand for types of
   this module's own (so that they cannot clash with a header's). */
typedef signed char ember_i8;
typedef short ember_i16;
typedef int ember_i32;
typedef long long ember_i64;
typedef unsigned char ember_u8;
#define int8_t ember_i8
#define int16_t ember_i16
#define int32_t ember_i32
#define int64_t ember_i64
#define uint8_t ember_u8
#ifndef INFINITY
#define INFINITY __int_as_float(0x7f800000)
#endif
#ifndef NAN
#define NAN __int_as_float(0x7fc00000)
#endif

""" + scalar.expf_source("static __device__ __forceinline__",
                       lambda v: f"__float_as_int({v})",
                       lambda v: f"__int_as_float({v})") + """
/* the scalar rules' float32 log and log1p: CUDA's own (one instruction sequence each) */
static __device__ __forceinline__ float ember_logf(float x) { return logf(x); }
static __device__ __forceinline__ float ember_log1pf(float x) { return log1pf(x); }
static __device__ __forceinline__ float ember_tanhf(float x) { return tanhf(x); }
struct ember_sum {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const
    { return a + b; }
};
struct ember_max {  /* NaN is tracked apart (a flag per reduction) */
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const
    { return b > a ? b : a; }
};
struct ember_min {
    template <typename T> __device__ __forceinline__ T operator()(T a, T b) const
    { return b < a ? b : a; }
};

/* The total of one value per thread of the block (blockDim.x a multiple of 32, at most
   1024), which every thread gets back: a shuffle tree within each warp, then the warps'
   totals through shared memory, reduced by the first warp. shared holds 33 values: one
   per warp and the result, kept apart so that no warp can overwrite it at its next
   reduction while another still reads it. */
template <typename T, typename Op>
static __device__ __forceinline__ T ember_block_reduce(T v, T start, T *shared, Op op)
{
    const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
    for (int offset = 16; offset > 0; offset >>= 1)
        v = op(v, (T)__shfl_down_sync(0xffffffffu, v, offset));
    if (lane == 0)
        shared[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < (blockDim.x >> 5) ? shared[lane] : start;
        for (int offset = 16; offset > 0; offset >>= 1)
            v = op(v, (T)__shfl_down_sync(0xffffffffu, v, offset));
        if (lane == 0)
            shared[32] = v;
    }
    __syncthreads();
    return shared[32];
}
"""

_COMBINE = {"sum": "ember_sum", "amax": "ember_max", "amin": "ember_min"}


class CUDARenderer:
    """Renders fused kernels as CUDA C, compiles a graph's kernels as one NVRTC module
    through CuPy and binds each kernel to a launcher."""
    name = "cuda"

    def render(self, kernel: FusedKernel) -> str:
        """A module holding ``kernel``'s function alone (compilable as it is)."""
        return render_module([kernel])

    def prepare(self, kernels, compile_now: bool = False, extra=()) -> None:
        """Bind every kernel to its function in one module (compiled at the first
        call of any of them, or here with ``compile_now``). ``extra`` (the CPU's
        hand-written loops) does not apply on the GPU."""
        from .cuda_launch import prepare
        prepare(kernels, compile_now)


def render_function(kernel: FusedKernel) -> tuple[str, str, set]:
    """``(name, code, half dtype names it uses)`` of ``kernel``'s ``__global__``
    function; the name is ``ember_`` and the hash of the code."""
    writer = _Writer(kernel)
    code = writer.function("EMBER_NAME")
    name = "ember_" + hashlib.sha256(code.encode()).hexdigest()[:20]
    return name, code.replace("EMBER_NAME", name), writer.halves


def render_module(kernels) -> str:
    """The CUDA C source of one module holding the functions of ``kernels`` (each
    once), with the headers and helpers they use. Needs no GPU and no CuPy."""
    return module_source([render_function(k) for k in kernels])


def module_source(functions) -> str:
    """The module of ``functions``, :func:`render_function`'s results."""
    seen, codes, halves = set(), [], set()
    for name, code, used in functions:
        halves |= used
        if name not in seen:
            seen.add(name)
            codes.append(code)
    head = [_HALF_HEADERS[h] for h in scalar.HALF_TYPES if h in halves]
    return "\n".join(head + [PRELUDE] + codes)


def has_reductions(kernel: FusedKernel) -> bool:
    """Whether ``kernel`` reduces (a block per row) or not (a flat grid-stride loop)."""
    return any(s.is_reduction for s in kernel.steps)


def launch_shape(kernel: FusedKernel, multiprocessors: int) -> tuple[int, int]:
    """``(blocks, threads per block)`` for ``kernel``: a block per row for a kernel with
    reductions (32 to :data:`REDUCE_THREADS` threads, as its row needs), enough blocks
    of :data:`BLOCK_THREADS` for every element otherwise; at most
    :data:`BLOCKS_PER_MULTIPROCESSOR` blocks per multiprocessor."""
    cap = max(1, multiprocessors * BLOCKS_PER_MULTIPROCESSOR)
    sizes = kernel.layout.sizes
    if not sizes:
        return 1, 32
    if has_reductions(kernel):
        threads = 32
        while threads < min(sizes[-1], REDUCE_THREADS):
            threads *= 2
        return max(1, min(kernel.layout.rows, cap)), threads
    return max(1, min(-(-math.prod(sizes) // BLOCK_THREADS), cap)), BLOCK_THREADS


class _Writer:
    """The code of one kernel's function (see the module's docstring)."""

    def __init__(self, kernel: FusedKernel):
        self.k = kernel
        self.level, self.phase = kernel.schedule
        self.patterns = kernel.layout.patterns
        self.ndim = len(kernel.layout.sizes)
        self.out_of = {v: j for j, v in enumerate(kernel.outputs)}
        self.reductions = [kernel.first_step + j for j, s in enumerate(kernel.steps)
                           if s.is_reduction]
        self.halves = {d.name for _, d in kernel.avals if d.name in scalar.HALF_TYPES}
        self.needed = self.reached_from_outputs()
        self.lines: list[str] = []

    def reached_from_outputs(self) -> set:
        """The values the outputs are computed from (a kernel may hold steps whose
        results nothing reads; their inputs are then not read either)."""
        k, found = self.k, set()
        stack = list(k.outputs)
        while stack:
            i = stack.pop()
            if i not in found:
                found.add(i)
                if i >= k.first_step:
                    stack.extend(k.steps[i - k.first_step].args)
        return found

    # Types and values -----------------------------------------------------------------
    def emit(self, depth: int, text: str) -> None:
        self.lines.append("    " * depth + text)

    def dtype(self, i: int):
        return self.k.avals[i][1]

    def local(self, i: int) -> str:
        """The C type value ``i`` is computed in (float for the half types)."""
        return scalar.c_type(scalar.compute_dtype(self.dtype(i)))

    def load(self, i: int, ref: str) -> str:
        convert = _TO_FLOAT.get(self.dtype(i).name)
        return f"{convert}({ref})" if convert else ref

    def stored(self, i: int, value: str) -> str:
        convert = _STORE.get(self.dtype(i).name)
        return f"{convert}({value})" if convert else value

    def expr(self, i: int) -> str:
        k = self.k
        step = k.steps[i - k.first_step]
        compute = scalar.compute_dtype
        text = scalar.expression(step.op.name, [f"v{a}" for a in step.args],
                                 [compute(k.avals[a][1]) for a in step.args],
                                 compute(step.dtype), step.params)
        if text is None:  # the fuse pass only groups ops the table can express
            raise NotImplementedError(f"{step.op.name}: no CUDA rule for these dtypes")
        rounding = _ROUND.get(step.dtype.name)
        return f"{rounding}({text})" if rounding else text

    def is_input(self, i: int) -> bool:
        return i < len(self.k.inputs)

    def is_literal(self, i: int) -> bool:
        return len(self.k.inputs) <= i < self.k.first_step

    # The function ------------------------------------------------------------------
    def function(self, name: str) -> str:
        k = self.k
        params = [f"const int64_t s{d}" for d in range(self.ndim)]
        params += [f"const {MEMORY_TYPES[d.name]} *__restrict__ in{i}"
                   for i, (_, d) in enumerate(k.inputs)]
        params += [f"{MEMORY_TYPES[self.dtype(v).name]} *__restrict__ out{j}"
                   for j, v in enumerate(k.outputs)]
        self.emit(0, f"/* ember fused kernel {k.name}: {len(k.steps)} ops, {self.ndim} "
                     "collapsed dims */")
        self.emit(0, f'extern "C" __global__ void {name}({", ".join(params)})')
        self.emit(0, "{")
        self.prologue()
        if self.ndim:
            if self.reductions:
                self.row_loop()
            else:
                self.flat_loop()
        self.emit(0, "}")
        return "\n".join(self.lines) + "\n"

    def prologue(self) -> None:
        """One-element values, computed by every thread; stored once."""
        k = self.k
        for i in range(len(k.avals)):
            if self.level[i] != UNIFORM or i not in self.needed:
                continue
            if self.is_input(i):
                value = self.load(i, f"in{i}[0]")
            elif self.is_literal(i):
                lit = k.literals[i - len(k.inputs)]
                value = scalar.literal(lit.reshape(-1)[0], scalar.compute_dtype(self.dtype(i)))
            else:
                value = self.expr(i)
            self.emit(1, f"const {self.local(i)} v{i} = {value};")
            if i in self.out_of:
                self.emit(1, "if (blockIdx.x == 0 && threadIdx.x == 0)")
                self.emit(2, f"out{self.out_of[i]}[0] = {self.stored(i, f'v{i}')};")

    def flat_loop(self) -> None:
        """No reductions: a grid-stride loop over every element of the domain."""
        nd = self.ndim
        total = " * ".join(f"s{d}" for d in range(nd))
        self.emit(1, f"const int64_t total = {total};")
        self.emit(1, "for (int64_t e = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; "
                     "e < total; e += (int64_t)gridDim.x * blockDim.x) {")
        k = self.k
        offsets = {i: self.flat_offset(self.patterns[i]) for i in range(len(k.inputs))
                   if self.level[i] != UNIFORM and i in self.needed}
        indexed = [i for i, off in offsets.items() if off is None]
        if indexed:
            self.indices(2, "e", nd, [self.patterns[i] for i in indexed])
            for i in indexed:
                offsets[i] = self.indexed_offset(self.patterns[i], nd)
        done: set = set()

        def need(i):
            if self.level[i] == UNIFORM or i in done:
                return
            done.add(i)
            if self.is_input(i):
                self.emit(2, f"const {self.local(i)} v{i} = "
                             f"{self.load(i, f'in{i}[{offsets[i]}]')};")
                return
            for a in k.steps[i - k.first_step].args:
                need(a)
            self.emit(2, f"const {self.local(i)} v{i} = {self.expr(i)};")

        for i, j in sorted(self.out_of.items()):
            if self.level[i] == UNIFORM:
                continue
            need(i)
            if all(self.patterns[i]):
                self.emit(2, f"out{j}[e] = {self.stored(i, f'v{i}')};")
            else:  # one value per row: stored by the row's first element
                self.emit(2, f"if (e % s{nd - 1} == 0)")
                self.emit(3, f"out{j}[e / s{nd - 1}] = {self.stored(i, f'v{i}')};")
        self.emit(1, "}")

    @staticmethod
    def flat_offset(pattern):
        """An input's offset at flat index ``e`` when it is simple (None: needs the
        indices of the collapsed dims)."""
        return "e" if all(pattern) else None

    def indices(self, depth: int, flat: str, dims: int, patterns) -> None:
        """Declare ``i<d>``, the index along collapsed dim ``d`` of the first ``dims``,
        from the flat index ``flat`` over them, for the dims some pattern varies along."""
        used = [d for d in range(dims) if any(p[d] for p in patterns)]
        self.emit(depth, f"int64_t rest = {flat};")
        for d in range(dims - 1, used[0], -1):
            if d in used:
                self.emit(depth, f"const int64_t i{d} = rest % s{d};")
            self.emit(depth, f"rest /= s{d};")
        first = used[0]
        self.emit(depth, f"const int64_t i{first} = rest{f' % s{first}' if first else ''};")

    @staticmethod
    def indexed_offset(pattern, dims: int) -> str:
        """The offset of an input varying along ``pattern``, from the indices
        ``i0...`` of the first ``dims`` collapsed dims."""
        terms = []
        for d in range(dims):
            if pattern[d]:
                stride = [f"s{e}" for e in range(d + 1, len(pattern)) if pattern[e]]
                terms.append(f"i{d} * {' * '.join(stride) or '1'}")
        return " + ".join(terms) or "0"

    def row_loop(self) -> None:
        """Reductions: a block per row of the outer dims; each pass a strided loop over
        the row, then the block's reductions of what the pass fed them."""
        k, nd = self.k, self.ndim
        for r in self.reductions:
            self.emit(1, f"__shared__ {self.accumulator(r)[0]} red{r}[33];")
        rows = " * ".join(f"s{d}" for d in range(nd - 1)) or "1"
        self.emit(1, f"const int64_t rows = {rows}, cols = s{nd - 1};")
        self.emit(1, "for (int64_t o = blockIdx.x; o < rows; o += gridDim.x) {")
        offsets = {}
        for i in range(len(k.inputs)):
            if self.level[i] != UNIFORM and i in self.needed:
                offsets[i] = self.row_offset(self.patterns[i])
        indexed = [i for i, off in offsets.items() if off is None]
        if indexed:
            self.indices(2, "o", nd - 1, [self.patterns[i] for i in indexed])
            for i in indexed:
                offsets[i] = self.indexed_offset(self.patterns[i], nd - 1)
        pointers = {}
        for i, off in offsets.items():
            mem = MEMORY_TYPES[self.dtype(i).name]
            if self.level[i] == ROW:
                self.emit(2, f"const {self.local(i)} v{i} = {self.load(i, f'in{i}[{off}]')};")
            else:
                self.emit(2, f"const {mem} *__restrict__ p{i} = in{i} + {off};")
                pointers[i] = f"p{i}"
        stores = {}
        for i, j in self.out_of.items():
            if self.level[i] == INNER:
                mem = MEMORY_TYPES[self.dtype(i).name]
                self.emit(2, f"{mem} *__restrict__ q{j} = out{j} + o * cols;")
                stores[i] = f"q{j}"
        # pass p feeds the reductions whose results are ready at p + 1, and stores the
        # inner outputs computed at p
        n_passes = max([1] + [self.phase[r] for r in self.reductions] +
                       [self.phase[i] + 1 for i in stores])
        for p in range(n_passes):
            self.row_values(2, p)
            self.inner_pass(2, p, pointers, stores)
        self.row_values(2, n_passes)
        self.emit(1, "}")

    @staticmethod
    def row_offset(pattern):
        """An input's offset at row ``o`` when it is simple (None: needs indices)."""
        outer = pattern[:-1]
        if all(outer):
            return "o * cols" if pattern[-1] else "o"
        return "0" if not any(outer) else None

    def accumulator(self, r: int) -> tuple[str, str]:
        """(C type, start value) of reduction ``r``'s accumulator: float for the half
        types, else the C renderer's (double for float sums)."""
        step = self.k.steps[r - self.k.first_step]
        out = scalar.compute_dtype(step.dtype)
        if step.dtype.name in scalar.HALF_TYPES:
            acc_type = "float"
        else:
            acc_type = scalar.accumulator_type(step.op.name, out)
        return acc_type, scalar.accumulator_start(step.op.name, out)

    def row_values(self, depth: int, p: int) -> None:
        """Row values that become ready at pass ``p`` (after its reductions)."""
        k = self.k
        for j, step in enumerate(k.steps):
            i = k.first_step + j
            if self.level[i] != ROW or step.is_reduction or self.phase[i] != p:
                continue
            self.emit(depth, f"const {self.local(i)} v{i} = {self.expr(i)};")
            self.store_row(depth, i)

    def store_row(self, depth: int, i: int) -> None:
        if i in self.out_of:
            self.emit(depth, "if (threadIdx.x == 0)")
            self.emit(depth + 1, f"out{self.out_of[i]}[o] = {self.stored(i, f'v{i}')};")

    def inner_pass(self, depth: int, p: int, pointers, stores) -> None:
        k = self.k
        reducing = [r for r in self.reductions if self.phase[r] == p + 1]
        if not reducing and not any(self.phase[i] == p for i in stores):
            return
        for r in reducing:
            acc_type, start = self.accumulator(r)
            self.emit(depth, f"{acc_type} acc{r} = {start};")
            if scalar.tracks_nan(k.steps[r - k.first_step].op.name,
                                 scalar.compute_dtype(self.dtype(r))):
                self.emit(depth, f"int nan{r} = 0;")
        self.emit(depth, "for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {")
        self.inner_body(depth + 1, p, pointers, stores, reducing)
        self.emit(depth, "}")
        for r in reducing:
            step = k.steps[r - k.first_step]
            acc_type, start = self.accumulator(r)
            self.emit(depth, f"acc{r} = ember_block_reduce(acc{r}, ({acc_type})({start}), "
                             f"red{r}, {_COMBINE[step.op.name]}());")
            local = self.local(r)
            value = f"({local})acc{r}"
            if step.dtype.name in _ROUND and step.op.name == "sum":
                value = f"{_ROUND[step.dtype.name]}({value})"
            if scalar.tracks_nan(step.op.name, scalar.compute_dtype(step.dtype)):
                self.emit(depth, f"nan{r} = __syncthreads_or(nan{r});")
                value = f"nan{r} ? ({local})NAN : {value}"
            self.emit(depth, f"const {local} v{r} = {value};")
            self.store_row(depth, r)

    def inner_body(self, depth: int, p: int, pointers, stores, reducing) -> None:
        """The loop body of pass ``p``: the inner values it stores or feeds to its
        reductions (a value an earlier pass stored is read back from there)."""
        k = self.k
        done: set = set()

        def need(i):
            if self.level[i] != INNER or i in done:
                return
            done.add(i)
            if i in pointers:
                self.emit(depth, f"const {self.local(i)} v{i} = "
                                 f"{self.load(i, f'{pointers[i]}[c]')};")
                return
            if self.phase[i] < p and i in stores:  # an earlier pass stored it
                self.emit(depth, f"const {self.local(i)} v{i} = "
                                 f"{self.load(i, f'{stores[i]}[c]')};")
                return
            for a in k.steps[i - k.first_step].args:
                need(a)
            self.emit(depth, f"const {self.local(i)} v{i} = {self.expr(i)};")
            if i in stores and self.phase[i] == p:
                self.emit(depth, f"{stores[i]}[c] = {self.stored(i, f'v{i}')};")

        for i in sorted(stores):
            if self.phase[i] == p:
                need(i)
        for r in reducing:
            step = k.steps[r - k.first_step]
            (a,) = step.args
            need(a)
            self.emit(depth, scalar.accumulate(step.op.name, f"acc{r}", f"v{a}"))
            if scalar.tracks_nan(step.op.name, scalar.compute_dtype(step.dtype)):
                self.emit(depth, f"nan{r} |= v{a} != v{a};")


__all__ = ["CUDARenderer", "render_function", "render_module", "module_source", "launch_shape",
           "has_reductions", "MEMORY_TYPES", "PRELUDE"]
