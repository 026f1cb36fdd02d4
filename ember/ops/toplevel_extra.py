"""Top-level functions PyTorch has beside its Tensor methods: the in-place ops as
functions (``torch.abs_(x)``), the ``*_copy`` versions of the view ops, the split
variants, the functional dropouts with PyTorch's ``(input, p, train)`` signature, and
the small tensor queries (``typename``, ``is_nonzero``, ...).

The in-place functions are made from the Tensor methods of the same name, so they share
their argument names, checks and autograd. A ``*_copy`` function runs the view op and
copies the result into fresh contiguous memory: it differentiates as the view does and
never shares memory with its input.
"""
from __future__ import annotations

import operator

from .. import dtypes as dt
from ..errors import EmberError, EmberTypeError, ShapeError
from ..tensor import Tensor
from . import activation, nn_misc

# The in-place functions torch has at the top level, each the Tensor method of its name.
_INPLACE_METHODS = (
    "abs_", "acos_", "acosh_", "addmv_", "arccos_", "arccosh_", "arcsin_", "arcsinh_",
    "arctan_", "arctanh_", "asin_", "asinh_", "atan_", "atanh_", "ceil_", "clamp_",
    "clamp_max_", "clamp_min_", "clip_", "cos_", "cosh_", "deg2rad_", "detach_", "erf_",
    "erfc_", "exp2_", "exp_", "expm1_", "fill_", "fix_", "floor_", "frac_", "gcd_", "i0_",
    "lcm_", "ldexp_", "log10_", "log1p_", "log2_", "log_", "logit_", "nan_to_num_", "neg_",
    "negative_", "rad2deg_", "reciprocal_", "relu_", "round_", "rsqrt_", "sigmoid_", "sin_",
    "sinc_", "sinh_", "sqrt_", "square_", "tan_", "tanh_", "trunc_", "xlogy_", "zero_",
    "index_put_", "resize_as_")

_QUERIES = ["typename", "is_complex", "is_nonzero", "is_same_size", "is_storage"]
_FUNCTIONS = ["fill", "detach", "selu_", "celu_", "rrelu_", "threshold_", "dropout_",
              "alpha_dropout_", "feature_alpha_dropout_", "feature_dropout",
              "feature_dropout_", "unsafe_split", "unsafe_chunk", "split_with_sizes",
              "unsafe_split_with_sizes"]
_COPIES = ["view_copy", "permute_copy", "expand_copy", "transpose_copy", "t_copy",
           "squeeze_copy", "unsqueeze_copy", "select_copy", "slice_copy", "diagonal_copy",
           "detach_copy", "alias_copy", "narrow_copy", "split_copy", "split_with_sizes_copy",
           "unbind_copy"]


def _tensor(name: str, value, arg: str = "input") -> Tensor:
    if not isinstance(value, Tensor):
        raise EmberTypeError(f"{name}: argument '{arg}' must be a Tensor, not "
                             f"{type(value).__name__}")
    return value


# in-place functions -----------------------------------------------------------------------
def _inplace_function(name: str):
    method = getattr(Tensor, name)

    def function(input, *args, **kwargs):
        return method(_tensor(name, input), *args, **kwargs)
    function.__name__ = function.__qualname__ = name
    function.__module__ = __name__
    function.__doc__ = (f"``ember.{name}(input, *args, **kwargs)`` is "
                        f"``input.{name}(*args, **kwargs)``: changes ``input`` in place and "
                        f"returns it (see :meth:`ember.Tensor.{name}`).\n\n"
                        f"    Example, for ``sqrt_``:\n\n"
                        f"    >>> x = ember.tensor([4.0, 9.0])\n"
                        f"    >>> ember.sqrt_(x) is x, x\n"
                        f"    (True, tensor([2., 3.]))\n")
    return function


_INPLACE = [name for name in _INPLACE_METHODS if hasattr(Tensor, name)]
globals().update({name: _inplace_function(name) for name in _INPLACE})

selu_ = activation.selu_
celu_ = activation.celu_
rrelu_ = activation.rrelu_
threshold_ = activation.threshold_


def fill(input: Tensor, value) -> Tensor:
    """A new tensor of ``input``'s shape, dtype and device, every element ``value`` (a
    number or a 0-d tensor, whose gradient is the sum of the result's).

    >>> ember.fill(ember.zeros(2, dtype=ember.int64), 3)
    tensor([3, 3])
    """
    return _tensor("fill", input).clone().fill_(value)


