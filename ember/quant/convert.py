"""The static-quantization workflow: :func:`prepare` (or :func:`prepare_qat`) inserts
observers (or fake quantizers), calibration (or training) runs data through the model,
and :func:`convert` swaps each observed layer for its integer counterpart."""
from __future__ import annotations

import copy

from ..errors import EmberTypeError
from ..nn.layers.activation import ReLU, ReLU6
from ..nn.layers.conv import Conv2d
from ..nn.layers.dropout import Dropout
from ..nn.layers.flatten import Flatten, Unflatten
from ..nn.layers.linear import Linear
from ..nn.layers.pooling import AdaptiveAvgPool2d, AvgPool2d, MaxPool1d, MaxPool2d
from ..nn.module import Module
from .fused import ConvReLU2d, LinearReLU, fuse_relu
from .qat import QATConv2d, QATConvReLU2d, QATLinear, QATLinearReLU
from .qconfig import QConfig, default_qat_qconfig, default_qconfig
from .quantized import (DeQuantize, Quantize, QuantizedConv2d, QuantizedConvReLU2d,
                        QuantizedLinear, QuantizedLinearReLU, QuantizedPassThrough)
from .stubs import DeQuantStub, QuantStub, QuantWrapper

__all__ = ["prepare", "prepare_qat", "convert", "calibrate"]

# The layers whose output is observed, and what each becomes.
_STATIC = {QuantStub: Quantize, Linear: QuantizedLinear, LinearReLU: QuantizedLinearReLU,
           Conv2d: QuantizedConv2d, ConvReLU2d: QuantizedConvReLU2d,
           QATLinear: QuantizedLinear, QATLinearReLU: QuantizedLinearReLU,
           QATConv2d: QuantizedConv2d, QATConvReLU2d: QuantizedConvReLU2d}
_QAT = {Linear: QATLinear, LinearReLU: QATLinearReLU, Conv2d: QATConv2d,
        ConvReLU2d: QATConvReLU2d}
# Layers that commute with the affine map: they run on the integers unchanged.
_PASS_THROUGH = (ReLU, ReLU6, MaxPool1d, MaxPool2d, AvgPool2d, AdaptiveAvgPool2d, Flatten,
                 Unflatten, Dropout)


def _observe_output(module: Module, inputs, output):
    return module.activation_post_process(output)


def _propagate_qconfig(module: Module, qconfig) -> None:
    """Give every module a ``qconfig``: its own if it set one (None opts out), else its
    parent's."""
    own = module.__dict__.get("qconfig", qconfig)
    module.qconfig = own
    for child in module.children():
        _propagate_qconfig(child, own)


def _children_in(model: Module):
    """``(parent, name, child)`` for every module below ``model``, parents first."""
    for parent in list(model.modules()):
        for name, child in list(parent._modules.items()):
            if child is not None:
                yield parent, name, child


def _setup(model: Module, qconfig: QConfig, inplace: bool, qat: bool) -> Module:
    if not isinstance(qconfig, QConfig):
        raise EmberTypeError(f"prepare: qconfig must be an ember.quant.QConfig, got "
                             f"{type(qconfig).__name__}")
    if not inplace:
        model = copy.deepcopy(model)
    fuse_relu(model)
    if not any(isinstance(m, QuantStub) for m in model.modules()):
        model = QuantWrapper(model)
    _propagate_qconfig(model, qconfig)
    for module in model.modules():
        if isinstance(module, (LinearReLU, ConvReLU2d)):
            for inner in module.modules():
                if inner is not module:
                    inner.qconfig = None  # the fused unit is observed and converted whole
    if qat:
        for parent, name, child in _children_in(model):
            if type(child) in _QAT and child.qconfig is not None:
                float_layer = child[0] if isinstance(child, (LinearReLU, ConvReLU2d)) else child
                setattr(parent, name, _QAT[type(child)].from_float(float_layer, child.qconfig))
    for module in model.modules():
        if type(module) in _STATIC and module.qconfig is not None and \
                "activation_post_process" not in module._modules:
            module.activation_post_process = module.qconfig.activation()
            module._quant_observer_hook = module.register_forward_hook(_observe_output)
    return model


def prepare(model: Module, qconfig: QConfig = default_qconfig,
            inplace: bool = False) -> Module:
    """Prepare ``model`` for post-training static quantization.

    Fuses each Linear/Conv2d + ReLU pair inside ``Sequential`` containers (use
    :func:`fuse_modules` for other models), wraps the model in :class:`QuantWrapper`
    when it has no :class:`QuantStub`, gives each module the ``qconfig`` (a module's own
    ``qconfig`` attribute wins; ``None`` keeps it float), and attaches an activation
    observer to the output of every QuantStub, Linear and Conv2d. Then run calibration
    data through it (:func:`calibrate`) and call :func:`convert`.

    Returns the prepared model (a copy unless ``inplace``; the wrapper when one was
    added).

    >>> model = ember.nn.Sequential(ember.nn.Linear(8, 4), ember.nn.ReLU())
    >>> prepared = ember.quant.prepare(model)
    >>> _ = prepared(ember.randn(16, 8))
    >>> ember.quant.convert(prepared)(ember.randn(2, 8)).shape
    ember.Size([2, 4])
    """
    return _setup(model, qconfig, inplace, qat=False)


def prepare_qat(model: Module, qconfig: QConfig = default_qat_qconfig,
                inplace: bool = False) -> Module:
    """Prepare ``model`` for quantization-aware training: as :func:`prepare`, but
    Linear/Conv2d become QAT layers whose weights are fake-quantized, and outputs pass
    through :class:`FakeQuantize` modules; train as usual (the straight-through
    estimator carries gradients), then :func:`convert`. The QAT layers share the
    float model's parameters; the model is put in training mode."""
    return _setup(model, qconfig, inplace, qat=True).train()


def _converted(child: Module) -> Module | None:
    if getattr(child, "qconfig", None) is None:
        return None
    if isinstance(child, DeQuantStub):
        return DeQuantize()
    if type(child) in _STATIC and "activation_post_process" in child._modules:
        return _STATIC[type(child)].from_float(child)
    if isinstance(child, _PASS_THROUGH):
        return QuantizedPassThrough(child)
    return None


def convert(model: Module, inplace: bool = False) -> Module:
    """Swap every prepared layer for its quantized counterpart: QuantStub →
    :class:`Quantize`, DeQuantStub → :class:`DeQuantize`, Linear/Conv2d (and their
    fused ReLU and QAT forms) → :class:`QuantizedLinear` / :class:`QuantizedConv2d`
    with int8 per-channel weights and the observed output scale, and pooling, flatten,
    ReLU and dropout → :class:`QuantizedPassThrough`. The result is in eval mode.
    """
    if not inplace:
        model = copy.deepcopy(model)
    for parent, name, child in _children_in(model):
        new = _converted(child)
        if new is not None:
            setattr(parent, name, new)
    return model.eval()


def calibrate(model: Module, loader, num_batches: int | None = None) -> Module:
    """Run the inputs of ``loader`` (``(input, target)`` pairs or bare inputs) through a
    prepared ``model`` in eval mode without gradients, so its observers see them."""
    from ..autograd import no_grad
    model.eval()
    with no_grad():
        for i, batch in enumerate(loader):
            if num_batches is not None and i >= num_batches:
                break
            model(batch[0] if isinstance(batch, (tuple, list)) else batch)
    return model
