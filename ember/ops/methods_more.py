"""More Tensor methods, so that ``dir(ember.Tensor)`` covers what PyTorch's Tensor has:
the in-place shape ops and ``resize_`` (``inplace_shape.py``), strided views
(``strided.py``), the view scatters (``view_scatter.py``), index writes
(``index_more.py``), the incomplete gamma functions (``igamma.py``), factor solves
(``linalg_solvers.py``); and here the small ones: queries (``is_nonzero``, ``layout``,
``get_device``, ...), ``mH``/``H``, ``sum_to_size``, ``split_with_sizes``, ``diagflat``,
more in-place ops and random fills, ``apply_``/``map_`` with Python callables, and
``register_post_accumulate_grad_hook``.
"""
from __future__ import annotations

import numbers

import numpy as np

from ..autograd.graph import PostAccumulateGradHook, RemovableHandle
from ..errors import EmberError, EmberTypeError, EmberValueError, ShapeError
from ..tensor import Tensor
from . import (activation, igamma as ig, index_more, inplace_shape, linalg_solvers, movement,
               registry, shape as sh, special_fns, strided as strided_views, view_scatter)
from .inplace import inplace
from .methods import _inplace_method, _random_fill, register_methods
from .reduce import sum_to

__all__ = ["diagflat", "layout", "strided"]


class layout:
    """How a tensor's elements are stored. ember has one layout, ``ember.strided``
    (dense, with strides); PyTorch's sparse layouts have no ember counterpart.

    >>> ember.zeros(2).layout
    ember.strided
    """
    __slots__ = ("name",)

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return f"ember.{self.name}"


strided = layout("strided")


def diagflat(input, offset: int = 0):
    """The square matrix with ``input`` (flattened) on diagonal ``offset``, zeros
    elsewhere.

    >>> ember.diagflat(ember.tensor([[1, 2], [3, 4]]))
    tensor([[1, 0, 0, 0],
            [0, 2, 0, 0],
            [0, 0, 3, 0],
            [0, 0, 0, 4]])
    """
    return movement.diag(sh.reshape(input, (-1,)), offset)


# Queries -----------------------------------------------------------------------------
def is_nonzero(self) -> bool:
    """Whether this one-element tensor is not zero (NaN counts as non-zero).

    >>> ember.tensor([0.0]).is_nonzero()
    False
    """
    n = self.numel()
    if n != 1:
        how = "no values" if n == 0 else "more than one value"
        raise EmberError(f"is_nonzero: Boolean value of Tensor with {how} is ambiguous")
    return bool(self._data.reshape(()) != 0)


def is_same_size(self, other) -> bool:
    """Whether ``other`` has this tensor's shape."""
    if not isinstance(other, Tensor):
        raise EmberTypeError(f"is_same_size: expected a Tensor, got {type(other).__name__}")
    return tuple(self.shape) == tuple(other.shape)


def is_inference(self) -> bool:
    """Whether this is an inference tensor. Always False: ``ember.inference_mode`` turns
    gradients off but makes ordinary tensors."""
    return False


def get_device(self) -> int:
    """The index of this tensor's GPU, or -1 for a tensor on the CPU."""
    if self.device.type == "cpu":
        return -1
    index = self.device.index
    if index is None:
        index = self.device.backend.current_index() or 0
    return index


def _m_h(self):
    """The last two dims swapped, conjugated where complex; for matrices or batches of
    matrices."""
    if self.ndim < 2:
        raise EmberError(f"mH: tensor.mH is only supported on matrices or batches of "
                         f"matrices. Got {self.ndim}-D tensor.")
    return sh.adjoint(self)


def _h(self):
    """The conjugate transpose of a matrix (the transpose of a real one); a 0-d tensor is
    returned as a view of itself (conjugated where complex)."""
    if self.ndim not in (0, 2):
        hint = ". For batches of matrices, consider using tensor.mH" if self.ndim > 2 else ""
        raise EmberError(f"H: tensor.H is only supported on matrices (2-D tensors). Got "
                         f"{self.ndim}-D tensor{hint}")
    out = sh.t(self)
    if out.dtype.is_complex:
        from .complex_support import conj_physical
        out = conj_physical(out)
    return out


def _layout(self) -> layout:
    """The memory layout: ``ember.strided``, the only one ember has."""
    return strided


def _output_nr(self) -> int:
    """Which output of the op that made this tensor it is (0 for a leaf)."""
    return self._out_index


