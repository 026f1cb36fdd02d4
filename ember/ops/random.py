"""Random numbers: generators, seeding, and random tensors."""
from __future__ import annotations

import operator

import numpy as np

from .. import dtypes as dt
from ..backends import CPU, placement
from ..errors import EmberError, EmberTypeError
from ..tensor import Tensor
from . import registry
from .creation import _dev, _dtype, _new, _number, _size

__all__ = ["rand", "randn", "randint", "normal", "rand_like", "randn_like", "randint_like",
           "randperm", "bernoulli", "multinomial", "manual_seed", "seed", "initial_seed",
           "get_rng_state", "set_rng_state", "Generator", "default_generator"]


# Random numbers -------------------------------------------------------------------------
_DEFAULT_SEED = 67280421310721  # what a fresh torch.Generator starts from


def _entropy_seed() -> int:
    return int(np.random.SeedSequence().entropy % (2 ** 63))


class Generator:
    """A random-number generator, as ``torch.Generator``: on the CPU NumPy's PCG64, on a
    GPU the backend's (cuRAND through CuPy). The same seed gives different numbers on
    different device types, as in PyTorch.

    >>> g = ember.Generator().manual_seed(0)
    >>> ember.randn(2, generator=g).shape
    ember.Size([2])
    """

    def __init__(self, device="cpu"):
        self.device = placement(device)
        self.manual_seed(_DEFAULT_SEED)

    def manual_seed(self, seed: int) -> "Generator":
        """Restart the stream from ``seed``; returns self."""
        self._seed = operator.index(seed)
        self._rng = self.device.backend.generator(self._seed % (2 ** 64))
        return self

    def seed(self) -> int:
        """Restart from a seed drawn from the OS's entropy; returns that seed."""
        self.manual_seed(_entropy_seed())
        return self._seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        """The generator state, as a JSON-serialisable dict (not a byte tensor)."""
        return {"seed": self._seed, "bit_generator": self._rng.bit_generator.state}

    def set_state(self, new_state: dict) -> "Generator":
        """Restore a state from :meth:`get_state`; returns self."""
        self._seed = new_state["seed"]
        self._rng.bit_generator.state = new_state["bit_generator"]
        return self


_default_gen: Generator | None = None
_device_gens: dict = {}        # device -> its default generator (made on first use)
_seed_for_devices: int | None = None  # the last manual_seed, for generators made later


def default_generator(device=None) -> Generator:
    """The process-wide generator random ops on ``device`` (the CPU by default) use when
    given none. Each device has its own, seeded from entropy, or by the last
    :func:`manual_seed`, which seeds them all."""
    global _default_gen
    dev = CPU if device is None else placement(device)
    if dev is CPU:
        if _default_gen is None:
            _default_gen = Generator().manual_seed(_entropy_seed())
        return _default_gen
    gen = _device_gens.get(dev)
    if gen is None:
        seed = _seed_for_devices if _seed_for_devices is not None else _entropy_seed()
        gen = _device_gens[dev] = Generator(dev).manual_seed(seed)
    return gen


def manual_seed(seed: int) -> Generator:
    """Seed the default generators of every device, so random ops repeat from here on;
    returns the CPU's.

    >>> ember.manual_seed(0)
    """
    global _seed_for_devices
    _seed_for_devices = operator.index(seed)
    for gen in _device_gens.values():
        gen.manual_seed(seed)
    return default_generator().manual_seed(seed)


def seed_devices(device_type: str, seed: int | None) -> None:
    """Seed the default generators of the devices of ``device_type`` made so far, and
    those made later (``ember.cuda.manual_seed_all``); None re-seeds from entropy."""
    global _seed_for_devices
    if seed is not None:
        _seed_for_devices = operator.index(seed)
    for dev, gen in _device_gens.items():
        if dev.type == device_type:
            gen.manual_seed(_entropy_seed() if seed is None else seed)


def seed() -> int:
    """Seed the default generators of every device from the OS's entropy; returns the
    seed."""
    return manual_seed(_entropy_seed()).initial_seed()