def detach(input: Tensor) -> Tensor:
    """``input.detach()``: the same data, cut from the autograd graph.

    >>> ember.detach(ember.ones(2, requires_grad=True)).requires_grad
    False
    """
    return _tensor("detach", input).detach()


# dropout with PyTorch's (input, p, train) -------------------------------------------------
def dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`ember.nn.functional.dropout` in place: in training, zero each element with
    probability ``p`` and scale the rest by ``1 / (1 - p)``; returns ``input``.

    >>> x = ember.ones(3)
    >>> ember.dropout_(x, 0.5, False) is x
    True
    """
    return nn_misc.dropout(input, p, train, inplace=True)


def alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`ember.nn.functional.alpha_dropout` in place; returns ``input``.

    >>> ember.alpha_dropout_(ember.ones(3), 0.5, False)
    tensor([1., 1., 1.])
    """
    return nn_misc.alpha_dropout(input, p, train, inplace=True)


def feature_alpha_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`ember.nn.functional.feature_alpha_dropout` in place; returns ``input``.

    >>> ember.feature_alpha_dropout_(ember.ones(2, 3), 0.5, False).shape
    ember.Size([2, 3])
    """
    return nn_misc.feature_alpha_dropout(input, p, train, inplace=True)


def _feature_dropout(name, input, p, train, inplace):
    _tensor(name, input)
    if input.ndim < 2:
        raise ShapeError(f"{name}: feature dropout requires at least 2 dimensions in the "
                         f"input, got shape {tuple(input.shape)}")
    return nn_misc._feature_dropout(name, input, p, train, inplace, input.ndim)


def feature_dropout(input: Tensor, p: float, train: bool) -> Tensor:
    """Dropout of whole features: in training each ``input[n, c]`` (all of its trailing
    dims at once) is zeroed with probability ``p``, the rest scaled by ``1 / (1 - p)``.

    Shape: ``(N, C, *)``, at least 2-D; a 2-D input drops single elements.

    >>> ember.feature_dropout(ember.ones(2, 3, 4), 0.5, False).shape
    ember.Size([2, 3, 4])
    """
    return _feature_dropout("feature_dropout", input, p, train, False)


def feature_dropout_(input: Tensor, p: float, train: bool) -> Tensor:
    """:func:`feature_dropout` in place; returns ``input``.

    >>> x = ember.ones(2, 3)
    >>> ember.feature_dropout_(x, 0.5, False) is x
    True
    """
    return _feature_dropout("feature_dropout_", input, p, train, True)


# split variants ---------------------------------------------------------------------------
def unsafe_split(input: Tensor, split_size, dim: int = 0) -> tuple:
    """:func:`ember.split` (PyTorch's version without view tracking; ember's results are
    the same).

    >>> [t.shape for t in ember.unsafe_split(ember.arange(5), 2)]
    [ember.Size([2]), ember.Size([2]), ember.Size([1])]
    """
    return tuple(_tensor("unsafe_split", input).split(split_size, dim))


def unsafe_chunk(input: Tensor, chunks: int, dim: int = 0) -> tuple:
    """:func:`ember.chunk` (PyTorch's version without view tracking).

    >>> len(ember.unsafe_chunk(ember.arange(6), 3))
    3
    """
    return tuple(_tensor("unsafe_chunk", input).chunk(chunks, dim))


def _sizes(name, split_sizes) -> list:
    if isinstance(split_sizes, (Tensor, str)) or not hasattr(split_sizes, "__iter__"):
        raise EmberTypeError(f"{name}: split_sizes must be a sequence of ints, got "
                             f"{type(split_sizes).__name__}")
    return [operator.index(s) for s in split_sizes]


def split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """Pieces of ``input`` along ``dim`` of the sizes ``split_sizes`` (which must add up
    to the dim's size).

    >>> [t.tolist() for t in ember.split_with_sizes(ember.arange(5), [2, 3])]
    [[0, 1], [2, 3, 4]]
    """
    sizes = _sizes("split_with_sizes", split_sizes)
    return tuple(_tensor("split_with_sizes", input).split(sizes, dim))


def unsafe_split_with_sizes(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """:func:`split_with_sizes` (PyTorch's version without view tracking)."""
    sizes = _sizes("unsafe_split_with_sizes", split_sizes)
    return tuple(_tensor("unsafe_split_with_sizes", input).split(sizes, dim))


# *_copy -----------------------------------------------------------------------------------
def _copy(view: Tensor) -> Tensor:
    return view.clone()


def view_copy(input: Tensor, size) -> Tensor:
    """:meth:`Tensor.view` into new memory: ``size`` a shape (one entry may be -1) or a
    dtype of the same item size.

    >>> ember.view_copy(ember.arange(6), (2, 3)).shape
    ember.Size([2, 3])
    """
    _tensor("view_copy", input)
    if isinstance(size, dt.DType):
        return _copy(input.view(size))
    shape = (size,) if isinstance(size, int) else tuple(size)
    return _copy(input.view(*shape))


def permute_copy(input: Tensor, dims) -> Tensor:
    """:func:`ember.permute` into new contiguous memory.

    >>> ember.permute_copy(ember.zeros(2, 3, 4), (2, 0, 1)).shape
    ember.Size([4, 2, 3])
    """
    return _copy(_tensor("permute_copy", input).permute(*dims))


def expand_copy(input: Tensor, size, *, implicit: bool = False) -> Tensor:
    """:meth:`Tensor.expand` into new memory (each repeated element stored);
    ``implicit`` is accepted for PyTorch's signature and changes nothing.

    >>> ember.expand_copy(ember.tensor([1, 2]), (3, 2)).stride()
    (2, 1)
    """
    shape = (size,) if isinstance(size, int) else tuple(size)
    return _copy(_tensor("expand_copy", input).expand(*shape))


def transpose_copy(input: Tensor, dim0: int, dim1: int) -> Tensor:
    """:func:`ember.transpose` into new contiguous memory.

    >>> ember.transpose_copy(ember.zeros(2, 3), 0, 1).is_contiguous()
    True
    """
    return _copy(_tensor("transpose_copy", input).transpose(dim0, dim1))


def t_copy(input: Tensor) -> Tensor:
    """:func:`ember.t` (a tensor of at most 2 dims) into new contiguous memory.

    >>> ember.t_copy(ember.zeros(2, 3)).shape
    ember.Size([3, 2])
    """
    return _copy(_tensor("t_copy", input).t())


def squeeze_copy(input: Tensor, dim=None) -> Tensor:
    """:func:`ember.squeeze` (all size-1 dims, or those of ``dim``, an int or a tuple)
    into new memory.

    >>> ember.squeeze_copy(ember.zeros(2, 1, 3)).shape
    ember.Size([2, 3])
    """
    return _copy(_tensor("squeeze_copy", input).squeeze(dim))


def unsqueeze_copy(input: Tensor, dim: int) -> Tensor:
    """:func:`ember.unsqueeze` into new memory.

    >>> ember.unsqueeze_copy(ember.zeros(2, 3), 1).shape
    ember.Size([2, 1, 3])
    """
    return _copy(_tensor("unsqueeze_copy", input).unsqueeze(dim))


def select_copy(input: Tensor, dim: int, index: int) -> Tensor:
    """:func:`ember.select` into new memory.

    >>> ember.select_copy(ember.arange(6).view(2, 3), 1, 2)
    tensor([2, 5])
    """
    return _copy(_tensor("select_copy", input).select(dim, index))


def slice_copy(input: Tensor, dim: int = 0, start=None, end=None, step: int = 1) -> Tensor:
    """``input[..., start:end:step, ...]`` along ``dim`` into new memory (``start`` and
    ``end`` wrap when negative and clamp to the dim, as Python slices do).

    >>> ember.slice_copy(ember.arange(6), 0, 1, None, 2)
    tensor([1, 3, 5])
    """
    _tensor("slice_copy", input)
    if input.ndim == 0:
        raise EmberError("slice_copy: slice() cannot be applied to a 0-dim tensor")
    from .shape import wrap_dim
    d = wrap_dim(dim, input.ndim, "slice_copy")
    step = operator.index(step)
    if step <= 0:
        raise EmberError(f"slice_copy: slice step must be positive, got {step}")
    index = (slice(None),) * d + (slice(start, end, step),)
    return _copy(input[index])


def diagonal_copy(input: Tensor, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Tensor:
    """:func:`ember.diagonal` into new memory.

    >>> ember.diagonal_copy(ember.eye(3))
    tensor([1., 1., 1.])
    """
    return _copy(_tensor("diagonal_copy", input).diagonal(offset, dim1, dim2))


def detach_copy(input: Tensor) -> Tensor:
    """``input.detach()`` into new memory (cut from the autograd graph).

    >>> ember.detach_copy(ember.ones(2, requires_grad=True)).requires_grad
    False
    """
    return _copy(_tensor("detach_copy", input).detach())


def alias_copy(input: Tensor) -> Tensor:
    """A copy of ``input`` in new contiguous memory (differentiable, as :meth:`clone`).

    >>> ember.alias_copy(ember.tensor([1, 2]))
    tensor([1, 2])
    """
    return _copy(_tensor("alias_copy", input))


def narrow_copy(input: Tensor, dim: int, start: int, length: int) -> Tensor:
    """:func:`ember.narrow` into new memory.

    >>> ember.narrow_copy(ember.arange(5), 0, 1, 3)
    tensor([1, 2, 3])
    """
    return _copy(_tensor("narrow_copy", input).narrow(dim, start, length))


def split_copy(input: Tensor, split_size: int, dim: int = 0) -> tuple:
    """:func:`ember.split` with each piece in new memory.

    >>> [t.tolist() for t in ember.split_copy(ember.arange(5), 2)]
    [[0, 1], [2, 3], [4]]
    """
    return tuple(_copy(t) for t in _tensor("split_copy", input).split(split_size, dim))


def split_with_sizes_copy(input: Tensor, split_sizes, dim: int = 0) -> tuple:
    """:func:`split_with_sizes` with each piece in new memory.

    >>> [t.tolist() for t in ember.split_with_sizes_copy(ember.arange(5), [1, 4])]
    [[0], [1, 2, 3, 4]]
    """
    sizes = _sizes("split_with_sizes_copy", split_sizes)
    return tuple(_copy(t) for t in _tensor("split_with_sizes_copy", input).split(sizes, dim))


def unbind_copy(input: Tensor, dim: int = 0) -> tuple:
    """:func:`ember.unbind` with each slice in new memory.

    >>> [t.tolist() for t in ember.unbind_copy(ember.arange(4).view(2, 2), 1)]
    [[0, 2], [1, 3]]
    """
    return tuple(_copy(t) for t in _tensor("unbind_copy", input).unbind(dim))


if hasattr(Tensor, "unfold"):
    def unfold_copy(input: Tensor, dimension: int, size: int, step: int) -> Tensor:
        """:meth:`Tensor.unfold` (every ``size``-long window along ``dimension``, ``step``
        apart, as a new last dim) into new memory.

        >>> ember.unfold_copy(ember.arange(5), 0, 2, 2)
        tensor([[0, 1],
                [2, 3]])
        """
        return _copy(_tensor("unfold_copy", input).unfold(dimension, size, step))
    _COPIES.append("unfold_copy")


# queries ----------------------------------------------------------------------------------
def typename(obj, /) -> str:
    """The type of ``obj`` as a string: a tensor's type name (``"ember.FloatTensor"``),
    else the module-qualified name of a class or function, or of the object's class.

    >>> ember.typename(ember.zeros(2))
    'ember.FloatTensor'
    >>> ember.typename([])
    'list'
    """
    if isinstance(obj, Tensor):
        return obj.type()
    if hasattr(obj, "__qualname__") or hasattr(obj, "__name__"):
        module = getattr(obj, "__module__", "") or ""
        name = getattr(obj, "__qualname__", None) or obj.__name__
    else:
        module = type(obj).__module__ or ""
        name = type(obj).__qualname__
    return name if module in ("", "builtins") else f"{module}.{name}"


def is_complex(input: Tensor) -> bool:
    """Whether ``input`` holds complex numbers: always False (ember has no complex
    dtypes).

    >>> ember.is_complex(ember.zeros(2))
    False
    """
    return _tensor("is_complex", input).is_complex()


def is_nonzero(input: Tensor) -> bool:
    """Whether the one element of ``input`` is not zero (False for 0, 0.0 and False).

    >>> ember.is_nonzero(ember.tensor([[1.5]]))
    True
    """
    _tensor("is_nonzero", input)
    n = input.numel()
    if n != 1:
        raise EmberError(f"is_nonzero: Boolean value of Tensor with "
                         f"{'no values' if n == 0 else 'more than one value'} is ambiguous "
                         f"(shape {tuple(input.shape)})")
    return bool(input.reshape(()).item() != 0)


def is_same_size(input: Tensor, other: Tensor) -> bool:
    """Whether ``input`` and ``other`` have the same shape.

    >>> ember.is_same_size(ember.zeros(2, 3), ember.ones(2, 3))
    True
    """
    return _tensor("is_same_size", input).shape == _tensor("is_same_size", other,
                                                            "other").shape


def is_storage(obj) -> bool:
    """Whether ``obj`` is a storage object: always False (ember tensors own their data
    directly; there are no storage objects).

    >>> ember.is_storage(ember.zeros(2))
    False
    """
    return False


__all__ = _QUERIES + _INPLACE + _FUNCTIONS + _COPIES
