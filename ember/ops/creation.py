"""Making tensors: from data, filled, ranges, random; and moving them between devices."""
from __future__ import annotations

import numbers
import threading

import numpy as np

from .. import dtypes as dt
from ..backends import CPU, device as _device
from ..errors import EmberError, EmberTypeError
from .registry import register

__all__ = ["tensor", "as_tensor", "asarray", "from_numpy", "from_dlpack", "zeros", "ones",
           "full", "empty", "zeros_like", "ones_like", "full_like", "empty_like", "arange",
           "linspace", "logspace", "eye", "rand", "randn", "randint", "normal", "rand_like",
           "randn_like", "randint_like", "randperm", "bernoulli", "multinomial",
           "manual_seed", "seed", "initial_seed", "get_rng_state", "set_rng_state",
           "Generator", "scalar_tensor"]


def _tensor_cls():
    from ..tensor import Tensor
    return Tensor


def _dev(device):
    return CPU if device is None else _device(device)


def _infer_dtype(arr: np.ndarray, data) -> dt.DType:
    """PyTorch's inference: Python floats give the default dtype, ints int64."""
    if arr.dtype.kind == "f" and not isinstance(data, np.ndarray) and \
            not isinstance(data, np.floating):
        return dt.get_default_dtype()
    if arr.dtype.kind in "iu" and arr.dtype not in dt._BY_NP:
        return dt.int64
    try:
        return dt.as_dtype(arr.dtype)
    except TypeError:
        raise EmberTypeError(f"tensor: can't convert data of dtype {arr.dtype} to a tensor; "
                             "supported dtypes are "
                             f"{', '.join(d.name for d in dt.ALL)}") from None


def _to_array(data):
    Tensor = _tensor_cls()
    if isinstance(data, Tensor):
        return data.detach()._device.backend.to_numpy(data._data)
    if isinstance(data, (list, tuple)) and data and any(isinstance(x, Tensor) for x in data):
        return np.stack([_to_array(x) for x in data])
    try:
        arr = np.asarray(data)
    except ValueError as exc:
        raise EmberError(f"tensor: expected a sequence of equal-length sequences ({exc})") from None
    if arr.dtype == object:
        raise EmberTypeError(f"tensor: can't make a tensor from {type(data).__name__} "
                             "data (ragged nesting or non-numeric elements)")
    return arr


def tensor(data, *, dtype=None, device=None, requires_grad: bool = False):
    """A new tensor holding a copy of ``data`` (a number, nested sequence, array or tensor).

    >>> ember.tensor([[1, 2], [3, 4]])
    tensor([[1, 2],
            [3, 4]])
    """
    arr = _to_array(data)
    dtype = _infer_dtype(arr, data) if dtype is None else dt.as_dtype(dtype)
    dev = _dev(device)
    arr = dev.backend.asarray(np.array(arr, dtype=dtype.np, copy=True))
    return _tensor_cls()._make(arr, dev).requires_grad_(requires_grad)


def as_tensor(data, dtype=None, device=None):
    """Like :func:`tensor` but shares memory with ``data`` when it can (same dtype, CPU)."""
    Tensor = _tensor_cls()
    if isinstance(data, Tensor):
        return data.to(device=device, dtype=dtype) if (dtype or device) else data
    if isinstance(data, np.ndarray) and (dtype is None or dt.as_dtype(dtype).np == data.dtype) \
            and (device is None or _device(device) is CPU) and data.dtype in dt._BY_NP:
        return Tensor._make(data, CPU)
    arr = _to_array(data)
    dtype = _infer_dtype(arr, data) if dtype is None else dt.as_dtype(dtype)
    dev = _dev(device)
    return Tensor._make(dev.backend.asarray(np.asarray(arr, dtype=dtype.np)), dev)


asarray = as_tensor


def from_numpy(ndarray: np.ndarray):
    """A tensor sharing memory with ``ndarray`` (changes to one show in the other)."""
    if not isinstance(ndarray, np.ndarray):
        raise EmberTypeError(f"from_numpy: expected np.ndarray, got {type(ndarray).__name__}")
    return _tensor_cls()._make(ndarray, CPU)


