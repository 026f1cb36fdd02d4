"""Top-level tensor makers PyTorch has and ember's creation and random files do not:
``range`` (deprecated, with an inclusive end), ``empty_strided``, ``empty_permuted``,
``frombuffer``, and the Poisson and binomial samplers ``poisson`` and ``binomial``.

The samplers draw on the host from a CPU generator (the default one unless given), as
:func:`ember.multinomial` does, and move the result to the input's device; under
``ember.jit`` the draw is recorded as a graph instruction, so each call draws afresh.
"""
from __future__ import annotations

import math
import numbers
import operator
import warnings

import numpy as np

from .. import dtypes as dt
from ..backends import CPU
from ..errors import EmberError, EmberTypeError, EmberValueError, ShapeError
from ..tensor import Tensor
from .creation import _dev, _dtype, _new, _number
from .random import draw

__all__ = ["range", "empty_strided", "empty_permuted", "frombuffer", "poisson", "binomial"]

_builtin_range = range


def _ints(name: str, what: str, values) -> tuple:
    if isinstance(values, numbers.Integral):
        values = (values,)
    try:
        return tuple(operator.index(v) for v in values)
    except TypeError:
        raise EmberTypeError(f"{name}: {what} must be a sequence of ints, got "
                             f"{values!r}") from None


# range ------------------------------------------------------------------------------------
def range(start=0, end=None, step=1, *, dtype=None, device=None,  # noqa: A001
          requires_grad: bool = False) -> Tensor:
    """``start, start + step, ...`` up to and including ``end``: ``floor((end - start) /
    step) + 1`` values, in the default (floating) dtype unless ``dtype`` is given.

    Deprecated, as in PyTorch (it warns): :func:`ember.arange` excludes ``end``, as
    Python's ``range`` does.

    >>> ember.range(1, 4)  # doctest: +SKIP
    tensor([1., 2., 3., 4.])
    """
    warnings.warn("ember.range is deprecated and will be removed in a future release "
                  "because its behavior is inconsistent with Python's range builtin. "
                  "Instead, use ember.arange, which produces values in [start, end).",
                  UserWarning, stacklevel=2)
    if end is None:
        raise EmberTypeError("range: missing the required argument end (range(start, end, "
                             "step))")
    start, end, step = (_number("range", v) for v in (start, end, step))
    if not all(math.isfinite(float(v)) for v in (start, end, step)):
        raise EmberError(f"range: unsupported range {start} -> {end} (step {step}): the "
                         f"bounds and step must be finite")
    if step == 0:
        raise EmberError("range: step must be nonzero")
    if (end - start) / step < 0:
        raise EmberError(f"range: upper bound and lower bound inconsistent with step sign "
                         f"(start {start}, end {end}, step {step})")
    dtype = _dtype("range", dtype)
    count = math.floor((float(end) - float(start)) / float(step)) + 1
    if dtype.is_floating_point:
        values = float(start) + np.arange(count, dtype=np.float64) * float(step)
    else:
        values = int(start) + np.arange(count, dtype=np.int64) * int(step)
    return _new("range", values, dtype, device, requires_grad)


