"""A stricter stand-in device, ``strictgpu``: NumPy underneath, but its arrays refuse
what CuPy's arrays refuse, so that an op forward that reaches for NumPy instead of the
``xp`` it is given fails here and not first on a GPU.

Its arrays (:class:`DeviceArray`, an ndarray subclass) reject:

- NumPy API functions (``np.concatenate(a)``, ``np.where(a)``, ...) unless called
  through the backend's ``xp``;
- NumPy arrays as operands of arithmetic (CuPy takes its own arrays and scalars);
- ufuncs that are not NumPy's own (``np.frompyfunc`` ones, which run on the host);
- keyword arguments CuPy's functions lack (``max(initial=)``, ``as_strided(writeable=)``).

What it cannot see: ``np.asarray(device_array)`` (NumPy returns a view of a subclass
without asking it), and CuPy's own gaps (dtypes of ``ufunc.at``, missing functions).
"""
from __future__ import annotations

import math
import threading
import types

import numpy as np

import ember
from ember.backends import Backend, register_backend

_inside = threading.local()
# keyword arguments NumPy has and CuPy's function of the same name lacks
_NOT_IN_CUPY = {"max": {"initial", "where"}, "min": {"initial", "where"},
                "amax": {"initial", "where"}, "amin": {"initial", "where"},
                "sum": {"initial", "where"}, "prod": {"initial", "where"},
                "mean": {"where"}, "as_strided": {"writeable", "subok"}}


class DeviceArray(np.ndarray):
    """An array on the strict stand-in device."""

    def __array_function__(self, func, types_, args, kwargs):
        if not getattr(_inside, "xp", False):
            raise TypeError(f"np.{func.__name__} called on a device array; use the xp the "
                            f"op is given (CuPy has no implicit conversion)")
        return super().__array_function__(func, types_, args, kwargs)

    def __array_ufunc__(self, ufunc, method, *inputs, **kwargs):
        if getattr(_inside, "xp", False):  # inside an xp function: NumPy's own business
            pass
        elif getattr(np, ufunc.__name__, None) is not ufunc:
            raise TypeError(f"the ufunc {ufunc.__name__!r} is not NumPy's own: it would "
                            f"run on the host")
        else:
            operands = inputs[:1] + inputs[2:] if method == "at" else inputs  # (not indices)
            for x in operands + tuple(kwargs.get("out", ())):
                if isinstance(x, np.ndarray) and not isinstance(x, DeviceArray):
                    raise TypeError(f"{ufunc.__name__}: a NumPy array operand (shape "
                                    f"{x.shape}) with a device array; CuPy refuses it")
        plain = [x.view(np.ndarray) if isinstance(x, DeviceArray) else x for x in inputs]
        if "out" in kwargs:
            kwargs["out"] = tuple(o.view(np.ndarray) for o in kwargs["out"])
        out = getattr(ufunc, method)(*plain, **kwargs)
        return _to_device(out)


def _to_device(value):
    """Results as device arrays; NumPy scalars as 0-d ones (CuPy returns no scalars)."""
    if isinstance(value, np.generic):
        value = np.asarray(value)
    if isinstance(value, np.ndarray) and not isinstance(value, DeviceArray):
        return value.view(DeviceArray)
    if isinstance(value, tuple):
        return tuple(_to_device(v) for v in value)
    return value


def _through_xp(name, fn):
    refused = _NOT_IN_CUPY.get(name, set())

    def call(*args, **kwargs):
        bad = refused & set(kwargs)
        if bad:
            raise TypeError(f"xp.{name}: CuPy's {name} has no {sorted(bad)} argument")
        was, _inside.xp = getattr(_inside, "xp", False), True
        try:
            return _to_device(fn(*args, **kwargs))
        finally:
            _inside.xp = was
    call.__name__ = name
    return call


def _namespace(module, name):
    ns = types.ModuleType(name)
    for key, value in vars(module).items():
        if key.startswith("__"):
            continue
        if isinstance(value, types.FunctionType) or (callable(value) and not
                                                     isinstance(value, (type, np.ufunc))):
            value = _through_xp(key, value)
        ns.__dict__[key] = value
    return ns


xp = _namespace(np, "strictgpu.xp")
xp.lib = types.SimpleNamespace(stride_tricks=_namespace(np.lib.stride_tricks,
                                                        "strictgpu.xp.lib.stride_tricks"))
xp.linalg = _namespace(np.linalg, "strictgpu.xp.linalg")
# as CuPy's (from cupyx.scipy.special): float arrays in, float arrays out
xp.erf = _through_xp("erf", lambda a: np.asarray(np.frompyfunc(math.erf, 1, 1)(a), a.dtype))
xp.erfc = _through_xp("erfc", lambda a: np.asarray(np.frompyfunc(math.erfc, 1, 1)(a),
                                                   a.dtype))
xp.asynchronous = True  # take the branch-free paths a GPU takes
xp.fast_reductions = True


class StrictGPUBackend(Backend):
    name = "strictgpu"
    xp = xp
    kernel_renderer = "numpy"

    def asarray(self, data, dtype=None):
        if isinstance(data, DeviceArray) and (dtype is None or data.dtype == dtype):
            return data
        return np.array(data, dtype=dtype).view(DeviceArray)

    def to_numpy(self, array):
        return np.array(array).view(np.ndarray)

    def generator(self, seed):
        return _DeviceGenerator(seed)

    def matmul(self, a, b):
        return xp.matmul(a, b)


class _DeviceGenerator:
    """NumPy's PCG64 with its draws handed out as device arrays."""

    def __init__(self, seed):
        self._rng = np.random.Generator(np.random.PCG64(seed))
        self.bit_generator = self._rng.bit_generator

    def __getattr__(self, name):
        method = getattr(self._rng, name)
        return lambda *args, **kwargs: _to_device(method(*args, **kwargs))


register_backend(StrictGPUBackend())
STRICT = ember.device("strictgpu")
