"""Matrix products on the CPU, driven from ember's own thread pool.

NumPy's OpenBLAS runs a product over its own worker threads, and after each product
those workers keep spinning for a long while (tens of milliseconds) waiting for more.
In a training step that keeps one of two cores busy with nothing, while ember's
generated kernels run on OpenMP threads of their own: a softmax right after a product
ran 3 times slower than alone. So OpenBLAS is asked for one thread, and a large product
is split into row (or column) blocks that the OpenMP threads compute side by side, each
with a one-thread GEMM: everything parallel in ember shares one pool. That GEMM is
ember's own (:mod:`ember.backends.cpu_gemm`, faster than OpenBLAS at a model's sizes) for
products up to ``OWN_GEMM_MAX_FLOPS``, OpenBLAS's above.

It is on by default (``EMBER_BLAS=numpy`` turns it off): measured on the reference
training steps (alternating processes, medians of 5), ember.jit's steps took 4 % (mlp),
10 % (gpt) and 14 % (cnn) less time, and eager steps the same or up to 4 % less. Asking
OpenBLAS for one thread holds for the whole process from ember's first product: NumPy
products outside ember then run on one thread too. It applies to float32 and float64
operands whose last two dims are rows or columns of unit stride, with a C compiler to
build the small driver; anything else (a NumPy without OpenBLAS, a forked child) is
``np.matmul``.

Each block can end with an epilogue (a bias added to its rows, then ReLU), applied while
the block is in cache: a Linear's bias, and the ReLU ``ember.jit`` folds into it. A row
times a transposed matrix (a Linear at batch 1) is OpenBLAS's GEMV on each thread's block
of weight rows (about 15 % faster than the driver's own GEMV it replaced, and 1.5 times
OpenBLAS's GEMM at M = 1). A product's parameters are made once per shape (a *plan*); a
call then writes its arrays' pointers, read from the array objects
(:mod:`ember.backends.addresses`), and calls the driver.
"""
from __future__ import annotations

import ctypes
import glob
import math
import os
import threading

import numpy as np

from .addresses import C_ARRAY_DATA, Plans, address, scratch, takes_arrays
from . import cpu_gemm

# Smaller products run on one thread (splitting costs more than it saves there), unless
# their operands are large: a matrix-vector product (a Linear layer at batch 1) is
# bound by memory, and two cores each reading half the weights take half the time.
MIN_PARALLEL_FLOPS = 1 << 21
MIN_PARALLEL_BYTES = 1 << 19

# ember's own GEMM (:mod:`cpu_gemm`) for the driver's products (and the convolution
# loops'); ``EMBER_GEMM=openblas`` keeps OpenBLAS's
OWN_GEMM = os.environ.get("EMBER_GEMM", "").strip().lower() != "openblas"
# larger products are OpenBLAS's, whose blocking for big matrices is better
OWN_GEMM_MAX_FLOPS = 1 << 28

_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)
_np_matmul = np.matmul
_pid = os.getpid()
_state: dict = {}

