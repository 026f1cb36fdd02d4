"""``ember.func.vmap``, ``stack_module_state`` and ``linearize``.

``vmap(f)`` maps ``f`` over a dimension of its inputs. ember runs ``f`` once per batch
element, on that element's slices (``x.select(in_dim, i)``), and stacks the results
along ``out_dims``: every result is what PyTorch's vmap gives, built from ember ops, so
gradients flow through it and it composes with ``grad``, ``vjp``, ``jacrev`` and itself
(per-sample gradients: ``vmap(grad(loss), in_dims=(None, 0, 0))``). The cost is one
Python call of ``f`` per element rather than one batched call.

Where PyTorch refuses what a per-element run can do (``.item()`` or data-dependent
control flow inside ``f``), ember runs it. A random op inside ``f`` follows
``randomness``: ``'error'`` raises, ``'different'`` draws anew for every element,
``'same'`` puts the generators back before each element so all draw the same numbers.
"""
from __future__ import annotations

import functools
import threading
from typing import Any, Callable

from .errors import EmberError, EmberIndexError, EmberValueError

__all__ = ["vmap", "stack_module_state", "linearize"]

_RANDOMNESS = ("error", "different", "same")


# Pytrees: tuples, lists and dicts; anything else (None too) is a leaf --------------------
def _flatten(tree) -> tuple[list, Any]:
    if isinstance(tree, (tuple, list)):
        leaves, specs = [], []
        for item in tree:
            sub, spec = _flatten(item)
            leaves.extend(sub)
            specs.append((len(sub), spec))
        return leaves, (type(tree), specs)
    if isinstance(tree, dict):
        keys = list(tree)
        leaves, spec = _flatten([tree[k] for k in keys])
        return leaves, (dict, (keys, spec))
    return [tree], None


def _unflatten(spec, leaves: list):
    if spec is None:
        return leaves[0]
    kind, inner = spec
    if kind is dict:
        keys, sub = inner
        return dict(zip(keys, _unflatten(sub, leaves)))
    out, start = [], 0
    for n, sub in inner:
        out.append(_unflatten(sub, leaves[start:start + n]))
        start += n
    if kind is tuple or kind is list:
        return kind(out)
    return kind(*out) if hasattr(kind, "_fields") else kind(out)  # namedtuples


def _spec_repr(tree, indent: int = 0) -> str:
    """The structure of ``tree`` as PyTorch's ``TreeSpec`` prints it."""
    if isinstance(tree, dict):
        kind, context, children = "dict", repr(list(tree)), list(tree.values())
    elif isinstance(tree, (tuple, list)):
        kind, context, children = type(tree).__name__, "None", list(tree)
    else:
        return "*"
    parts = [_spec_repr(c, indent + 2) for c in children]
    joined = (",\n" + " " * (indent + 2)).join(parts)
    return f"TreeSpec({kind}, {context}, [{joined}])"


def _broadcast_dims(dims, tree):
    """One dim per leaf of ``tree``: ``dims`` matches the structure of ``tree``, where a
    leaf of ``dims`` (an int or None) stands for the whole subtree at its place. None
    where the structures do not fit."""
    if not isinstance(dims, (tuple, list, dict)):
        return [dims] * len(_flatten(tree)[0])
    if isinstance(dims, dict):
        if not isinstance(tree, dict) or set(dims) != set(tree):
            return None
        pairs = [(dims[k], tree[k]) for k in tree]
    else:
        same_kind = isinstance(tree, tuple) if isinstance(dims, tuple) else \
            isinstance(tree, list)
        if not same_kind or len(dims) != len(tree):
            return None
        pairs = list(zip(dims, tree))
    flat = []
    for d, sub in pairs:
        part = _broadcast_dims(d, sub)
        if part is None:
            return None
        flat.extend(part)
    return flat


def _name(func) -> str:
    if hasattr(func, "__name__"):
        return func.__name__
    if isinstance(func, functools.partial):
        return f"functools.partial({_name(func.func)}, ...)"
    return repr(func)


