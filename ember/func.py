"""Function transforms in the style of ``torch.func``: ``grad``, ``grad_and_value``,
``vjp``, ``jvp``, ``jacrev``, ``jacfwd``, ``hessian``.

They are written on the tape (``ember.autograd.grad`` with ``create_graph=True``), so
they compose: ``grad(grad(f))``, ``jacfwd(jacrev(f))``. Each call differentiates with
respect to fresh handles on its arguments, so only the arguments it was asked about
count, not other uses of the same tensors in ``func``. A result keeps a graph only when
it depends on a tensor that required grad outside the transform (an argument or a
closure variable, or a handle of an enclosing transform); otherwise it is detached, so
plain inputs give plain outputs. Arguments may be tensors or (nested) tuples, lists and
dicts of tensors. ``jvp`` and ``jacfwd`` use the double-VJP trick: the VJP is linear in
its cotangent ``u``, and differentiating ``u -> vjp(u)`` gives the JVP.
"""
from __future__ import annotations

import functools
import threading
import weakref
from typing import Callable

from .autograd import grad_mode
from .autograd.graph import reachable_leaves
from .errors import EmberError

__all__ = ["grad", "grad_and_value", "vjp", "jvp", "jacrev", "jacfwd", "hessian",
           "functional_call", "vmap", "stack_module_state", "linearize"]


# Pytrees: tensors inside (nested) tuples, lists and dicts -------------------------------
def _flatten(tree):
    """``(leaves, spec)``; ``_unflatten(spec, leaves)`` rebuilds the tree."""
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


def _unflatten(spec, leaves):
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


# Levels: which tensors belong to which transform call ------------------------------------
class _Depth(threading.local):
    value = 0


_depth = _Depth()
_HANDLES: dict = {}  # id(handle tensor) -> (weakref, level of the transform that made it)


def _track(t, level: int):
    key = id(t)

    def forget(ref, key=key):
        if _HANDLES.get(key, (None,))[0] is ref:
            del _HANDLES[key]
    _HANDLES[key] = (weakref.ref(t, forget), level)


class _Level:
    """Runs the user's function one level deeper, so transforms inside it are told
    apart from this one."""

    def __enter__(self) -> int:
        self.level = _depth.value
        _depth.value += 1
        self._grad = grad_mode.enable_grad().__enter__()
        return self.level

    def __exit__(self, *exc):
        self._grad.__exit__(*exc)
        _depth.value = self.level
        return False


def _handle(x, level: int, what: str):
    """A tensor to differentiate with respect to, standing for argument ``x``."""
    from .tensor import Tensor
    if not isinstance(x, Tensor):
        raise EmberError(f"{what}: expected the differentiated arguments to be tensors (or "
                         f"tuples, lists and dicts of tensors), got {type(x).__name__}")
    if not x.dtype.is_floating_point:
        raise EmberError(f"{what}: can only differentiate with respect to floating point "
                         f"tensors, got dtype {x.dtype.name}")
    if x.requires_grad:
        h = x.view_as(x)  # stays connected to x, for enclosing transforms and autograd
    else:
        h = x.detach().requires_grad_()
    _track(h, level)
    return h


def _external(tensors, level: int) -> bool:
    """Whether the graph of ``tensors`` reaches a tensor requiring grad that does not
    belong to this transform call (or to a transform nested in it)."""
    for leaf in reachable_leaves(tensors):
        entry = _HANDLES.get(id(leaf))
        if entry is None or entry[1] < level:
            return True
    return False


def _finish(tree, level: int):
    """Detach the tensors of ``tree`` that depend on nothing outside this call."""
    from .tensor import Tensor
    leaves, spec = _flatten(tree)
    out = [t.detach() if isinstance(t, Tensor) and t.requires_grad
           and not _external([t], level) else t for t in leaves]
    return _unflatten(spec, out)


# The core: outputs and a pullback --------------------------------------------------------
def _argnums(argnums, n_args: int, what: str) -> tuple:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    if not nums:
        raise EmberError(f"{what}: argnums must be non-empty")
    for a in nums:
        if not isinstance(a, int) or not -n_args <= a < n_args:
            raise EmberError(f"{what}: argnums {argnums!r} out of range for {n_args} "
                             "positional arguments")
    return tuple(a % n_args for a in nums)


