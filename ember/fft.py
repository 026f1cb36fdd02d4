"""Discrete Fourier transforms, as ``torch.fft``.

The transforms take PyTorch's arguments: ``n`` (1-D) or ``s`` (n-D) is the signal
length along each transformed dim (the input is zero-padded or cropped to it first; for
the inverse real transforms it is the *output* length), ``dim`` the dims, and ``norm``:

* ``"backward"`` (the default, ``None``): forward transforms unscaled, inverse ones
  scaled by ``1/n``;
* ``"ortho"``: both scaled by ``1/sqrt(n)`` (the transforms are then unitary);
* ``"forward"``: forward transforms scaled by ``1/n``, inverse ones unscaled.

A float32 input gives complex64, a float64 input complex128; integer and bool inputs are
first converted to the default float dtype. float16 is not supported (as in PyTorch on
the CPU). Each transform is differentiable with PyTorch's gradients (complex tensors'
gradients are ``dL/dx + i dL/dy``); see :mod:`ember.ops.fft_ops`.

>>> import ember
>>> ember.fft.fft(ember.tensor([1.0, 0.0, 0.0, 0.0]))
tensor([1.+0.j, 1.+0.j, 1.+0.j, 1.+0.j])
"""
from __future__ import annotations

import numbers

import numpy as np

from . import dtypes as dt
from .autograd import grad_mode
from .errors import EmberError, EmberIndexError, EmberTypeError
from .ops import elementwise as ew
from .ops.complex_support import conj_physical
from .ops.creation import _dtype, _new
from .ops.fft_ops import NORMS, _ADJOINT_NORM, fft_c2c, fft_c2r, fft_r2c
from .ops.movement import _CONSTANT_PAD, roll
from .ops.registry import apply, autocast_inputs
from .ops.shape import clone, wrap_dim
from .tensor import Tensor

__all__ = ["fft", "ifft", "fft2", "ifft2", "fftn", "ifftn", "rfft", "irfft", "rfft2",
           "irfft2", "rfftn", "irfftn", "hfft", "ihfft", "hfft2", "ihfft2", "hfftn",
           "ihfftn", "fftfreq", "rfftfreq", "fftshift", "ifftshift"]


# Arguments ------------------------------------------------------------------------------
def _int(name: str, arg: str, value) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise EmberTypeError(f"{name}: argument '{arg}' must be int, not "
                             f"{type(value).__name__}")
    return int(value)


def _ints(name: str, arg: str, value) -> tuple:
    if isinstance(value, numbers.Integral):
        value = (value,)
    if not isinstance(value, (tuple, list)):
        raise EmberTypeError(f"{name}: argument '{arg}' must be a tuple of ints, not "
                             f"{type(value).__name__}")
    return tuple(_int(name, arg, v) for v in value)


def _norm(name: str, norm) -> str:
    if norm is None:
        return "backward"
    if norm not in NORMS:
        raise EmberError(f'{name}: Invalid normalization mode: "{norm}" (expected None, '
                         f'"backward", "ortho" or "forward")')
    return norm


def _input(name: str, input, *, real: bool = False) -> Tensor:
    """``input`` as a float32/float64 or complex tensor (integers and bools in the
    default float dtype); ``real``: a complex input is an error."""
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor as input, got "
                             f"{type(input).__name__}")
    (input,) = autocast_inputs("fft", input)  # (float32 under autocast, as in PyTorch)
    dtype = input.dtype
    if dtype.is_complex:
        if real:
            raise EmberTypeError(f"{name} expects a real input tensor, but got "
                                 f"{dtype.name} (shape {tuple(input.shape)})")
        return input
    if dtype in (dt.float16, dt.bfloat16):
        raise EmberTypeError(f"{name}: Unsupported dtype {dtype.name} (the transforms take "
                             "float32, float64, complex64 and complex128)")
    if not dtype.is_floating_point:
        return ew.cast(input, dt.get_default_dtype())
    return input


def _complex(x: Tensor) -> Tensor:
    return x if x.dtype.is_complex else ew.cast(x, x.dtype.to_complex())


def _check_length(name: str, n: int) -> int:
    if n < 1:
        raise EmberError(f"{name}: Invalid number of data points ({n}) specified")
    return n


