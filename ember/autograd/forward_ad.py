"""Forward-mode AD in the style of ``torch.autograd.forward_ad``: ``dual_level``,
``make_dual``, ``unpack_dual``.

ember's ops have reverse-mode rules only, so a tangent is found with the
double-backward trick (as :func:`ember.func.jvp` does) rather than carried along op by
op: ``make_dual(x, t)`` returns a tensor recorded on the tape behind a hidden marker,
and ``unpack_dual(y)`` differentiates ``y``'s VJP (linear in its cotangent ``u``) with
respect to ``u`` in the direction of the tangents: two backward passes over the graph
between the duals and ``y``. The values are PyTorch's; what differs:

- a dual tensor (and everything computed from it) has ``requires_grad=True``: the
  tangent travels on the autograd tape;
- ops run under ``no_grad`` or ``inference_mode`` are not recorded, so their results
  carry no tangent (``unpack_dual`` then gives ``tangent=None``);
- the ``primal`` that ``unpack_dual`` returns is detached when nothing outside the dual
  level needs its graph; otherwise it is the tensor itself, still linked to the duals
  (a further ``unpack_dual`` of something computed from it finds a tangent).
- as in PyTorch, levels do not nest.
"""
from __future__ import annotations

import functools
import weakref
from typing import NamedTuple

from ..errors import EmberError, EmberTypeError, EmberValueError
from . import grad_mode
from .function import Function
from .graph import reachable_leaves

__all__ = ["UnpackedDualTensor", "enter_dual_level", "exit_dual_level", "make_dual",
           "unpack_dual", "dual_level"]

_level: int | None = None
_markers: dict = {}  # id(marker leaf) -> (weakref to it, its tangent)
_duals: dict = {}    # id(dual tensor) -> (weakref to it, its tangent)


def enter_dual_level() -> int:
    """Enter a forward-AD level (only one at a time); returns its index."""
    global _level
    if _level is not None:
        raise EmberError("Nested forward mode AD is not supported at the moment")
    _level = 0
    return _level


def exit_dual_level(*, level: int | None = None) -> None:
    """Leave the forward-AD level; the tangents made in it are forgotten."""
    global _level
    if level is None:
        level = _level
    if _level is None or level != _level:
        raise EmberError("Trying to exit a forward AD level that was not the last one that "
                         "was created. This is not supported.")
    _level = None
    _markers.clear()
    _duals.clear()


