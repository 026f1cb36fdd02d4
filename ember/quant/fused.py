"""Fusing a ReLU into the Linear or Conv2d before it, so the quantized layer clamps
its integer output at the zero point instead of running a separate ReLU."""
from __future__ import annotations

from ..errors import EmberValueError
from ..nn.containers import Sequential
from ..nn.layers.activation import ReLU
from ..nn.layers.conv import Conv2d
from ..nn.layers.linear import Identity, Linear
from ..nn.module import Module

__all__ = ["LinearReLU", "ConvReLU2d", "fuse_modules", "fuse_relu"]


class LinearReLU(Sequential):
    """A Linear followed by a ReLU, as one unit for quantization (PyTorch's
    ``torch.ao.nn.intrinsic.LinearReLU``)."""

    def __init__(self, linear: Linear, relu: ReLU):
        super().__init__(linear, relu)


class ConvReLU2d(Sequential):
    """A Conv2d followed by a ReLU, as one unit for quantization."""

    def __init__(self, conv: Conv2d, relu: ReLU):
        super().__init__(conv, relu)


def _fused(first: Module, second: Module, where: str) -> Module:
    if not isinstance(second, ReLU):
        raise EmberValueError(f"fuse_modules: {where}: can fuse a Linear or Conv2d with a "
                              f"following ReLU, got {type(first).__name__} then "
                              f"{type(second).__name__}")
    if type(first) is Linear:
        return LinearReLU(first, second)
    if type(first) is Conv2d:
        return ConvReLU2d(first, second)
    raise EmberValueError(f"fuse_modules: {where}: can fuse a Linear or Conv2d with a "
                          f"following ReLU, got {type(first).__name__} then ReLU")


def fuse_modules(model: Module, modules_to_fuse: list) -> Module:
    """Fuse each named ``[layer, relu]`` pair in place: the layer becomes a
    :class:`LinearReLU`/:class:`ConvReLU2d`, the ReLU an ``Identity``. Use it for models
    whose ``forward`` is not a plain :class:`~ember.nn.Sequential`.

    >>> m = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.ReLU())
    >>> type(ember.quant.fuse_modules(m, [["0", "1"]])[0]).__name__
    'LinearReLU'
    """
    for names in modules_to_fuse:
        if len(names) != 2:
            raise EmberValueError(f"fuse_modules: expected pairs [layer, relu], got {names}")
        first, second = (model.get_submodule(n) for n in names)
        fused = _fused(first, second, f"{names[0]!r} and {names[1]!r}")
        _replace(model, names[0], fused)
        _replace(model, names[1], Identity())
    return model


def _replace(model: Module, path: str, new: Module) -> None:
    parent, _, name = path.rpartition(".")
    setattr(model.get_submodule(parent) if parent else model, name, new)


def fuse_relu(model: Module) -> Module:
    """Fuse, in place, every Linear/Conv2d directly followed by a ReLU inside a
    :class:`~ember.nn.Sequential` (whose order is its forward order)."""
    for module in list(model.modules()):
        if not isinstance(module, Sequential) or isinstance(module, (LinearReLU, ConvReLU2d)):
            continue
        names = list(module._modules)
        for first, second in zip(names, names[1:]):
            a, b = module._modules[first], module._modules[second]
            if type(a) in (Linear, Conv2d) and type(b) is ReLU:
                setattr(module, first, _fused(a, b, f"{first!r} and {second!r}"))
                setattr(module, second, Identity())
    return model