# The driver: p = [gemm, int64 ints?, item size, threads, batch, M, N, K,
#                  A, lda, A batch stride, A transposed, B, ldb, B stride, B transposed,
#                  C, C batch stride, bias (N values) or 0, relu, ember's own GEMM for
#                  this dtype (cpu_gemm.address) or 0, inner batch count, A outer batch
#                  stride, B outer batch stride, OpenBLAS's GEMV or 0]; strides in
#                  elements; A, B, C and bias filled in per call by the C side (the
#                  plan's params hold 0 for them, 1 for a bias that is there, and a 26th
#                  entry: where an array object keeps its data pointer). Product b of the
#                  batch is at (b / inner) * outer stride + (b % inner) * batch stride:
#                  batch dims that flatten in two groups (attention's heads of a
#                  transposed view) need no copy;
# C is contiguous (ldc = N). Each block is the own GEMM's where given (else OpenBLAS's)
# and adds the bias to its rows and applies the relu right after its product, while the
# block is in cache.
SOURCE = cpu_gemm.CALLER + C_ARRAY_DATA + r"""
#include <stdint.h>
#include <string.h>
#include <omp.h>
#define GEMM_TYPES(T, I) \
    typedef void (*T##_l)(int, int, int, int64_t, int64_t, int64_t, T, const T *, int64_t, \
                          const T *, int64_t, T, T *, int64_t); \
    typedef void (*T##_i)(int, int, int, int32_t, int32_t, int32_t, T, const T *, int32_t, \
                          const T *, int32_t, T, T *, int32_t);
GEMM_TYPES(float, 0)
GEMM_TYPES(double, 0)
typedef void (*sgemv_l)(int, int, int64_t, int64_t, float, const float *, int64_t,
                        const float *, int64_t, float, float *, int64_t);
typedef void (*dgemv_l)(int, int, int64_t, int64_t, double, const double *, int64_t,
                        const double *, int64_t, double, double *, int64_t);

#define EPILOGUE(T)                                                                   \
    static void epilogue_##T(T *C, int64_t ldc, int64_t m, int64_t n, const T *bias,      \
                             int relu)                                                    \
    {                                                                                     \
        for (int64_t i = 0; i < m; i++) {                                                 \
            T *row = C + i * ldc;                                                         \
            if (bias && relu) {                                                           \
                _Pragma("omp simd")                                                       \
                for (int64_t j = 0; j < n; j++) {                                         \
                    const T v = row[j] + bias[j];                                         \
                    row[j] = v < 0 ? 0 : v;                                               \
                }                                                                         \
            } else if (bias) {                                                            \
                _Pragma("omp simd")                                                       \
                for (int64_t j = 0; j < n; j++)                                           \
                    row[j] += bias[j];                                                    \
            } else {                                                                      \
                _Pragma("omp simd")                                                       \
                for (int64_t j = 0; j < n; j++)                                           \
                    row[j] = row[j] < 0 ? 0 : row[j];                                     \
            }                                                                             \
        }                                                                                 \
    }
EPILOGUE(float)
EPILOGUE(double)

static void block(const int64_t *p, int64_t b, int64_t m0, int64_t m1, int64_t n0, int64_t n1)
{
    const int64_t item = p[2], K = p[7], lda = p[9], ldb = p[13], ldc = p[6];
    const int ta = p[11] ? 112 : 111, tb = p[15] ? 112 : 111;
    const int64_t bo = b / p[21], bi = b % p[21];  /* outer and inner batch index */
    const char *A = (const char *)p[8] +
                    (bo * p[22] + bi * p[10] + (p[11] ? m0 : m0 * lda)) * item;
    const char *B = (const char *)p[12] +
                    (bo * p[23] + bi * p[14] + (p[15] ? n0 * ldb : n0)) * item;
    char *C = (char *)p[16] + (b * p[17] + m0 * ldc + n0) * item;
    const int64_t m = m1 - m0, n = n1 - n0;
    const int64_t ai = p[11] ? 1 : lda, ak = p[11] ? lda : 1;
    const int64_t bk = p[15] ? 1 : ldb, bj = p[15] ? ldb : 1;
    const int row_times_t = m == 1 && !p[11] && p[15];  /* a Linear at batch 1 */
    if (row_times_t && p[24] && item == 4)  /* (OpenBLAS's GEMV: p[24] is 0 unless ints are
                                               64-bit) */
        ((sgemv_l)p[24])(101, 111, n, K, 1.0f, (const float *)B, ldb, (const float *)A, 1,
                         0.0f, (float *)C, 1);
    else if (row_times_t && p[24])
        ((dgemv_l)p[24])(101, 111, n, K, 1.0, (const double *)B, ldb, (const double *)A, 1,
                         0.0, (double *)C, 1);
    else if (p[20] && !row_times_t && item == 4 &&
             !((own_gemm_float)p[20])(m, n, K, (const float *)A, ai, ak, (const float *)B, bk,
                                      bj, (float *)C, ldc, 0))
        ;
    else if (p[20] && !row_times_t && item == 8 &&
             !((own_gemm_double)p[20])(m, n, K, (const double *)A, ai, ak, (const double *)B,
                                       bk, bj, (double *)C, ldc, 0))
        ;
    else if (item == 4 && p[1])
        ((float_l)p[0])(101, ta, tb, m, n, K, 1.0f, (const float *)A, lda, (const float *)B,
                        ldb, 0.0f, (float *)C, ldc);
    else if (item == 4)
        ((float_i)p[0])(101, ta, tb, (int32_t)m, (int32_t)n, (int32_t)K, 1.0f,
                        (const float *)A, (int32_t)lda, (const float *)B, (int32_t)ldb, 0.0f,
                        (float *)C, (int32_t)ldc);
    else if (p[1])
        ((double_l)p[0])(101, ta, tb, m, n, K, 1.0, (const double *)A, lda,
                         (const double *)B, ldb, 0.0, (double *)C, ldc);
    else
        ((double_i)p[0])(101, ta, tb, (int32_t)m, (int32_t)n, (int32_t)K, 1.0,
                         (const double *)A, (int32_t)lda, (const double *)B, (int32_t)ldb,
                         0.0, (double *)C, (int32_t)ldc);
    if (!p[18] && !p[19])
        return;
    if (item == 4)
        epilogue_float((float *)C, ldc, m, n, p[18] ? (const float *)p[18] + n0 : 0, (int)p[19]);
    else
        epilogue_double((double *)C, ldc, m, n, p[18] ? (const double *)p[18] + n0 : 0,
                        (int)p[19]);
}

static void product(const int64_t *p)
{
    const int threads = (int)p[3];
    const int64_t batch = p[4], M = p[5], N = p[6];
    if (threads <= 1) {
        for (int64_t b = 0; b < batch; b++)
            block(p, b, 0, M, 0, N);
        return;
    }
    #pragma omp parallel num_threads(threads)
    {
        const int64_t t = omp_get_thread_num(), n = omp_get_num_threads();
        if (batch >= 2 * n || (batch >= n && batch % n == 0)) {
            for (int64_t b = batch * t / n; b < batch * (t + 1) / n; b++)
                block(p, b, 0, M, 0, N);
        } else if (M >= N) {  /* row blocks, 8-row aligned */
            const int64_t lo = t ? (M * t / n) & ~(int64_t)7 : 0;
            const int64_t hi = t == n - 1 ? M : (M * (t + 1) / n) & ~(int64_t)7;
            for (int64_t b = 0; b < batch && hi > lo; b++)
                block(p, b, lo, hi, 0, N);
        } else {              /* column blocks, 16-column aligned */
            const int64_t lo = t ? (N * t / n) & ~(int64_t)15 : 0;
            const int64_t hi = t == n - 1 ? N : (N * (t + 1) / n) & ~(int64_t)15;
            for (int64_t b = 0; b < batch && hi > lo; b++)
                block(p, b, 0, M, lo, hi);
        }
    }
}

/* A chain of products, each reading the one before's result (Linear layers one after
   another: ember.jit's linear_chain), in one call: t = [-1, layers, where an array
   object keeps its data pointer, where a tuple keeps its items, then per layer its 25
   params and the byte offset of its result in work]; a the first input, b a tuple of
   each layer's weight and (where its params say) bias, out the last result. */
static void chain(const int64_t *t, const char *a, const char *b, char *out, char *work)
{
    const int64_t layers = t[1], at = t[2];
    const char *const *arrays = (const char *const *)(b + t[3]);
    int64_t in = ember_array_data(a, at), k = 0;
    work = (char *)(intptr_t)ember_array_data(work, at);
    for (int64_t l = 0; l < layers; l++) {
        const int64_t *u = t + 4 + 26 * l;
        int64_t p[25];
        memcpy(p, u, sizeof p);
        p[8] = in;
        p[12] = ember_array_data(arrays[k++], at);
        if (u[18])
            p[18] = ember_array_data(arrays[k++], at);
        p[16] = l == layers - 1 ? ember_array_data(out, at) : (int64_t)(intptr_t)(work + u[25]);
        product(p);
        in = p[16];
    }
}

/* The call: the plan's params t (read only: t[25] is where an array object keeps its
   data pointer, or -1 where a, b, out and bias are the data pointers themselves) and
   the arrays; bias only where t[18] says there is one. t[0] == -1: a chain (above; bias
   then is its work array). */
void ember_kernel(const int64_t *t, const char *a, const char *b, char *out, const char *bias)
{
    if (t[0] == -1) {
        chain(t, a, b, out, (char *)bias);
        return;
    }
    int64_t p[25];
    memcpy(p, t, sizeof p);
    const int64_t at = t[25];
    p[8] = ember_array_data(a, at);
    p[12] = ember_array_data(b, at);
    p[16] = ember_array_data(out, at);
    if (t[18])
        p[18] = ember_array_data(bias, at);
    product(p);
}
"""