# Randomness: a check on every random draw while a vmap runs ------------------------------
class _Frames(threading.local):
    def __init__(self):
        self.stack: list[_RandomScope] = []


_frames = _Frames()
_active = 0
_active_lock = threading.Lock()


def _on_draw(generator) -> None:
    """Called by ember's random ops before they draw from ``generator`` (None: a draw
    that ``ember.jit`` records, to run later)."""
    stack = _frames.stack
    if not stack:
        return
    for scope in stack:
        if scope.randomness == "error":
            raise EmberError(
                "vmap: called random operation while in randomness error mode. Please "
                "either use the 'same' or 'different' randomness flags on vmap or perform "
                "the randomness operation out of vmap")
    for scope in stack:
        if scope.randomness == "same":
            if generator is None:
                raise EmberError("vmap(..., randomness='same'): ember.jit cannot trace a "
                                 "random op inside this vmap (the generator would have to "
                                 "be put back between batch elements at run time); call "
                                 "it outside ember.jit, or use randomness='different'")
            if id(generator) not in scope.saved:
                scope.saved[id(generator)] = (generator, generator.get_state())


class _RandomScope:
    """The random-op policy of one running vmap."""

    def __init__(self, randomness: str):
        self.randomness = randomness
        self.saved: dict = {}  # 'same': id(generator) -> (generator, state at first draw)

    def __enter__(self):
        global _active
        from .ops import random
        with _active_lock:
            _active += 1
            random._draw_hook = _on_draw
        _frames.stack.append(self)
        return self

    def __exit__(self, *exc):
        global _active
        from .ops import random
        _frames.stack.pop()
        with _active_lock:
            _active -= 1
            if _active == 0:
                random._draw_hook = None
        return False

    def start_element(self) -> None:
        """Before each batch element: with 'same', the generators as they were before
        the first element drew."""
        for generator, state in self.saved.values():
            generator.set_state(state)


# vmap ---------------------------------------------------------------------------------
def _check_out_dims(out_dims, func) -> None:
    if isinstance(out_dims, int):
        return
    for d in _flatten(out_dims)[0]:
        if d is not None and not isinstance(d, int):
            raise EmberValueError(
                f"vmap({_name(func)}, ..., out_dims={out_dims}): `out_dims` must be an int, "
                "None or a python collection of ints representing where in the outputs the "
                "vmapped dimension should appear.")


def _batched_inputs(in_dims, args: tuple, func):
    """(batch size, in_dim per flat argument, flat arguments, their structure)."""
    from .tensor import Tensor
    name = _name(func)
    if not isinstance(in_dims, (int, tuple)):
        raise EmberValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): expected `in_dims` to be int "
            "or a (potentially nested) tuple matching the structure of inputs, got: "
            f"{type(in_dims)}.")
    if not args:
        raise EmberValueError(
            f"vmap({name})(<inputs>): got no inputs. Maybe you forgot to add inputs, or you "
            "are trying to vmap over a function with no inputs. The latter is unsupported.")
    flat_args, spec = _flatten(args)
    flat_dims = _broadcast_dims(in_dims, args)
    if flat_dims is None:
        raise EmberValueError(
            f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): in_dims is not compatible "
            f"with the structure of `inputs`. in_dims has structure {_spec_repr(in_dims)} "
            f"but inputs has structure {_spec_repr(args)}.")
    for i, (arg, d) in enumerate(zip(flat_args, flat_dims)):
        if d is None:
            continue
        if not isinstance(d, int):
            raise EmberValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an "
                "input but in_dim must be either an integer dimension or None.")
        if not isinstance(arg, Tensor):
            raise EmberValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for an "
                f"input but the input is of type {type(arg)}. We cannot vmap over "
                "non-Tensor arguments, please use None as the respective in_dim")
        if not -arg.ndim <= d < arg.ndim:
            raise EmberValueError(
                f"vmap({name}, in_dims={in_dims}, ...)(<inputs>): Got in_dim={d} for some "
                f"input, but that input is a Tensor of dimensionality {arg.ndim} so expected "
                f"in_dim to satisfy -{arg.ndim} <= in_dim < {arg.ndim}.")
        flat_dims[i] = d % arg.ndim
    sizes = [a.shape[d] for a, d in zip(flat_args, flat_dims) if d is not None]
    if not sizes:
        raise EmberValueError("vmap: Expected at least one Tensor to vmap over")
    if any(s != sizes[0] for s in sizes):
        raise EmberValueError(f"vmap: Expected all tensors to have the same size in the mapped "
                              f"dimension, got sizes {sizes} for the mapped dimension")
    return sizes[0], flat_dims, flat_args, spec


