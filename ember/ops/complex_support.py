"""Complex tensors (``complex64``, ``complex128``): the ops of their own, and which
registry ops take complex inputs.

Gradients follow PyTorch's convention: for a real loss ``L`` of ``z = x + iy``,
``z.grad`` is ``dL/dx + i dL/dy`` (what a gradient-descent step on ``z`` needs). Where
an op is holomorphic in its inputs (``mul``, ``exp``, ``matmul``, ...) that gradient is
``g * conj(f'(z))``: the op's own VJP, written for real numbers, applied to ``conj(g)``
and conjugated (:func:`_holomorphic`). The ops that are not (``abs``, ``angle``, the
parts, ``polar``) have rules here.

Every other registry op refuses a complex input with an error naming it (PyTorch
refuses ordering comparisons, ``clamp``, ``relu`` ... too). ``real``, ``imag`` and
``view_as_real`` are views of the complex tensor's memory, as in PyTorch (writing into
them changes it); so is ``view_as_complex``.
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import elementwise as ew
from . import registry
from .registry import COMPLEX_FORWARD, COMPLEX_GRAD, OPS, AbstractValue, apply, register

__all__ = ["real", "imag", "conj", "conj_physical", "resolve_conj", "resolve_neg", "is_conj",
           "is_neg", "view_as_real", "view_as_complex", "complex", "polar"]


def _tensor(name: str, value) -> Tensor:
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: expected a Tensor, got {type(value).__name__}")
    return value


def _as_complex(g: Tensor, like_dtype) -> Tensor:
    """A real gradient as one of the complex dtype ``like_dtype``."""
    return g if g.dtype.is_complex else ew.cast(g, like_dtype)


# The parts ------------------------------------------------------------------------------
def _part_infer(a):
    return AbstractValue(a.shape, a.dtype.to_real())


# (views of the complex tensor's memory, as in PyTorch: writing into them changes it)
_REAL = register("real", lambda xp, a: a.real,
                 lambda n, g: _as_complex(g, n.inputs[0].dtype),
                 saves_inputs=False, infer=_part_infer, is_view=True)
_IMAG = register("imag", lambda xp, a: a.imag,
                 lambda n, g: complex(ew.mul(g, 0.0), g),
                 saves_inputs=False, infer=_part_infer, is_view=True)
_CONJ = register("conj_physical", lambda xp, a: xp.conjugate(a),
                 lambda n, g: conj_physical(g), saves_inputs=False)


def real(input) -> Tensor:
    """The real parts of a complex tensor (a real view of its memory); a real tensor itself.

    >>> ember.real(ember.tensor([1 + 2j, -3j]))
    tensor([1., 0.])
    """
    input = _tensor("real", input)
    return apply(_REAL, input) if input.dtype.is_complex else input


def imag(input) -> Tensor:
    """The imaginary parts of a complex tensor (a real view of its memory). A real tensor
    has none: an error, as in PyTorch.

    >>> ember.imag(ember.tensor([1 + 2j, -3j]))
    tensor([ 2., -3.])
    """
    input = _tensor("imag", input)
    if not input.dtype.is_complex:
        raise EmberTypeError(f"imag is not implemented for tensors with non-complex dtypes "
                             f"(got {input.dtype.name})")
    return apply(_IMAG, input)


def conj_physical(input) -> Tensor:
    """The complex conjugate of each element (a new tensor); a real tensor itself.

    >>> ember.conj_physical(ember.tensor([1 + 2j]))
    tensor([1.-2.j])
    """
    input = _tensor("conj_physical", input)
    return apply(_CONJ, input) if input.dtype.is_complex else input


def conj(input) -> Tensor:
    """The complex conjugate (PyTorch's lazy conjugate bit is not kept: the result is
    computed at once, as :func:`conj_physical`)."""
    return conj_physical(input)


def resolve_conj(input) -> Tensor:
    """``input`` itself: ember never holds a lazy conjugate."""
    return _tensor("resolve_conj", input)


def resolve_neg(input) -> Tensor:
    """``input`` itself: ember never holds a lazy negation."""
    return _tensor("resolve_neg", input)


def is_conj(input) -> bool:
    """False: ember computes conjugates at once (no lazy conjugate bit)."""
    _tensor("is_conj", input)
    return False


def is_neg(input) -> bool:
    """False: ember computes negations at once (no lazy negative bit)."""
    _tensor("is_neg", input)
    return False


# Real and complex views of the same numbers ---------------------------------------------
def _stack_parts(xp, a):
    """The parts side by side as a view: the real parts with a last dim stepping half an
    element to the imaginary one."""
    return xp.lib.stride_tricks.as_strided(a.real, a.shape + (2,),
                                           a.strides + (a.itemsize // 2,))


def _join_parts(xp, a):
    """A view of pairs as complex numbers (eagerly the last dim's stride is one element,
    as :func:`view_as_complex` checks; in a compiled graph, or a gradient, a copy where it
    is not)."""
    if a.strides[-1] != a.itemsize:
        a = xp.ascontiguousarray(a)
    return a.view(dt.as_dtype(a.dtype).to_complex().np)[..., 0]


_VIEW_AS_REAL = register("view_as_real", _stack_parts,
                         lambda n, g: apply(_VIEW_AS_COMPLEX, g),  # (g: any layout)
                         saves_inputs=False, is_view=True)
_VIEW_AS_COMPLEX = register("view_as_complex", _join_parts, lambda n, g: view_as_real(g),
                            saves_inputs=False, is_view=True)


def view_as_real(input) -> Tensor:
    """A complex tensor of shape ``S`` as a real one of shape ``S + (2,)``: the real and
    imaginary parts side by side (a view of its memory).

    >>> ember.view_as_real(ember.tensor([1 + 2j]))
    tensor([[1., 2.]])
    """
    input = _tensor("view_as_real", input)
    if not input.dtype.is_complex:
        raise EmberTypeError(f"view_as_real is only supported for complex tensors (got "
                             f"{input.dtype.name})")
    return apply(_VIEW_AS_REAL, input)


def view_as_complex(input) -> Tensor:
    """A float32 or float64 tensor whose last dimension has size 2 (real, imaginary) as
    a complex one without it (a view of its memory: the last dim's stride must be 1, the
    others even, as in PyTorch).

    >>> ember.view_as_complex(ember.tensor([[1.0, 2.0]]))
    tensor([1.+2.j])
    """
    input = _tensor("view_as_complex", input)
    if input.dtype not in (dt.float32, dt.float64):
        raise EmberTypeError(f"view_as_complex is only supported for float32 and float64 "
                             f"tensors, but got a tensor of scalar type: {input.dtype.name}")
    if input.ndim == 0 or input.shape[-1] != 2:
        raise ShapeError(f"view_as_complex: tensor must have a last dimension of size 2 "
                         f"(got shape {tuple(input.shape)})")
    if registry._trace is not None:  # (no layout while ember.jit traces)
        return apply(_VIEW_AS_COMPLEX, input)
    strides = input.stride()
    if strides[-1] != 1:
        raise EmberError(f"view_as_complex: tensor must have a last dimension with stride 1 "
                         f"(got strides {strides}); call .contiguous() first")
    if any(s % 2 for s in strides[:-1]) or input.storage_offset() % 2:
        raise EmberError(f"view_as_complex: tensor must have a stride divisible by 2 for all "
                         f"but the last dimension, and an even storage offset (got strides "
                         f"{strides}); call .contiguous() first")
    return apply(_VIEW_AS_COMPLEX, input)


# Complex numbers from real ones ---------------------------------------------------------
def _complex_infer(a, b):
    return AbstractValue(np.broadcast_shapes(a.shape, b.shape), a.dtype.to_complex())


_COMPLEX = register("complex", lambda xp, a, b: (a + 1j * b).astype(
                        dt.as_dtype(a.dtype).to_complex().np),
                    lambda n, g: (real(g), imag(g)), saves_inputs=False, broadcasting=True,
                    infer=_complex_infer)


def _polar_vjp(n, g):
    r, theta = n.saved_inputs()
    unit = complex(ew.cos(theta), ew.sin(theta))
    g_unit = ew.mul(g, conj_physical(unit))  # g * e^{-i theta}
    grad_r = real(g_unit) if n.edges[0] else None
    grad_theta = ew.mul(imag(g_unit), r) if n.edges[1] else None  # Re(g conj(i r e^{i t}))
    return grad_r, grad_theta


_POLAR = register("polar", lambda xp, r, t: (r * xp.cos(t) + 1j * (r * xp.sin(t))).astype(
                      dt.as_dtype(r.dtype).to_complex().np),
                  _polar_vjp, broadcasting=True, infer=_complex_infer)


def _real_pair(name: str, a, b, first: str, second: str):
    a, b = _tensor(name, a), _tensor(name, b)
    if a.dtype is not b.dtype or a.dtype not in (dt.float32, dt.float64, dt.float16):
        raise EmberTypeError(f"{name}: expected {first} and {second} of the same floating "
                             f"dtype (float32 or float64), got {a.dtype.name} and "
                             f"{b.dtype.name}")
    if a.dtype is dt.float16:
        a, b = ew.cast(a, dt.float32), ew.cast(b, dt.float32)
    return a, b


def complex(real, imag) -> Tensor:  # noqa: A001  (PyTorch's name)
    """The complex tensor ``real + i * imag`` (float32 parts give complex64, float64
    parts complex128; they broadcast).

    >>> ember.complex(ember.tensor([1.0]), ember.tensor([2.0]))
    tensor([1.+2.j])
    """
    a, b = _real_pair("complex", real, imag, "real", "imag")
    return apply(_COMPLEX, a, b)


def polar(abs, angle) -> Tensor:  # noqa: A002  (PyTorch's names)
    """The complex tensor ``abs * (cos(angle) + i sin(angle))``.

    >>> ember.polar(ember.tensor([2.0]), ember.tensor([0.0]))
    tensor([2.+0.j])
    """
    r, t = _real_pair("polar", abs, angle, "abs", "angle")
    return apply(_POLAR, r, t)


# abs and angle of complex numbers -------------------------------------------------------
_CABS = register("complex_abs", lambda xp, a: xp.abs(a), None, infer=_part_infer)
_ANGLE = register("complex_angle", lambda xp, a: xp.angle(a), None, infer=_part_infer)


def _safe_abs_squared(z):
    """|z|^2 with 1 where it is 0 (so that a ratio over it is 0 there, not NaN)."""
    mag2 = real(ew.mul(z, conj_physical(z)))
    return ew.where(mag2 == 0, ew.mul(mag2, 0.0) + 1, mag2)


def _cabs_vjp(n, g):
    (z,) = n.saved_inputs()
    mag = apply(_CABS, z)
    unit = ew.div(z, _as_complex(ew.where(mag == 0, ew.mul(mag, 0.0) + 1, mag), z.dtype))
    return ew.mul(_as_complex(g, z.dtype), unit)  # g z / |z| (0 at z = 0)


def _angle_vjp(n, g):
    (z,) = n.saved_inputs()
    turned = ew.mul(z, 1j)  # (-y + ix)
    return ew.mul(_as_complex(g, z.dtype),
                  ew.div(turned, _as_complex(_safe_abs_squared(z), z.dtype)))


_CABS.vjp, _ANGLE.vjp = _cabs_vjp, _angle_vjp


def complex_abs(z: Tensor) -> Tensor:
    """|z| of a complex tensor (a real one)."""
    return apply(_CABS, z)


def complex_angle(z: Tensor) -> Tensor:
    """The argument of each element of a complex tensor, in (-pi, pi]."""
    return apply(_ANGLE, z)


# Which registry ops take complex inputs -------------------------------------------------
def _holomorphic(vjp):
    """The VJP of an op holomorphic in its complex inputs, from its real one: for
    ``w = f(z)``, PyTorch's gradient is ``g * conj(f'(z))`` = ``conj(vjp(conj(g)))``."""
    def complex_vjp(n, g):
        if not g.dtype.is_complex:
            return vjp(n, g)
        out = vjp(n, conj_physical(g))
        if isinstance(out, tuple):
            return tuple(None if x is None else conj_physical(x) for x in out)
        return None if out is None else conj_physical(out)
    return complex_vjp


# Gradients linear in g with real coefficients: right for complex tensors as they are.
LINEAR = ("add", "sub", "neg", "sum", "view", "expand", "permute", "flip", "roll", "cat",
          "stack", "index", "index_view", "index_select", "index_backward", "clone",
          "diagonal", "diag_embed", "tril", "triu", "where", "masked_fill",
          "constant_pad_nd", "repeat", "to_device", "cumsum", "take", "gather", "unfold",
          "view_scatter", "index_put", "index_add", "unfold_backward", "scatter",
          "scatter_add", "masked_scatter", "index_fill", "index_copy", "as_strided",
          "as_strided_backward", "as_strided_gather")
# Holomorphic: gradients from the real VJP through conj (see _holomorphic).
HOLOMORPHIC = ("mul", "div", "exp", "log", "log2", "log10", "log1p", "expm1", "sqrt",
               "rsqrt", "reciprocal", "square", "sin", "cos", "tan", "sinh", "cosh", "tanh",
               "asin", "acos", "atan", "exp2", "lerp",
               "sigmoid", "pow", "matmul", "einsum", "prod", "cumprod", "linalg_solve",
               "linalg_inv", "linalg_det")
# Their own VJPs conjugate where complex (written with mH).
CONJUGATING = ("linalg_eigh", "linalg_cholesky", "linalg_qr", "linalg_svd",
               "linalg_slogdet")
# Forward only (their results are not complex, or their gradient is not written).
FORWARD = ("eq", "ne", "isnan", "isinf", "isfinite", "any", "all", "nan_to_num",
           "count_nonzero", "nonzero", "masked_select")


def _cast_vjp(n, g):
    """A cast's gradient, in the input's dtype: the real part where a real tensor became
    complex, the gradient as a complex one where a complex tensor became real."""
    source = n.inputs[0].dtype
    if g.dtype.is_complex and not source.is_complex:
        return real(g)
    if source.is_complex and not g.dtype.is_complex:
        return ew.cast(g, source)
    return g


def mark_ops() -> None:
    """Let the ops listed above take complex tensors (``import ember`` calls it, once
    every op is registered; a listed name that is not is an error here, not a silent
    gap)."""
    missing = [name for name in LINEAR + HOLOMORPHIC + CONJUGATING + FORWARD
               if name not in OPS]
    if missing:
        raise RuntimeError(f"complex_support: no registry ops named {missing}")
    for name in LINEAR + CONJUGATING:
        OPS[name].complex = COMPLEX_GRAD
    for name in HOLOMORPHIC:
        op = OPS[name]
        if op.complex != COMPLEX_GRAD:  # (once)
            op.vjp, op.complex = _holomorphic(op.vjp), COMPLEX_GRAD
    for name in FORWARD:
        OPS[name].complex = COMPLEX_FORWARD
    OPS["cast"].vjp, OPS["cast"].complex = _cast_vjp, COMPLEX_GRAD


for _op in (_REAL, _IMAG, _CONJ, _VIEW_AS_REAL, _VIEW_AS_COMPLEX, _COMPLEX, _POLAR, _CABS,
            _ANGLE):
    _op.complex = COMPLEX_GRAD


# Tensor methods and properties ----------------------------------------------------------
Tensor.real = property(real, doc="The real parts (a view, for a complex tensor).")
Tensor.imag = property(imag, doc="The imaginary parts of a complex tensor (a view).")
Tensor.conj = conj
Tensor.conj_physical = conj_physical
Tensor.resolve_conj = resolve_conj
Tensor.resolve_neg = resolve_neg
Tensor.is_conj = is_conj
Tensor.is_neg = is_neg