def initial_seed() -> int:
    """The seed the default generator was last seeded with."""
    return default_generator().initial_seed()


def get_rng_state() -> dict:
    """The default generator's state (a JSON-serialisable dict), for
    :func:`set_rng_state`."""
    return default_generator().get_state()


def set_rng_state(new_state: dict) -> None:
    """Restore the default generator's state from :func:`get_rng_state`."""
    default_generator().set_state(new_state)


_draw_hook = None  # while ember.func.vmap runs: its randomness= check, called per draw


def _rng(generator, device=CPU):
    """The backend generator of ``generator``, or of ``device``'s default one."""
    gen = generator or default_generator(device)
    if _draw_hook is not None:
        _draw_hook(gen)
    return gen._rng


def _xp(generator, device):
    """The array module of the arrays ``generator`` (or ``device``'s default) draws."""
    return (device if generator is None else generator.device).backend.xp


def draw(generator, shape: tuple, np_dtype, make, device=CPU):
    """The array ``make(rng)`` (of ``shape`` and ``np_dtype``) for the backend ``rng`` of
    ``generator`` (by default ``device``'s default generator): an array on that
    generator's device. While ``ember.jit`` traces, the draw becomes a graph instruction
    that runs at every call, in program order, so compiled and eager runs draw the same
    numbers."""
    trace = registry._trace
    if trace is None:
        return make(_rng(generator, device))
    if _draw_hook is not None:
        _draw_hook(None)
    return trace.draw(make, lambda: _rng(generator, device), shape, np_dtype)


def _float_dtype(name: str, dtype) -> dt.DType:
    dtype = _dtype(name, dtype)
    if not dtype.is_floating_point:
        raise EmberTypeError(f"{name}: expected a floating dtype, got {dtype.name}")
    return dtype


def _draw_dtype(dtype: dt.DType):
    # NumPy's generators produce float32 or float64; narrower floats are cast from float32.
    return np.float64 if dtype is dt.float64 else np.float32


_MANTISSA_BITS = {"float16": 11, "bfloat16": 8}


def rand(*sizes, size=None, generator=None, dtype=None, device=None,
         requires_grad: bool = False):
    """Uniform random numbers in [0, 1).

    >>> ember.rand(2, 3).shape
    ember.Size([2, 3])
    """
    dtype = _float_dtype("rand", dtype)
    shape = _size(sizes, "rand", size)
    bits = _MANTISSA_BITS.get(dtype.name)
    dev = _dev(device, "rand")
    xp = _xp(generator, dev)

    def make(rng):
        arr = rng.random(shape, _draw_dtype(dtype))
        if bits is not None:  # round down to the narrow type's grid: 1.0 never appears
            arr = xp.floor(arr * 2.0 ** bits) / 2.0 ** bits
        return arr.astype(dtype.np, copy=False)
    return _new("rand", draw(generator, shape, dtype.np, make, dev), dtype, dev,
                requires_grad)


def randn(*sizes, size=None, generator=None, dtype=None, device=None,
          requires_grad: bool = False):
    """Standard normal random numbers.

    >>> ember.randn(2, 3).shape
    ember.Size([2, 3])
    """
    dtype = _dtype("randn", dtype)
    if dtype.is_complex:  # real and imaginary parts each of variance 1/2, as in PyTorch
        shape = _size(sizes, "randn", size)
        dev = _dev(device, "randn")
        real = dtype.to_real()
        arr = draw(generator, shape, dtype.np, lambda rng: (rng.standard_normal(
            shape + (2,), _draw_dtype(real)) * np.sqrt(0.5)).astype(real.np).view(
            dtype.np)[..., 0], dev)
        return _new("randn", arr, dtype, dev, requires_grad)
    dtype = _float_dtype("randn", dtype)
    shape = _size(sizes, "randn", size)
    dev = _dev(device, "randn")
    arr = draw(generator, shape, dtype.np, lambda rng: rng.standard_normal(
        shape, _draw_dtype(dtype)).astype(dtype.np, copy=False), dev)
    return _new("randn", arr, dtype, dev, requires_grad)