# (sgemm, dgemm, set threads, 64-bit integers) as NumPy's OpenBLAS builds name them
_SYMBOLS = (
    ("scipy_cblas_sgemm64_", "scipy_cblas_dgemm64_", "scipy_openblas_set_num_threads64_", 1),
    ("scipy_cblas_sgemm", "scipy_cblas_dgemm", "scipy_openblas_set_num_threads", 0),
    ("cblas_sgemm", "cblas_dgemm", "openblas_set_num_threads", None),
)


def _openblas():
    """(sgemm address, dgemm address, 64-bit ints, set_num_threads) of the OpenBLAS
    NumPy uses, or None."""
    for path in _loaded_libraries():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for sgemm, dgemm, set_threads, wide in _SYMBOLS:
            try:
                s, d, t = getattr(lib, sgemm), getattr(lib, dgemm), getattr(lib, set_threads)
            except AttributeError:
                continue
            if wide is None:  # plain OpenBLAS: its configuration says how wide ints are
                try:
                    config = lib.openblas_get_config
                    config.restype = ctypes.c_char_p
                    wide = int(b"USE64BITINT" in config())
                except AttributeError:
                    continue
            t.argtypes = [ctypes.c_int]
            gemv = [getattr(lib, name.replace("gemm", "gemv"), None) for name in (sgemm, dgemm)]
            return (ctypes.cast(s, ctypes.c_void_p).value, ctypes.cast(d, ctypes.c_void_p).value,
                    wide, t, *(0 if g is None else ctypes.cast(g, ctypes.c_void_p).value
                               for g in gemv))
    return None


