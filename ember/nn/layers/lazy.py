"""Lazy modules: layers whose input size is read from the first batch
(``LazyLinear(out_features)``, ``LazyConv2d(out_channels, kernel_size)``, ...).

Until the first forward their weights are :class:`UninitializedParameter` (and
BatchNorm's statistics :class:`UninitializedBuffer`): placeholders that know their dtype,
device and ``requires_grad`` but hold no values, so any op on them raises. The first call
materialises them in place (the same objects, so an optimizer built before still holds
them), initialises them as the ordinary layer would, and turns the module into that
layer (``LazyLinear`` becomes ``Linear``).
"""
from __future__ import annotations

from ...autograd import grad_mode
from ...errors import EmberError, EmberValueError
from ...ops import registry as _registry
from ...ops.creation import empty, tensor
from ...tensor import Tensor
from ... import dtypes
from ..module import Module
from ..parameter import Parameter
from .conv import Conv1d, Conv2d, Conv3d, ConvTranspose1d, ConvTranspose2d, ConvTranspose3d
from .linear import Linear
from .normalization import (BatchNorm1d, BatchNorm2d, BatchNorm3d, InstanceNorm1d,
                            InstanceNorm2d, InstanceNorm3d)

__all__ = ["UninitializedParameter", "UninitializedBuffer", "LazyModuleMixin", "LazyLinear",
           "LazyConv1d", "LazyConv2d", "LazyConv3d", "LazyConvTranspose1d",
           "LazyConvTranspose2d", "LazyConvTranspose3d", "LazyBatchNorm1d", "LazyBatchNorm2d",
           "LazyBatchNorm3d", "LazyInstanceNorm1d", "LazyInstanceNorm2d",
           "LazyInstanceNorm3d"]

_DATA_SLOT = Tensor.__dict__["_data"]


def _use_error(self):
    raise EmberValueError(
        "Attempted to use an uninitialized parameter or buffer. This error happens when "
        "you are using a `LazyModule` or explicitly manipulating "
        f"`{type(self).__name__}` objects. When using LazyModules call `forward` with a "
        "dummy batch to initialize the parameters before calling ember functions")


class _UninitializedTensorMixin:
    """What the placeholders share: no values (every access to them raises), a
    ``materialize`` that gives them some, and a copy/repr that need none."""
    __slots__ = ()
    cls_to_become: type = Tensor

    # Every op reads ``_data``; the placeholders have none to give.
    _data = property(_use_error, _DATA_SLOT.__set__)

    @property
    def shape(self):
        raise EmberError("Can't access the shape of an uninitialized parameter or buffer. "
                         "This error usually happens in `load_state_dict` when trying to "
                         "load an uninitialized parameter into an initialized one. Call "
                         "`forward` to initialize the parameters before accessing their "
                         "attributes.")

    def materialize(self, shape, device=None, dtype=None) -> None:
        """Give the placeholder uninitialised values of ``shape`` (on ``device``, of
        ``dtype``; its own by default) and make it a plain ``cls_to_become``."""
        device = self.device if device is None else device
        dtype = self.dtype if dtype is None else dtype
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        new = empty(shape, device=device, dtype=dtype)
        self.__class__ = self.cls_to_become
        self.data = new

    def _retype(self, template: Tensor) -> None:
        """Take ``template``'s dtype and device (``module.to(...)`` before the first
        forward)."""
        _DATA_SLOT.__set__(self, template.detach()._data)
        self._dtype = template.dtype
        self._device = template.device

    def __repr__(self) -> str:
        return f"<{type(self).__name__}>"

    def __deepcopy__(self, memo):
        copy = type(self)(self.requires_grad, self.device, self.dtype)
        memo[id(self)] = copy
        return copy


