"""Run the same computation in ember and PyTorch and compare the results."""
import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:  # the oracle tests skip; the others still run
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")


def both(fn):
    """``fn(ember)`` and ``fn(torch)``: ``fn`` is written once against the module."""
    return fn(ember), fn(torch)


def assert_same(got, expected, rtol=1e-7, atol=1e-10, path="result"):
    """Nested tuples/lists/dicts of tensors, None, numbers and strings must agree:
    tensors in values, shape, dtype name and requires_grad."""
    if torch is not None and isinstance(expected, torch.Tensor):
        assert isinstance(got, ember.Tensor), f"{path}: got {got!r}, expected a tensor"
        assert tuple(got.shape) == tuple(expected.shape), \
            f"{path}: shape {tuple(got.shape)} != {tuple(expected.shape)}"
        assert got.dtype.name == str(expected.dtype).removeprefix("torch."), \
            f"{path}: dtype {got.dtype.name} != {expected.dtype}"
        assert got.requires_grad == expected.requires_grad, \
            f"{path}: requires_grad {got.requires_grad} != {expected.requires_grad}"
        np.testing.assert_allclose(np.asarray(got.detach()), expected.detach().numpy(),
                                   rtol=rtol, atol=atol, err_msg=path)
    elif isinstance(expected, (tuple, list)):
        assert isinstance(got, (tuple, list)) and len(got) == len(expected), \
            f"{path}: got {got!r}, expected {len(expected)} items"
        for i, (g, e) in enumerate(zip(got, expected)):
            assert_same(g, e, rtol, atol, f"{path}[{i}]")
    elif isinstance(expected, dict):
        assert isinstance(got, dict) and got.keys() == expected.keys(), f"{path}: keys differ"
        for k in expected:
            assert_same(got[k], expected[k], rtol, atol, f"{path}[{k!r}]")
    else:
        assert got == expected, f"{path}: {got!r} != {expected!r}"


def check(fn, **tol):
    """Run ``fn`` on both frameworks and compare."""
    got, expected = both(fn)
    assert_same(got, expected, **tol)


def check_raises(fn, ember_error, match):
    """``fn(torch)`` raises a RuntimeError and ``fn(ember)`` raises ``ember_error``, both
    with a message matching ``match``."""
    with pytest.raises(RuntimeError, match=match):
        fn(torch)
    with pytest.raises(ember_error, match=match):
        fn(ember)
