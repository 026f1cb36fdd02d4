"""The C col2im (conv_kernels) against conv.py's NumPy loop: the same bits, on wide and
exact grids, with strides, dilation and padding, in float32 and float64."""
import numpy as np
import pytest

from ember.ops import conv as C
from ember.ops import conv_kernels as K

CASES = [(64, 32, (13, 13), (3, 3), (1, 1), (1, 1), ((0, 0), (0, 0))),
         (2, 3, (9, 8), (3, 2), (2, 1), (1, 2), ((1, 1), (0, 2))),
         (3, 4, (7, 7), (3, 3), (1, 1), (1, 1), ((1, 1), (1, 1))),
         (2, 2, (10, 9), (2, 3), (3, 2), (2, 1), ((0, 0), (1, 0)))]


def _numpy_col2im(cols, geo, dtype, monkeypatch):
    with monkeypatch.context() as m:
        m.setattr(C, "col2im_2d", lambda *a: False)
        return C.col2im(np, cols, geo, dtype)


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("allow_wide", [True, False])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_c_col2im_gives_numpys_bits(case, allow_wide, dtype, monkeypatch):
    n, c, hw, k, st, dil, pad = case
    out = tuple((hw[i] + sum(pad[i]) - dil[i] * (k[i] - 1) - 1) // st[i] + 1 for i in range(2))
    geo = C.geometry(n, c, 5, 1, hw, k, st, dil, pad, out, allow_wide)
    rng = np.random.default_rng(0)
    if geo.wide:
        cols = rng.standard_normal((c,) + k + (n,) + geo.grid).astype(dtype)
    else:
        cols = rng.standard_normal((n, c) + k + out).astype(dtype).transpose((1, 2, 3, 0, 4, 5))
    buf = np.zeros((n, c) + geo.padded, dtype=dtype)
    if not K.col2im_2d(cols, buf, geo):
        pytest.skip("no C compiler for the col2im kernel")
    np.testing.assert_array_equal(C.col2im(np, cols, geo, dtype),
                                  _numpy_col2im(cols, geo, dtype, monkeypatch))
