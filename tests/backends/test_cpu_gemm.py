"""ember's own GEMM (backends/cpu_gemm.py) inside the BLAS driver, against float64
products in NumPy, in a child process (the driver asks OpenBLAS for one thread)."""
import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import json
import numpy as np
from ember.backends import cpu_blas
assert cpu_blas._driver() is not None
rng = np.random.default_rng(1)

def layouts(x):
    # rows (C order), columns (a transposed copy), and rows with a leading dim past the
    # width (a slice), which every layout of the driver's operands reduces to
    cols = np.swapaxes(np.swapaxes(x, -1, -2).copy(), -1, -2)
    wide = np.concatenate([x, x[..., :3]], axis=-1)[..., :x.shape[-1]]
    return {"rows": x, "cols": cols, "wide": wide}

def plan(a, b):
    return cpu_blas._PLANS.get((a.shape, a.strides, b.shape, b.strides, a.dtype, b.dtype,
                                None, False), a, b, None, False)

# (m, k, n): tails of the 12-, 4- and 1-row tiles, of the panels (32 floats, 16 doubles),
# of the 8 x 8 transposes of a column operand, k past one block (256), rows past a chunk
shapes = [(13, 9, 33), (17, 31, 47), (64, 784, 512), (5, 300, 200), (2, 64, 48),
          (1, 100, 40), (130, 70, 90), (40, 1001, 17), (700, 257, 37), (3, 8, 1024),
          (200, 1100, 64)]
report = {"worst": {}, "own": 0, "driver": 0}
for m, k, n in shapes:
    for dt, tol in ((np.float32, 2e-6), (np.float64, 1e-14)):
        a = rng.standard_normal((m, k)).astype(dt)
        b = rng.standard_normal((k, n)).astype(dt)
        want = a.astype(np.float64) @ b.astype(np.float64)
        scale = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        for na, x in layouts(a).items():
            for nb, y in layouts(b).items():
                got = cpu_blas.matmul(x, y)
                err = float((np.abs(got - want) / scale).max())
                key = f"{np.dtype(dt).name}"
                report["worst"][key] = max(report["worst"].get(key, 0.0), err / tol)
                p = plan(x, y)
                report["driver"] += p is not False
                report["own"] += p is not False and bool(p[4][20])
# a batch of products, and a product with a bias and ReLU
a = rng.standard_normal((6, 50, 70)).astype(np.float32)
b = rng.standard_normal((6, 70, 45)).astype(np.float32)
err = np.abs(cpu_blas.matmul(a, b) - np.matmul(a.astype(np.float64), b)).max()
report["batched"] = float(err)
bias = rng.standard_normal(45).astype(np.float32)
got = cpu_blas.matmul(a[0], b[0], bias, True)
report["epilogue"] = float(np.abs(got - np.maximum(a[0].astype(np.float64) @ b[0] + bias, 0)).max())
# batch dims that flatten in two groups (attention's heads, a transposed view) go through
# the driver without a copy; ones that do not stay NumPy's, and all agree with NumPy
q = rng.standard_normal((16, 64, 4, 32)).astype(np.float32)
k = rng.standard_normal((2, 3, 64, 5, 48)).astype(np.float64)
views = [(q.transpose(0, 2, 1, 3), q.transpose(0, 2, 3, 1)),        # q @ k^T
         (q.transpose(0, 2, 1, 3), np.ones((16, 4, 32, 8), np.float32)),
         (k.transpose(0, 1, 3, 2, 4), k.transpose(0, 1, 3, 4, 2)),  # outer dims (2, 3)
         (k.transpose(1, 0, 3, 2, 4), k.transpose(1, 0, 3, 4, 2))]  # outer dims do not flatten
report["views"] = []
for x, y in views:
    got = cpu_blas.matmul(x, y)
    want = np.matmul(x.astype(np.float64), y.astype(np.float64))
    p = plan(x, y)
    report["views"].append([p is not False, float(np.abs(got - want).max() / np.abs(want).max())])
