"""Cross-entropy's C row statistics (ops/loss_kernels.py) against the NumPy path they
replace: the loss and its lse output, with ignored targets, label smoothing, every
reduction and rows holding NaN or infinities."""
import numpy as np
import pytest

from ember.ops import loss_kernels, registry

OP = registry.OPS["cross_entropy_loss"]
pytestmark = pytest.mark.skipif(loss_kernels.LOOP.get(np.float32) is None,
                                reason="no C compiler")


def _both(x, t, monkeypatch, **kw):
    got = OP.forward(np, x, t, cdim=1, ignore_index=-100, **kw)
    with monkeypatch.context() as m:
        m.setattr(loss_kernels, "row_statistics", lambda *a: None)
        from ember.ops import loss
        m.setattr(loss, "row_statistics", lambda *a: None)
        ref = OP.forward(np, x, t, cdim=1, ignore_index=-100, **kw)
    return got, ref


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", [(1, 1), (7, 3), (1024, 256), (300, 1000)])
@pytest.mark.parametrize("reduction", ["mean", "sum", "none"])
@pytest.mark.parametrize("smoothing", [0.0, 0.2])
def test_loss_and_lse_equal_numpy(dtype, shape, reduction, smoothing, monkeypatch):
    rng = np.random.default_rng(shape[0])
    x = (rng.standard_normal(shape) * 4).astype(dtype)
    t = rng.integers(0, shape[1], shape[0])
    t[::5] = -100
    got, ref = _both(x, t, monkeypatch, reduction=reduction, label_smoothing=smoothing)
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for a, b in zip(got, ref):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=tol, atol=tol)


def test_rows_with_nan_and_infinities(monkeypatch):
    x = np.array([[0.0, np.nan, 1.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, 2.0],
                  [-np.inf, -np.inf, -np.inf], [1.0, 2.0, 3.0]], np.float32)
    t = np.array([0, 1, 2, 0, -100])
    got, ref = _both(x, t, monkeypatch, reduction="none", label_smoothing=0.0)
    for a, b in zip(got, ref):
        np.testing.assert_allclose(a, b, rtol=1e-6, equal_nan=True)


def test_other_layouts_take_the_numpy_path():
    x = np.ones((4, 6), np.float32)
    assert loss_kernels.row_statistics(x[:, ::2], np.zeros(4, np.int64), False) is None
    assert loss_kernels.row_statistics(x.astype(np.float16), np.zeros(4, np.int64),
                                       False) is None
    assert loss_kernels.row_statistics(x, np.zeros(3, np.int64), False) is None