def _loaded_libraries():
    """Paths of the OpenBLAS libraries loaded in this process (NumPy's first)."""
    found = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.rstrip("\n").split(" ")[-1]
                if "openblas" in os.path.basename(path).lower() and path not in found:
                    found.append(path)
    except OSError:  # not Linux: look beside NumPy
        here = os.path.dirname(np.__file__)
        for pattern in ("../numpy.libs/*openblas*", ".dylibs/*openblas*"):
            found += glob.glob(os.path.join(here, pattern))
    return found


def wanted() -> bool:
    """Whether products will go through the driver: unless ``EMBER_BLAS`` is ``numpy``
    (or ``off``/``0``), where NumPy's BLAS is an OpenBLAS whose entry points were found
    (the compiler is checked when the driver is built)."""
    if "wanted" not in _state:
        _state["wanted"] = os.environ.get("EMBER_BLAS", "").strip().lower() not in \
            ("numpy", "off", "0", "false", "no") and _openblas() is not None
    return _state["wanted"]


def _driver():
    """The compiled driver and the OpenBLAS entry points, or None where either is
    missing (then products are ``np.matmul``)."""
    driver = _state.get("driver", False)
    if driver is not False:
        return driver
    _state["driver"] = None
    blas = _openblas() if wanted() else None
    if blas is not None:
        from ..compiler.codegen import build
        from ..dtypes import get_default_dtype
        # the default dtype's GEMM compiles beside the driver (each on one core; a cold
        # first product waits for the longer of the two, not their sum)
        early = threading.Thread(target=cpu_gemm.address, args=(get_default_dtype().np,),
                                 daemon=True)
        early.start()
        kernel = build.load_c_function("blas_driver", SOURCE)
        early.join()
        if kernel is not None:  # (else NumPy's products)
            # the arrays go in as objects where the C side can read their data pointers
            # (about 1.5 us a call less than reading each pointer in Python)
            _state["at"] = takes_arrays(kernel, 4)
            blas[3](1)  # one OpenBLAS thread: the splitting is ours
            _state["driver"] = (kernel, blas[0], blas[1], blas[2], build.max_threads(),
                                blas[4], blas[5])
    return _state["driver"]