# strided empties --------------------------------------------------------------------------
def empty_strided(size, stride, *, dtype=None, device=None,
                  requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of shape ``size`` laid out with the element strides
    ``stride`` (its ``stride()`` reports them); strides may overlap (0 repeats an
    element) but may not be negative.

    >>> ember.empty_strided((2, 3), (1, 2)).stride()
    (1, 2)
    """
    name = "empty_strided"
    shape, strides = _ints(name, "size", size), _ints(name, "stride", stride)
    if len(shape) != len(strides):
        raise ShapeError(f"{name}: mismatch in length of strides and shape: size {shape}, "
                         f"stride {strides}")
    if any(s < 0 for s in shape):
        raise EmberError(f"{name}: negative dimension in size {shape}")
    if any(s < 0 for s in strides):
        raise EmberError(f"{name}: negative strides are not supported, got {strides}")
    dtype = _dtype(name, dtype)
    dev = _dev(device, name)
    xp = dev.backend.xp
    n = 0 if 0 in shape else 1 + sum((s - 1) * st for s, st in zip(shape, strides))
    buffer = xp.empty(n, dtype.np)
    arr = xp.lib.stride_tricks.as_strided(buffer, shape,
                                          tuple(st * buffer.itemsize for st in strides))
    return _made(name, arr, dtype, dev, requires_grad)


def _made(name, arr, dtype, dev, requires_grad) -> Tensor:
    """A leaf tensor on ``dev`` wrapping the device array ``arr`` as it is (its strides
    kept)."""
    if requires_grad and not dtype.differentiable:
        raise EmberTypeError(f"{name}: only Tensors of floating point and complex dtype can "
                             f"require gradients, got dtype {dtype.name}")
    t = Tensor._make(arr, dev)
    if requires_grad:
        t.requires_grad_(True)
    return t


def empty_permuted(size, physical_layout, *, dtype=None, device=None,
                   requires_grad: bool = False) -> Tensor:
    """An uninitialised tensor of shape ``size`` whose dims lie in memory in the order
    ``physical_layout`` (outermost first): ``(0, 2, 3, 1)`` for a 4-D tensor is
    channels-last.

    >>> ember.empty_permuted((2, 3, 5, 7), (0, 2, 3, 1)).stride()
    (105, 1, 21, 3)
    """
    name = "empty_permuted"
    shape = _ints(name, "size", size)
    layout = _ints(name, "physical_layout", physical_layout)
    if sorted(layout) != list(_builtin_range(len(shape))):
        raise EmberError(f"{name}: physical_layout {layout} must be a permutation of the "
                         f"{len(shape)} dims of size {shape}")
    if any(s < 0 for s in shape):
        raise EmberError(f"{name}: negative dimension in size {shape}")
    dtype = _dtype(name, dtype)
    dev = _dev(device, name)
    physical = dev.backend.xp.empty(tuple(shape[d] for d in layout), dtype.np)
    return _made(name, physical.transpose(tuple(np.argsort(layout).tolist())), dtype, dev,
                 requires_grad)


def frombuffer(buffer, *, dtype, count: int = -1, offset: int = 0,
               requires_grad: bool = False) -> Tensor:
    """A 1-D tensor over the bytes of an object with the buffer protocol (``bytearray``,
    ``array.array``, ``memoryview``, ...), sharing its memory: writes to one show in the
    other. A read-only buffer (``bytes``) is copied, with a warning.

    Args:
        buffer: the object.
        dtype: the element type.
        count: how many elements (-1, or any negative number: all that fit).
        offset: bytes to skip at the start.

    >>> data = bytearray(b"\\x01\\x00\\x02\\x00")
    >>> ember.frombuffer(data, dtype=ember.int16)
    tensor([1, 2], dtype=ember.int16)
    """
    name = "frombuffer"
    dtype = dt.as_dtype(dtype, name)
    try:
        view = memoryview(buffer)
    except TypeError:
        raise EmberTypeError(f"{name}: expected an object with the buffer protocol, got "
                             f"{type(buffer).__name__}") from None
    length, item = view.nbytes, dtype.itemsize
    count, offset = operator.index(count), operator.index(offset)
    if length <= 0 or count == 0:
        raise EmberValueError(f"{name}: both buffer length ({length}) and count ({count}) "
                              f"must not be 0")
    if not 0 <= offset < length:
        raise EmberValueError(f"{name}: offset ({offset} bytes) must be non-negative and no "
                              f"greater than buffer length ({length} bytes) minus 1")
    if count < 0:
        if (length - offset) % item:
            raise EmberValueError(f"{name}: buffer length ({length - offset} bytes) after "
                                  f"offset ({offset} bytes) must be a multiple of element "
                                  f"size ({item})")
        count = (length - offset) // item
    elif offset + count * item > length:
        raise EmberValueError(f"{name}: requested buffer length ({count} * {item} bytes) "
                              f"after offset ({offset} bytes) must not be greater than "
                              f"actual buffer length ({length} bytes)")
    arr = np.frombuffer(view.cast("B"), dtype=dtype.np, count=count, offset=offset)
    if not arr.flags.writeable:
        warnings.warn(f"{name}: the given buffer is not writable; the tensor holds a copy of "
                      f"its data (writes to it do not reach the buffer)", UserWarning,
                      stacklevel=2)
        arr = arr.copy()
    return _made(name, arr, dtype, CPU, requires_grad)


# Poisson and binomial samples -------------------------------------------------------------
def _host_values(name: str, t: Tensor) -> np.ndarray:
    return t.detach().cpu().numpy().astype(np.float64)


def _cpu_generator(name: str, generator):
    if generator is not None and generator.device is not CPU:
        raise EmberError(f"{name}: draws on the host, from a CPU generator; got a generator "
                         f"on {generator.device}")
    return generator


# NumPy's Poisson sampler refuses larger rates (they would overflow an int64)
_MAX_POISSON_RATE = 9.2e18


def poisson(input: Tensor, generator=None) -> Tensor:
    """Poisson samples, each with the rate (mean) at its place in ``input``; the result
    has ``input``'s shape, floating dtype and device, and no gradient.

    Args:
        input: non-negative finite rates, a floating tensor.
        generator: a CPU :class:`ember.Generator` (the default one when None).

    >>> ember.manual_seed(0)  # doctest: +SKIP
    >>> ember.poisson(ember.tensor([0.0, 4.0]))[0]
    tensor(0.)
    """
    name = "poisson"
    if not isinstance(input, Tensor):
        raise EmberTypeError(f"{name}: argument 'input' must be a Tensor, not "
                             f"{type(input).__name__}")
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected floating rates, got dtype {input.dtype.name}")
    _cpu_generator(name, generator)
    rates = _host_values(name, input)
    if rates.size and not ((rates >= 0) & (rates <= _MAX_POISSON_RATE)).all():
        bad = rates[~((rates >= 0) & (rates <= _MAX_POISSON_RATE))].flat[0]
        raise EmberError(f"{name}: invalid Poisson rate {bad}: expected rates to be "
                         f"non-negative and finite (at most {_MAX_POISSON_RATE:g})")
    dtype = input.dtype
    arr = draw(generator, rates.shape, dtype.np,
               lambda rng: np.asarray(rng.poisson(rates)).astype(dtype.np), CPU)
    return _new(name, arr, dtype, input.device, False)


def binomial(count: Tensor, prob: Tensor, generator=None) -> Tensor:
    """Binomial samples: the number of successes in ``count`` trials each succeeding
    with probability ``prob`` (the two broadcast); the result has their broadcast shape,
    their floating dtype and ``count``'s device, and no gradient.

    Args:
        count: non-negative whole numbers of trials, a floating tensor.
        prob: probabilities in [0, 1], a tensor of ``count``'s dtype.
        generator: a CPU :class:`ember.Generator` (the default one when None).

    >>> ember.binomial(ember.tensor([5.0, 3.0]), ember.tensor([1.0, 0.0]))
    tensor([5., 0.])
    """
    name = "binomial"
    for arg, value in (("count", count), ("prob", prob)):
        if not isinstance(value, Tensor):
            raise EmberTypeError(f"{name}: argument '{arg}' must be a Tensor, not "
                                 f"{type(value).__name__}")
    if not count.dtype.is_floating_point or prob.dtype is not count.dtype:
        raise EmberTypeError(f"{name}: expected count and prob of the same floating dtype, "
                             f"got {count.dtype.name} and {prob.dtype.name}")
    _cpu_generator(name, generator)
    try:
        shape = np.broadcast_shapes(tuple(count.shape), tuple(prob.shape))
    except ValueError:
        raise ShapeError(f"{name}: count of shape {tuple(count.shape)} and prob of shape "
                         f"{tuple(prob.shape)} do not broadcast") from None
    n, p = _host_values(name, count), _host_values(name, prob)
    if n.size and not ((n >= 0) & (n == np.floor(n)) & (n < 2.0 ** 63)).all():
        raise EmberError(f"{name}: count must hold non-negative whole numbers, got "
                         f"{n[~((n >= 0) & (n == np.floor(n)) & (n < 2.0 ** 63))].flat[0]}")
    if p.size and not ((p >= 0) & (p <= 1)).all():
        raise EmberError(f"{name}: prob must hold probabilities in [0, 1], got "
                         f"{p[~((p >= 0) & (p <= 1))].flat[0]}")
    dtype = count.dtype
    trials = np.broadcast_to(n, shape).astype(np.int64)
    chance = np.broadcast_to(p, shape)
    arr = draw(generator, shape, dtype.np,
               lambda rng: np.asarray(rng.binomial(trials, chance)).astype(dtype.np), CPU)
    return _new(name, arr, dtype, count.device, False)
