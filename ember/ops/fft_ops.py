"""Discrete Fourier transforms: the three primitives behind ``ember.fft``.

``fft_c2c`` transforms complex tensors over some dims (forward, ``exp(-2 pi i jk/n)``, or
inverse, ``exp(+2 pi i jk/n)``); ``fft_r2c`` is the one-sided forward transform of a real
tensor over one dim (the ``n // 2 + 1`` bins that determine the rest); ``fft_c2r`` is its
inverse, the real signal of ``n`` points whose spectrum is Hermitian, given its first
``n // 2 + 1`` bins. Every ``ember.fft`` function is these three, zero-padding or
cropping (``constant_pad_nd``), casts and conjugates.

Each primitive is linear, so its VJP is its adjoint, itself a transform: the adjoint of a
forward transform is the inverse one with the same scale (``norm`` "backward" and
"forward" trade places, "ortho" stays). Gradients follow PyTorch's convention for
complex tensors (``z.grad = dL/dx + i dL/dy``): for a map ``y = A z`` that is
``A^H g``. The one-sided transforms' adjoints account for the bins left out: ``fft_r2c``
of a real signal is the first bins of the full spectrum, so its adjoint is the real part
of an inverse transform of ``g`` zero-padded to ``n`` bins, which is ``fft_c2r`` of ``g``
with the bins that have a mirror image (all but the zero frequency and, for even ``n``,
the Nyquist one) halved; ``fft_c2r`` counts each such bin twice (once for its mirror
image), so its adjoint is ``fft_r2c`` of ``g`` with those bins doubled.
"""
from __future__ import annotations

from .. import dtypes as dt
from .registry import COMPLEX_GRAD, AbstractValue, apply, register
from . import elementwise as ew
from .complex_support import real
from .shape import cat
from .index import slice_dim

__all__: list[str] = []  # (the public functions live in ember.fft)

NORMS = ("backward", "ortho", "forward")
# The adjoint of a transform scaled by norm m is the opposite transform with the same
# scale, which the opposite direction names differently.
_ADJOINT_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}


# Forwards -------------------------------------------------------------------------------
def _c2c_forward(xp, a, dims, norm, forward):
    if a.size == 0:  # (a batch dim of size 0: nothing to transform)
        return xp.zeros(a.shape, a.dtype)
    fn = xp.fft.fftn if forward else xp.fft.ifftn
    return fn(a, axes=dims, norm=norm).astype(a.dtype, copy=False)


def _r2c_forward(xp, a, dim, norm):
    dtype = dt.as_dtype(a.dtype).to_complex()
    shape = a.shape[:dim] + (a.shape[dim] // 2 + 1,) + a.shape[dim + 1:]
    if a.size == 0:
        return xp.zeros(shape, dtype.np)
    return xp.fft.rfft(a, axis=dim, norm=norm).astype(dtype.np, copy=False)


def _c2r_forward(xp, a, dim, n, norm):
    dtype = dt.as_dtype(a.dtype).to_real()
    shape = a.shape[:dim] + (n,) + a.shape[dim + 1:]
    if a.size == 0:
        return xp.zeros(shape, dtype.np)
    return xp.fft.irfft(a, n=n, axis=dim, norm=norm).astype(dtype.np, copy=False)


# Shape and dtype rules ------------------------------------------------------------------
def _c2c_infer(a, dims, norm, forward):
    return AbstractValue(a.shape, a.dtype)


def _r2c_infer(a, dim, norm):
    shape = a.shape[:dim] + (a.shape[dim] // 2 + 1,) + a.shape[dim + 1:]
    return AbstractValue(shape, a.dtype.to_complex())


def _c2r_infer(a, dim, n, norm):
    return AbstractValue(a.shape[:dim] + (n,) + a.shape[dim + 1:], a.dtype.to_real())


# VJPs -----------------------------------------------------------------------------------
def _scale_mirrored_bins(g, dim: int, n: int, factor: float):
    """``g`` (``n // 2 + 1`` bins along ``dim``) with the bins that have a mirror image in
    the full spectrum of ``n`` points (``1 .. n - n // 2 - 1``) multiplied by ``factor``."""
    stop = n - n // 2  # one past the last mirrored bin
    if stop <= 1:
        return g
    parts = [slice_dim(g, dim, 0, 1), ew.mul(slice_dim(g, dim, 1, stop), factor)]
    if stop < g.shape[dim]:  # (the Nyquist bin of an even n)
        parts.append(slice_dim(g, dim, stop, g.shape[dim]))
    return cat(parts, dim)


def _as_complex(g, dtype):
    return g if g.dtype.is_complex else ew.cast(g, dtype)


def _c2c_vjp(n, g):
    p = n.params
    g = _as_complex(g, n.inputs[0].dtype)
    return apply(_C2C, g, dims=p["dims"], norm=_ADJOINT_NORM[p["norm"]],
                 forward=not p["forward"])


def _r2c_vjp(n, g):
    dim, norm = n.params["dim"], n.params["norm"]
    size = n.inputs[0].shape[dim]
    g = _as_complex(g, n.inputs[0].dtype.to_complex())
    return apply(_C2R, _scale_mirrored_bins(g, dim, size, 0.5), dim=dim, n=size,
                 norm=_ADJOINT_NORM[norm])


def _c2r_vjp(n, g):
    dim, size, norm = n.params["dim"], n.params["n"], n.params["norm"]
    if g.dtype.is_complex:  # (only the real part of a real output's gradient counts)
        g = real(g)
    spectrum = apply(_R2C, g, dim=dim, norm=_ADJOINT_NORM[norm])
    return _scale_mirrored_bins(spectrum, dim, size, 2.0)


_C2C = register("fft_c2c", _c2c_forward, _c2c_vjp, infer=_c2c_infer, saves_inputs=False)
_R2C = register("fft_r2c", _r2c_forward, _r2c_vjp, infer=_r2c_infer, saves_inputs=False)
_C2R = register("fft_c2r", _c2r_forward, _c2r_vjp, infer=_c2r_infer, saves_inputs=False)
for _op in (_C2C, _R2C, _C2R):
    _op.complex = COMPLEX_GRAD


def fft_c2c(x, dims: tuple, norm: str, forward: bool):
    """The complex-to-complex transform of the complex tensor ``x`` over ``dims``
    (non-negative, distinct), scaled as ``norm`` says for this direction."""
    return apply(_C2C, x, dims=tuple(dims), norm=norm, forward=bool(forward))


def fft_r2c(x, dim: int, norm: str):
    """The one-sided forward transform of the real tensor ``x`` over ``dim``."""
    return apply(_R2C, x, dim=dim, norm=norm)


def fft_c2r(x, dim: int, n: int, norm: str):
    """The real signal of ``n`` points (inverse transform) whose one-sided spectrum along
    ``dim`` is ``x`` (which has ``n // 2 + 1`` bins there)."""
    return apply(_C2R, x, dim=dim, n=int(n), norm=norm)
