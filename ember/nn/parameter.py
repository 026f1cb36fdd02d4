"""``nn.Parameter``: a tensor that a :class:`~ember.nn.Module` registers as a parameter
when assigned as an attribute."""
from __future__ import annotations

from ..errors import EmberTypeError
from ..tensor import Tensor

__all__ = ["Parameter"]


class Parameter(Tensor):
    """A tensor that is a module parameter: assigning one to a module attribute adds it to
    ``module.parameters()``. It shares storage with ``data`` and requires a gradient
    unless told otherwise. Ops on a parameter give plain tensors.

    Args:
        data: the values (defaults to an empty tensor).
        requires_grad: whether the parameter needs a gradient.

    >>> p = ember.nn.Parameter(ember.zeros(3))
    >>> p.requires_grad
    True
    """

    def __new__(cls, data: Tensor | None = None, requires_grad: bool = True):
        if data is None:
            from ..ops.creation import empty
            data = empty(0)
        if not isinstance(data, Tensor):
            raise EmberTypeError(f"Parameter: expected a Tensor as data, got "
                                 f"{type(data).__name__}")
        p = cls._make(data._data, data._device)
        p._version = data._version
        p.requires_grad_(requires_grad)
        return p

    def __init__(self, data: Tensor | None = None, requires_grad: bool = True):
        pass  # everything happens in __new__; Tensor.__init__ refuses direct construction

    def __repr__(self) -> str:
        return "Parameter containing:\n" + super().__repr__()

    def __deepcopy__(self, memo):
        if id(self) in memo:
            return memo[id(self)]
        p = Parameter(self.detach().clone(), self._requires_grad)
        if self.grad is not None:
            p.grad = self.grad.detach().clone()
        memo[id(self)] = p
        return p