def randint(low=0, high=None, size=None, *, generator=None, dtype=None, device=None,
            requires_grad: bool = False):
    """Random integers in [low, high): ``randint(10, (3,))`` or ``randint(2, 10, (3,))``.

    >>> ember.randint(0, 10, (3,)).dtype
    ember.int64
    """
    if size is None:  # randint(high, size)
        low, high, size = 0, low, high
    if high is None:  # randint(high, size=...)
        low, high = 0, low
    if size is None:
        raise EmberTypeError("randint: size is required, e.g. randint(10, (3,))")
    low, high = _number("randint", low), _number("randint", high)
    if not (float(low).is_integer() and float(high).is_integer()):
        raise EmberTypeError(f"randint: low and high must be integers, got low={low}, "
                             f"high={high}")
    low, high = int(low), int(high)
    if low >= high:
        raise EmberError(f"randint: expected low < high, got low={low}, high={high}")
    dtype = _dtype("randint", dtype, dt.int64)
    if dtype._category == dt._INT:
        info = np.iinfo(dtype.np)
        if low < info.min or high - 1 > info.max:
            raise EmberError(f"randint: [{low}, {high}) does not fit in dtype {dtype.name} "
                             f"([{info.min}, {info.max}])")
    elif dtype is dt.bool and (low < 0 or high > 2):
        raise EmberError(f"randint: [{low}, {high}) does not fit in dtype bool")
    shape = _size((size,), "randint")
    dev = _dev(device, "randint")
    arr = draw(generator, shape, dtype.np, lambda rng: rng.integers(
        low, high, shape, dtype=np.int64).astype(dtype.np, copy=False), dev)
    return _new("randint", arr, dtype, dev, requires_grad)


def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad: bool = False):
    """Normal random numbers with the given ``mean`` and ``std``.

    ``mean`` and ``std`` may be tensors (the result then has their broadcast shape and
    dtype), or numbers with ``size`` given.

    >>> ember.normal(2.0, 0.5, (3,)).shape
    ember.Size([3])
    """
    if isinstance(mean, Tensor) or isinstance(std, Tensor):
        if isinstance(std, Tensor) and std.numel() and bool((std < 0).any()):
            raise EmberError("normal: expects std >= 0.0, but found a negative std")
        if not isinstance(std, Tensor) and std < 0:
            raise EmberError(f"normal: expects std >= 0.0, but found std {std}")
        out_dtype = dt.result_type(mean, std)
        if not out_dtype.is_floating_point:
            raise EmberTypeError(f"normal: expected floating mean and std, got "
                                 f"{out_dtype.name}")
        shape = np.broadcast_shapes(*(tuple(v.shape) for v in (mean, std)
                                      if isinstance(v, Tensor)))
        ref = mean if isinstance(mean, Tensor) else std
        noise = randn(shape, generator=generator, dtype=out_dtype, device=ref.device)
        return (noise * std + mean).detach()
    if size is None:
        raise EmberTypeError("normal: size is required when mean and std are numbers")
    if std < 0:
        raise EmberError(f"normal: expects std >= 0.0, but found std {std}")
    dtype = _float_dtype("normal", dtype)
    shape, np_dtype = _size((size,), "normal"), _draw_dtype(dtype)
    dev = _dev(device, "normal")

    def make(rng):
        arr = rng.standard_normal(shape, np_dtype) * np_dtype(std) + np_dtype(mean)
        return arr.astype(dtype.np, copy=False)
    return _new("normal", draw(generator, shape, dtype.np, make, dev), dtype, dev,
                requires_grad)


def rand_like(input, *, generator=None, dtype=None, device=None, requires_grad=False,
              memory_format=None):
    """:func:`rand` with ``input``'s shape, and its dtype and device unless given."""
    return rand(input.shape, generator=generator, dtype=dtype or input.dtype,
                device=device or input.device, requires_grad=requires_grad)