def _wrap(name: str, d: int, ndim: int) -> int:
    if ndim == 0:
        raise EmberIndexError(f"{name}: Dimension specified as {d} but tensor has no "
                              "dimensions")
    return wrap_dim(d, ndim, name)


def _one_dim(name: str, x: Tensor, n, dim) -> tuple:
    """``((dim,), (n,))`` for the 1-D transforms; ``n`` None where not given."""
    d = _wrap(name, _int(name, "dim", dim), x.ndim)
    return (d,), (None if n is None else _int(name, "n", n),)


def _n_dims(name: str, x: Tensor, s, dim) -> tuple:
    """The dims and lengths (None: the input's) of an n-D transform, as PyTorch reads
    ``s`` and ``dim``: ``dim`` None means the last ``len(s)`` dims, or all of them."""
    ndim = x.ndim
    s = None if s is None else _ints(name, "s", s)
    if dim is not None:
        dims = tuple(_wrap(name, d, ndim) for d in _ints(name, "dim", dim))
        if len(set(dims)) != len(dims):
            raise EmberError(f"{name}: FFT dims must be unique (got dim={list(dim)} for an "
                             f"input of shape {tuple(x.shape)})")
        if s is not None and len(s) != len(dims):
            raise EmberError(f"{name}: When given, dim and shape arguments must have the "
                             f"same length (got s={list(s)} and dim={list(dims)})")
    elif s is not None:
        if len(s) > ndim:
            raise EmberError(f"{name}: Got shape with {len(s)} values but input tensor only "
                             f"has {ndim} dimensions (shape {tuple(x.shape)}).")
        dims = tuple(range(ndim - len(s), ndim))
    else:
        dims = tuple(range(ndim))
    if s is None:
        return dims, (None,) * len(dims)
    return dims, tuple(None if n == -1 else n for n in s)


def _resize(x: Tensor, dim: int, n: int) -> Tensor:
    """``x`` zero-padded or cropped to ``n`` elements along ``dim``."""
    size = x.shape[dim]
    if size == n:
        return x
    pads = tuple((0, n - size) if d == dim else (0, 0) for d in range(x.ndim))
    return apply(_CONSTANT_PAD, x, pads=pads, value=0)


def _sized(name: str, x: Tensor, dims: tuple, sizes: tuple) -> Tensor:
    """``x`` resized along ``dims`` to ``sizes`` (None: as it is), each at least 1."""
    for d, n in zip(dims, sizes):
        x = _resize(x, d, _check_length(name, x.shape[d] if n is None else n))
    return x


def _out(name: str, result: Tensor, out) -> Tensor:
    """``result`` written into ``out`` (resized to fit) when given, as PyTorch's ``out=``."""
    if out is None:
        return result
    if not isinstance(out, Tensor):
        raise EmberTypeError(f"{name}: argument 'out' must be a Tensor, not "
                             f"{type(out).__name__}")
    if out.dtype is not result.dtype:
        raise EmberTypeError(f"{name}: expected out tensor to have dtype "
                             f"{result.dtype.name}, but got {out.dtype.name} instead")
    if grad_mode.is_grad_enabled() and (result.requires_grad or out.requires_grad):
        raise EmberError(f"{name}(): functions with out=... arguments don't support "
                         "automatic differentiation, but one of the arguments requires grad")
    if tuple(out.shape) != tuple(result.shape):
        out.resize_(tuple(result.shape))
    return out.copy_(result)


# The three kinds of transform -----------------------------------------------------------
def _c2c(name, input, dims_of, norm, forward, out):
    x = _input(name, input)
    dims, sizes = dims_of(x)
    norm = _norm(name, norm)
    x = _sized(name, _complex(x), dims, sizes)
    result = fft_c2c(x, dims, norm, forward) if dims else (
        x if x is not input else clone(x))
    return _out(name, result, out)


def _r2c(name, input, dims_of, norm, out, *, inverse=False):
    """The one-sided transform of a real signal (``inverse``: ``ihfft``'s, the conjugate
    of the forward one scaled as an inverse transform)."""
    x = _input(name, input, real=True)
    dims, sizes = dims_of(x)
    norm = _norm(name, norm)
    if not dims:
        raise EmberError(f"{name} must transform at least one axis (input shape "
                         f"{tuple(x.shape)})")
    if inverse:
        norm = _ADJOINT_NORM[norm]
    x = _sized(name, x, dims, sizes)
    y = fft_r2c(x, dims[-1], norm)
    if len(dims) > 1:
        y = fft_c2c(y, dims[:-1], norm, True)
    return _out(name, conj_physical(y) if inverse else y, out)