def _flat_out_dims(out_dims, output, func) -> list:
    from .tensor import Tensor
    flat = None
    if isinstance(output, Tensor):
        if isinstance(out_dims, int) or out_dims is None:
            flat = [out_dims]
        elif isinstance(out_dims, tuple) and len(out_dims) == 1:
            flat = list(out_dims)
    else:
        flat = _broadcast_dims(out_dims, output)
    if flat is None:
        raise EmberValueError(
            f"vmap({_name(func)}, ..., out_dims={out_dims})(<inputs>): out_dims is not "
            "compatible with the structure of `outputs`. out_dims has structure "
            f"{_spec_repr(out_dims)} but outputs has structure {_spec_repr(output)}.")
    return flat


def _same_value(a, b) -> bool:
    import numpy as np
    if a is b:
        return True
    if tuple(a.shape) != tuple(b.shape) or a.dtype is not b.dtype:
        return False
    x, y = np.asarray(a.detach().cpu()._data), np.asarray(b.detach().cpu()._data)
    return bool(np.array_equal(x, y, equal_nan=x.dtype.kind == "f"))


def _stack_outputs(results: list, out_dims, func, batch_size: int, batched: list):
    """The per-element results of ``func`` as one output, batched along ``out_dims``
    (``batched``: the storage bases of the batched inputs, whose views are batched)."""
    from .ops.shape import stack
    from .tensor import Tensor
    name = _name(func)
    flat_first, spec = _flatten(results[0])
    flat_dims = _flat_out_dims(out_dims, results[0], func)
    columns = [[x] for x in flat_first]
    for r in results[1:]:
        leaves, s = _flatten(r)
        if s != spec:
            raise EmberError(f"vmap({name}, ...): `{name}` returned outputs of different "
                             "structures for different batch elements; vmap needs the same "
                             "structure for every element")
        for col, x in zip(columns, leaves):
            col.append(x)
    flat_out = []
    for col, d in zip(columns, flat_dims):
        first = col[0]
        if d is None:
            if isinstance(first, Tensor) and not all(
                    isinstance(x, Tensor) and not any(x._base is b for b in batched)
                    and _same_value(first, x)
                    for x in col):
                raise EmberValueError(f"vmap({name}, ...): `{name}` can not return a "
                                      "BatchedTensor when out_dim is None")
            flat_out.append(first)
            continue
        for x in col:
            if not isinstance(x, Tensor):
                raise EmberValueError(
                    f"vmap({name}, ...): `{name}` must only return Tensors, got type "
                    f"{type(x)}. Did you mean to set out_dims= to None for output?")
        rank = first.ndim
        if not -(rank + 1) <= d <= rank:
            raise EmberIndexError(f"Dimension out of range (expected to be in range of "
                                  f"[{-(rank + 1)}, {rank}], but got {d})")
        for x in col[1:]:
            if tuple(x.shape) != tuple(first.shape):
                raise EmberError(
                    f"vmap({name}, ...): `{name}` returned outputs of shapes "
                    f"{tuple(first.shape)} and {tuple(x.shape)} for different batch "
                    "elements; vmap needs the same output shape for every element")
        if batch_size == 0:  # (col holds the one run on a placeholder element)
            flat_out.append(first.unsqueeze(d).narrow(d, 0, 0))
        else:
            flat_out.append(stack(col, d))
    return _unflatten(spec, flat_out)


