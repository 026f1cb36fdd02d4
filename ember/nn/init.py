"""``nn.init``: fill a tensor in place with values from a distribution (no gradient is
recorded), with PyTorch's names, arguments and scaling rules."""
from __future__ import annotations

import math
import warnings

from ..autograd import grad_mode
from ..tensor import Tensor

__all__ = ["calculate_gain", "uniform_", "normal_", "trunc_normal_", "constant_", "ones_",
           "zeros_", "eye_", "dirac_", "xavier_uniform_", "xavier_normal_",
           "kaiming_uniform_", "kaiming_normal_", "orthogonal_", "sparse_"]


def calculate_gain(nonlinearity: str, param: float | None = None) -> float:
    """The recommended gain for a nonlinearity (scales the std of an initialisation).

    ==================  ===========================================
    linear, conv*d,     1
    sigmoid
    tanh                5/3
    relu                sqrt(2)
    leaky_relu          sqrt(2 / (1 + negative_slope^2)) (slope ``param``, default 0.01)
    selu                3/4
    ==================  ===========================================

    >>> ember.nn.init.calculate_gain("relu")
    1.4142135623730951
    """
    linear = ("linear", "conv1d", "conv2d", "conv3d", "conv_transpose1d", "conv_transpose2d",
              "conv_transpose3d")
    if nonlinearity in linear or nonlinearity == "sigmoid":
        return 1
    if nonlinearity == "tanh":
        return 5.0 / 3
    if nonlinearity == "relu":
        return math.sqrt(2.0)
    if nonlinearity == "leaky_relu":
        if param is None:
            slope = 0.01
        elif not isinstance(param, bool) and isinstance(param, (int, float)):
            slope = param
        else:
            raise ValueError(f"negative_slope {param} not a valid number")
        return math.sqrt(2.0 / (1 + slope ** 2))
    if nonlinearity == "selu":
        return 3.0 / 4
    raise ValueError(f"Unsupported nonlinearity {nonlinearity}")


def _calculate_fan_in_and_fan_out(tensor: Tensor) -> tuple[int, int]:
    """``(fan_in, fan_out)`` of a weight ``(out, in, *kernel)``: in (out) times the
    kernel size."""
    if tensor.dim() < 2:
        raise ValueError("Fan in and fan out can not be computed for tensor with fewer than "
                         "2 dimensions")
    receptive = math.prod(tensor.shape[2:])
    return tensor.shape[1] * receptive, tensor.shape[0] * receptive


def _calculate_correct_fan(tensor: Tensor, mode: str) -> int:
    mode = mode.lower()
    if mode not in ("fan_in", "fan_out"):
        raise ValueError(f"Mode {mode} not supported, please use one of "
                         "['fan_in', 'fan_out']")
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return fan_in if mode == "fan_in" else fan_out


