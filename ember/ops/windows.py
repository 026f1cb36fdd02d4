"""Window functions, as ``torch.hann_window`` and its kin: 1-D tensors that taper a
signal's frame towards its ends before a Fourier transform.

Each window is computed on the host in float64 and stored in the requested dtype. A
periodic window (the default) of length ``L`` is the symmetric window of length
``L + 1`` without its last point, the shape a spectral analysis with ``L``-point frames
wants; ``periodic=False`` gives the symmetric window a filter design wants.
"""
from __future__ import annotations

import operator

import numpy as np

from ..errors import EmberError, EmberTypeError
from .creation import _dtype, _new

__all__ = ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
           "kaiser_window"]


def _window(name, window_length, periodic, dtype, device, requires_grad, shape):
    """The window ``shape(n, N)`` of ``window_length`` points, ``n = 0 .. N-1`` the
    positions on a symmetric window of ``N`` points (one longer where periodic)."""
    try:
        length = operator.index(window_length)
    except TypeError:
        raise EmberTypeError(f"{name}: window_length must be an int, got "
                             f"{type(window_length).__name__}") from None
    if length < 0:
        raise EmberError(f"{name}: window_length must be non-negative, got {length}")
    dtype = _dtype(name, dtype)
    if not dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expects a floating point dtype, got {dtype.name}")
    if length <= 1:  # (the formulas divide by N - 1)
        values = np.ones(length)
    else:
        points = length + 1 if periodic else length
        values = shape(np.arange(points, dtype=np.float64), points)[:length]
    return _new(name, values.astype(dtype.np), dtype, device, requires_grad)


def _cosine_sum(*coefficients):
    """``a0 - a1 cos(2 pi n / (N-1)) + a2 cos(4 pi n / (N-1)) - ...``."""
    def shape(n, points):
        phase = 2.0 * np.pi * n / (points - 1)
        return sum((-1) ** k * a * np.cos(k * phase) for k, a in enumerate(coefficients))
    return shape


def hann_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                requires_grad: bool = False):
    """The Hann window, ``0.5 - 0.5 cos(2 pi n / (N - 1))``.

    Args:
        window_length: the number of points ``L``.
        periodic: the first ``L`` points of the ``L + 1``-point window (for spectral
            analysis); False gives the symmetric ``L``-point window.
        dtype: a floating dtype (the default dtype when None).

    Shape: ``(L,)``; a length of 1 gives ``[1.]``, a length of 0 an empty tensor.

    >>> ember.hann_window(4)
    tensor([0.0000, 0.5000, 1.0000, 0.5000])
    """
    return _window("hann_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(0.5, 0.5))


def hamming_window(window_length: int, periodic: bool = True, alpha: float = 0.54,
                   beta: float = 0.46, *, dtype=None, device=None,
                   requires_grad: bool = False):
    """The generalised Hamming window, ``alpha - beta cos(2 pi n / (N - 1))``.

    Args:
        window_length: the number of points ``L``.
        periodic: the first ``L`` points of the ``L + 1``-point window; False gives the
            symmetric window.
        alpha, beta: the coefficients (Hamming's 0.54 and 0.46 by default).
        dtype: a floating dtype (the default dtype when None).

    >>> ember.hamming_window(3, periodic=False)
    tensor([0.0800, 1.0000, 0.0800])
    """
    return _window("hamming_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(float(alpha), float(beta)))


def blackman_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                    requires_grad: bool = False):
    """The Blackman window,
    ``0.42 - 0.5 cos(2 pi n / (N - 1)) + 0.08 cos(4 pi n / (N - 1))``.

    Args:
        window_length: the number of points ``L``.
        periodic: the first ``L`` points of the ``L + 1``-point window; False gives the
            symmetric window.
        dtype: a floating dtype (the default dtype when None).

    >>> ember.blackman_window(3, periodic=False)
    tensor([-1.3878e-17,  1.0000e+00, -1.3878e-17])
    """
    return _window("blackman_window", window_length, periodic, dtype, device, requires_grad,
                   _cosine_sum(0.42, 0.5, 0.08))


def _triangle(n, points):
    return 1.0 - np.abs(2.0 * n / (points - 1) - 1.0)


def bartlett_window(window_length: int, periodic: bool = True, *, dtype=None, device=None,
                    requires_grad: bool = False):
    """The Bartlett (triangular) window, ``1 - |2n / (N - 1) - 1|``.

    Args:
        window_length: the number of points ``L``.
        periodic: the first ``L`` points of the ``L + 1``-point window; False gives the
            symmetric window.
        dtype: a floating dtype (the default dtype when None).

    >>> ember.bartlett_window(5, periodic=False)
    tensor([0.0000, 0.5000, 1.0000, 0.5000, 0.0000])
    """
    return _window("bartlett_window", window_length, periodic, dtype, device, requires_grad,
                   _triangle)


def kaiser_window(window_length: int, periodic: bool = True, beta: float = 12.0, *,
                  dtype=None, device=None, requires_grad: bool = False):
    """The Kaiser window, ``I0(beta sqrt(1 - ((n - m) / m)^2)) / I0(beta)`` with
    ``m = (N - 1) / 2`` and ``I0`` the modified Bessel function of order 0.

    Args:
        window_length: the number of points ``L``.
        periodic: the first ``L`` points of the ``L + 1``-point window; False gives the
            symmetric window.
        beta: the shape: 0 is a rectangle, larger values taper harder.
        dtype: a floating dtype (the default dtype when None).

    >>> ember.kaiser_window(3, periodic=False, beta=0.0)
    tensor([1., 1., 1.])
    """
    beta = float(beta)

    def shape(n, points):
        middle = (points - 1) / 2.0
        ratio = (n - middle) / middle
        return np.i0(beta * np.sqrt(np.maximum(1.0 - ratio * ratio, 0.0))) / np.i0(beta)
    return _window("kaiser_window", window_length, periodic, dtype, device, requires_grad,
                   shape)
