"""``gradcheck`` and ``gradgradcheck``: analytical Jacobians (from vector-Jacobian
products) against numerical ones (central finite differences), as in PyTorch."""
from __future__ import annotations

import warnings

import numpy as np

from ..errors import EmberError

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]


class GradcheckError(EmberError):
    """Raised by :func:`gradcheck` and :func:`gradgradcheck` when a check fails."""


def gradcheck(func, inputs, *, eps: float = 1e-6, atol: float = 1e-5, rtol: float = 1e-3,
              raise_exception: bool = True, nondet_tol: float = 0.0,
              check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
              check_batched_grad: bool = False, check_batched_forward_grad: bool = False,
              check_forward_ad: bool = False, check_backward_ad: bool = True,
              fast_mode: bool = False, masked: bool | None = None) -> bool:
    """Check the gradients of ``func`` at ``inputs`` against finite differences.

    For every output and every input that requires grad, the Jacobian built from
    vector-Jacobian products (one backward pass per output element) must be close to
    the one from central differences, ``|analytical - numerical| <= atol + rtol *
    |numerical|``. Inputs should be float64: in lower precision the finite differences
    are mostly rounding error.

    Args:
        func: takes the inputs, returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of arguments; tensors with ``requires_grad=True``
            are differentiated.
        eps: the finite-difference step.
        raise_exception: raise :class:`GradcheckError` on failure (else return False).
        nondet_tol: how far two backward passes with the same input and gradient may
            differ (0: they must agree exactly).
        check_undefined_grad: also backpropagate a zero gradient from each output alone
            (so multi-output ops see missing gradients) and require zero gradients.
        check_grad_dtypes: require each gradient to have its input's dtype.
        fast_mode: compare a random projection ``v^T J u`` instead of the whole
            Jacobian (two function calls per input instead of two per element).

    >>> x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradcheck(ember.sin, (x,))
    True
    """
    _refuse(check_batched_grad=check_batched_grad,
            check_batched_forward_grad=check_batched_forward_grad,
            check_forward_ad=check_forward_ad, masked=masked)
    args = _as_tuple(inputs)
    try:
        _gradcheck(func, args, eps, atol, rtol, nondet_tol, check_undefined_grad,
                   check_grad_dtypes, check_backward_ad, fast_mode)
    except GradcheckError:
        if raise_exception:
            raise
        return False
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps: float = 1e-6, atol: float = 1e-5,
                  rtol: float = 1e-3, gen_non_contig_grad_outputs: bool = False,
                  raise_exception: bool = True, nondet_tol: float = 0.0,
                  check_undefined_grad: bool = True, check_grad_dtypes: bool = False,
                  check_batched_grad: bool = False, check_fwd_over_rev: bool = False,
                  check_rev_over_rev: bool = True, fast_mode: bool = False,
                  masked: bool = False) -> bool:
    """Check second-order gradients: :func:`gradcheck` of the map
    ``(inputs, grad_outputs) -> vjp(func, inputs)(grad_outputs)``.

    Args:
        grad_outputs: the output gradients to differentiate through (random in
            [-1, 1) with ``requires_grad=True`` when not given).
        gen_non_contig_grad_outputs: make the random grad_outputs non-contiguous.
        (the rest as in :func:`gradcheck`)

    >>> x = ember.randn(3, dtype=ember.float64, requires_grad=True)
    >>> ember.autograd.gradgradcheck(lambda t: (t ** 3).sum(), (x,))
    True
    """
    _refuse(check_batched_grad=check_batched_grad, check_fwd_over_rev=check_fwd_over_rev,
            masked=masked)
    if not check_rev_over_rev:
        return True
    from ..tensor import Tensor
    from .grad_mode import enable_grad
    from . import grad as autograd_grad
    args = _as_tuple(inputs)
    if grad_outputs is None:
        with enable_grad():
            outputs = _differentiable_outputs(func(*args))
        rng = np.random.default_rng(0)
        grad_outputs = tuple(_random_like(o, rng, gen_non_contig_grad_outputs)
                             for o in outputs)
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_out = len(grad_outputs)

    def grads_of_func(*all_args):
        input_args, cotangents = all_args[:len(all_args) - n_out], all_args[len(all_args) - n_out:]
        outputs = _differentiable_outputs(func(*input_args))
        diff = [a for a in input_args if isinstance(a, Tensor) and a.requires_grad]
        pairs = [(o, g) for o, g in zip(outputs, cotangents) if g is not None]
        if not pairs or not diff:
            return ()
        grads = autograd_grad([o for o, _ in pairs], diff, [g for _, g in pairs],
                              create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    return gradcheck(grads_of_func, args + tuple(grad_outputs), eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, fast_mode=fast_mode)


# The check ------------------------------------------------------------------------------
def _gradcheck(func, args, eps, atol, rtol, nondet_tol, check_undefined_grad,
               check_grad_dtypes, check_backward_ad, fast_mode):
    from ..tensor import Tensor
    from .grad_mode import enable_grad
    diff = [i for i, a in enumerate(args) if isinstance(a, Tensor) and a.requires_grad]
    if not diff:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of the them have requires_grad=True.")
    for n, i in enumerate(diff):
        if args[i].dtype.name != "float64":
            warnings.warn(f"Input #{n} requires gradient and is not a double precision "
                          "floating point. This check will likely fail if all the inputs "
                          "are not of double precision floating point.", stacklevel=3)
    if not check_backward_ad:
        return
    with enable_grad():
        outputs = tuple(o for o in _as_tuple(func(*args)) if isinstance(o, Tensor))
    if fast_mode:
        _check_projected(func, args, diff, outputs, eps, atol, rtol, nondet_tol)
    else:
        _check_jacobians(func, args, diff, outputs, eps, atol, rtol, nondet_tol,
                         check_grad_dtypes)
    if check_undefined_grad:
        _check_undefined_grad(args, diff, outputs)


def _check_jacobians(func, args, diff, outputs, eps, atol, rtol, nondet_tol,
                     check_grad_dtypes):
    numerical = [_numerical_jacobian(func, args, i, eps) for i in diff]  # [input][output]
    for j, out in enumerate(outputs):
        if not out.requires_grad:
            for n in range(len(diff)):
                if np.abs(numerical[n][j]).max(initial=0.0) > atol:
                    raise GradcheckError(
                        f"Numerical gradient for function expected to be zero: output {j} "
                        f"does not require grad but depends on input {n}\n"
                        f"numerical:{_show(numerical[n][j])}")
            continue
        analytical = _analytical_jacobian(args, diff, out, j, nondet_tol, check_grad_dtypes)
        for n in range(len(diff)):
            a, num = analytical[n], numerical[n][j]
            if not np.allclose(a, num, rtol=rtol, atol=atol):
                raise GradcheckError(
                    f"Jacobian mismatch for output {j} with respect to input {n},\n"
                    f"numerical:{_show(num)}\nanalytical:{_show(a)}\n")


def _numerical_jacobian(func, args, index, eps):
    """d outputs / d args[index] by central differences: one (in_numel, out_numel)
    array per output."""
    x = args[index]
    base = x.detach()._data.copy()
    flat = base.reshape(-1)
    columns = None
    for k in range(flat.size):
        orig = flat[k].item()
        flat[k] = orig + eps
        plus = _outputs_at(func, args, index, base)
        flat[k] = orig - eps
        minus = _outputs_at(func, args, index, base)
        flat[k] = orig
        if columns is None:
            columns = [np.zeros((flat.size, p.size)) for p in plus]
        for col, p, m in zip(columns, plus, minus):
            col[k] = (p - m) / (2 * eps)
    if columns is None:  # an empty input
        columns = [np.zeros((0, p.size)) for p in _outputs_at(func, args, index, base)]
    return columns


def _outputs_at(func, args, index, data):
    """The outputs (flat float64 arrays) with ``args[index]`` replaced by ``data``."""
    from ..tensor import Tensor
    from .grad_mode import enable_grad
    x = args[index]
    moved = Tensor._make(data.copy(), x.device, requires_grad=x.requires_grad)
    with enable_grad():  # func may itself differentiate (gradgradcheck)
        outs = _as_tuple(func(*args[:index], moved, *args[index + 1:]))
    return [np.asarray(o.detach(), dtype=np.float64).reshape(-1)
            for o in outs if isinstance(o, Tensor)]


def _analytical_jacobian(args, diff, out, j, nondet_tol, check_grad_dtypes):
    """d out / d inputs from one VJP per output element, each run twice to check that
    backward is deterministic (reentrant)."""
    from ..ops.creation import zeros_like
    from . import grad as autograd_grad
    inputs = [args[i] for i in diff]
    jac = [np.zeros((t.numel(), out.numel())) for t in inputs]
    for k in range(out.numel()):
        onehot = zeros_like(out).detach()
        onehot._data.reshape(-1)[k] = 1
        first = autograd_grad(out, inputs, onehot, retain_graph=True, allow_unused=True)
        again = autograd_grad(out, inputs, onehot, retain_graph=True, allow_unused=True)
        for n, (t, g, g2) in enumerate(zip(inputs, first, again)):
            if g is None:
                continue
            if tuple(g.shape) != tuple(t.shape):
                raise GradcheckError(f"Gradient has shape mismatch for output {j} with "
                                     f"respect to input {n}: got {tuple(g.shape)}, expected "
                                     f"{tuple(t.shape)}")
            if check_grad_dtypes and g.dtype is not t.dtype:
                raise GradcheckError(f"Gradient has dtype mismatch for output {j} with "
                                     f"respect to input {n}: got {g.dtype.name}, expected "
                                     f"{t.dtype.name}")
            col = np.asarray(g.detach(), dtype=np.float64).reshape(-1)
            col2 = np.asarray(g2.detach(), dtype=np.float64).reshape(-1)
            if np.abs(col - col2).max(initial=0.0) > nondet_tol:
                raise GradcheckError(
                    "Backward is not reentrant, i.e., running backward with same input and "
                    "grad_output multiple times gives different values, although analytical "
                    "gradient matches numerical gradient. The tolerance for nondeterminism "
                    f"was {nondet_tol}.")
            jac[n][:, k] = col
    return jac


def _check_projected(func, args, diff, outputs, eps, atol, rtol, nondet_tol):
    """Fast mode: ``v^T J u`` for random unit vectors u (per input), v (per output)."""
    from ..tensor import Tensor
    from . import grad as autograd_grad
    rng = np.random.default_rng(0)
    us = []
    for i in diff:
        u = rng.standard_normal(args[i].numel())
        us.append(u / max(np.linalg.norm(u), 1e-300))
    vs = []
    for o in outputs:
        v = rng.standard_normal(o.numel())
        vs.append(v / max(np.linalg.norm(v), 1e-300))
    for n, (i, u) in enumerate(zip(diff, us)):
        base = args[i].detach()._data
        shift = args[i].device.backend.asarray(u.reshape(base.shape).astype(base.dtype) * eps)
        plus = _outputs_at(func, args, i, base + shift)
        minus = _outputs_at(func, args, i, base - shift)
        for j, out in enumerate(outputs):
            numerical = float(vs[j] @ ((plus[j] - minus[j]) / (2 * eps)))
            analytical = 0.0
            if out.requires_grad:
                v = Tensor._make(vs[j].reshape(tuple(out.shape)).astype(out.dtype.np),
                                 out.device)
                firsts = [autograd_grad(out, [args[i]], v, retain_graph=True,
                                        allow_unused=True)[0] for _ in range(2)]
                if firsts[0] is not None:
                    g = [np.asarray(f.detach(), dtype=np.float64).reshape(-1) for f in firsts]
                    if np.abs(g[0] - g[1]).max(initial=0.0) > nondet_tol:
                        raise GradcheckError(
                            "Backward is not reentrant, i.e., running backward with same "
                            "input and grad_output multiple times gives different values. "
                            f"The tolerance for nondeterminism was {nondet_tol}.")
                    analytical = float(g[0] @ u)
            if not np.isclose(analytical, numerical, rtol=rtol, atol=atol):
                raise GradcheckError(
                    f"Jacobian mismatch for output {j} with respect to input {n},\n"
                    f"numerical:{numerical}\nanalytical:{analytical}\n"
                    "(fast mode compares v^T J u for random unit vectors u and v; run with "
                    "fast_mode=False to see the whole Jacobians)\n")


def _check_undefined_grad(args, diff, outputs):
    """Backpropagate zeros from each output alone: the other outputs of a multi-output
    op then have no gradient at all, which its VJP must handle (as zeros)."""
    from ..ops.creation import zeros_like
    from . import grad as autograd_grad
    inputs = [args[i] for i in diff]
    for j, out in enumerate(outputs):
        if not out.requires_grad:
            continue
        try:
            grads = autograd_grad(out, inputs, zeros_like(out), retain_graph=True,
                                  allow_unused=True)
        except Exception as exc:
            raise GradcheckError(
                f"Expected backward function to handle undefined output grads: backward "
                f"from output {j} alone failed with {type(exc).__name__}: {exc}") from exc
        for n, g in enumerate(grads):
            if g is not None and np.any(np.asarray(g.detach()) != 0):
                raise GradcheckError(
                    "Expected all input grads to be zero when the output grads are zero or "
                    f"undefined, but input {n}'s gradient from output {j} is {_show(g)}")


# Helpers --------------------------------------------------------------------------------
def _as_tuple(x) -> tuple:
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _differentiable_outputs(out) -> tuple:
    from ..tensor import Tensor
    return tuple(o for o in _as_tuple(out) if isinstance(o, Tensor) and o.requires_grad)


def _random_like(t, rng, noncontiguous: bool):
    from ..tensor import Tensor
    shape = tuple(t.shape)
    data = rng.uniform(-1.0, 1.0, shape + ((2,) if noncontiguous else ()))
    data = data.astype(t.dtype.np)
    if noncontiguous:
        data = data[..., 0]
    return Tensor._make(t.device.backend.asarray(data), t.device, requires_grad=True)


def _show(a) -> str:
    from ..tensor import Tensor
    if isinstance(a, Tensor):
        return repr(a.detach())
    return repr(Tensor._make(np.ascontiguousarray(a)))


def _refuse(**flags):
    for name, value in flags.items():
        if value:
            raise NotImplementedError(f"gradcheck: {name}=True is not supported by ember "
                                      "(no forward-mode AD, batching or masked tensors)")