# Shapes ------------------------------------------------------------------------------
def sum_to_size(self, *size):
    """This tensor summed down to ``size``, which must broadcast to its shape.

    >>> ember.ones(2, 3).sum_to_size(1, 3)
    tensor([[2., 2., 2.]])
    """
    size = sh.size_args(size, "sum_to_size")
    have = tuple(self.shape)
    lead = len(have) - len(size)
    if lead < 0 or any(s != 1 and s != have[lead + i] for i, s in enumerate(size)):
        raise ShapeError(f"sum_to_size: size {{{list(size)}}} is not expandable to size "
                         f"{{{list(have)}}}.")
    return sum_to(self, size)


def split_with_sizes(self, split_sizes, dim: int = 0):
    """Views of pieces of the given sizes along ``dim`` (they must add up to its size).

    >>> [p.tolist() for p in ember.arange(5).split_with_sizes([2, 3])]
    [[0, 1], [2, 3, 4]]
    """
    if not isinstance(split_sizes, (list, tuple)):
        raise EmberTypeError(f"split_with_sizes: argument 'split_sizes' must be a tuple of "
                             f"ints, not {type(split_sizes).__name__}")
    return sh.split(self, list(split_sizes), dim)


# In-place ops ------------------------------------------------------------------------
def float_power_(self, exponent):
    """In-place version of :meth:`float_power`; this tensor must be float64."""
    if self.dtype.name != "float64":
        raise EmberError(f"float_power_: the base given to float_power_ has dtype "
                         f"{self.dtype.name} but the operation's result requires dtype "
                         f"float64")
    return _inplace_method(Tensor.float_power, "float_power_")(self, exponent)


def _float_fill(name: str, draw, check):
    fill = _random_fill(name, draw)

    def method(self, *args, generator=None, **kwargs):
        if not self.dtype.is_floating_point:
            raise EmberTypeError(f"{name}: expects a floating point tensor, got dtype "
                                 f"{self.dtype.name}")
        check(*args, **kwargs)
        return fill(self, *args, generator=generator, **kwargs)
    method.__name__ = name
    return method


def _check_std(mean=1.0, std=2.0):
    if not std > 0:
        raise EmberError(f"log_normal_: log_normal_ expects std > 0.0, but found std={std}")


def _check_sigma(median=0.0, sigma=1.0):
    if not sigma > 0:
        raise EmberError(f"cauchy_: cauchy_ expects sigma > 0.0, but found sigma={sigma}")


def _check_p(p):
    if not 0 < p < 1:
        raise EmberError(f"geometric_: geometric_ expects p to be in (0, 1), but got p={p}")


_log_normal_ = _float_fill("log_normal_", lambda r, s, mean=1.0, std=2.0:
                           r.lognormal(mean, std, s), _check_std)
_log_normal_.__doc__ = """Fill with numbers whose log is normal with ``mean`` and ``std``
(defaults 1 and 2), in place."""
_cauchy_ = _float_fill("cauchy_", lambda r, s, median=0.0, sigma=1.0:
                       median + sigma * r.standard_cauchy(s), _check_sigma)
_cauchy_.__doc__ = "Fill with numbers from the Cauchy distribution (``median``, ``sigma``)."
_geometric_fill = _random_fill("geometric_", lambda r, s, p: r.geometric(p, s))


def _geometric_(self, p, *, generator=None):
    """Fill with the number of Bernoulli(``p``) trials up to the first success
    (1, 2, ...), in place."""
    _check_p(p)
    return _geometric_fill(self, p, generator=generator)


# Python callables --------------------------------------------------------------------
def _check_python_map(name: str, *tensors):
    if registry._trace is not None or any(getattr(t._data, "_ember_tracer", False)
                                          for t in tensors):
        raise EmberError(f"{name}: ember.jit cannot capture a Python function applied to "
                         f"each element; call {name} outside ember.jit")
    if tensors[0].device.type != "cpu":
        raise EmberError(f"{name}: {name} is only implemented on CPU tensors")
    if any(t._requires_grad for t in tensors):
        raise EmberError(f"{name}: Can't call {name}() on Variable that requires grad. Use "
                         f"var.detach().{name}() instead.")


def _number(name: str, value):
    if not isinstance(value, (numbers.Real, np.bool_)):
        raise EmberTypeError(f"{name}: the callable must return a real number, not "
                             f"{type(value).__name__}")
    return value


def _store(name: str, arr, index, value) -> None:
    try:
        arr[index] = _number(name, value)
    except OverflowError:
        raise EmberValueError(f"{name}: the callable returned {value}, which does not fit "
                              f"dtype {arr.dtype}") from None


