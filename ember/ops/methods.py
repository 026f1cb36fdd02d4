"""Attach the op functions to :class:`~ember.Tensor` as methods, operators and in-place
variants (``x.exp()``, ``x + y``, ``x.add_(y)``)."""
from __future__ import annotations

from ..tensor import Tensor
from . import (creation, elementwise as ew, elementwise_composite as ewc, index, linalg,
               logical as lg, movement, random, reduce, scan, selection, shape)
from ..autograd import grad_mode
from .inplace import inplace
from .inplace_direct import direct_writer

# Methods that are the same function with the tensor first.
_METHODS = {}


def _collect(module):
    skip = getattr(module, "NOT_METHODS", ())
    for name in module.__all__:
        if name not in skip:
            _METHODS[name] = getattr(module, name)


for _m in (ew, ewc, lg, reduce, scan, shape):
    _collect(_m)
for _name in shape.METHODS_ONLY:
    _METHODS[_name] = getattr(shape, _name)
for _skip in ("cast", "broadcast_shapes", "broadcast_tensors", "sum_to", "cat", "concat",
              "concatenate", "stack", "hstack", "vstack", "dstack", "column_stack", "row_stack", "atleast_1d",
              "atleast_2d", "atleast_3d"):
    _METHODS.pop(_skip, None)


def register_methods(module, skip=()) -> None:
    """Attach the functions in ``module.__all__`` as Tensor methods (used by op files
    that load later)."""
    for name in module.__all__:
        if name not in skip and not hasattr(Tensor, name):
            setattr(Tensor, name, getattr(module, name))


# Methods whose in-place variant ``name_`` computes ``name`` and writes it back.
_INPLACE = """add sub mul div pow clamp clip neg negative abs absolute exp exp2 log log2 log10
log1p expm1 sqrt rsqrt sigmoid tanh relu sin cos tan asin acos atan arcsin arccos arctan atan2
arctan2 sinh cosh asinh acosh atanh arcsinh arccosh arctanh floor ceil round trunc fix frac
sign sgn reciprocal square remainder fmod floor_divide lerp nan_to_num erf erfc logit multiply
subtract divide true_divide xlogy addcmul addcdiv clamp_min clamp_max hypot deg2rad rad2deg
copysign heaviside sinc eq ne lt le gt ge not_equal greater greater_equal less less_equal
logical_and logical_or logical_xor logical_not bitwise_and bitwise_or bitwise_xor bitwise_not
cumsum cumprod tril triu""".split()


def _swap(fn):
    return lambda self, other: fn(other, self)


def _inplace_method(fn, name):
    def method(self, *args, **kwargs):
        others = [a for a in args if isinstance(a, Tensor)] + \
                 [v for v in kwargs.values() if isinstance(v, Tensor)]
        direct = None
        if not (grad_mode._state.enabled and (self._requires_grad or any(
                o._requires_grad for o in others))):
            direct = direct_writer(name, self, args, kwargs)
        return inplace(name, self, lambda x: fn(x, *args, **kwargs), others, direct)
    method.__name__ = name
    method.__doc__ = f"In-place version of :meth:`{fn.__name__}`."
    return method


def _install():
    for name, fn in _METHODS.items():
        if not hasattr(Tensor, name):
            setattr(Tensor, name, fn)
    for module in (linalg, movement, selection):
        register_methods(module, skip=getattr(module, "NOT_METHODS", ()))
    ops = {
        "__add__": ew.add, "__radd__": _swap(ew.add), "__sub__": ew.sub,
        "__rsub__": _swap(ew.sub), "__mul__": ew.mul, "__rmul__": _swap(ew.mul),
        "__truediv__": ew.div, "__rtruediv__": _swap(ew.div),
        "__floordiv__": ew.floor_divide, "__rfloordiv__": _swap(ew.floor_divide),
        "__mod__": ew.remainder, "__rmod__": _swap(ew.remainder),
        "__pow__": ew.pow, "__rpow__": _swap(ew.pow),
        "__neg__": ew.neg, "__pos__": lambda self: self, "__abs__": ew.abs,
        "__eq__": lg.eq, "__ne__": lg.ne, "__lt__": lg.lt, "__le__": lg.le, "__gt__": lg.gt,
        "__ge__": lg.ge, "__and__": lg.bitwise_and, "__rand__": _swap(lg.bitwise_and),
        "__or__": lg.bitwise_or, "__ror__": _swap(lg.bitwise_or),
        "__xor__": lg.bitwise_xor, "__rxor__": _swap(lg.bitwise_xor),
        "__invert__": lg.bitwise_not, "__getitem__": index.getitem,
        "__setitem__": index.setitem,
    }
    for name, fn in ops.items():
        setattr(Tensor, name, fn)

    for name in _INPLACE:
        setattr(Tensor, name + "_", _inplace_method(getattr(Tensor, name), name + "_"))
    augmented = {"__iadd__": ew.add, "__isub__": ew.sub, "__imul__": ew.mul,
                 "__itruediv__": ew.div, "__ifloordiv__": ew.floor_divide,
                 "__imod__": ew.remainder, "__ipow__": ew.pow, "__iand__": lg.bitwise_and,
                 "__ior__": lg.bitwise_or, "__ixor__": lg.bitwise_xor}
    for name, fn in augmented.items():
        setattr(Tensor, name, _inplace_method(fn, name))

    # x == None is False (and x != None True), as in PyTorch, not a type error
    Tensor.__eq__ = lambda self, other: False if other is None else lg.eq(self, other)
    Tensor.__ne__ = lambda self, other: True if other is None else lg.ne(self, other)
    Tensor.type_as = lambda self, other: self.to(other.dtype)
    Tensor.is_signed = lambda self: self._dtype.is_signed
    Tensor.itemsize = property(lambda self: self._dtype.itemsize)
    Tensor.nbytes = property(lambda self: self._dtype.itemsize * self._data.size)
    # x.where(condition, y) is where(condition, x, y): the tensor is the values, not the
    # condition (which the function takes first)
    Tensor.where = lambda self, condition, other: ew.where(condition, self, other)
    Tensor.new_zeros = lambda self, *sizes, size=None, dtype=None, device=None, \
        requires_grad=False: creation.zeros(*sizes, size=size, dtype=dtype or self.dtype,
                                            device=device or self.device,
                                            requires_grad=requires_grad)
    Tensor.new_ones = lambda self, *sizes, size=None, dtype=None, device=None, \
        requires_grad=False: creation.ones(*sizes, size=size, dtype=dtype or self.dtype,
                                           device=device or self.device,
                                           requires_grad=requires_grad)
    Tensor.new_empty = lambda self, *sizes, size=None, dtype=None, device=None, \
        requires_grad=False: creation.empty(*sizes, size=size, dtype=dtype or self.dtype,
                                            device=device or self.device,
                                            requires_grad=requires_grad)
    Tensor.new_full = lambda self, size, fill_value, dtype=None, device=None, \
        requires_grad=False: creation.full(size, fill_value, dtype=dtype or self.dtype,
                                           device=device or self.device,
                                           requires_grad=requires_grad)
    Tensor.new_tensor = lambda self, data, dtype=None, device=None, requires_grad=False: \
        creation.tensor(data, dtype=dtype or self.dtype, device=device or self.device,
                        requires_grad=requires_grad)