class UninitializedParameter(_UninitializedTensorMixin, Parameter):
    """A parameter with no values yet (a lazy module's weight before its first forward).

    Only its dtype, device and ``requires_grad`` may be read; :meth:`materialize` gives
    it a shape and turns it into a plain :class:`~ember.nn.Parameter`.

    >>> w = ember.nn.UninitializedParameter()
    >>> w.materialize((2, 3)); type(w).__name__
    'Parameter'
    """
    __slots__ = ()
    cls_to_become = Parameter

    def __new__(cls, requires_grad: bool = True, device=None, dtype=None):
        return Parameter.__new__(cls, empty(0, device=device, dtype=dtype), requires_grad)

    def __init__(self, requires_grad: bool = True, device=None, dtype=None):
        pass


class UninitializedBuffer(_UninitializedTensorMixin, Tensor):
    """A buffer with no values yet (a lazy BatchNorm's running statistics before its
    first forward); :meth:`materialize` turns it into a plain tensor."""
    __slots__ = ()
    cls_to_become = Tensor

    def __new__(cls, requires_grad: bool = False, device=None, dtype=None):
        data = empty(0, device=device, dtype=dtype)
        t = Tensor._make.__func__(cls, data._data, data.device)
        t.requires_grad_(requires_grad)
        return t

    def __init__(self, requires_grad: bool = False, device=None, dtype=None):
        pass


def is_lazy(t) -> bool:
    """Whether ``t`` is an uninitialised parameter or buffer."""
    return isinstance(t, _UninitializedTensorMixin)


class LazyModuleMixin:
    """Makes a layer lazy: a forward pre-hook calls ``initialize_parameters(*inputs)``
    on the first call, then the module becomes ``cls_to_become``. A state dict with
    real tensors materialises the placeholders it fills (the module still changes class
    at its first forward).

    A lazy module must run once eagerly before ``ember.jit`` compiles a function that
    calls it, and an optimizer may be built before or after that first call.
    """
    cls_to_become: type | None = None

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._initialize_hook = self.register_forward_pre_hook(self._infer_parameters,
                                                               with_kwargs=True)

    def initialize_parameters(self, *args, **kwargs) -> None:
        """Materialise and initialise the placeholders from the first inputs."""
        raise NotImplementedError(f"initialize_parameters is not implemented for "
                                  f"{type(self).__name__}")

    def has_uninitialized_params(self) -> bool:
        """Whether a parameter or buffer of this module is still a placeholder."""
        return any(is_lazy(t) for t in (*self._parameters.values(), *self._buffers.values()))

    def _infer_parameters(self, module: Module, args: tuple, kwargs: dict | None = None):
        if _registry._trace is not None:
            raise EmberError(f"{self._get_name()}: a lazy module cannot be initialised while "
                             "ember.jit traces; call it once eagerly on a sample batch first")
        module.initialize_parameters(*args, **(kwargs or {}))
        if module.has_uninitialized_params():
            raise EmberError(f"module {self._get_name()} has not been fully initialized")
        module._initialize_hook.remove()
        del module._initialize_hook
        if module.cls_to_become is not None:
            module.__class__ = module.cls_to_become
        module._changed()

    # Placeholders have no values to save, copy or convert ---------------------------------
    def _save_to_state_dict(self, destination: dict, prefix: str, keep_vars: bool) -> None:
        for name, value in self._local_state().items():
            destination[prefix + name] = value if keep_vars or is_lazy(value) else \
                value.detach()

    def _check_state(self, state: dict, prefix: str, missing: list, unexpected: list,
                     errors: list, plan: list) -> None:
        tables = (self._parameters, self._buffers)
        with grad_mode.no_grad():
            for table in tables:
                for name, current in table.items():
                    value = state.get(prefix + name)
                    if is_lazy(current) and isinstance(value, Tensor) and not is_lazy(value):
                        current.materialize(value.shape)
        # Placeholders still lazy match a placeholder in the state (nothing to copy).
        hidden = [(table, name) for table in tables for name, t in table.items()
                  if is_lazy(t)]
        saved = [table[name] for table, name in hidden]
        for table, name in hidden:
            table[name] = None
        try:
            super()._check_state(state, prefix, missing, unexpected, errors, plan)
        finally:
            for (table, name), t in zip(hidden, saved):
                table[name] = t
        keys = {prefix + name for table, name in hidden
                if table is self._parameters or name not in self._non_persistent_buffers_set}
        unexpected[:] = [k for k in unexpected if k not in keys]
        # This module's missing keys, placeholders included, in state-dict order.
        own = [prefix + name for name in self._local_state()]
        gone = set(missing) | {k for k in keys if k not in state}
        missing[:] = [k for k in missing if k not in own] + [k for k in own if k in gone]

    def _apply(self, fn) -> Module:
        lazy = [(table, name, t) for table in (self._parameters, self._buffers)
                for name, t in table.items() if is_lazy(t)]
        for table, name, _ in lazy:
            table[name] = None
        try:
            super()._apply(fn)
        finally:
            for table, name, t in lazy:
                table[name] = t
        for _, _, t in lazy:
            with grad_mode.no_grad():
                t._retype(fn(empty(0, device=t.device, dtype=t.dtype)))
        return self