def _linearize(func, args, nums, has_aux, level, what):
    """Run ``func`` on handles of ``args[nums]``: returns (output tree, aux, the handle
    trees per argnum, the flat handles)."""
    args = list(args)
    handle_trees, handles = [], []
    for a in nums:
        leaves, spec = _flatten(args[a])
        hs = [_handle(x, level, what) for x in leaves]
        handles.extend(hs)
        args[a] = _unflatten(spec, hs)
        handle_trees.append(args[a])
    with _Level():
        result = func(*args)
    aux = None
    if has_aux:
        if not (isinstance(result, tuple) and len(result) == 2):
            raise EmberError(f"{what}(f, has_aux=True): f must return a tuple (output, aux), "
                             f"got {type(result).__name__}")
        result, aux = result
    return result, aux, handle_trees, handles


def _pullback(outputs, cotangents, handles):
    """VJP of the flat ``outputs`` with ``cotangents``, a gradient (never None) per
    handle, recorded so it can be differentiated again."""
    from . import autograd
    from .ops.creation import zeros_like
    pairs = [(o, c) for o, c in zip(outputs, cotangents) if o.requires_grad]
    grads = [None] * len(handles)
    if pairs:
        grads = autograd.grad([o for o, _ in pairs], handles, [c for _, c in pairs],
                              retain_graph=True, create_graph=True, allow_unused=True)
    return [zeros_like(h).detach() if g is None else g for h, g in zip(handles, grads)]


def _check_outputs(tree, what):
    from .tensor import Tensor
    leaves, spec = _flatten(tree)
    for t in leaves:
        if not isinstance(t, Tensor):
            raise EmberError(f"{what}: expected f to return tensors (or tuples, lists and "
                             f"dicts of tensors), got {type(t).__name__}")
    return leaves, spec


def _regroup(flat, handle_trees):
    """Flat per-handle values back into one tree per argnum."""
    out, start = [], 0
    for tree in handle_trees:
        leaves, spec = _flatten(tree)
        out.append(_unflatten(spec, flat[start:start + len(leaves)]))
        start += len(leaves)
    return out


# Public transforms -----------------------------------------------------------------------
def grad_and_value(func: Callable, argnums: int | tuple = 0, has_aux: bool = False) -> Callable:
    """Like :func:`grad`, but the new function returns ``(gradient, value)`` (and
    ``(gradient, (value, aux))`` with ``has_aux``).

    >>> g, v = ember.func.grad_and_value(lambda x: (x ** 2).sum())(ember.tensor([1.0, 2.0]))
    """
    @functools.wraps(func)
    def wrapper(*args):
        level = _depth.value
        nums = _argnums(argnums, len(args), "grad_and_value")
        out, aux, trees, handles = _linearize(func, args, nums, has_aux, level,
                                              "grad_and_value")
        from .tensor import Tensor
        if not isinstance(out, Tensor) or out.ndim != 0:
            got = f"tensor with {out.ndim} dims" if isinstance(out, Tensor) else \
                type(out).__name__
            raise EmberError(f"grad_and_value(f)(*args): Expected f(*args) to return a "
                             f"scalar Tensor, got {got}. Maybe you wanted to use the vjp or "
                             "jacrev APIs instead?")
        from .ops.creation import ones_like
        with grad_mode.enable_grad():
            flat = _pullback([out], [ones_like(out).detach()], handles)
        grads = _regroup(flat, trees)
        g = grads[0] if isinstance(argnums, int) else tuple(grads)
        value = out if not has_aux else (out, aux)
        return _finish(g, level), _finish(value, level)
    return wrapper