# NaN and inf go through as in any product
a = rng.standard_normal((40, 64)).astype(np.float32)
b = rng.standard_normal((64, 50)).astype(np.float32)
a[3, 5], b[7, 9] = np.nan, np.inf
got, want = cpu_blas.matmul(a, b), a.astype(np.float64) @ b
report["nan_same"] = bool(np.array_equal(np.isnan(got), np.isnan(want)))
report["inf_same"] = bool(np.array_equal(np.isinf(got), np.isinf(want)))
# the result does not depend on the thread count: the same bits on one thread
a = rng.standard_normal((300, 500)).astype(np.float32)
b = rng.standard_normal((500, 200)).astype(np.float32)
two = cpu_blas.matmul(a, b.T.copy().T)
driver = cpu_blas._state["driver"]
cpu_blas._state["driver"] = driver[:4] + (1,) + driver[5:]
cpu_blas._PLANS.plans.clear()
one = cpu_blas.matmul(a, b.T.copy().T)
report["threads_equal"] = bool(np.array_equal(one, two)) and driver[4] >= 1
print(json.dumps(report))
"""


def _child(**env):
    out = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True,
                         timeout=300, env=dict(os.environ, PYTHONPATH=ROOT, **env))
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_own_gemm_matches_float64_products_on_every_layout():
    report = _child()
    # errors in units of the tolerance, relative to sum |a||b| per element
    assert report["worst"]["float32"] < 1, report
    assert report["worst"]["float64"] < 1, report
    assert report["driver"] >= 50 and report["own"] == report["driver"], report
    assert report["batched"] < 1e-4 and report["epilogue"] < 1e-4, report
    assert report["nan_same"] and report["inf_same"], report
    assert report["threads_equal"], report
    assert [v[0] for v in report["views"]] == [True, True, True, False], report
    assert max(v[1] for v in report["views"]) < 1e-6, report


def test_ember_gemm_openblas_keeps_openblas():
    report = _child(EMBER_GEMM="openblas")
    assert report["own"] == 0, report
    assert report["worst"]["float32"] < 1 and report["worst"]["float64"] < 1, report


THREADS_CHILD = r"""
import threading
import numpy as np
from ember.backends import cpu_blas

def rss():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096

a = np.ones((64, 784), np.float32)
b = np.ones((512, 784), np.float32).T
want = cpu_blas.matmul(a, b)

def run(n):
    for _ in range(n):
        t = threading.Thread(target=lambda: cpu_blas.matmul(a, b))
        t.start()
        t.join()

run(50)
before = rss()
run(300)
print(rss() - before, float(np.abs(cpu_blas.matmul(a, b) - want).max()))
"""


def test_own_gemm_buffers_of_finished_threads_are_freed():
    # each thread's panel buffer (about 100 KB here) goes with the thread: 300 short
    # threads leave the resident size about where 50 of them left it
    if not os.path.exists("/proc/self/statm"):
        pytest.skip("needs /proc/self/statm (Linux) to read the resident size")
    out = subprocess.run([sys.executable, "-c", THREADS_CHILD], capture_output=True,
                         text=True, timeout=300, env=dict(os.environ, PYTHONPATH=ROOT))
    assert out.returncode == 0, out.stderr[-3000:]
    grown, diff = out.stdout.split()
    assert int(grown) < 8 << 20, grown
    assert float(diff) == 0.0


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_packed_gemm_reads_the_left_operand_at_column_offsets(dtype):
    """``cpu_gemm.packed``: the right operand packed once (all of it, or panel ranges
    packed separately, as threads sharing a convolution's weight do), the left read at a
    table of offsets (a convolution's taps in the image), column ranges of the result."""
    import ctypes

    import numpy as np

    from ember.backends import cpu_gemm

    found = cpu_gemm.packed(dtype)
    if found is None:
        pytest.skip("no C compiler for ember's own GEMM")
    pack_address, gemm_address, width = found
    real = ctypes.c_float if dtype == "float32" else ctypes.c_double
    pointer, i64 = ctypes.c_void_p, ctypes.c_int64
    pack = ctypes.CFUNCTYPE(None, pointer, i64, i64, i64, i64, i64, i64, pointer)(pack_address)
    gemm = ctypes.CFUNCTYPE(None, i64, i64, i64, pointer, pointer, pointer, pointer, i64, i64,
                            i64, ctypes.c_int)(gemm_address)
    assert ctypes.sizeof(real) * width in (32, 64, 128)  # two vectors of the machine
    rng = np.random.default_rng(0)
    # (rows, k, n): tails of the tiles and of the panels, k past one block (256 taps)
    for m, k, n in [(13, 9, 5), (50, 300, 70), (141, 700, 33), (1, 20, 2 * width)]:
        a = rng.standard_normal(m + 5 * k).astype(dtype)        # the "image"
        ko = np.sort(rng.choice(5 * k, k, replace=False)).astype(np.int64)
        b = rng.standard_normal((k, n)).astype(dtype)
        wt = np.ascontiguousarray(b.T)                           # (n, k): a weight
        want = a[np.arange(m)[:, None] + ko[None, :]].astype(np.float64) @ b
        panels = np.full(-(-n // width) * width * k, np.nan, dtype)
        cut = width if n > width else n                          # two ranges of panels
        for j0, j1 in ((0, cut), (cut, n)):
            if j1 > j0:
                pack(wt.ctypes.data, 1, k, k, n, j0, j1, panels.ctypes.data)
        out = np.full((m, n + 3), np.nan, dtype)                 # rows n + 3 apart
        for j0, j1 in ((0, cut), (cut, n)):
            if j1 > j0:
                gemm(m, n, k, a.ctypes.data, ko.ctypes.data, panels.ctypes.data,
                     out.ctypes.data, n + 3, j0, j1, 0)
        tol = 2e-5 if dtype == "float32" else 1e-12
        scale = np.abs(a[np.arange(m)[:, None] + ko[None, :]]).astype(np.float64) @ np.abs(b)
        assert (np.abs(out[:, :n] - want) <= tol * scale).all(), (m, k, n)
        assert np.isnan(out[:, n:]).all()                        # nothing past the result