# Linear --------------------------------------------------------------------------------------
class LazyLinear(LazyModuleMixin, Linear):
    """A :class:`~ember.nn.Linear` whose ``in_features`` is the last dim of the first
    input; ``weight`` and ``bias`` are :class:`UninitializedParameter` until then, and
    are initialised as ``Linear``'s. The module becomes a ``Linear``.

    >>> m = ember.nn.LazyLinear(3)
    >>> m(ember.randn(2, 5)).shape, type(m).__name__
    (ember.Size([2, 3]), 'Linear')
    """
    cls_to_become = Linear

    def __init__(self, out_features: int, bias: bool = True, device=None, dtype=None):
        super().__init__(0, 0, False)
        self.weight = UninitializedParameter(device=device, dtype=dtype)
        self.out_features = out_features
        if bias:
            self.bias = UninitializedParameter(device=device, dtype=dtype)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_features != 0:
            super().reset_parameters()

    def initialize_parameters(self, input: Tensor) -> None:
        if self.has_uninitialized_params():
            with grad_mode.no_grad():
                self.in_features = input.shape[-1]
                self.weight.materialize((self.out_features, self.in_features))
                if self.bias is not None:
                    self.bias.materialize((self.out_features,))
                self.reset_parameters()
        elif self.in_features == 0:  # materialised by load_state_dict
            self.in_features = self.weight.shape[-1]