def grad(func: Callable, argnums: int | tuple = 0, has_aux: bool = False) -> Callable:
    """A function computing the gradient of ``func`` (which returns a 0-d tensor) with
    respect to its argument(s) ``argnums``.

    Args:
        argnums: an int, or a tuple of ints (then a tuple of gradients is returned).
        has_aux: ``func`` returns ``(output, aux)``; the new function returns
            ``(gradient, aux)``.

    >>> ember.func.grad(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0]))
    tensor([ 3., 12.])
    """
    inner = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args):
        g, value = inner(*args)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func: Callable, *primals, has_aux: bool = False):
    """``func(*primals)`` and a function ``vjp_fn(cotangents)`` that returns the
    vector-Jacobian products, a tuple with one entry per primal. ``vjp_fn`` may be
    called many times.

    >>> out, vjp_fn = ember.func.vjp(ember.sin, ember.tensor([0.0, 1.0]))
    >>> vjp_fn(ember.ones(2))
    (tensor([1.0000, 0.5403]),)
    """
    level = _depth.value
    out, aux, trees, handles = _linearize(func, primals, tuple(range(len(primals))),
                                          has_aux, level, "vjp")
    out_leaves, out_spec = _check_outputs(out, "vjp")

    def vjp_fn(cotangents):
        cts, ct_spec = _flatten(cotangents)
        if ct_spec != out_spec:
            raise EmberError("vjp_fn: expected cotangents with the structure of the "
                             "output of f")
        for o, c in zip(out_leaves, cts):
            if tuple(c.shape) != tuple(o.shape):
                raise EmberError(f"vjp_fn: cotangent of shape {tuple(c.shape)} for an output "
                                 f"of shape {tuple(o.shape)}")
        with grad_mode.enable_grad():
            flat = _pullback(out_leaves, cts, handles)
        return _finish(tuple(_regroup(flat, trees)), level)

    result = (_finish(out, level), vjp_fn)
    return result + (_finish(aux, level),) if has_aux else result


def _forward_columns(out_leaves, handles, tangent_sets, level):
    """For each set of tangents (one per handle), the JVP of the outputs, by the
    double-VJP trick; one list of output-shaped tensors per set."""
    from . import autograd
    from .ops.creation import zeros_like
    us = []
    for o in out_leaves:
        u = zeros_like(o).detach().requires_grad_()
        _track(u, level)
        us.append(u)
    with grad_mode.enable_grad():
        pulled = _pullback(out_leaves, us, handles)  # linear in us
        linked = [i for i, p in enumerate(pulled) if p.requires_grad]
        columns = []
        for tangents in tangent_sets:
            if not linked:
                columns.append([zeros_like(o).detach() for o in out_leaves])
                continue
            gs = autograd.grad([pulled[i] for i in linked], us,
                               [tangents[i] for i in linked], retain_graph=True,
                               create_graph=True, allow_unused=True)
            columns.append([zeros_like(o).detach() if g is None else g
                            for o, g in zip(out_leaves, gs)])
    return columns


def jvp(func: Callable, primals: tuple, tangents: tuple, *, strict: bool = False,
        has_aux: bool = False):
    """``(func(*primals), J @ tangents)``: the Jacobian-vector product at ``primals``.

    >>> ember.func.jvp(ember.sin, (ember.tensor([0.0]),), (ember.tensor([2.0]),))
    (tensor([0.]), tensor([2.]))
    """
    if not isinstance(primals, tuple) or not isinstance(tangents, tuple):
        raise EmberError("jvp: expected primals and tangents to be tuples")
    p_leaves, p_spec = _flatten(primals)
    t_leaves, t_spec = _flatten(tangents)
    if p_spec != t_spec:
        raise EmberError("jvp: expected tangents with the same structure as primals")
    for p, t in zip(p_leaves, t_leaves):
        if tuple(p.shape) != tuple(t.shape):
            raise EmberError(f"jvp: tangent of shape {tuple(t.shape)} for a primal of shape "
                             f"{tuple(p.shape)}")
    level = _depth.value
    out, aux, _, handles = _linearize(func, primals, tuple(range(len(primals))), has_aux,
                                      level, "jvp")
    out_leaves, out_spec = _check_outputs(out, "jvp")
    (column,) = _forward_columns(out_leaves, handles, [t_leaves], level)
    result = (_finish(out, level), _finish(_unflatten(out_spec, column), level))
    return result + (_finish(aux, level),) if has_aux else result