def unbuilt_sources() -> list:
    """``(name, source)`` of the driver and the default dtype's GEMM where products will
    go through them and this process has not built them yet, so that ``ember.jit`` can
    compile them in one parallel batch with a graph's kernels (a cold first step then
    waits for one batch, not for the driver and then the batch)."""
    from ..dtypes import get_default_dtype
    if "driver" in _state or not wanted():
        return []
    dtype = get_default_dtype().np
    found = [("blas_driver", SOURCE)]
    if dtype in (_F32, _F64) and not cpu_gemm.built(dtype):
        found.append(cpu_gemm.named_source(dtype))
    return found


def entry_points():
    """(sgemm address, dgemm address, 64-bit ints) of OpenBLAS, set to one thread, for C
    loops that call a GEMM per block from ember's threads; None where the driver is off
    (or in a forked child)."""
    driver = _driver()
    if driver is None or os.getpid() != _pid:
        return None
    return driver[1:4]


def _rows_or_cols(x):
    """(transposed, leading dimension) of the matrices in ``x``'s last two dims, or None."""
    item = x.itemsize
    s0, s1 = x.strides[-2:]
    rows, cols = x.shape[-2:]
    if s1 == item and s0 % item == 0 and s0 >= cols * item:
        return 0, s0 // item
    if s0 == item and s1 % item == 0 and s1 >= rows * item:
        return 1, s1 // item
    return None


def _batch_stride(x, dims=None):
    """The one stride (in elements) that steps through ``x``'s flattened batch dims (or
    its first ``dims`` of them), or None when they do not flatten."""
    shape, strides = x.shape[:-2], x.strides[:-2]
    if dims is not None:
        shape, strides = shape[:dims], strides[:dims]
    stride = step = None
    for s, d in zip(reversed(strides), reversed(shape)):
        if d == 1:
            continue
        if stride is None:
            stride = s
        elif s != step:
            return None
        step = s * d
    if stride is None:
        return 0
    return stride // x.itemsize if stride % x.itemsize == 0 else None


def _batch_layout(a, b):
    """(inner count, A stride, B stride, A outer stride, B outer stride) stepping through
    the batch of a product whose operands have the same batch dims: one group when they
    flatten, else the last batch dim inside the others (which must flatten); or None."""
    sa, sb = _batch_stride(a), _batch_stride(b)
    if sa is not None and sb is not None:
        return math.prod(a.shape[:-2]), sa, sb, 0, 0
    item = a.itemsize
    ia, ib = a.strides[-3], b.strides[-3]
    oa, ob = _batch_stride(a, a.ndim - 3), _batch_stride(b, b.ndim - 3)
    if oa is None or ob is None or ia % item or ib % item:
        return None
    return a.shape[-3], ia // item, ib // item, oa, ob


def matmul(a, b, bias=None, relu=False):
    """``np.matmul(a, b)``, split over ember's threads where that applies; plus ``bias``
    (an array of the product's last dim, in its dtype) and then ReLU, when given."""
    out = _product(a, b, bias, relu)
    if out.__class__ is tuple:  # NumPy's product: the epilogue in NumPy
        out = out[0]
        if bias is not None:
            out += bias
        if relu:
            np.maximum(out, 0, out=out)
    return out


def _product(a, b, bias, relu):
    """The driver's product (with its epilogue), or ``(np.matmul(a, b),)``."""
    if a.__class__ is not np.ndarray or b.__class__ is not np.ndarray or \
            (bias is not None and bias.__class__ is not np.ndarray):
        return (_np_matmul(a, b),)
    key = (a.shape, a.strides, b.shape, b.strides, a.dtype, b.dtype,
           None if bias is None else (bias.shape, bias.strides, bias.dtype), relu)
    plan = _PLANS.get(key, a, b, bias, relu)
    if plan is False or os.getpid() != _pid:
        return (_np_matmul(a, b),)
    kernel, params, out_shape, objects, _ = plan
    out = np.empty(out_shape, a.dtype)
    if objects:  # (the C side copies the params: they stay read only)
        kernel(params, a, b, out, bias)
    else:
        kernel(params, address(a), address(b), address(out),
               None if bias is None else address(bias))
    return out