def apply_(self, callable):
    """Replace each element ``v`` with ``callable(v)`` (a Python number in, a number
    out), in place. CPU only and slow: for code that is not performance critical.

    >>> ember.tensor([1.0, 2.0]).apply_(lambda v: v * v)
    tensor([1., 4.])
    """
    _check_python_map("apply_", self)

    def direct(arr):
        for index in np.ndindex(arr.shape):
            _store("apply_", arr, index, callable(arr[index].item()))
    return inplace("apply_", self, None, (), direct)


def map_(self, tensor, callable):
    """Replace each element ``a`` with ``callable(a, b)``, ``b`` the matching element of
    ``tensor`` (broadcast to this tensor's shape, of its dtype), in place. CPU only.

    >>> ember.zeros(2).map_(ember.tensor([1.0, 2.0]), lambda a, b: a + 10 * b)
    tensor([10., 20.])
    """
    if not isinstance(tensor, Tensor):
        raise EmberTypeError(f"map_: expected a Tensor for 'other', got "
                             f"{type(tensor).__name__}")
    if tensor.dtype is not self.dtype:
        raise EmberTypeError(f"map_: expected {self.dtype.name} for 'other' (this tensor's "
                             f"dtype), got {tensor.dtype.name}")
    _check_python_map("map_", self, tensor)
    other = sh.expand(tensor, tuple(self.shape))._data

    def direct(arr):
        for index in np.ndindex(arr.shape):
            _store("map_", arr, index, callable(arr[index].item(), other[index].item()))
    return inplace("map_", self, None, (), direct)


# Hooks -------------------------------------------------------------------------------
def register_post_accumulate_grad_hook(self, hook) -> RemovableHandle:
    """Call ``hook(tensor)`` after a backward pass has accumulated this leaf's
    ``.grad`` (for example to step an optimizer per parameter); it must return None.
    Returns a handle whose ``remove()`` unregisters it.

    >>> w = ember.ones(2, requires_grad=True)
    >>> h = w.register_post_accumulate_grad_hook(lambda t: print(t.grad))
    >>> (w * 3).sum().backward()
    tensor([3., 3.])
    """
    if not self._requires_grad:
        raise EmberError("register_post_accumulate_grad_hook: cannot register a hook on a "
                         "tensor that doesn't require gradient")
    if self._node is not None:
        raise EmberError("register_post_accumulate_grad_hook: post accumulate grad hooks "
                         "cannot be registered on non-leaf tensors")
    if self._hooks is None:
        self._hooks = []
    return RemovableHandle(self._hooks, PostAccumulateGradHook(hook))


# Attaching ---------------------------------------------------------------------------
def _install() -> None:
    for module in (inplace_shape, view_scatter, index_more, ig, linalg_solvers, strided_views):
        register_methods(module, skip=("new_empty_strided", "new", "linalg_lu_solve",
                                       "lu_solve"))
    methods = {
        "new_empty_strided": inplace_shape.new_empty_strided, "new": inplace_shape.new,
        "storage_offset": strided_views.storage_offset, "unfold": strided_views.unfold,
        "index_put": index_more.index_put_method, "index_put_": index_more.index_put_,
        "put_": index_more.put_, "index_reduce_": index_more.index_reduce_,
        "fill_diagonal_": index_more.fill_diagonal_,
        "lu_solve": linalg_solvers.lu_solve,
        "diagflat": diagflat, "hardshrink": activation.hardshrink,
        "prelu": activation.prelu, "mvlgamma": special_fns.mvlgamma,
        "is_nonzero": is_nonzero, "is_same_size": is_same_size,
        "is_inference": is_inference, "get_device": get_device,
        "sum_to_size": sum_to_size, "split_with_sizes": split_with_sizes,
        "float_power_": float_power_, "log_normal_": _log_normal_, "cauchy_": _cauchy_,
        "geometric_": _geometric_, "apply_": apply_, "map_": map_,
        "register_post_accumulate_grad_hook": register_post_accumulate_grad_hook,
    }
    for name, fn in methods.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for name in ("addmm", "addmv", "baddbmm", "nextafter", "igamma", "igammac", "mvlgamma"):
        if not hasattr(Tensor, name + "_"):
            setattr(Tensor, name + "_", _inplace_method(getattr(Tensor, name), name + "_"))
    properties = {"mH": _m_h, "H": _h, "layout": _layout, "output_nr": _output_nr}
    for name, fn in properties.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, property(fn, doc=fn.__doc__))


_install()