def from_dlpack(ext_tensor):
    """A tensor sharing memory with any object that implements ``__dlpack__``."""
    return _tensor_cls()._make(np.from_dlpack(ext_tensor), CPU)


def _shape(size, name: str) -> tuple:
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = tuple(size[0])
    elif len(size) == 1 and hasattr(size[0], "shape") and not isinstance(size[0], numbers.Number):
        size = tuple(size[0])
    try:
        shape = tuple(int(s) for s in size)
    except TypeError:
        raise EmberTypeError(f"{name}: size must be ints, got {size!r}") from None
    if any(s < 0 for s in shape):
        raise EmberError(f"{name}: negative dimension in size {list(shape)}")
    return shape


def _filled(name, fill, size, dtype, device, requires_grad):
    shape = _shape(size, name)
    dtype = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    dev = _dev(device)
    arr = fill(dev.backend.xp, shape, dtype.np)
    return _tensor_cls()._make(arr, dev).requires_grad_(requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad: bool = False):
    """A tensor of zeros. ``ember.zeros(2, 3)`` or ``ember.zeros((2, 3))``."""
    return _filled("zeros", lambda xp, s, d: xp.zeros(s, d), size, dtype, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad: bool = False):
    """A tensor of ones."""
    return _filled("ones", lambda xp, s, d: xp.ones(s, d), size, dtype, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad: bool = False, memory_format=None):
    """A tensor with uninitialised values."""
    return _filled("empty", lambda xp, s, d: xp.empty(s, d), size, dtype, device, requires_grad)


def full(size, fill_value, *, dtype=None, device=None, requires_grad: bool = False):
    """A tensor filled with ``fill_value``; its dtype follows the value when not given."""
    if dtype is None:
        dtype = dt.scalar_dtype(fill_value) if isinstance(fill_value, numbers.Number) else None
    return _filled("full", lambda xp, s, d: xp.full(s, fill_value, d), (size,), dtype, device,
                   requires_grad)


def _like(fn, input, dtype, device, requires_grad, *args):
    return fn(*args, tuple(input.shape), dtype=input.dtype if dtype is None else dtype,
              device=input.device if device is None else device, requires_grad=requires_grad)


def zeros_like(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None):
    """Zeros with ``input``'s shape, dtype and device."""
    return _like(zeros, input, dtype, device, requires_grad)


def ones_like(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None):
    """Ones with ``input``'s shape, dtype and device."""
    return _like(ones, input, dtype, device, requires_grad)


def empty_like(input, *, dtype=None, device=None, requires_grad: bool = False, memory_format=None):
    """Uninitialised values with ``input``'s shape, dtype and device."""
    return _like(empty, input, dtype, device, requires_grad)


def full_like(input, fill_value, *, dtype=None, device=None, requires_grad: bool = False,
              memory_format=None):
    """``fill_value`` with ``input``'s shape, dtype and device."""
    return full(tuple(input.shape), fill_value, dtype=input.dtype if dtype is None else dtype,
                device=input.device if device is None else device, requires_grad=requires_grad)


def scalar_tensor(s, *, dtype=None, device=None, requires_grad: bool = False):
    """A 0-d tensor."""
    return tensor(s, dtype=dtype or dt.get_default_dtype(), device=device,
                  requires_grad=requires_grad)


def arange(start, end=None, step=1, *, dtype=None, device=None, requires_grad: bool = False):
    """Values from ``start`` up to (not including) ``end``, ``step`` apart.

    >>> ember.arange(5)
    tensor([0, 1, 2, 3, 4])
    """
    if end is None:
        start, end = 0, start
    start, end, step = (_number(v) for v in (start, end, step))
    if step == 0:
        raise EmberError("arange: step must be nonzero")
    if (end - start) * step < 0:
        raise EmberError(f"arange: upper bound and larger bound inconsistent with step sign "
                         f"(start={start}, end={end}, step={step})")
    if dtype is None:
        dtype = dt.int64 if all(isinstance(v, int) for v in (start, end, step)) \
            else dt.get_default_dtype()
    dtype = dt.as_dtype(dtype)
    dev = _dev(device)
    n = int(np.ceil((end - start) / step))
    arr = dev.backend.xp.asarray(start + np.arange(n, dtype=np.float64 if dtype.is_floating_point
                                                   else np.int64) * step).astype(dtype.np)
    return _tensor_cls()._make(arr, dev).requires_grad_(requires_grad)