def specialized_matmul(a, b, bias=None, relu=False):
    """``run(a, b, bias, out)``: :func:`matmul` into ``out`` for operands laid out as
    the stand-ins ``a``, ``b`` and ``bias`` (arrays of the same shapes, dtypes and
    strides), its plan made here, once. ``run`` reads only the arrays' data pointers: the
    caller passes arrays with those layouts (any view of the same memory will do: a
    weight for its transpose) and ``out`` C-contiguous, of the product's size. None
    where the driver leaves this product to NumPy."""
    key = (a.shape, a.strides, b.shape, b.strides, a.dtype, b.dtype,
           None if bias is None else (bias.shape, bias.strides, bias.dtype), relu)
    plan = _PLANS.get(key, a, b, bias, relu)
    if plan is False or not plan[3]:  # (only where the arrays go in as objects)
        return None
    kernel, params = plan[:2]

    def run(a, b, bias, out):
        kernel(params, a, b, out, bias)
        return out
    return run


def _plan(a, b, bias, relu, small=False):
    """Everything about a product but its arrays, or False where it is NumPy's:
    (kernel, the address of its params (the pointers left 0), the output shape, whether
    the arrays go in as objects, the params array (kept alive here)). ``small``: a small
    product (else NumPy's, on one OpenBLAS thread) is the driver's on one thread."""
    driver = _driver()  # (first: with the driver off, nothing else is looked at)
    if driver is None or a.dtype is not b.dtype or (a.dtype != _F32 and a.dtype != _F64) or \
            a.ndim < 2 or (b.ndim != 2 and b.ndim != a.ndim):
        return False
    m, k = a.shape[-2:]
    n = b.shape[-1]
    one_thread = 2 * a.size * n < MIN_PARALLEL_FLOPS and \
        (a.size + b.size) * a.itemsize < MIN_PARALLEL_BYTES
    if b.shape[-2] != k or n < 2 or k < 1 or a.size == 0 or b.size == 0 or \
            (one_thread and not small):  # one thread: OpenBLAS
        return False
    if bias is not None and (bias.dtype is not a.dtype or bias.shape != (n,) or
                             not bias.flags.c_contiguous):
        return False
    la, lb = _rows_or_cols(a), _rows_or_cols(b)
    if la is None or lb is None:
        return False
    lead = a.shape[:-2]
    batch = math.prod(lead)
    if b.ndim == 2:
        sb = 0
        sa = _batch_stride(a)
        if sa is None:
            return False
        if la[0] == 0 and (batch == 1 or sa == la[1] * m):
            m, batch = m * batch, 1  # the batch is just more rows (x @ W in a Linear)
        inner, outer_a, outer_b = batch, 0, 0
    else:
        if b.shape[:-2] != lead:
            return False  # broadcasting batch dims: NumPy's
        layout = _batch_layout(a, b)
        if layout is None:
            return False
        inner, sa, sb, outer_a, outer_b = layout
    kernel, sgemm, dgemm, wide, threads, sgemv, dgemv = driver
    threads = 1 if one_thread else threads
    at = _state["at"]
    params = np.array([sgemm if a.dtype == _F32 else dgemm, wide, a.itemsize, threads, batch,
                       m, n, k, 0, la[1], sa, la[0], 0, lb[1], sb, lb[0], 0,
                       m * n if batch > 1 else 0, int(bias is not None), int(relu),
                       cpu_gemm.address(a.dtype) if OWN_GEMM and
                       2 * m * n * k <= OWN_GEMM_MAX_FLOPS else 0, max(inner, 1), outer_a,
                       outer_b, (sgemv if a.dtype == _F32 else dgemv) if wide else 0,
                       -1 if at is None else at], dtype=np.int64)
    return kernel, address(params), lead + (a.shape[-2], n), at is not None, params


_PLANS = Plans(_plan)