class dual_level:
    """Context manager (and decorator) for forward AD: every ``make_dual`` and
    ``unpack_dual`` happens inside one; leaving it drops the tangents.

    Example::

        >>> import ember.autograd.forward_ad as fwAD
        >>> x = ember.tensor([0.0, 1.0])
        >>> with fwAD.dual_level():
        ...     y = fwAD.make_dual(x, ember.ones(2)).sin()
        ...     fwAD.unpack_dual(y).tangent
        tensor([1.0000, 0.5403])
    """

    def __enter__(self) -> int:
        return enter_dual_level()

    def __exit__(self, *exc) -> bool:
        exit_dual_level()
        return False

    def __call__(self, fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            with dual_level():
                return fn(*args, **kwargs)
        return wrapper


class UnpackedDualTensor(NamedTuple):
    """What :func:`unpack_dual` returns: ``primal`` and ``tangent`` (None when the
    tensor has no tangent at this level)."""
    primal: object
    tangent: object


class _MakeDual(Function):
    """The dual: the primal's values; gradients go to the primal (for ordinary
    backward) and to the hidden marker (for the tangent)."""

    @staticmethod
    def forward(ctx, primal, marker):
        return primal

    @staticmethod
    def backward(ctx, grad):
        return grad, grad


def _check_level(level, what: str) -> None:
    if level is not None and level != _level:
        raise EmberError(f"{what}: level {level} is not the current forward AD level "
                         f"({_level})")


def _markers_of(tensor) -> list:
    """The live markers of this level that ``tensor`` was computed from."""
    if not tensor.requires_grad:
        return []
    found = []
    for leaf in reachable_leaves([tensor]):
        entry = _markers.get(id(leaf))
        if entry is not None and entry[0]() is leaf:
            found.append(leaf)
    return found


def make_dual(tensor, tangent, *, level: int | None = None):
    """A tensor with the values of ``tensor`` that carries ``tangent`` (its forward
    gradient) through the ops applied to it, for :func:`unpack_dual` to read.

    Args:
        tensor: the primal, a floating-point tensor.
        tangent: a floating-point tensor of the same shape (cast to the primal's dtype).
        level: the forward-AD level (the current one by default).

    Example::

        >>> with ember.autograd.forward_ad.dual_level():
        ...     d = ember.autograd.forward_ad.make_dual(ember.tensor(2.0), ember.tensor(1.0))
        ...     ember.autograd.forward_ad.unpack_dual(d ** 3).tangent
        tensor(12.)
    """
    from ..ops.creation import zeros_like
    from ..tensor import Tensor
    if _level is None:
        raise EmberError("Trying to create a dual Tensor for forward AD but no level exists, "
                         "make sure to enter_dual_level() first.")
    _check_level(level, "make_dual")
    for what, t in (("primal", tensor), ("tangent", tangent)):
        if not isinstance(t, Tensor):
            raise EmberTypeError(f"make_dual: expected the {what} to be a Tensor, got "
                                 f"{type(t).__name__}")
        if not t.dtype.is_floating_point:
            raise EmberValueError(f"Expected {what} to be floating point or complex, but got: "
                                  f"{t.dtype}")
    if tuple(tangent.shape) != tuple(tensor.shape):
        raise EmberError("Trying to set a forward gradient that has a different size than "
                         "that of the original Tensor, this is not supported. Tensor is of "
                         f"size {list(tensor.shape)} while the given forward gradient is of "
                         f"size {list(tangent.shape)}.")
    if _markers_of(tensor):
        raise EmberError("Making a dual Tensor based on a Tensor that already has a forward "
                         f"gradient at the same level {_level} is not supported.")
    if tangent.dtype is not tensor.dtype:
        tangent = tangent.to(tensor.dtype)
    marker = zeros_like(tensor).requires_grad_()
    with grad_mode.enable_grad():
        dual = _MakeDual.apply(tensor, marker)
    _markers[id(marker)] = (weakref.ref(marker, _forget(_markers, id(marker))), tangent)
    _duals[id(dual)] = (weakref.ref(dual, _forget(_duals, id(dual))), tangent)
    return dual


def _forget(table: dict, key: int):
    def drop(ref):
        if table.get(key, (None,))[0] is ref:
            del table[key]
    return drop


def _depends_outside(tensor, inside: set) -> bool:
    """Whether ``tensor``'s graph reaches a leaf requiring grad that is not in ``inside``
    (ids): then its graph is kept for ordinary backward."""
    return any(id(leaf) not in inside for leaf in reachable_leaves([tensor]))


def unpack_dual(tensor, *, level: int | None = None) -> UnpackedDualTensor:
    """``(primal, tangent)`` of ``tensor``: its values and its forward gradient (the
    Jacobian-vector product of the computation from the duals made by
    :func:`make_dual`), or ``tangent=None`` when it was not computed from any.

    Example::

        >>> import ember.autograd.forward_ad as fwAD
        >>> with fwAD.dual_level():
        ...     x = fwAD.make_dual(ember.tensor([1.0, 2.0]), ember.tensor([1.0, 0.0]))
        ...     primal, tangent = fwAD.unpack_dual(x.exp().sum())
        >>> tangent
        tensor(2.7183)
    """
    from . import grad as autograd_grad
    from ..ops.creation import zeros_like
    from ..tensor import Tensor
    if not isinstance(tensor, Tensor):
        raise EmberTypeError(f"unpack_dual(): argument 'dual' (position 1) must be Tensor, "
                             f"not {type(tensor).__name__}")
    if _level is None or not tensor.dtype.is_floating_point:
        return UnpackedDualTensor(tensor, None)
    _check_level(level, "unpack_dual")
    entry = _duals.get(id(tensor))
    if entry is not None and entry[0]() is tensor:
        markers, tangent = [], entry[1]
    else:
        markers = _markers_of(tensor)
        if not markers:
            return UnpackedDualTensor(tensor, None)
        with grad_mode.enable_grad():
            u = zeros_like(tensor).detach().requires_grad_()
            pulled = autograd_grad([tensor], markers, [u], retain_graph=True,
                                   create_graph=True, allow_unused=True)
            pairs = [(p, _markers[id(mk)][1]) for p, mk in zip(pulled, markers)
                     if p is not None and p.requires_grad]
            tangent = None
            if pairs:
                (tangent,) = autograd_grad([p for p, _ in pairs], [u], [t for _, t in pairs],
                                           retain_graph=True, create_graph=True,
                                           allow_unused=True)
            if tangent is None:
                tangent = zeros_like(tensor).detach()
        inside = {id(u)} | set(_markers)
        if tangent.requires_grad and not _depends_outside(tangent, inside):
            tangent = tangent.detach()
    inside = set(_markers)
    primal = tensor if _depends_outside(tensor, inside) else tensor.detach()
    return UnpackedDualTensor(primal, tangent)
