"""``linalg.eig`` and ``linalg.eigvals``: the eigenvalues and eigenvectors of general
square matrices, complex as in PyTorch (LAPACK's geev through NumPy: eigenvectors of unit
norm, in the order LAPACK gives), batched over leading dims and differentiable.

For ``A = V diag(L) V^-1`` and the gradients ``gL``, ``gV`` of a real loss, the gradient
of ``A`` is ``V^-H (diag(gL) + (V^H gV - V^H V Re(diag(V^H gV))) / conj(E)) V^H`` with
``E[i, j] = L[j] - L[i]`` (off the diagonal), its real part for a real ``A``. The
eigenvectors are defined only up to a phase each: a loss that depends on the phase has
no gradient (PyTorch checks this and refuses; ember does not check).
"""
from __future__ import annotations

import collections

from .. import dtypes as dt
from ..tensor import Tensor
from . import elementwise as ew
from .complex_support import conj_physical, real
from .linalg import matmul
from .linalg_decomp import _lapack, check_matrices, solve
from .registry import COMPLEX_GRAD, AbstractValue, apply, register

__all__ = ["eig", "eigvals"]

eig_result = collections.namedtuple("eig", ["eigenvalues", "eigenvectors"])


def _complex_of(dtype):
    return dt.as_dtype(dtype).to_complex()


def _eig_forward(xp, a):
    values, vectors = _lapack("linalg.eig", xp.linalg.eig, a)
    target = _complex_of(a.dtype).np
    return values.astype(target, copy=False), vectors.astype(target, copy=False)


def _mH(x):
    return conj_physical(x.mT)


def _eig_vjp(n, g_values, g_vectors):
    A, = n.saved_inputs()
    L, V = n.output(0), n.output(1)
    Vh = _mH(V)
    if g_vectors is not None:
        VhgV = matmul(Vh, g_vectors)
        diag_re = real(VhgV.diagonal(0, -2, -1))
        Lc = conj_physical(L)
        E = Lc.unsqueeze(-2) - Lc.unsqueeze(-1)  # conj(L[j] - L[i])
        n_ = L.shape[-1]
        from .creation import eye
        off = ~eye(n_, dtype=dt.bool, device=L.device)
        inner = VhgV - matmul(Vh, V * ew.cast(diag_re, V.dtype).unsqueeze(-2))
        inner = ew.where(off, ew.div(inner, ew.where(off, E, ew.mul(E, 0) + 1)), 0)
        if g_values is not None:
            from .movement import diag_embed
            inner = inner + diag_embed(g_values)
    else:
        from .movement import diag_embed
        inner = diag_embed(g_values)
    gA = solve(Vh, matmul(inner, Vh))
    return gA if A.dtype.is_complex else real(gA)


def _eig_vjp_entry(n, g):
    g_values, g_vectors = g
    if g_values is None and g_vectors is None:
        return None
    return _eig_vjp(n, g_values, g_vectors)


def _eig_infer(a):
    complex_dtype = _complex_of(a.dtype)
    return (AbstractValue(a.shape[:-1], complex_dtype), AbstractValue(a.shape, complex_dtype))


_EIG = register("linalg_eig", _eig_forward, _eig_vjp_entry, n_outputs=2, saves_outputs=True,
                infer=_eig_infer)
_EIG.complex = COMPLEX_GRAD


def eig(A):
    """``(eigenvalues, eigenvectors)`` of each square matrix of ``A`` (``(*, n, n)``),
    complex (complex64 for float32/complex64 input, complex128 for float64/complex128);
    ``A @ V == V @ diag(L)``.

    >>> ember.linalg.eig(ember.tensor([[2.0, 0.0], [0.0, 3.0]])).eigenvalues
    tensor([2.+0.j, 3.+0.j])
    """
    check_matrices("linalg.eig", A)
    return eig_result(*apply(_EIG, A))


def eigvals(A) -> Tensor:
    """The eigenvalues of each square matrix of ``A``, complex (see :func:`eig`).

    >>> ember.linalg.eigvals(ember.tensor([[0.0, -1.0], [1.0, 0.0]]))
    tensor([0.+1.j, 0.-1.j])
    """
    check_matrices("linalg.eigvals", A)
    return apply(_EIG, A)[0]