def _jacobian(func, argnums, has_aux, what, forward):
    @functools.wraps(func)
    def wrapper(*args):
        from .ops.creation import zeros_like
        from .ops.shape import stack
        level = _depth.value
        nums = _argnums(argnums, len(args), what)
        out, aux, trees, handles = _linearize(func, args, nums, has_aux, level, what)
        out_leaves, out_spec = _check_outputs(out, what)
        # jac[i][k]: d out_leaves[i] / d handles[k], shaped out.shape + handle.shape
        if forward:
            tangent_sets = []
            for k, h in enumerate(handles):
                for e in range(h.numel()):
                    ts = [zeros_like(x).detach() for x in handles]
                    ts[k]._data.reshape(-1)[e] = 1
                    tangent_sets.append(ts)
            columns = _forward_columns(out_leaves, handles, tangent_sets, level)
            jac, start = [[None] * len(handles) for _ in out_leaves], 0
            for k, h in enumerate(handles):
                cols = columns[start:start + h.numel()]
                start += h.numel()
                for i, o in enumerate(out_leaves):
                    j = stack([c[i] for c in cols], -1) if cols else \
                        o.new_zeros(tuple(o.shape) + (0,))
                    jac[i][k] = j.reshape(tuple(o.shape) + tuple(h.shape))
        else:
            jac = []
            with grad_mode.enable_grad():
                for i, o in enumerate(out_leaves):
                    rows = []
                    for e in range(o.numel()):
                        ct = [zeros_like(x).detach() for x in out_leaves]
                        ct[i]._data.reshape(-1)[e] = 1
                        rows.append(_pullback(out_leaves, ct, handles))
                    per_handle = []
                    for k, h in enumerate(handles):
                        j = stack([r[k] for r in rows], 0) if rows else \
                            h.new_zeros((0,) + tuple(h.shape))
                        per_handle.append(j.reshape(tuple(o.shape) + tuple(h.shape)))
                    jac.append(per_handle)
        per_output = []
        for i in range(len(out_leaves)):
            groups = _regroup(jac[i], trees)
            per_output.append(groups[0] if isinstance(argnums, int) else tuple(groups))
        result = _finish(_unflatten(out_spec, per_output), level)
        return (result, _finish(aux, level)) if has_aux else result
    return wrapper


def jacrev(func: Callable, argnums: int | tuple = 0, *, has_aux: bool = False) -> Callable:
    """A function computing the Jacobian of ``func`` with respect to argument(s)
    ``argnums`` by reverse mode (one VJP per output element). The Jacobian of an output
    of shape ``S`` with respect to an input of shape ``T`` has shape ``S + T``.

    >>> ember.func.jacrev(ember.sin)(ember.tensor([0.0, 1.0]))
    tensor([[1.0000, 0.0000],
            [0.0000, 0.5403]])
    """
    return _jacobian(func, argnums, has_aux, "jacrev", forward=False)


def jacfwd(func: Callable, argnums: int | tuple = 0, has_aux: bool = False) -> Callable:
    """Like :func:`jacrev`, column by column (one JVP per input element, each a VJP of
    the VJP); cheaper than jacrev when the inputs are smaller than the outputs.

    >>> ember.func.jacfwd(ember.sin)(ember.tensor([0.0, 1.0]))
    tensor([[1.0000, 0.0000],
            [0.0000, 0.5403]])
    """
    return _jacobian(func, argnums, has_aux, "jacfwd", forward=True)


def hessian(func: Callable, argnums: int | tuple = 0) -> Callable:
    """A function computing the Hessian of ``func`` (``jacfwd(jacrev(func))``).

    >>> ember.func.hessian(lambda x: (x ** 3).sum())(ember.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs: dict | None = None,
                    *, tie_weights: bool = True, strict: bool = False):
    """Call ``module(*args, **kwargs)`` with its parameters and buffers replaced by the
    tensors of ``parameter_and_buffer_dicts`` (a dict by dotted name, or a tuple of
    dicts), restored afterwards; with :func:`grad` this differentiates a module with
    respect to its parameters. See :mod:`ember.nn.utils.stateless` for the details
    (``tie_weights``, ``strict``, parametrized modules).

    >>> model = ember.nn.Linear(3, 1)
    >>> params = dict(model.named_parameters())
    >>> loss = lambda p, x: ember.func.functional_call(model, p, (x,)).sum()
    >>> grads = ember.func.grad(loss)(params, ember.ones(2, 3))
    """
    from .nn.utils.stateless import _func_functional_call  # nn sits above func
    return _func_functional_call(module, parameter_and_buffer_dicts, args, kwargs,
                                 tie_weights=tie_weights, strict=strict)


from .func_vmap import linearize, stack_module_state, vmap  # noqa: E402,F401