def _run(func, in_dims, out_dims, randomness, args, kwargs):
    _check_out_dims(out_dims, func)
    batch_size, flat_dims, flat_args, spec = _batched_inputs(in_dims, args, func)
    results = []
    with _RandomScope(randomness) as scope:
        for i in range(max(batch_size, 1)):
            if i:
                scope.start_element()
            if batch_size == 0:
                # No element to run on: one run on zeros of an element's shape gives the
                # structure, shapes and dtypes of the (empty) outputs.
                sliced = [a if d is None else a.new_zeros(tuple(
                    s for k, s in enumerate(a.shape) if k != d)) for a, d in
                    zip(flat_args, flat_dims)]
            else:
                sliced = [a if d is None else a.select(d, i)
                          for a, d in zip(flat_args, flat_dims)]
            results.append(func(*_unflatten(spec, sliced), **kwargs))
    batched = [a if a._base is None else a._base
               for a, d in zip(flat_args, flat_dims) if d is not None]
    return _stack_outputs(results, out_dims, func, batch_size, batched)


def vmap(func: Callable, in_dims: int | tuple = 0, out_dims: int | tuple = 0,
         randomness: str = "error", *, chunk_size: int | None = None) -> Callable:
    """Vectorize ``func`` over a dimension of its inputs, as ``torch.func.vmap``.

    ``vmap(func)(*args)`` runs ``func`` on each slice of the batched inputs along their
    ``in_dims`` and stacks the results along ``out_dims``. Inputs and outputs may be
    tensors or (nested) tuples, lists and dicts of them. It composes with
    :func:`ember.func.grad`, :func:`~ember.func.vjp`, :func:`~ember.func.jacrev` and
    with itself, and gradients flow through it.

    Args:
        func: the function to map; its keyword arguments are passed unbatched.
        in_dims: where each positional argument is batched: an int for all, or a tuple
            with one entry per argument (an int, None for "not batched", or a structure
            matching that argument). Default 0.
        out_dims: where the batch dimension goes in each output: an int, or a structure
            matching the outputs; None for an output that does not depend on the batch.
        randomness: ``'error'`` (a random op inside ``func`` raises), ``'different'``
            (each element draws its own numbers) or ``'same'`` (every element draws the
            same numbers).
        chunk_size: accepted for PyTorch compatibility (None or a positive int); ember
            runs ``func`` one element at a time, so it changes nothing.

    Shapes: an input of shape ``(..., B, ...)`` with its batch dim ``B`` at ``in_dim`` is
    seen by ``func`` without it; an output of shape ``S`` becomes ``S`` with ``B``
    inserted at ``out_dim``.

    Example::

        >>> x, y = ember.randn(8, 3), ember.randn(3)
        >>> ember.func.vmap(ember.dot, in_dims=(0, None))(x, y).shape
        ember.Size([8])
        >>> # per-sample gradients
        >>> loss = lambda w, xi, yi: ((xi @ w - yi) ** 2).sum()
        >>> ember.func.vmap(ember.func.grad(loss), in_dims=(None, 0, 0))(
        ...     ember.randn(3), ember.randn(8, 3), ember.randn(8)).shape
        ember.Size([8, 3])
    """
    if randomness not in _RANDOMNESS:
        raise EmberError("Only allowed values for randomness are 'error', 'different', or "
                         f"'same'. Got {randomness}")
    if not (chunk_size is None or (isinstance(chunk_size, int) and chunk_size > 0)):
        raise EmberValueError(
            f"vmap: chunk_size should be None or greater than 0. (got {chunk_size})")

    def wrapped(*args, **kwargs):
        return _run(func, in_dims, out_dims, randomness, args, kwargs)

    if hasattr(func, "__name__"):
        wrapped = functools.wraps(func, updated=())(wrapped)
    return wrapped