def linear_chain(x, arrays, layers):
    """Linear layers one after another (``x @ w.T + b``, then ReLU where its flag says,
    the result the next one's input) in one call of the driver, for ``x`` ``(M, K)``
    C-contiguous; ``arrays`` each layer's weight ``(N, K)`` and, where it has one, bias
    ``(N,)`` (a tuple), ``layers`` ``(has_bias, relu)`` per layer. The intermediate
    results go to the calling thread's scratch array. None where this does not apply (then
    the layers run one by one)."""
    if arrays.__class__ is not tuple or not _contiguous(x, arrays) or x.ndim != 2:
        return None
    key = (x.shape, x.dtype, tuple((a.shape, a.dtype) for a in arrays), layers)
    plan = _CHAINS.get(key, x, arrays, layers)
    if plan is False or os.getpid() != _pid:
        return None
    return _run_chain(plan, x, arrays)


def _contiguous(x, arrays) -> bool:
    """Whether ``x`` and every array of ``arrays`` are C-contiguous NumPy arrays (what a
    chain's plan reads)."""
    return x.__class__ is np.ndarray and x.flags.c_contiguous and \
        all(a.__class__ is np.ndarray and a.flags.c_contiguous for a in arrays)


def _run_chain(plan, x, arrays):
    kernel, params, out_shape, work_size, _ = plan
    work = scratch(np.uint8, work_size)
    out = np.empty(out_shape, x.dtype)
    kernel(params, x, arrays, out, work)
    return out


def specialized_chain(x_aval, array_avals, layers):
    """``run(x, arrays)``: :func:`linear_chain` for arrays of exactly these
    ``(shape, dtype)`` (``x`` 2-D), its plan made here, once; ``run`` returns None where
    the arrays do not fit it (not C-contiguous NumPy arrays, another process). None where
    the chain does not apply to these shapes."""
    stand_in = [np.empty(shape, dtype) for shape, dtype in [x_aval] + list(array_avals)]
    plan = _chain_plan(stand_in[0], tuple(stand_in[1:]), layers)
    if plan is False:
        return None
    pid = _pid

    def run(x, arrays):
        if os.getpid() != pid or not _contiguous(x, arrays):
            return None
        return _run_chain(plan, x, arrays)
    return run


def _chain_plan(x, arrays, layers):
    """(kernel, params address, output shape, work bytes, params), or False."""
    driver = _driver()
    items = _tuple_items_offset()
    if driver is None or _state["at"] is None or items is None or len(layers) < 2:
        return False
    blocks, a, k, offset = [], x, 0, 0
    for i, (has_bias, relu) in enumerate(layers):
        w = arrays[k]
        bias = arrays[k + 1] if has_bias else None
        k += 1 + has_bias
        if w.ndim != 2 or w.dtype is not x.dtype or w.shape[1] != a.shape[1] or \
                (bias is not None and (bias.dtype is not x.dtype or bias.shape != w.shape[:1])):
            return False
        plan = _plan(a, w.T, bias, relu, small=True)
        if plan is False:  # (a product the driver leaves to NumPy: the layers one by one)
            return False
        block = plan[4].copy()
        block[25] = offset  # (here: where in the work buffer this layer's result goes)
        blocks.append(block)
        a = np.empty((x.shape[0], w.shape[0]), x.dtype)
        if i < len(layers) - 1:
            offset += (a.nbytes + 63) // 64 * 64
    if k != len(arrays):
        return False
    params = np.concatenate([np.array([-1, len(layers), _state["at"], items], np.int64)] +
                            blocks)
    return driver[0], address(params), a.shape, offset, params


def _tuple_items_offset():
    """Where a tuple object keeps its items (checked on a live tuple), or None."""
    if "items" not in _state:
        probe = (object(), object())
        offset = object.__basicsize__ + 8  # (after the header, the size)
        found = ctypes.c_void_p.from_address(id(probe) + offset).value
        _state["items"] = offset if found == id(probe[0]) else None
    return _state["items"]


_CHAINS = Plans(_chain_plan, 64)

__all__ = ["entry_points", "linear_chain", "matmul", "MIN_PARALLEL_BYTES",
           "MIN_PARALLEL_FLOPS"]