def _number(v):
    Tensor = _tensor_cls()
    return v.item() if isinstance(v, Tensor) else v


def linspace(start, end, steps: int, *, dtype=None, device=None, requires_grad: bool = False):
    """``steps`` values evenly spaced from ``start`` to ``end`` inclusive."""
    dtype = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    dev = _dev(device)
    arr = np.linspace(_number(start), _number(end), int(steps)).astype(dtype.np)
    return _tensor_cls()._make(dev.backend.asarray(arr), dev).requires_grad_(requires_grad)


def logspace(start, end, steps: int, base: float = 10.0, *, dtype=None, device=None,
             requires_grad: bool = False):
    """``base ** linspace(start, end, steps)``."""
    dtype = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    arr = np.logspace(_number(start), _number(end), int(steps), base=base).astype(dtype.np)
    dev = _dev(device)
    return _tensor_cls()._make(dev.backend.asarray(arr), dev).requires_grad_(requires_grad)


def eye(n: int, m: int | None = None, *, dtype=None, device=None, requires_grad: bool = False):
    """The n×m identity matrix."""
    dtype = dt.get_default_dtype() if dtype is None else dt.as_dtype(dtype)
    dev = _dev(device)
    arr = dev.backend.xp.eye(n, n if m is None else m, dtype=dtype.np)
    return _tensor_cls()._make(arr, dev).requires_grad_(requires_grad)


# Random numbers -------------------------------------------------------------------------
class Generator:
    """A random-number generator (PCG64), as ``torch.Generator``.

    >>> g = ember.Generator().manual_seed(0)
    >>> ember.randn(2, generator=g)
    """

    def __init__(self, device="cpu"):
        self.device = _device(device)
        self._seed = int(np.random.SeedSequence().entropy % (2 ** 63))
        self._rng = self.device.backend.generator(self._seed)

    def manual_seed(self, seed: int) -> "Generator":
        self._seed = int(seed)
        self._rng = self.device.backend.generator(self._seed)
        return self

    def seed(self) -> int:
        self.manual_seed(int(np.random.SeedSequence().entropy % (2 ** 63)))
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        """The generator state as a JSON-serialisable dict."""
        return {"seed": self._seed, "bit_generator": self._rng.bit_generator.state}

    def set_state(self, state: dict) -> None:
        self._seed = state["seed"]
        self._rng.bit_generator.state = state["bit_generator"]


_default = threading.local()


def default_generator() -> Generator:
    gen = getattr(_default, "gen", None)
    if gen is None:
        gen = _default.gen = Generator().manual_seed(
            int(np.random.SeedSequence().entropy % (2 ** 63)))
    return gen


def manual_seed(seed: int) -> Generator:
    """Seed the default generator, so random ops repeat from here on."""
    return default_generator().manual_seed(seed)


def seed() -> int:
    """Seed the default generator from the OS's entropy; returns the seed."""
    return default_generator().seed()


def initial_seed() -> int:
    return default_generator().initial_seed()


def get_rng_state() -> dict:
    """The default generator's state (a JSON-serialisable dict)."""
    return default_generator().get_state()


def set_rng_state(state: dict) -> None:
    default_generator().set_state(state)


def _rng(generator):
    return (generator or default_generator())._rng