# Ensembles and linearization ----------------------------------------------------------
def _stacked_leaf(tensors, name: str):
    from .ops.shape import stack
    needs = [t.requires_grad for t in tensors]
    if any(needs) and not all(needs):
        raise EmberError(f"Expected {name} from each model to have the same .requires_grad")
    result = stack(list(tensors))
    return result.detach().requires_grad_() if all(needs) else result


def stack_module_state(models) -> tuple[dict, dict]:
    """Stack the parameters and buffers of ``models`` (modules of one class) for an
    ensemble run with :func:`vmap`, as ``torch.func.stack_module_state``.

    Returns ``(params, buffers)``: dicts by name of tensors with a new leading dim of
    size ``len(models)``. Stacked parameters are new leaves (requiring grad when the
    originals do), not connected to the models.

    Example::

        >>> models = [ember.nn.Linear(3, 2) for _ in range(4)]
        >>> params, buffers = ember.func.stack_module_state(models)
        >>> base = models[0]
        >>> run = lambda p, b, x: ember.func.functional_call(base, (p, b), (x,))
        >>> ember.func.vmap(run, in_dims=(0, 0, None))(params, buffers,
        ...                                            ember.randn(5, 3)).shape
        ember.Size([4, 5, 2])
    """
    models = list(models)
    if not models:
        raise EmberError("stack_module_state: Expected at least one model, got 0.")
    if len({m.training for m in models}) > 1:
        raise EmberError("stack_module_state: Expected all models to have the same "
                         "training/eval mode.")
    if any(type(m) is not type(models[0]) for m in models):
        raise EmberError("stack_module_state: Expected all models to be of the same class.")
    all_params = [dict(m.named_parameters()) for m in models]
    all_buffers = [dict(m.named_buffers()) for m in models]
    params = {k: _stacked_leaf([p[k] for p in all_params], k) for k in all_params[0]}
    buffers = {k: _stacked_leaf([b[k] for b in all_buffers], k) for k in all_buffers[0]}
    return params, buffers


def linearize(func: Callable, *primals) -> tuple:
    """``(func(*primals), jvp_fn)``, where ``jvp_fn(*tangents)`` gives the
    Jacobian-vector product of ``func`` at ``primals``, as ``torch.func.linearize``.
    ``func`` runs once; each ``jvp_fn`` call reuses its recorded graph.

    Example::

        >>> x = ember.tensor([0.0, 1.0])
        >>> out, jvp_fn = ember.func.linearize(ember.sin, x)
        >>> jvp_fn(ember.ones(2))
        tensor([1.0000, 0.5403])
    """
    from . import func as F
    from .tensor import Tensor
    level = F._depth.value
    out, _, _, handles = F._linearize(func, primals, tuple(range(len(primals))), False,
                                      level, "linearize")
    out_leaves, out_spec = F._check_outputs(out, "linearize")
    p_leaves, p_spec = _flatten(primals)

    def jvp_fn(*tangents):
        t_leaves, t_spec = _flatten(tangents)
        if t_spec != p_spec:
            raise EmberError(f"Expected the tangents {_spec_repr(tangents)} to have the same "
                             f"argspec as the primals {_spec_repr(primals)}")
        for i, (t, p) in enumerate(zip(t_leaves, p_leaves)):
            if not isinstance(t, Tensor):
                raise EmberError(f"linearize: tangent:{i} must be a tensor, got {type(t)}")
            for what in ("shape", "device", "dtype"):
                if getattr(t, what) != getattr(p, what):
                    raise EmberError(
                        f"tangent:{i} with {what} {getattr(t, what)} in flattened pytree "
                        f"doesn't match the {what} {getattr(p, what)} of the corresponding "
                        "primal.")
        (column,) = F._forward_columns(out_leaves, handles, [t_leaves], level)
        return F._finish(_unflatten(out_spec, column), level)

    return F._finish(out, level), jvp_fn