def _fill_forward_method(self, value):
    """Fill with ``value`` in place."""
    from ._promote import scalar_tensor
    if isinstance(value, Tensor):
        if value.ndim:
            from ..errors import EmberError
            raise EmberError(f"fill_: only supports 0-dimension value tensor but got tensor "
                             f"with {value.ndim} dimensions")
        v = value.to(self.dtype)
    else:
        v = scalar_tensor(value, self.dtype, self.device)

    def direct(arr):
        arr[...] = v._data
    return inplace("fill_", self, lambda x: shape.expand(v, tuple(x.shape)).clone(), (v,),
                   direct)


def _zero_(self):
    """Fill with zeros in place."""
    return _fill_forward_method(self, 0)


def _copy_(self, src, non_blocking: bool = False):
    """Copy ``src`` (broadcast, cast to this dtype) into this tensor in place; a Python
    number fills it, as PyTorch allows."""
    if not isinstance(src, Tensor):
        return _fill_forward_method(self, src)

    def compute(x):
        s = src.to(device=x.device, dtype=x.dtype)
        return shape.expand(s, tuple(x.shape)).clone()

    def direct(arr):
        arr[...] = src.to(device=self.device, dtype=self.dtype)._data
    return inplace("copy_", self, compute, (src,), direct)


_install()
Tensor.bernoulli = random.bernoulli
Tensor.multinomial = random.multinomial
Tensor.fill_ = _fill_forward_method
Tensor.zero_ = _zero_
Tensor.copy_ = _copy_
Tensor.clone = shape.clone


# In-place random fills (what nn.init uses) ----------------------------------------------
def _random_fill(name, draw):
    def method(self, *args, generator=None, **kwargs):
        rng = random._rng(generator, self._device)

        def values():
            arr = draw(rng, tuple(self.shape), *args, **kwargs)
            return self._device.backend.asarray(arr.astype(self.dtype.np, copy=False))

        def direct(arr):
            arr[...] = values()
        return inplace(name, self, lambda x: Tensor._make(values(), x.device), (), direct)
    method.__name__ = name
    return method


Tensor.uniform_ = _random_fill("uniform_", lambda r, s, a=0.0, b=1.0: r.uniform(a, b, s))
Tensor.uniform_.__doc__ = "Fill with numbers drawn uniformly from [from, to)."
Tensor.normal_ = _random_fill("normal_", lambda r, s, mean=0.0, std=1.0: r.normal(mean, std, s))
Tensor.normal_.__doc__ = "Fill with numbers from a normal distribution."
Tensor.bernoulli_ = _random_fill("bernoulli_", lambda r, s, p=0.5: r.random(s) < p)
Tensor.bernoulli_.__doc__ = "Fill with 1 with probability p, else 0."
Tensor.exponential_ = _random_fill("exponential_",
                                   lambda r, s, lambd=1.0: r.exponential(1.0 / lambd, s))
Tensor.exponential_.__doc__ = "Fill with numbers from an exponential distribution."


def _draw_integers(rng, shape, low=0, high=None):
    if high is None:  # random_(to) means [0, to); random_() means [0, 2**24)
        low, high = 0, (low or 2 ** 24)
    return rng.integers(low, high, shape)


Tensor.random_ = _random_fill("random_", _draw_integers)
Tensor.random_.__doc__ = "Fill with integers from [from, to - 1] (to defaults to 2**24)."