def uniform_(tensor: Tensor, a: float = 0.0, b: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn uniformly from ``[a, b)``.

    >>> w = ember.nn.init.uniform_(ember.empty(3, 5), -0.1, 0.1)
    """
    with grad_mode.no_grad():
        return tensor.uniform_(a, b, generator=generator)


def normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, generator=None) -> Tensor:
    """Fill with values drawn from N(mean, std²).

    >>> w = ember.nn.init.normal_(ember.empty(3, 5), std=0.02)
    """
    with grad_mode.no_grad():
        return tensor.normal_(mean, std, generator=generator)


def _erfinv(y: Tensor) -> Tensor:
    """The inverse error function on (-1, 1) (±inf at ±1): a rational approximation
    (Giles, 2010) refined by two Newton steps on ``erf``, accurate to float64."""
    from ..ops.elementwise import erf, exp, log, sqrt, where
    w = -log((1 - y) * (1 + y))
    central, tail = w - 2.5, sqrt(w) - 3.0
    p_central = 2.81022636e-08
    for c in (3.43273939e-07, -3.5233877e-06, -4.39150654e-06, 0.00021858087,
              -0.00125372503, -0.00417768164, 0.246640727, 1.50140941):
        p_central = c + p_central * central
    p_tail = -0.000200214257
    for c in (0.000100950558, 0.00134934322, -0.00367342844, 0.00573950773,
              -0.0076224613, 0.00943887047, 1.00167406, 2.83297682):
        p_tail = c + p_tail * tail
    x = where(w < 5.0, p_central, p_tail) * y
    inside = y.abs() < 1
    x = where(inside, x, 0.0)
    for _ in range(2):
        x = x - (erf(x) - y) / (2.0 / math.sqrt(math.pi) * exp(-x * x))
    edge = where(y.abs() == 1, y * math.inf, math.nan)
    return where(inside, x, edge)


def trunc_normal_(tensor: Tensor, mean: float = 0.0, std: float = 1.0, a: float = -2.0,
                  b: float = 2.0, generator=None) -> Tensor:
    """Fill with values from N(mean, std²) truncated to ``[a, b]`` (by inverting the
    normal CDF on uniform draws, so every draw lands inside).

    >>> w = ember.nn.init.trunc_normal_(ember.empty(3, 5), std=0.02, a=-0.04, b=0.04)
    """
    def cdf(x):
        return (1.0 + math.erf(x / math.sqrt(2.0))) / 2.0

    if mean < a - 2 * std or mean > b + 2 * std:
        warnings.warn("mean is more than 2 std from [a, b] in nn.init.trunc_normal_. The "
                      "distribution of values may be incorrect.", stacklevel=2)
    with grad_mode.no_grad():
        lo, hi = cdf((a - mean) / std), cdf((b - mean) / std)
        u = tensor.new_empty(tuple(tensor.shape), dtype=_wide(tensor))
        u.uniform_(2 * lo - 1, 2 * hi - 1, generator=generator)
        values = (_erfinv(u) * (std * math.sqrt(2.0)) + mean).clamp(a, b)
        return tensor.copy_(values)


def _wide(tensor: Tensor):
    """float64 for float64 tensors, else float32: the dtype to draw and transform in."""
    from .. import dtypes
    return dtypes.float64 if tensor.dtype is dtypes.float64 else dtypes.float32


def constant_(tensor: Tensor, val: float) -> Tensor:
    """Fill with ``val``."""
    with grad_mode.no_grad():
        return tensor.fill_(val)


def ones_(tensor: Tensor) -> Tensor:
    """Fill with ones."""
    return constant_(tensor, 1.0)


def zeros_(tensor: Tensor) -> Tensor:
    """Fill with zeros."""
    return constant_(tensor, 0.0)


def eye_(tensor: Tensor) -> Tensor:
    """Fill a 2-D tensor with the identity (ones on the diagonal, zeros elsewhere)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ..ops.creation import eye
    with grad_mode.no_grad():
        return tensor.copy_(eye(*tensor.shape, dtype=tensor.dtype))


def dirac_(tensor: Tensor, groups: int = 1) -> Tensor:
    """Fill a 3-, 4- or 5-D convolution weight so the convolution is the identity (per
    group), keeping as many input channels as fit."""
    if tensor.ndim not in (3, 4, 5):
        raise ValueError("Only tensors with 3, 4, or 5 dimensions are supported")
    out_channels, in_channels = tensor.shape[0], tensor.shape[1]
    if out_channels % groups:
        raise ValueError("dim 0 must be divisible by groups")
    per_group = out_channels // groups
    centre = tuple(k // 2 for k in tensor.shape[2:])
    with grad_mode.no_grad():
        tensor.zero_()
        for g in range(groups):
            for d in range(min(per_group, in_channels)):
                tensor[(g * per_group + d, d) + centre] = 1
    return tensor


def xavier_uniform_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot uniform: U(-a, a) with ``a = gain * sqrt(6 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    bound = math.sqrt(3.0) * gain * math.sqrt(2.0 / float(fan_in + fan_out))
    return uniform_(tensor, -bound, bound, generator)


def xavier_normal_(tensor: Tensor, gain: float = 1.0, generator=None) -> Tensor:
    """Glorot normal: N(0, std²) with ``std = gain * sqrt(2 / (fan_in + fan_out))``."""
    fan_in, fan_out = _calculate_fan_in_and_fan_out(tensor)
    return normal_(tensor, 0.0, gain * math.sqrt(2.0 / float(fan_in + fan_out)), generator)


def _kaiming_std(tensor, a, mode, nonlinearity) -> float | None:
    if 0 in tuple(tensor.shape):
        warnings.warn("Initializing zero-element tensors is a no-op", stacklevel=3)
        return None
    fan = _calculate_correct_fan(tensor, mode)
    return calculate_gain(nonlinearity, a) / math.sqrt(fan)


def kaiming_uniform_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                     nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He uniform: U(-bound, bound) with ``bound = gain * sqrt(3 / fan)``.

    Args:
        a: the negative slope of the rectifier after this layer (leaky_relu).
        mode: ``"fan_in"`` keeps the forward pass's variance, ``"fan_out"`` the
            backward's.
        nonlinearity: the name given to :func:`calculate_gain`.

    >>> w = ember.nn.init.kaiming_uniform_(ember.empty(3, 5), a=math.sqrt(5))
    """
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    bound = math.sqrt(3.0) * std
    return uniform_(tensor, -bound, bound, generator)


def kaiming_normal_(tensor: Tensor, a: float = 0, mode: str = "fan_in",
                    nonlinearity: str = "leaky_relu", generator=None) -> Tensor:
    """He normal: N(0, std²) with ``std = gain / sqrt(fan)``."""
    std = _kaiming_std(tensor, a, mode, nonlinearity)
    if std is None:
        return tensor
    return normal_(tensor, 0.0, std, generator)


def orthogonal_(tensor: Tensor, gain: float = 1, generator=None) -> Tensor:
    """Fill with a (semi-)orthogonal matrix (the tensor seen as ``(shape[0], rest)``)
    times ``gain``: the Q of the QR decomposition of a Gaussian matrix, its signs fixed
    by R's diagonal so the result is uniformly distributed."""
    if tensor.ndim < 2:
        raise ValueError("Only tensors with 2 or more dimensions are supported")
    if tensor.numel() == 0:
        return tensor
    rows = tensor.shape[0]
    cols = tensor.numel() // rows
    xp = tensor.device.backend.xp
    with grad_mode.no_grad():
        flat = tensor.new_empty((rows, cols), dtype=_wide(tensor)).normal_(0, 1,
                                                                           generator=generator)
        a = flat._data.T if rows < cols else flat._data
        q, r = xp.linalg.qr(a)
        q = q * xp.sign(xp.diagonal(r))
        if rows < cols:
            q = q.T
        values = Tensor._make(xp.ascontiguousarray(q), tensor.device)
        tensor.copy_(values.reshape(tuple(tensor.shape)) * gain)
    return tensor


def sparse_(tensor: Tensor, sparsity: float, std: float = 0.01, generator=None) -> Tensor:
    """Fill a 2-D tensor from N(0, std²), then zero a ``sparsity`` fraction of each
    column (at random rows)."""
    if tensor.ndim != 2:
        raise ValueError("Only tensors with 2 dimensions are supported")
    from ..ops.random import randperm
    rows, cols = tensor.shape
    n_zeros = int(math.ceil(sparsity * rows))
    with grad_mode.no_grad():
        tensor.normal_(0, std, generator=generator)
        for col in range(cols):
            tensor[randperm(rows, generator=generator)[:n_zeros], col] = 0
    return tensor


# PyTorch's deprecated spellings without the trailing underscore ----------------------------
def _deprecated(method):
    """``method`` under its old name: the same call, with PyTorch's FutureWarning."""
    old_name = method.__name__[:-1]

    def deprecated_method(*args, **kwargs):
        warnings.warn(f"`nn.init.{old_name}` is now deprecated in favor of "
                      f"`nn.init.{method.__name__}`.", FutureWarning, stacklevel=2)
        return method(*args, **kwargs)

    deprecated_method.__name__ = deprecated_method.__qualname__ = old_name
    deprecated_method.__doc__ = (f"{old_name}(...)\n\n    Deprecated: use "
                                 f":func:`ember.nn.init.{method.__name__}` (same arguments).")
    return deprecated_method


uniform = _deprecated(uniform_)
normal = _deprecated(normal_)
constant = _deprecated(constant_)
eye = _deprecated(eye_)
dirac = _deprecated(dirac_)
xavier_uniform = _deprecated(xavier_uniform_)
xavier_normal = _deprecated(xavier_normal_)
kaiming_uniform = _deprecated(kaiming_uniform_)
kaiming_normal = _deprecated(kaiming_normal_)
orthogonal = _deprecated(orthogonal_)
sparse = _deprecated(sparse_)
