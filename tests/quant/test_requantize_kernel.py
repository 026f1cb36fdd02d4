"""The C requantization (quant/requantize_kernel.py) against the NumPy expression it
replaces: the same bytes, per channel along any axis, with and without a bias and a
fused ReLU's lower clamp, for accumulators past float32's exact integers and past int32
when the bias is added (where both wrap)."""
import numpy as np
import pytest

from ember.quant.requantize_kernel import requantize_into


def _numpy(acc, bias, multiplier, zero_point, low, axis):
    shape = [1] * acc.ndim
    shape[axis] = -1
    if bias is not None:
        acc = acc + bias.reshape(shape)
    scaled = acc.astype(np.float32) * multiplier.reshape(shape)
    out = np.rint(scaled) + np.float32(zero_point)
    return np.clip(out, low, 255).astype(np.uint8)


@pytest.mark.parametrize("shape,axis", [((4, 6, 5, 3), 1), ((7, 9), 1), ((2, 3, 8), 2),
                                        ((5, 4), 0)])
@pytest.mark.parametrize("with_bias", [True, False])
@pytest.mark.parametrize("low", [0, 37])
def test_c_requantize_gives_numpys_bytes(shape, axis, with_bias, low):
    rng = np.random.default_rng(0)
    acc = rng.integers(-2 ** 31, 2 ** 31, size=shape, dtype=np.int64).astype(np.int32)
    acc.flat[::3] = rng.integers(-3000, 3000, size=acc.flat[::3].shape)  # mid-range
    acc.flat[1] = 2 ** 31 - 1                                           # wraps with a bias
    channels = shape[axis]
    bias = rng.integers(-5000, 5000, size=channels).astype(np.int32) if with_bias else None
    if bias is not None:
        bias[0] = 4999
    multiplier = rng.uniform(1e-6, 0.05, size=channels).astype(np.float32)
    multiplier[0] = 0.5  # halves: rint rounds them to even
    got = requantize_into(acc, bias, multiplier, 11, low, axis)
    if got is False:
        pytest.skip("no C compiler for the kernel")
    np.testing.assert_array_equal(got, _numpy(acc, bias, multiplier, 11, low, axis))


def test_what_the_loop_does_not_take_says_false():
    multiplier = np.ones(3, np.float32)
    assert requantize_into(np.zeros((2, 3), np.int64), None, multiplier, 0, 0, 1) is False
    assert requantize_into(np.zeros((3, 2), np.int32).T, None, multiplier, 0, 0, 1) is False
    assert requantize_into(np.zeros((2, 3), np.int32), None, multiplier.astype(np.float64),
                           0, 0, 1) is False
