"""The CPU BLAS driver (on by default; EMBER_BLAS=numpy turns it off) against np.matmul,
in a child process (it asks OpenBLAS for one thread for the whole process)."""
import os
import subprocess
import sys

import numpy as np

from ember.backends import cpu_blas

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = r"""
import numpy as np
from ember.backends import cpu_blas
driver = cpu_blas._driver()
print("driver", driver is not None)
rng = np.random.default_rng(0)
cases = [((5, 7), (7, 3)), ((1, 64), (64, 48)), ((3, 64, 32), (32, 48)),
         ((4, 5, 64, 32), (4, 5, 32, 40)), ((300, 200), (200, 500)), ((2, 3, 130, 70), (70, 90)),
         ((1, 784), (784, 512)), ((2, 512), (512, 300)),  # (few flops, large operands: split)
         ((1, 1001), (1001, 301))]  # (a row times a transposed matrix: OpenBLAS's GEMV
                                    # on each thread's block of rows)
worst = 0.0
for sa, sb in cases:
    for dt in (np.float32, np.float64):
        a = rng.standard_normal(sa).astype(dt)
        b = rng.standard_normal(sb).astype(dt)
        for x in (a, np.swapaxes(np.swapaxes(a, -1, -2).copy(), -1, -2)):
            for y in (b, np.swapaxes(np.swapaxes(b, -1, -2).copy(), -1, -2), b[..., ::-1, :]):
                got, want = cpu_blas.matmul(x, y), np.matmul(x, y)
                assert got.shape == want.shape and got.dtype == want.dtype
                worst = max(worst, float(np.abs(got - want).max() / (np.abs(want).max() + 1)))
q = rng.standard_normal((16, 64, 4, 32)).astype(np.float32)
got = cpu_blas.matmul(q.transpose(0, 2, 1, 3), q.transpose(0, 2, 3, 1))  # not flattenable
worst = max(worst, float(np.abs(got - np.matmul(q.transpose(0, 2, 1, 3), q.transpose(0, 2, 3, 1))).max()))
a = np.broadcast_to(rng.standard_normal((64, 32)).astype(np.float32), (3, 64, 32))
b = rng.standard_normal((3, 32, 64)).astype(np.float32)
worst = max(worst, float(np.abs(cpu_blas.matmul(a, b) - np.matmul(a, b)).max()))
print("worst", worst)
# the epilogue: + bias, then relu (NaN stays NaN), on both paths (small: NumPy's)
epi = 0.0
for sa, sb in cases:
    for dt in (np.float32, np.float64):
        a, b = rng.standard_normal(sa).astype(dt), rng.standard_normal(sb).astype(dt)
        a.reshape(-1)[0] = np.nan
        bias = rng.standard_normal(sb[-1]).astype(dt)
        for relu in (False, True):
            for vec in (bias, None):
                got = cpu_blas.matmul(a, b, vec, relu)
                want = np.matmul(a, b) + (0 if vec is None else vec)
                want = np.maximum(want, 0) if relu else want
                assert np.array_equal(np.isnan(got), np.isnan(want))
                ok = ~np.isnan(want)
                assert (got[ok] >= 0).all() or not relu
                epi = max(epi, float(np.abs(got[ok] - want[ok]).max(initial=0) /
                                    (np.abs(want[ok]).max(initial=0) + 1)))
print("epilogue", epi)
"""


def _run(env_value):
    env = dict(os.environ, EMBER_BLAS=env_value, PYTHONPATH=ROOT)
    out = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                         text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    return dict(line.split(" ", 1) for line in out.stdout.strip().splitlines())


def test_driver_products_equal_numpy():
    result = _run("threads")
    if cpu_blas._openblas() is not None:
        assert result["driver"] == "True"
    assert float(result["worst"]) < 1e-5
    assert float(result["epilogue"]) < 1e-5


def test_driver_is_on_by_default_and_numpy_turns_it_off():
    if cpu_blas._openblas() is not None:
        assert _run("")["driver"] == "True"
    assert _run("numpy")["driver"] == "False"


def test_products_without_the_driver_are_numpy_products():
    a = np.arange(12.0).reshape(3, 4)
    np.testing.assert_array_equal(cpu_blas.matmul(a, a.T), a @ a.T)