def _random(name, draw, size, generator, dtype, device, requires_grad, floating=True):
    shape = _shape(size, name)
    dtype = (dt.get_default_dtype() if floating else dt.int64) if dtype is None \
        else dt.as_dtype(dtype)
    dev = _dev(device)
    arr = np.asarray(draw(_rng(generator), shape)).astype(dtype.np, copy=False)
    return _tensor_cls()._make(dev.backend.asarray(arr), dev).requires_grad_(requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad: bool = False):
    """Uniform random numbers in [0, 1)."""
    return _random("rand", lambda r, s: r.random(s, np.float64 if dtype in (dt.float64, "float64")
                                                 else np.float32),
                   size, generator, dtype, device, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad: bool = False):
    """Standard normal random numbers."""
    return _random("randn", lambda r, s: r.standard_normal(
        s, np.float64 if dtype in (dt.float64, "float64") else np.float32),
        size, generator, dtype, device, requires_grad)


def randint(low, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False):
    """Random integers in [low, high). ``randint(10, (3,))`` or ``randint(2, 10, (3,))``."""
    if size is None:
        low, high, size = 0, low, high
    if high is None:
        low, high = 0, low
    if high <= low:
        raise EmberError(f"randint: expected low < high, got low={low}, high={high}")
    return _random("randint", lambda r, s: r.integers(low, high, s), (size,), generator,
                   dtype, device, requires_grad, floating=False)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False):
    """Normal random numbers; ``mean``/``std`` may be tensors (then the shape is theirs)."""
    Tensor = _tensor_cls()
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        ref = mean if isinstance(mean, Tensor) else std
        noise = randn_like(ref if size is None else zeros(size, dtype=ref.dtype),
                           generator=generator)
        return (noise * std + mean).detach()
    if size is None:
        raise EmberError("normal: size is required when mean and std are numbers")
    return _random("normal", lambda r, s: r.normal(mean, std, s), (size,), generator, dtype,
                   device, requires_grad)


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    return rand(tuple(input.shape), generator=generator, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False):
    return randn(tuple(input.shape), generator=generator, dtype=dtype or input.dtype,
                 device=device or input.device, requires_grad=requires_grad)


def randint_like(input, low, high=None, *, generator=None, dtype=None, device=None):
    return randint(low, high, tuple(input.shape), generator=generator,
                   dtype=dtype or input.dtype, device=device or input.device)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0..n-1."""
    return _random("randperm", lambda r, s: r.permutation(n), (n,), generator, dtype, device,
                   requires_grad, floating=False)


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p``), else 0; same shape and dtype as input."""
    prob = input._data if p is None else p
    arr = (_rng(generator).random(tuple(input.shape)) < prob).astype(input.dtype.np)
    return _tensor_cls()._make(input.device.backend.asarray(arr), input.device)


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):
    """Indices sampled from the rows of ``input`` (unnormalised probabilities)."""
    probs = np.asarray(input.detach().numpy(), dtype=np.float64)
    rows = probs.reshape(-1, probs.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all() or (rows.sum(-1) <= 0).any():
        raise EmberError("multinomial: probabilities must be finite, non-negative and not "
                         "all zero")
    if not replacement and num_samples > rows.shape[-1]:
        raise EmberError(f"multinomial: cannot sample {num_samples} > {rows.shape[-1]} "
                         "categories without replacement")
    rng = _rng(generator)
    out = np.stack([rng.choice(rows.shape[-1], num_samples, replace=replacement,
                               p=r / r.sum()) for r in rows])
    out = out.reshape(probs.shape[:-1] + (num_samples,)).astype(np.int64)
    return _tensor_cls()._make(input.device.backend.asarray(out), input.device)


# Moving between devices --------------------------------------------------------------
def _to_device_forward(xp, a, device):
    return device.backend.asarray(a.get() if hasattr(a, "get") else a)


_TO_DEVICE = register("to_device", _to_device_forward, lambda n, g: to_device(g, n.inputs[0].device),
                      saves_inputs=False)


def to_device(input, device):
    """``input`` copied to ``device`` (differentiable)."""
    from ..tensor import Tensor
    from ..autograd import grad_mode
    from ..autograd.graph import Node, edge_of
    arr = _to_device_forward(None, input._data, device)
    out = Tensor._make(arr, device)
    if grad_mode.is_grad_enabled() and input._requires_grad:
        node = Node(_TO_DEVICE, (input,), (edge_of(input),), {"device": device})
        out._node, out._requires_grad = node, True
    return out