# Convolutions --------------------------------------------------------------------------------
class _LazyConvXdMixin(LazyModuleMixin):
    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.in_channels != 0:
            super().reset_parameters()

    def _get_in_channels(self, input: Tensor) -> int:
        n = self._dims
        if input.ndim not in (n + 1, n + 2):
            raise EmberError(f"Expected {n + 1}D (unbatched) or {n + 2}D (batched) input to "
                             f"{type(self).__name__}, but got input of size: "
                             f"{tuple(input.shape)}")
        return input.shape[1] if input.ndim == n + 2 else input.shape[0]

    def initialize_parameters(self, input: Tensor, *args, **kwargs) -> None:
        if not self.has_uninitialized_params():
            if self.in_channels == 0:  # materialised by load_state_dict
                self.in_channels = (self.weight.shape[0] if self.transposed
                                    else self.weight.shape[1] * self.groups)
            return
        in_channels = self._get_in_channels(input)
        if in_channels % self.groups != 0:
            raise ValueError("in_channels must be divisible by groups")
        self.in_channels = in_channels
        with grad_mode.no_grad():
            if self.transposed:
                shape = (in_channels, self.out_channels // self.groups, *self.kernel_size)
            else:
                shape = (self.out_channels, in_channels // self.groups, *self.kernel_size)
            self.weight.materialize(shape)
            if self.bias is not None:
                self.bias.materialize((self.out_channels,))
            self.reset_parameters()


class _LazyConv(_LazyConvXdMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0, dilation=1,
                 groups: int = 1, bias: bool = True, padding_mode: str = "zeros",
                 device=None, dtype=None):
        # in_channels 0 and no bias: nothing is allocated that the placeholders replace.
        super().__init__(0, 0, kernel_size, stride, padding, dilation, groups, False,
                         padding_mode, device, dtype)
        _lazy_weights(self, out_channels, bias, device, dtype)


class _LazyConvTranspose(_LazyConvXdMixin):
    def __init__(self, out_channels: int, kernel_size, stride=1, padding=0,
                 output_padding=0, groups: int = 1, bias: bool = True, dilation=1,
                 padding_mode: str = "zeros", device=None, dtype=None):
        super().__init__(0, 0, kernel_size, stride, padding, output_padding, groups, False,
                         dilation, padding_mode, device, dtype)
        _lazy_weights(self, out_channels, bias, device, dtype)


def _lazy_weights(module: Module, out_channels: int, bias: bool, device, dtype) -> None:
    module.weight = UninitializedParameter(device=device, dtype=dtype)
    module.out_channels = out_channels
    if bias:
        module.bias = UninitializedParameter(device=device, dtype=dtype)


class LazyConv1d(_LazyConv, Conv1d):
    """A :class:`~ember.nn.Conv1d` whose ``in_channels`` is read from the first input
    (dim 1, or dim 0 unbatched); ``weight`` and ``bias`` are
    :class:`UninitializedParameter` until then and are initialised as ``Conv1d``'s.
    Arguments as ``Conv1d``'s without ``in_channels``; the module becomes a ``Conv1d``.

    >>> m = ember.nn.LazyConv1d(8, 3)
    >>> m(ember.randn(2, 4, 10)).shape, m.weight.shape
    (ember.Size([2, 8, 8]), ember.Size([8, 4, 3]))
    """
    cls_to_become = Conv1d


class LazyConv2d(_LazyConv, Conv2d):
    """A :class:`~ember.nn.Conv2d` whose ``in_channels`` is read from the first input;
    see :class:`LazyConv1d`.

    >>> ember.nn.LazyConv2d(8, 3)(ember.randn(2, 4, 10, 10)).shape
    ember.Size([2, 8, 8, 8])
    """
    cls_to_become = Conv2d


class LazyConv3d(_LazyConv, Conv3d):
    """A :class:`~ember.nn.Conv3d` whose ``in_channels`` is read from the first input;
    see :class:`LazyConv1d`.

    >>> ember.nn.LazyConv3d(8, 3)(ember.randn(1, 4, 5, 5, 5)).shape
    ember.Size([1, 8, 3, 3, 3])
    """
    cls_to_become = Conv3d


class LazyConvTranspose1d(_LazyConvTranspose, ConvTranspose1d):
    """A :class:`~ember.nn.ConvTranspose1d` whose ``in_channels`` is read from the first
    input; ``weight`` (in_channels, out_channels / groups, k) and ``bias`` are
    initialised as ``ConvTranspose1d``'s. The module becomes a ``ConvTranspose1d``.

    >>> ember.nn.LazyConvTranspose1d(8, 3)(ember.randn(2, 4, 10)).shape
    ember.Size([2, 8, 12])
    """
    cls_to_become = ConvTranspose1d


class LazyConvTranspose2d(_LazyConvTranspose, ConvTranspose2d):
    """A :class:`~ember.nn.ConvTranspose2d` whose ``in_channels`` is read from the first
    input; see :class:`LazyConvTranspose1d`.

    >>> ember.nn.LazyConvTranspose2d(8, 3)(ember.randn(2, 4, 5, 5)).shape
    ember.Size([2, 8, 7, 7])
    """
    cls_to_become = ConvTranspose2d


class LazyConvTranspose3d(_LazyConvTranspose, ConvTranspose3d):
    """A :class:`~ember.nn.ConvTranspose3d` whose ``in_channels`` is read from the first
    input; see :class:`LazyConvTranspose1d`.

    >>> ember.nn.LazyConvTranspose3d(8, 3)(ember.randn(1, 4, 3, 3, 3)).shape
    ember.Size([1, 8, 5, 5, 5])
    """
    cls_to_become = ConvTranspose3d


# Normalisation -------------------------------------------------------------------------------
class _LazyNormBase(LazyModuleMixin):
    def __init__(self, eps: float = 1e-5, momentum: float | None = 0.1, affine: bool = True,
                 track_running_stats: bool = True, device=None, dtype=None, *,
                 bias: bool = True):
        # No affine parameters or statistics yet: the placeholders come next.
        super().__init__(0, eps, momentum, False, False, device, dtype, bias=False)
        self.affine = affine
        self.track_running_stats = track_running_stats
        if affine:
            self.weight = UninitializedParameter(device=device, dtype=dtype)
            if bias:
                self.bias = UninitializedParameter(device=device, dtype=dtype)
        if track_running_stats:
            self.running_mean = UninitializedBuffer(device=device, dtype=dtype)
            self.running_var = UninitializedBuffer(device=device, dtype=dtype)
            self.num_batches_tracked = tensor(0, dtype=dtypes.int64, device=device)

    def reset_parameters(self) -> None:
        if not self.has_uninitialized_params() and self.num_features != 0:
            super().reset_parameters()

    def _feature_dim(self, input: Tensor) -> int:
        return 1

    def initialize_parameters(self, input: Tensor) -> None:
        if not self.has_uninitialized_params():
            if self.num_features == 0:  # materialised by load_state_dict
                known = self.weight if self.weight is not None else self.running_mean
                if known is not None:
                    self.num_features = known.shape[0]
            return
        if input.ndim <= self._feature_dim(input):
            raise ValueError(f"{type(self).__name__}: expected an input with a channel dim, "
                             f"got shape {tuple(input.shape)}")
        self.num_features = input.shape[self._feature_dim(input)]
        with grad_mode.no_grad():
            for t in (self.weight, self.bias, self.running_mean, self.running_var):
                if is_lazy(t):
                    t.materialize((self.num_features,))
            self.reset_parameters()


class LazyBatchNorm1d(_LazyNormBase, BatchNorm1d):
    """A :class:`~ember.nn.BatchNorm1d` whose ``num_features`` is read from the first
    input (dim 1); the affine parameters and running statistics are placeholders until
    then. Arguments as ``BatchNorm1d``'s without ``num_features``.

    >>> m = ember.nn.LazyBatchNorm1d()
    >>> m(ember.randn(4, 3)).shape, m.running_mean.shape
    (ember.Size([4, 3]), ember.Size([3]))
    """
    cls_to_become = BatchNorm1d


class LazyBatchNorm2d(_LazyNormBase, BatchNorm2d):
    """A :class:`~ember.nn.BatchNorm2d` whose ``num_features`` is read from the first
    input; see :class:`LazyBatchNorm1d`."""
    cls_to_become = BatchNorm2d


class LazyBatchNorm3d(_LazyNormBase, BatchNorm3d):
    """A :class:`~ember.nn.BatchNorm3d` whose ``num_features`` is read from the first
    input; see :class:`LazyBatchNorm1d`."""
    cls_to_become = BatchNorm3d


class _LazyInstanceNorm(_LazyNormBase):
    def _feature_dim(self, input: Tensor) -> int:
        # An unbatched input's channels are its first dim.
        return 0 if input.ndim == self._unbatched_rank else 1


class LazyInstanceNorm1d(_LazyInstanceNorm, InstanceNorm1d):
    """A :class:`~ember.nn.InstanceNorm1d` whose ``num_features`` is read from the first
    input (its channel dim). As PyTorch's, ``affine`` and ``track_running_stats`` default
    to True here (unlike ``InstanceNorm1d``).

    >>> m = ember.nn.LazyInstanceNorm1d()
    >>> m(ember.randn(2, 3, 5)).shape, m.weight.shape
    (ember.Size([2, 3, 5]), ember.Size([3]))
    """
    cls_to_become = InstanceNorm1d


class LazyInstanceNorm2d(_LazyInstanceNorm, InstanceNorm2d):
    """A :class:`~ember.nn.InstanceNorm2d` whose ``num_features`` is read from the first
    input; see :class:`LazyInstanceNorm1d`."""
    cls_to_become = InstanceNorm2d


class LazyInstanceNorm3d(_LazyInstanceNorm, InstanceNorm3d):
    """A :class:`~ember.nn.InstanceNorm3d` whose ``num_features`` is read from the first
    input; see :class:`LazyInstanceNorm1d`."""
    cls_to_become = InstanceNorm3d
