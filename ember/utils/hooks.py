"""Module hooks: the handle ``register_*_hook`` returns, and the machinery that runs a
module's full backward hooks."""
from __future__ import annotations

import itertools
import warnings
from collections import OrderedDict

from ..autograd import grad_mode
from ..autograd.function import Function
from ..errors import EmberError
from ..tensor import Tensor

__all__ = ["RemovableHandle", "BackwardHook"]


class RemovableHandle:
    """Returned by ``register_*_hook``: ``handle.remove()`` unregisters the hook; also a
    context manager that removes it on exit.

    Args:
        hooks_dict: the ordered dict the hook lives in, keyed by ``handle.id``.
        extra_dict: other dicts or sets keyed by the same id (flags such as with_kwargs).
    """
    _next_id = itertools.count()

    def __init__(self, hooks_dict: OrderedDict, *, extra_dict=None):
        self.hooks_dict = hooks_dict
        self.id = next(RemovableHandle._next_id)
        if extra_dict is None:
            extra_dict = ()
        elif isinstance(extra_dict, (dict, set)):
            extra_dict = (extra_dict,)
        self.extra_dicts = tuple(extra_dict)

    def remove(self) -> None:
        """Unregister the hook (a no-op when already removed)."""
        self.hooks_dict.pop(self.id, None)
        for d in self.extra_dicts:
            if isinstance(d, set):
                d.discard(self.id)
            else:
                d.pop(self.id, None)

    def __enter__(self) -> "RemovableHandle":
        return self

    def __exit__(self, *exc) -> None:
        self.remove()


class _PassGrads(Function):
    """Identity on tensors whose backward hands their gradients to a callback (which may
    replace them): how module backward hooks see the gradients at a module's boundary."""

    @staticmethod
    def forward(ctx, callback, *tensors):
        ctx.callback = callback
        ctx.set_materialize_grads(False)
        return tensors

    @staticmethod
    def backward(ctx, *grads):
        return (None,) + tuple(ctx.callback(grads))


def _pack(positions, values, size: int) -> tuple:
    out = [None] * size
    for i, v in zip(positions, values):
        out[i] = v
    return tuple(out)


class BackwardHook:
    """Runs a module's full backward pre-hooks and hooks for one call of the module.

    The module's tensor inputs and outputs that need gradients pass through
    :class:`_PassGrads`; when the outputs' gradients arrive, the pre-hooks run (and may
    replace them); when the inputs' gradients are computed, the hooks run with
    ``(grad_input, grad_output)`` (and may replace ``grad_input``). ``grad_input`` has one
    entry per positional argument: None for non-tensors, zeros for tensors that got no
    gradient (as PyTorch). ``grad_output`` has None for outputs that got no gradient.
    """

    def __init__(self, module, hooks: list, pre_hooks: list):
        self.module = module
        self.hooks = hooks
        self.pre_hooks = pre_hooks
        self.n_inputs = 0
        self.input_positions = None
        self.input_meta = {}
        self.grad_outputs = None

    @staticmethod
    def _wrap(values: tuple, callback):
        positions = [i for i, v in enumerate(values) if isinstance(v, Tensor) and v.requires_grad]
        if not positions or not grad_mode.is_grad_enabled():
            return values, None
        wrapped = _PassGrads.apply(callback, *[values[i] for i in positions])
        out = list(values)
        for i, w in zip(positions, wrapped):
            out[i] = w
        return tuple(out), positions

    def setup_input_hook(self, args: tuple) -> tuple:
        """The forward's arguments, with those needing a gradient routed through the
        input hook."""
        self.n_inputs = len(args)
        # Tensor arguments that get no gradient show up in grad_input as zeros.
        self.input_meta = {i: (tuple(a.shape), a.dtype, a.device) for i, a in enumerate(args)
                           if isinstance(a, Tensor)}
        args, self.input_positions = self._wrap(args, self._on_input_grads)
        return args

    def setup_output_hook(self, result):
        """The forward's result, with its tensors routed through the output hook."""
        single = isinstance(result, Tensor)
        if not single and not isinstance(result, tuple):
            return result
        outs = (result,) if single else result
        n_outputs = len(outs)
        positions = []

        def on_output_grads(grads):
            grad_output = _pack(positions, grads, n_outputs)
            for hook in self.pre_hooks:
                res = hook(self.module, grad_output)
                if res is None:
                    continue
                res = res if isinstance(res, tuple) else (res,)
                if len(res) != n_outputs:
                    raise EmberError(f"Backward pre hook returned an invalid number of "
                                     f"grad_output, got {len(res)}, but expected {n_outputs}")
                grad_output = res
            self.grad_outputs = grad_output
            if self.input_positions is None:
                self._run_hooks_without_inputs(grad_output)
            return tuple(grad_output[i] for i in positions)

        outs, found = self._wrap(outs, on_output_grads)
        if found is None:
            return result
        positions.extend(found)
        return outs[0] if single else outs

    def _on_input_grads(self, grads):
        from ..ops.creation import zeros
        grad_input = list(_pack(self.input_positions, grads, self.n_inputs))
        for i, (shape, dtype, device) in self.input_meta.items():
            if grad_input[i] is None:
                grad_input[i] = zeros(shape, dtype=dtype, device=device)
        grad_input = tuple(grad_input)
        for hook in self.hooks:
            res = hook(self.module, grad_input, self.grad_outputs)
            if res is None:
                continue
            res = res if isinstance(res, tuple) else (res,)
            if len(res) != len(grad_input):
                raise EmberError(f"Backward hook returned an invalid number of grad_input, "
                                 f"got {len(res)}, but expected {len(grad_input)}")
            grad_input = res
        self.grad_outputs = None
        return tuple(grad_input[i] for i in self.input_positions)

    def _run_hooks_without_inputs(self, grad_output):
        grad_input = (None,) * self.n_inputs
        if self.hooks:
            warnings.warn("Full backward hook is firing when gradients are computed with "
                          "respect to module outputs since no inputs require gradients.",
                          stacklevel=2)
        for hook in self.hooks:
            res = hook(self.module, grad_input, grad_output)
            if res is not None and not (isinstance(res, tuple) and all(r is None for r in res)):
                raise EmberError("Backward hook for Modules where no input requires gradient "
                                 "should always return None or None for all gradients.")
        self.grad_outputs = None