def randn_like(input, *, generator=None, dtype=None, device=None, requires_grad=False,
               memory_format=None):
    """:func:`randn` with ``input``'s shape, and its dtype and device unless given."""
    return randn(input.shape, generator=generator, dtype=dtype or input.dtype,
                 device=device or input.device, requires_grad=requires_grad)


def randint_like(input, low=0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad=False, memory_format=None):
    """:func:`randint` with ``input``'s shape, and its dtype and device unless given:
    ``randint_like(x, 10)`` or ``randint_like(x, 2, 10)``."""
    if high is None:
        low, high = 0, low
    return randint(low, high, input.shape, generator=generator, dtype=dtype or input.dtype,
                   device=device or input.device, requires_grad=requires_grad)


def randperm(n: int, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of ``0 .. n-1``.

    >>> ember.randperm(4).sort().values
    tensor([0, 1, 2, 3])
    """
    n = operator.index(n)
    if n < 0:
        raise EmberError(f"randperm: n must be non-negative, got {n}")
    dtype = _dtype("randperm", dtype, dt.int64)
    dev = _dev(device, "randperm")
    arr = draw(generator, (n,), dtype.np,
               lambda rng: rng.permutation(n).astype(dtype.np, copy=False), dev)
    return _new("randperm", arr, dtype, dev, requires_grad)


def bernoulli(input, p=None, *, generator=None):
    """1 with probability ``input`` (or ``p`` for every element), else 0; the result has
    ``input``'s shape and dtype.

    >>> ember.bernoulli(ember.tensor([0.0, 1.0]))
    tensor([0., 1.])
    """
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"bernoulli: expected a floating input, got {input.dtype.name}")
    prob = np.asarray(input._device.backend.to_numpy(input._data) if p is None else p,
                      dtype=np.float64)
    if prob.size and not ((prob >= 0) & (prob <= 1)).all():
        raise EmberError("bernoulli: expected all probabilities in [0, 1]")
    shape, np_dtype = tuple(input.shape), input.dtype.np
    xp = _xp(generator, input.device)
    arr = draw(generator, shape, np_dtype,
               lambda rng: (rng.random(shape) < xp.asarray(prob)).astype(np_dtype),
               input.device)
    return _new("bernoulli", arr, input.dtype, input.device, False)


def multinomial(input, num_samples: int, replacement: bool = False, *, generator=None):
    """Indices drawn from the rows of ``input`` (non-negative weights, 1-D or 2-D).
    The draw runs on the host with a CPU generator, also for a tensor on a GPU.

    >>> ember.multinomial(ember.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    if not input.dtype.is_floating_point:
        raise EmberTypeError(f"multinomial: expected a floating input, got {input.dtype.name}")
    if input.ndim not in (1, 2):
        raise EmberError(f"multinomial: expected a 1-D or 2-D input, got shape "
                         f"{tuple(input.shape)}")
    if num_samples <= 0:
        raise EmberError(f"multinomial: num_samples must be positive, got {num_samples}")
    probs = np.asarray(input._device.backend.to_numpy(input._data), dtype=np.float64)
    rows = probs.reshape(-1, probs.shape[-1])
    if (rows < 0).any() or not np.isfinite(rows).all():
        raise EmberError("multinomial: probabilities must be finite and non-negative")
    if (rows.sum(-1) <= 0).any():
        raise EmberError("multinomial: a row of probabilities sums to zero")
    if not replacement and ((rows > 0).sum(-1) < num_samples).any():
        raise EmberError(f"multinomial: cannot draw {num_samples} samples without "
                         f"replacement from a row with fewer non-zero weights (shape "
                         f"{tuple(input.shape)})")
    if generator is not None and generator.device is not CPU:
        raise EmberError(f"multinomial: draws on the host, from a CPU generator; got a "
                         f"generator on {generator.device}")
    rng = _rng(generator)
    out = np.stack([rng.choice(rows.shape[-1], num_samples, replace=replacement,
                               p=r / r.sum()) for r in rows])
    out = out.reshape(probs.shape[:-1] + (num_samples,))
    return _new("multinomial", out, dt.int64, input.device, False)