def _c2r(name, input, dims_of, norm, out, *, forward=False):
    """The real signal of a one-sided spectrum (``forward``: ``hfft``'s, the forward
    transform of a Hermitian signal, that is the inverse one of its conjugate)."""
    x = _input(name, input)
    dims, sizes = dims_of(x)
    norm = _norm(name, norm)
    if not dims:
        raise EmberError(f"{name} must transform at least one axis (input shape "
                         f"{tuple(x.shape)})")
    x = _complex(x)
    if forward:
        x, norm = conj_physical(x), _ADJOINT_NORM[norm]
    last = dims[-1]
    n = _check_length(name, 2 * (x.shape[last] - 1) if sizes[-1] is None else sizes[-1])
    x = _sized(name, x, dims[:-1], sizes[:-1])
    x = _resize(x, last, n // 2 + 1)
    if len(dims) > 1:
        x = fft_c2c(x, dims[:-1], norm, False)
    return _out(name, fft_c2r(x, last, n, norm), out)


def _dims_1d(name, n, dim):
    return lambda x: _one_dim(name, x, n, dim)


def _dims_nd(name, s, dim):
    return lambda x: _n_dims(name, x, s, dim)


# 1-D ------------------------------------------------------------------------------------
def fft(input, n=None, dim=-1, norm=None, *, out=None) -> Tensor:
    """The one-dimensional discrete Fourier transform of ``input`` along ``dim``.

    Args:
        input: a real or complex tensor (real ones are treated as complex).
        n: the signal length: ``input`` is zero-padded or cropped to it along ``dim``
            first (default: its size there).
        dim: the dimension to transform (default: the last).
        norm: ``"backward"`` (default, no scaling), ``"ortho"`` (``1/sqrt(n)``) or
            ``"forward"`` (``1/n``).

    Returns a complex tensor (complex64 for float32/complex64 inputs, complex128 for
    64-bit ones) of ``input``'s shape with ``n`` elements along ``dim``.

    >>> ember.fft.fft(ember.tensor([0.0, 1.0, 0.0, 0.0]))
    tensor([ 1.+0.j,  0.-1.j, -1.+0.j,  0.+1.j])
    """
    return _c2c("fft", input, _dims_1d("fft", n, dim), norm, True, out)


def ifft(input, n=None, dim=-1, norm=None, *, out=None) -> Tensor:
    """The inverse of :func:`fft` (scaled by ``1/n`` with the default ``norm``).

    >>> ember.fft.ifft(ember.fft.fft(ember.tensor([1.0, 2.0]))).real
    tensor([1., 2.])
    """
    return _c2c("ifft", input, _dims_1d("ifft", n, dim), norm, False, out)


def rfft(input, n=None, dim=-1, norm=None, *, out=None) -> Tensor:
    """The Fourier transform of a real signal: the ``n // 2 + 1`` non-negative
    frequencies (the others are their complex conjugates).

    Args:
        input: a real tensor (a complex one is an error).
        n, dim, norm: as :func:`fft`.

    >>> ember.fft.rfft(ember.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([4.+0.j, 0.+0.j, 0.+0.j])
    """
    return _r2c("rfft", input, _dims_1d("rfft", n, dim), norm, out)


def irfft(input, n=None, dim=-1, norm=None, *, out=None) -> Tensor:
    """The inverse of :func:`rfft`: the real signal of ``n`` points whose one-sided
    spectrum is ``input``.

    Args:
        input: the one-sided spectrum (complex; a real one is read as complex).
        n: the output length (default ``2 * (m - 1)`` for ``m`` input bins; give it for
            odd lengths). The input is zero-padded or cropped to ``n // 2 + 1`` bins.
            The imaginary parts of the zero-frequency bin (and, for even ``n``, the
            Nyquist bin) are ignored.
        dim, norm: as :func:`ifft`.

    Returns a real tensor.

    >>> ember.fft.irfft(ember.fft.rfft(ember.tensor([1.0, 2.0, 3.0])), n=3)
    tensor([1., 2., 3.])
    """
    return _c2r("irfft", input, _dims_1d("irfft", n, dim), norm, out)


def hfft(input, n=None, dim=-1, norm=None, *, out=None) -> Tensor:
    """The Fourier transform of a signal with a Hermitian-symmetric (real-spectrum)
    form, given its first half: a real tensor of ``n`` points (default ``2 * (m - 1)``).
    The inverse of :func:`ihfft`.

    >>> ember.fft.hfft(ember.tensor([1.0, 0.0, 0.0]))
    tensor([1., 1., 1., 1.])
    """
    return _c2r("hfft", input, _dims_1d("hfft", n, dim), norm, out, forward=True)


def ihfft(input, n=None, dim=-1, norm=None, *, out=None) -> Tensor:
    """The inverse of :func:`hfft`: the first ``n // 2 + 1`` bins of the inverse
    transform of a real signal.

    >>> ember.fft.ihfft(ember.tensor([1.0, 1.0, 1.0, 1.0]))
    tensor([1.-0.j, 0.-0.j, 0.-0.j])
    """
    return _r2c("ihfft", input, _dims_1d("ihfft", n, dim), norm, out, inverse=True)


# 2-D and n-D ----------------------------------------------------------------------------
def fftn(input, s=None, dim=None, norm=None, *, out=None) -> Tensor:
    """The n-dimensional Fourier transform over ``dim``.

    Args:
        input: a real or complex tensor.
        s: the signal lengths along the transformed dims (``-1``: the input's size);
            the input is zero-padded or cropped to them first.
        dim: the dims (default: the last ``len(s)``, or all of them).
        norm: as :func:`fft`, with ``n`` the product of the lengths.

    >>> ember.fft.fftn(ember.ones(2, 2))
    tensor([[4.+0.j, 0.+0.j],
            [0.+0.j, 0.+0.j]])
    """
    return _c2c("fftn", input, _dims_nd("fftn", s, dim), norm, True, out)


def ifftn(input, s=None, dim=None, norm=None, *, out=None) -> Tensor:
    """The inverse of :func:`fftn`."""
    return _c2c("ifftn", input, _dims_nd("ifftn", s, dim), norm, False, out)


def fft2(input, s=None, dim=(-2, -1), norm=None, *, out=None) -> Tensor:
    """The 2-D Fourier transform: :func:`fftn` over the last two dims by default."""
    return _c2c("fft2", input, _dims_nd("fft2", s, dim), norm, True, out)


def ifft2(input, s=None, dim=(-2, -1), norm=None, *, out=None) -> Tensor:
    """The inverse of :func:`fft2`."""
    return _c2c("ifft2", input, _dims_nd("ifft2", s, dim), norm, False, out)


def rfftn(input, s=None, dim=None, norm=None, *, out=None) -> Tensor:
    """The n-dimensional Fourier transform of a real signal: one-sided (``s[-1] // 2 + 1``
    bins) along the last transformed dim, full along the others.

    >>> ember.fft.rfftn(ember.ones(2, 4)).shape
    ember.Size([2, 3])
    """
    return _r2c("rfftn", input, _dims_nd("rfftn", s, dim), norm, out)


def irfftn(input, s=None, dim=None, norm=None, *, out=None) -> Tensor:
    """The inverse of :func:`rfftn`: a real tensor with lengths ``s`` along ``dim``
    (the last one defaults to ``2 * (m - 1)`` for ``m`` input bins).

    >>> x = ember.randn(3, 5)
    >>> bool((ember.fft.irfftn(ember.fft.rfftn(x), x.shape) - x).abs().max() < 1e-5)
    True
    """
    return _c2r("irfftn", input, _dims_nd("irfftn", s, dim), norm, out)


def rfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None) -> Tensor:
    """:func:`rfftn` over the last two dims by default."""
    return _r2c("rfft2", input, _dims_nd("rfft2", s, dim), norm, out)


def irfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None) -> Tensor:
    """:func:`irfftn` over the last two dims by default."""
    return _c2r("irfft2", input, _dims_nd("irfft2", s, dim), norm, out)


def hfftn(input, s=None, dim=None, norm=None, *, out=None) -> Tensor:
    """The n-dimensional :func:`hfft`: the (real) transform of a Hermitian signal given
    by its first half along the last transformed dim."""
    return _c2r("hfftn", input, _dims_nd("hfftn", s, dim), norm, out, forward=True)


def ihfftn(input, s=None, dim=None, norm=None, *, out=None) -> Tensor:
    """The n-dimensional :func:`ihfft`, the inverse of :func:`hfftn`."""
    return _r2c("ihfftn", input, _dims_nd("ihfftn", s, dim), norm, out, inverse=True)


def hfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None) -> Tensor:
    """:func:`hfftn` over the last two dims by default."""
    return _c2r("hfft2", input, _dims_nd("hfft2", s, dim), norm, out, forward=True)


def ihfft2(input, s=None, dim=(-2, -1), norm=None, *, out=None) -> Tensor:
    """:func:`ihfftn` over the last two dims by default."""
    return _r2c("ihfft2", input, _dims_nd("ihfft2", s, dim), norm, out, inverse=True)


# Frequencies and shifts -----------------------------------------------------------------
def _frequencies(name, n, d, values, out, dtype, device, requires_grad):
    n = _int(name, "n", n)
    if n < 0:
        raise EmberError(f"{name}: Trying to create tensor with negative dimension {n}")
    dtype = _dtype(name, dtype)
    if not (dtype.is_floating_point or dtype.is_complex):
        raise EmberTypeError(f"{name} requires a floating point or complex dtype, got "
                             f"{dtype.name}")
    with np.errstate(divide="ignore", invalid="ignore"):
        result = _new(name, values(n) / (n * float(d)), dtype, device, requires_grad)
    return _out(name, result, out)


def fftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None,
            requires_grad=False) -> Tensor:
    """The sample frequencies of :func:`fft`'s bins for a signal of ``n`` points spaced
    ``d`` apart: ``[0, 1, ..., (n - 1) // 2, -(n // 2), ..., -1] / (d * n)``.

    >>> ember.fft.fftfreq(4)
    tensor([ 0.0000,  0.2500, -0.5000, -0.2500])
    """
    def values(n):
        return np.concatenate([np.arange((n + 1) // 2), np.arange(-(n // 2), 0)]
                              ).astype(np.float64)
    return _frequencies("fftfreq", n, d, values, out, dtype, device, requires_grad)


def rfftfreq(n, d=1.0, *, out=None, dtype=None, layout=None, device=None,
             requires_grad=False) -> Tensor:
    """The sample frequencies of :func:`rfft`'s ``n // 2 + 1`` bins:
    ``[0, 1, ..., n // 2] / (d * n)``.

    >>> ember.fft.rfftfreq(4)
    tensor([0.0000, 0.2500, 0.5000])
    """
    return _frequencies("rfftfreq", n, d, lambda n: np.arange(n // 2 + 1, dtype=np.float64),
                        out, dtype, device, requires_grad)


def _shift(name, input, dim, sign):
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor as input, got "
                             f"{type(input).__name__}")
    dims = tuple(range(input.ndim)) if dim is None else tuple(
        _wrap(name, d, input.ndim) for d in _ints(name, "dim", dim))
    if not dims:
        raise EmberError(f"{name}: no dims to shift (input shape {tuple(input.shape)}, "
                         f"dim={dim!r})")
    shifts = tuple(sign * (input.shape[d] // 2) for d in dims)
    return roll(input, shifts, dims)


def fftshift(input, dim=None) -> Tensor:
    """``input`` rolled so that the zero frequency of an :func:`fftn`'s output sits in
    the middle of each of ``dim`` (default: all dims): the order of
    ``fftshift(fftfreq(n))`` is increasing.

    >>> ember.fft.fftshift(ember.fft.fftfreq(5))
    tensor([-0.4000, -0.2000,  0.0000,  0.2000,  0.4000])
    """
    return _shift("fftshift", input, dim, 1)


def ifftshift(input, dim=None) -> Tensor:
    """The inverse of :func:`fftshift` (they differ for odd sizes).

    >>> ember.fft.ifftshift(ember.tensor([0, 1, 2, 3, 4]))
    tensor([2, 3, 4, 0, 1])
    """
    return _shift("ifftshift", input, dim, -1)
