"""``Optimizer``: the base class of every optimizer — parameter groups, per-parameter
state, ``zero_grad``, step hooks and PyTorch-format state dicts.

A subclass sets its hyperparameter defaults, validates them in ``_check_group`` and
implements ``step``; everything else lives here.
"""
from __future__ import annotations

import copy
import math
import functools
import warnings
from collections import defaultdict
from typing import Any, Callable, Iterable

from .. import dtypes
from ..autograd.grad_mode import enable_grad, no_grad
from ..autograd.graph import RemovableHandle
from ..errors import EmberTypeError, EmberValueError
from ..ops import registry
from ..ops.creation import tensor as _tensor
from ..tensor import Tensor

__all__ = ["Optimizer", "OptimizerError"]


class OptimizerError(EmberValueError):
    """A bad value given to an optimizer or a learning-rate scheduler (a negative
    learning rate, betas out of range, an empty parameter list, a state dict that does
    not fit). A ``ValueError`` as well, since PyTorch raises ``ValueError`` there."""


def _hooked(step: Callable) -> Callable:
    """Wrap a subclass's ``step`` so the step hooks run around it (once, even when an
    override calls ``super().step()``) and schedulers can tell that it has run."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        if self._stepping:
            return step(self, *args, **kwargs)
        if registry._trace is not None:
            _check_schedule_order(self, registry._trace)
        self._stepping = True
        if registry._trace is not None:
            _guard_options(self, registry._trace)
        try:
            for hook in tuple(self._step_pre_hooks):
                result = hook(self, args, kwargs)
                if result is not None:
                    args, kwargs = result
            out = step(self, *args, **kwargs)
            self._opt_called = True
            for hook in tuple(self._step_post_hooks):
                hook(self, args, kwargs)
        finally:
            self._stepping = False
        return out
    wrapper._ember_hooked = True
    return wrapper


class _Identities(tuple):
    """Object identities a guard compares; shown by count, not by address."""

    def __repr__(self) -> str:
        return f"<{len(self)} objects>"


def _guard_options(optimizer, trace) -> None:
    """ember.jit bakes an optimizer's options into the graph (all but the learning rate
    and the options a scheduler cycles, which are read at every call): a change of any
    of them, of the amount of state, or of the state tensors themselves must retrace."""
    for i, group in enumerate(optimizer.param_groups):
        def options(group=group):
            per_call = optimizer._scheduled_options
            return (tuple((k, v) for k, v in group.items()
                          if k not in ("params", "lr") and k not in per_call),
                    # whether a cycled option is 0 still decides which state exists
                    tuple((k, _nonzero(group[k])) for k in sorted(per_call) if k in group))
        trace.guard(options, options(), f"{optimizer._name} param_groups[{i}] options")

    def groups():  # the graph holds these group dicts and parameters
        return _Identities((id(g), tuple(map(id, g["params"])))
                           for g in optimizer.param_groups)
    trace.guard(groups, groups(), f"the {optimizer._name} parameter groups (added, or "
                "replaced by load_state_dict)")

    def entries():  # state made lazily by the first step changes what a step does
        return sum(len(s) for s in optimizer.state.values())
    trace.guard(entries, entries(), f"the number of {optimizer._name} state entries")

    def tensors():  # the graph reads and writes these objects (load_state_dict replaces them)
        return _Identities(id(v) for s in optimizer.state.values() for v in s.values()
                           if isinstance(v, Tensor))
    trace.guard(tensors, tensors(), f"the {optimizer._name} state tensors (replaced, e.g. "
                "by load_state_dict)")


def _check_schedule_order(optimizer, trace) -> None:
    """Inside ember.jit a scheduler's step runs once per call, after the graph (see
    ``LRScheduler.step``): a later step of its optimizer in the same traced function
    would not see the new learning rate, so it is an error rather than a silent change."""
    deferred = optimizer._deferred_schedule
    if deferred is None or deferred[0]() is not trace:
        return
    from ..compiler.trace import TraceError  # (only on this error path)
    raise TraceError(f"ember.jit: {optimizer._name}.step() is called after {deferred[1]}."
                     "step() in the same compiled function; the scheduler's step runs "
                     "after the compiled graph, so this optimizer step would not see its "
                     "new learning rate. Compile one training step per call (the scheduler "
                     "stepped once, after the optimizer), or step the scheduler outside "
                     "the compiled function.")


def _nonzero(value):
    return tuple(v != 0 for v in value) if isinstance(value, (tuple, list)) else value != 0


def hyper(group: dict, key: str = "lr"):
    """``group[key]``; while ember.jit traces, a 0-d tensor read from the group at every
    call (so a scheduler's new learning rate reaches the compiled step)."""
    trace = registry._trace
    if trace is None:
        return group[key]
    return trace.scalar_tensor((id(group), key), lambda: group[key], dtypes.float64)


def option(optimizer: "Optimizer", group: dict, key: str):
    """``group[key]`` (a number, or a tuple of them like ``betas``). While ember.jit
    traces, an option that a scheduler cycles (``CyclicLR``/``OneCycleLR`` with
    ``cycle_momentum``) is read at every call, as 0-d tensors; every other option is
    baked into the graph (and guarded by :func:`_guard_options`)."""
    trace = registry._trace
    value = group[key]
    if trace is None or key not in optimizer._scheduled_options:
        return value
    if not isinstance(value, (tuple, list)):
        return hyper(group, key)
    return tuple(trace.scalar_tensor((id(group), key, i), lambda i=i: group[key][i],
                                     dtypes.float64) for i in range(len(value)))


def count(state_t: Tensor):
    """The value of a 0-d state tensor (a ``step`` counter, NAdam's ``mu_product``): a
    Python number eagerly; while ember.jit traces, the tensor itself in float64 (so the
    bias corrections are computed in the graph at every call, in the precision of the
    Python arithmetic of the eager step)."""
    if registry._trace is None:
        return state_t.item()
    return state_t.to(dtypes.float64)


def sqrt(x):
    """``math.sqrt`` of a number, or the square root of a traced 0-d tensor."""
    return math.sqrt(x) if isinstance(x, (int, float)) else x.sqrt()


def scalar_dtype() -> dtypes.DType:
    """The dtype of the ``step`` counters kept in optimizer state (PyTorch's rule:
    float64 when that is the default dtype, float32 otherwise)."""
    return dtypes.float64 if dtypes.get_default_dtype() is dtypes.float64 else dtypes.float32


def step_counter() -> Tensor:
    """A fresh ``step`` entry for optimizer state: a 0-d float tensor holding 0."""
    return _tensor(0.0, dtype=scalar_dtype())


class Optimizer:
    """Base class of all optimizers.

    Args:
        params: an iterable of tensors, of ``(name, tensor)`` pairs, or of dicts, each
            dict a parameter group with a ``"params"`` entry and per-group options.
        defaults: the option values a group takes when it does not name them.

    >>> opt = ember.optim.SGD([w, b], lr=0.1)
    >>> opt = ember.optim.SGD([{"params": [w]}, {"params": [b], "lr": 0.01}], lr=0.1)
    """

    def __init__(self, params: Iterable, defaults: dict[str, Any]) -> None:
        self.defaults = defaults
        self.state: defaultdict = defaultdict(dict)
        self.param_groups: list[dict[str, Any]] = []
        self._step_pre_hooks: list = []
        self._step_post_hooks: list = []
        self._opt_called = False
        self._stepping = False
        # Options (besides lr) that a scheduler changes at every step: see option().
        self._scheduled_options: set[str] = set()
        # (weakref to a trace, scheduler name): a scheduler step deferred past the graph
        self._deferred_schedule = None
        self._check_group(defaults)
        if isinstance(params, Tensor):
            raise EmberTypeError(f"{self._name}: params should be an iterable of Tensors or "
                                 f"dicts, but got a Tensor of shape {tuple(params.shape)}; "
                                 "wrap it in a list")
        if isinstance(params, dict):
            raise EmberTypeError(f"{self._name}: params should be an iterable of Tensors or "
                                 "dicts, but got a dict; pass a list of parameter groups")
        if isinstance(params, (set, frozenset)):
            raise self._unordered_error()
        try:
            groups = list(params)
        except TypeError:
            raise EmberTypeError(f"{self._name}: params should be an iterable of Tensors or "
                                 f"dicts, but got {type(params).__name__}") from None
        if not groups:
            raise OptimizerError(f"{self._name}: got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def __init_subclass__(cls, **kwargs) -> None:
        # Every algorithm's step gets the hooks without having to call them itself.
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_ember_hooked", False):
            cls.step = _hooked(step)

    @property
    def _name(self) -> str:
        return type(self).__name__

    def _unordered_error(self) -> EmberTypeError:
        return EmberTypeError(f"{self._name}: parameters need to be in an ordered collection "
                              "(a set's order changes between runs, which would scramble "
                              "state dicts); use a list instead")

    def _check_group(self, group: dict[str, Any]) -> None:
        """Raise an :class:`OptimizerError` for an option value the algorithm can't use.
        Subclasses override this; it sees the defaults and every parameter group."""

    # Parameter groups ----------------------------------------------------------------
    def add_param_group(self, param_group: dict[str, Any]) -> None:
        """Add a parameter group: a dict with ``"params"`` and, optionally, options that
        override the optimizer's defaults for these parameters (e.g. a fine-tuning layer
        with its own ``lr``).

        >>> opt.add_param_group({"params": head.parameters(), "lr": 1e-3})
        """
        if not isinstance(param_group, dict):
            raise EmberTypeError(f"{self._name}: a parameter group must be a dict, got "
                                 f"{type(param_group).__name__}")
        if "params" not in param_group:
            raise OptimizerError(f"{self._name}: a parameter group needs a 'params' entry; "
                                 f"got keys {sorted(param_group)}")
        params = param_group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, (set, frozenset)):
            raise self._unordered_error()
        else:
            params = list(params)
        if params and isinstance(params[0], tuple):
            names = [item[0] for item in params if isinstance(item, tuple) and len(item) == 2]
            if len(names) != len(params):
                raise EmberTypeError(f"{self._name}: named parameters must be (name, tensor) "
                                     "pairs throughout a group")
            param_group["param_names"] = names
            params = [item[1] for item in params]
        for p in params:
            if not isinstance(p, Tensor):
                raise EmberTypeError(f"{self._name}: params must be tensors, got "
                                     f"{type(p).__name__}")
            if not (p.is_leaf or p.retains_grad):
                raise OptimizerError(f"{self._name}: can't optimize a non-leaf Tensor (shape "
                                     f"{tuple(p.shape)}); optimize the leaf tensors it was "
                                     "computed from")
        param_group["params"] = params
        for key, value in self.defaults.items():
            param_group.setdefault(key, value)
        self._check_group(param_group)

        if len({id(p) for p in params}) != len(params):
            warnings.warn(f"{self._name}: a parameter group contains the same parameter "
                          "more than once; it will be updated several times per step",
                          stacklevel=3)
        seen = {id(p) for group in self.param_groups for p in group["params"]}
        if any(id(p) in seen for p in params):
            raise OptimizerError(f"{self._name}: some parameters appear in more than one "
                                 "parameter group")
        self.param_groups.append(param_group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters: to ``None`` (the default,
        which saves memory and lets the optimizer skip them), or to zeros in place."""
        trace = registry._trace
        for group in self.param_groups:
            for p in group["params"]:
                if set_to_none and trace is not None:
                    trace.clear_grad(p)  # ember.jit: the clearing happens at every call
                    continue
                grad = p.grad
                if grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                    continue
                if grad.grad_fn is not None:
                    grad.detach_()
                else:
                    grad.requires_grad_(False)
                with no_grad():
                    grad.zero_()

    def step(self, closure: Callable[[], Any] | None = None):
        """Update the parameters once from their ``.grad``; subclasses implement this.

        Args:
            closure: re-evaluates the model and returns the loss (needed by LBFGS,
                optional elsewhere); its result is returned.
        """
        raise NotImplementedError(f"{self._name} does not implement step()")

    @staticmethod
    def _evaluate(closure: Callable[[], Any] | None):
        """The closure's loss, computed with gradients enabled (``None`` without one)."""
        if closure is None:
            return None
        with enable_grad():
            return closure()

    # Hooks ---------------------------------------------------------------------------
    def register_step_pre_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(optimizer, args, kwargs)`` before each ``step``; it may return a
        new ``(args, kwargs)``. Returns a handle whose ``remove()`` unregisters it."""
        return RemovableHandle(self._step_pre_hooks, hook)

    def register_step_post_hook(self, hook: Callable) -> RemovableHandle:
        """Call ``hook(optimizer, args, kwargs)`` after each ``step``."""
        return RemovableHandle(self._step_post_hooks, hook)

    # State dicts ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The optimizer's state in PyTorch's format::

            {"state": {index: {"step": tensor, "exp_avg": tensor, ...}},
             "param_groups": [{"lr": ..., ..., "params": [index, ...]}]}

        Parameters are numbered in the order the groups list them. The tensors are the
        optimizer's own (not copies), as in PyTorch; save or deep-copy the result.
        """
        index: dict[int, int] = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            ids = []
            for p in group["params"]:
                ids.append(index.setdefault(id(p), len(index)))
            packed["params"] = ids
            groups.append(packed)
        state = {(index[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        """Load a state from :meth:`state_dict` (of this optimizer or PyTorch's), so that
        training continues exactly where it stopped. The groups must list as many
        parameters as this optimizer's; hyperparameters are taken from the state dict.
        State tensors are copied (cast to each parameter's dtype, except the counters)."""
        if not isinstance(state_dict, dict) or not {"state", "param_groups"} <= set(state_dict):
            got = sorted(state_dict) if isinstance(state_dict, dict) else type(state_dict).__name__
            raise OptimizerError(f"{self._name}.load_state_dict: expected a dict with 'state' "
                                 f"and 'param_groups', got {got}")
        saved_groups = state_dict["param_groups"]
        if len(saved_groups) != len(self.param_groups):
            raise OptimizerError(f"{self._name}.load_state_dict: loaded state dict has "
                                 f"{len(saved_groups)} parameter groups, but the optimizer "
                                 f"has {len(self.param_groups)}")
        for i, (group, saved) in enumerate(zip(self.param_groups, saved_groups)):
            if len(saved["params"]) != len(group["params"]):
                raise OptimizerError(f"{self._name}.load_state_dict: loaded parameter group "
                                     f"{i} has {len(saved['params'])} parameters, but the "
                                     f"optimizer's group {i} has {len(group['params'])}")
        by_index = {}
        for group, saved in zip(self.param_groups, saved_groups):
            for index, p in zip(saved["params"], group["params"]):
                by_index[index] = p

        state: defaultdict = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if isinstance(key, str) and key.isdigit():
                key = int(key)  # JSON turns the integer keys into strings
            p = by_index.get(key)
            if p is None:
                state[key] = copy.deepcopy(value)
            else:
                state[p] = {k: _cast_state(p, k, v) for k, v in value.items()}

        groups = []
        for group, saved in zip(self.param_groups, saved_groups):
            new = copy.deepcopy({k: v for k, v in saved.items() if k != "params"})
            if "param_names" in group:
                new["param_names"] = group["param_names"]
            for key, default in self.defaults.items():
                new.setdefault(key, default)
            new["params"] = group["params"]
            groups.append(new)
        self.state = state
        self.param_groups = groups

    def __repr__(self) -> str:
        lines = [self._name + " ("]
        for i, group in enumerate(self.param_groups):
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


# Scalar bookkeeping kept in the step dtype. (PyTorch casts NAdam's mu_product to the
# parameter's dtype on load, so its resumed runs drift from uninterrupted ones; ember's
# continue identically.)
_COUNTERS = ("step", "mu_product")


def _cast_state(p: Tensor, key: str, value):
    """A loaded state entry for parameter ``p``: tensors copied onto ``p``'s device, in
    ``p``'s dtype (the ``step`` and ``mu_product`` counters keep their own dtype and stay
    on the CPU, as PyTorch keeps them); containers converted element by element."""
    if isinstance(value, Tensor):
        if key in _COUNTERS:
            return value.detach().to("cpu", copy=True)
        dtype = p.dtype if p.is_floating_point() else value.dtype
        return value.detach().to(device=p.device, dtype=dtype, copy=True)
    if key == "step" and isinstance(value, (int, float)):
        return _tensor(float(value), dtype=scalar_dtype())
    if isinstance(value, dict):
        return {k: _cast_state(p, k, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(p, key, v) for v in value)
    return value


def check_non_negative(owner: str, group: dict[str, Any], *keys: str) -> None:
    """Raise unless each ``group[key]`` is a number >= 0 (NaN fails too)."""
    for key in keys:
        value = group[key]
        if not value >= 0:
            what = "learning rate" if key == "lr" else key
            raise OptimizerError(f"{owner}: invalid {what} {value!r}; expected a value >= 0")


def check_betas(owner: str, betas) -> None:
    """Raise unless ``betas`` is a pair of numbers in [0, 1)."""
    if len(betas) != 2:
        raise OptimizerError(f"{owner}: betas must be a pair (beta1, beta2), got {betas!r}")
    for i, beta in enumerate(betas):
        if not 0.0 <= beta < 1.0:
            raise OptimizerError(f"{owner}: invalid beta parameter at index {i}: {beta!r}; "
                                 "expected 0 <= beta < 1")


def check_unsupported(owner: str, group: dict[str, Any], *flags: str) -> None:
    """Raise for PyTorch options that select implementations ember does not have
    (``fused``, ``capturable``, ``differentiable``); False/None is accepted."""
    for flag in flags:
        if group.get(flag):
            raise NotImplementedError(f"{owner}: {flag}=True is not supported by ember; "
                                      f"leave {flag} at its default")
