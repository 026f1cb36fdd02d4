"""Higher-level autograd on functions, as ``torch.autograd.functional``: ``vjp``,
``jvp``, ``jacobian``, ``hessian``, ``vhp`` and ``hvp``.

Each takes ``func`` and ``inputs`` (a tensor or a tuple of tensors) and differentiates
``func`` at ``inputs`` with :func:`ember.autograd.grad`. Results mirror the structure
of what was given: a tensor for a tensor, a tuple for a tuple (a Jacobian of a tuple of
outputs with respect to a tuple of inputs is a tuple of tuples). The forward-mode
products (``jvp``, ``hvp``, the ``"forward-mode"`` Jacobian) use the double-backward
trick, as PyTorch's versions do: a VJP is linear in its cotangent ``u``, and
differentiating ``u -> vjp(u)`` gives the JVP.

``create_graph=True`` keeps the graph of the results (they can be differentiated
again); otherwise they are detached. ``strict=True`` raises where an output does not
depend on an input instead of returning zeros.
"""
from __future__ import annotations

from typing import Callable

from ..errors import EmberError, EmberTypeError, EmberValueError
from . import grad_mode

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


# Inputs, outputs and results ----------------------------------------------------------
def _as_tuple(value, arg_name: str, fn_name: str) -> tuple[bool, tuple]:
    """(whether ``value`` was a tuple, ``value`` as a tuple of tensors)."""
    from ..tensor import Tensor
    is_tuple = isinstance(value, tuple)
    items = value if is_tuple else (value,)
    for i, el in enumerate(items):
        if not isinstance(el, Tensor):
            where = f"value at index {i}" if is_tuple else f"given {arg_name}"
            raise EmberTypeError(f"The {arg_name} given to {fn_name} must be either a Tensor "
                                 f"or a tuple of Tensors but the {where} has type {type(el)}.")
    return is_tuple, items


def _preprocess(inputs: tuple, create_graph: bool, need_graph: bool) -> tuple:
    """New tensor objects for ``inputs``, so uses of the same tensors captured by
    ``func`` are told apart from the arguments; connected to the originals only when
    the caller builds a graph (``create_graph``) through inputs that require grad."""
    return tuple(x.view_as(x) if create_graph and x.requires_grad
                 else x.detach().requires_grad_(need_graph) for x in inputs)


def _postprocess(results, create_graph: bool):
    """``results`` (a tuple of tensors, or of tuples of them) detached unless
    ``create_graph``."""
    if create_graph:
        return results
    return tuple(r.detach() if not isinstance(r, tuple) else _postprocess(r, False)
                 for r in results)


def _unpack(results, to_unpack):
    """Undo :func:`_as_tuple`: ``to_unpack`` is one flag, or (outputs, inputs) flags for
    a tuple of tuples."""
    if isinstance(to_unpack, tuple):
        outer, inner = to_unpack
        if not inner:
            results = tuple(r[0] for r in results)
        return results if outer else results[0]
    return results if to_unpack else results[0]


def _validate_v(v: tuple, other: tuple, is_other_tuple: bool) -> None:
    if len(v) != len(other):
        if is_other_tuple:
            raise EmberError(f"v is a tuple of invalid length: should be {len(other)} but got "
                             f"{len(v)}.")
        raise EmberError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, other)):
        if tuple(a.shape) != tuple(b.shape):
            where = f"Entry {i} in " if is_other_tuple else ""
            raise EmberError(f"{where}v has invalid size: should be {b.shape} but got "
                             f"{a.shape}.")


def _check_requires_grad(tensors: tuple, kind: str, strict: bool) -> None:
    """In strict mode: every tensor of ``tensors`` must depend on the inputs."""
    if not strict:
        return
    for i, t in enumerate(tensors):
        if t is None:
            raise EmberError(f"The output of the user-provided function is independent of "
                             f"input {i}. This is not allowed in strict mode.")
        if t.requires_grad:
            continue
        if kind == "hessian":
            raise EmberError(
                f"The hessian of the user-provided function with respect to input {i} is "
                "independent of the input. This is not allowed in strict mode. You should "
                "ensure that your function is thrice differentiable and that the hessian "
                "depends on the inputs.")
        if kind == "jacobian":
            raise EmberError(
                "While computing the hessian, found that the jacobian of the user-provided "
                f"function with respect to input {i} is independent of the input. This is not "
                "allowed in strict mode. You should ensure that your function is twice "
                "differentiable and that the jacobian depends on the inputs (this would be "
                "violated by a linear function for example).")
        if kind == "grad_inputs":
            raise EmberError(f"The gradient with respect to input {i} is independent of the "
                             "inputs of the user-provided function. This is not allowed in "
                             "strict mode.")
        raise EmberError(f"Output {i} of the user-provided function does not require "
                         "gradients. The outputs must be computed in a differentiable manner "
                         "from the input when running in strict mode.")


def _grad(outputs: tuple, inputs: tuple, grad_outputs=None, create_graph: bool = False,
          retain_graph: bool | None = None) -> tuple:
    """``autograd.grad`` over the outputs that require grad; None for every input
    when none does, and for inputs they do not reach."""
    from . import grad as autograd_grad
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs)
             if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return autograd_grad([o for o, _ in pairs], list(inputs), [g for _, g in pairs],
                         retain_graph=retain_graph, create_graph=create_graph,
                         allow_unused=True)


_INDEPENDENT = {
    "back": "The output of the user-provided function is independent of input {i}. This is "
            "not allowed in strict mode.",
    "back_trick": "The gradient with respect to the input is independent of entry {i} in the "
                  "grad_outputs when using the double backward trick to compute forward mode "
                  "gradients. This is not allowed in strict mode.",
    "double_back": "The jacobian of the user-provided function is independent of input {i}. "
                   "This is not allowed in strict mode.",
    "double_back_trick": "The hessian of the user-provided function is independent of entry "
                         "{i} in the grad_jacobian. This is not allowed in strict mode as it "
                         "prevents from using the double backward trick to replace forward "
                         "mode AD.",
}


def _fill_in_zeros(grads: tuple, refs: tuple, strict: bool, create_graph: bool,
                   stage: str) -> tuple:
    """Zeros shaped like ``refs[i]`` where ``grads[i]`` is None (or an error in strict
    mode)."""
    from ..ops.creation import zeros_like
    out = []
    for i, g in enumerate(grads):
        if g is None:
            if strict:
                raise EmberError(_INDEPENDENT[stage].format(i=i))
            g = zeros_like(refs[i])
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise EmberError(f"The {what} of the user-provided function is independent of "
                             f"input {i}. This is not allowed in strict mode when "
                             "create_graph=True.")
        out.append(g)
    return tuple(out)


def _v_or_default(v, others: tuple, is_others_tuple: bool, create_graph: bool,
                  fn_name: str, none_message: str) -> tuple | None:
    if v is None:
        if len(others) != 1 or others[0].numel() != 1:
            raise EmberError(none_message)
        return None
    _, v = _as_tuple(v, "v", fn_name)
    v = _preprocess(v, create_graph, need_graph=False)
    _validate_v(v, others, is_others_tuple)
    return v


# Products ---------------------------------------------------------------------------
def vjp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The vector-Jacobian product ``v^T J`` of ``func`` at ``inputs``.

    Args:
        func: takes the tensors of ``inputs`` and returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors.
        v: the vector(s), shaped like the outputs; may be omitted when ``func`` returns
            one single-element tensor.
        create_graph: keep the graph of the results, for higher-order derivatives.
        strict: raise where an output does not depend on an input (instead of zeros).

    Returns:
        ``(func_output, vjp)``, ``vjp`` shaped like ``inputs``.

    Example::

        >>> out, g = ember.autograd.functional.vjp(lambda x: x.exp().sum(),
        ...                                        ember.tensor([0.0, 1.0]))
        >>> g
        tensor([1.0000, 2.7183])
    """
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided "
                                              "function", "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        v = _v_or_default(v, outputs, is_outputs_tuple, create_graph, "vjp",
                          "The vector v can only be None if the user-provided function "
                          "returns a single Tensor with a single element.")
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _grad(outputs, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "back")
    return (_unpack(_postprocess(outputs, create_graph), is_outputs_tuple),
            _unpack(_postprocess(res, create_graph), is_inputs_tuple))


def jvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The Jacobian-vector product ``J v`` of ``func`` at ``inputs`` (by the
    double-backward trick).

    Args:
        v: the vector(s), shaped like ``inputs``; may be omitted when ``inputs`` is one
            single-element tensor.
        (the others as in :func:`vjp`)

    Returns:
        ``(func_output, jvp)``, ``jvp`` shaped like the outputs.

    Example::

        >>> ember.autograd.functional.jvp(ember.sin, ember.tensor([0.0]),
        ...                               ember.tensor([2.0]))
        (tensor([0.]), tensor([2.]))
    """
    from ..ops.creation import zeros_like
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        v = _v_or_default(v, inputs, is_inputs_tuple, create_graph, "jvp",
                          "The vector v can only be None if the input to the user-provided "
                          "function is a single Tensor with a single element.")
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided "
                                              "function", "jvp")
        _check_requires_grad(outputs, "outputs", strict)
        # the VJP is linear in these, so their (zero) values never matter
        us = tuple(zeros_like(o).requires_grad_() for o in outputs)
        grad_inputs = _grad(outputs, inputs, us, create_graph=True)
        _check_requires_grad(grad_inputs, "grad_inputs", strict)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _grad(grad_inputs, us, v, create_graph=create_graph)
        res = _fill_in_zeros(res, outputs, strict, create_graph, "back_trick")
    return (_unpack(_postprocess(outputs, create_graph), is_outputs_tuple),
            _unpack(_postprocess(res, create_graph), is_outputs_tuple))


# Jacobians and Hessians -------------------------------------------------------------
def _one_hot(ref, index: int):
    from ..ops.creation import zeros_like
    e = zeros_like(ref).detach()
    e._data.reshape(-1)[index] = 1
    return e


def _jacobian_reverse(outputs, inputs, create_graph, strict):
    """jac[i][k] = d outputs[i] / d inputs[k], one VJP per output element."""
    from ..ops.creation import zeros_like
    from ..ops.shape import stack
    jac = []
    for i, out in enumerate(outputs):
        rows = [[] for _ in inputs]
        for e in range(out.numel()):
            grads = _grad((out,), inputs, (_one_hot(out, e),), create_graph=create_graph,
                          retain_graph=True)
            for k, (g, x) in enumerate(zip(grads, inputs)):
                if g is None:
                    if strict:
                        raise EmberError(f"Output {i} of the user-provided function is "
                                         f"independent of input {k}. This is not allowed in "
                                         "strict mode.")
                    g = zeros_like(x)
                elif strict and create_graph and not g.requires_grad:
                    raise EmberError(f"The jacobian of the user-provided function is "
                                     f"independent of input {i}. This is not allowed in "
                                     "strict mode when create_graph=True.")
                rows[k].append(g)
        jac.append(tuple(
            stack(r, 0).reshape(tuple(out.shape) + tuple(x.shape)) if r else
            x.new_zeros(tuple(out.shape) + tuple(x.shape))
            for r, x in zip(rows, inputs)))
    return tuple(jac)


def _jacobian_forward(outputs, inputs):
    """The same Jacobian, one JVP (a VJP of the VJP) per input element."""
    from ..ops.creation import zeros_like
    from ..ops.shape import stack
    us = tuple(zeros_like(o).requires_grad_() for o in outputs)
    pulled = _grad(outputs, inputs, us, create_graph=True)
    linked = [(p, x) for p, x in zip(pulled, inputs) if p is not None]
    jac = [[None] * len(inputs) for _ in outputs]
    for k, x in enumerate(inputs):
        cols = []
        for e in range(x.numel()):
            tangents = [_one_hot(x, e) if y is x else zeros_like(y).detach()
                        for _, y in linked]
            col = _grad(tuple(p for p, _ in linked), us, tangents, retain_graph=True) \
                if linked else (None,) * len(us)
            cols.append([zeros_like(o) if c is None else c for c, o in zip(col, outputs)])
        for i, out in enumerate(outputs):
            shape = tuple(out.shape) + tuple(x.shape)
            jac[i][k] = stack([c[i] for c in cols], -1).reshape(shape) if cols else \
                out.new_zeros(shape)
    return tuple(tuple(row) for row in jac)


def jacobian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
             vectorize: bool = False, strategy: str = "reverse-mode"):
    """The Jacobian of ``func`` at ``inputs``.

    Args:
        func: takes the tensors of ``inputs``, returns a tensor or a tuple of tensors.
        inputs: a tensor or a tuple of tensors.
        create_graph: keep the graph of the Jacobian (to differentiate it again).
        strict: raise where an output does not depend on an input (instead of zeros).
        vectorize: accepted for PyTorch compatibility; ember computes the same rows
            either way.
        strategy: ``"reverse-mode"`` (a VJP per output element) or ``"forward-mode"``
            (a JVP per input element; needs ``vectorize=True``, as in PyTorch).

    Returns:
        For an output of shape ``S`` and an input of shape ``T``, a tensor of shape
        ``S + T``; a tuple of them for a tuple of inputs (or of outputs), and a tuple of
        tuples (indexed ``[output][input]``) for both.

    Example::

        >>> ember.autograd.functional.jacobian(lambda x: x ** 2, ember.tensor([1.0, 2.0]))
        tensor([[2., 0.],
                [0., 4.]])
    """
    if strategy not in ("forward-mode", "reverse-mode"):
        raise EmberValueError('Expected strategy to be either "forward-mode" or '
                              '"reverse-mode". Hint: If your function has more outputs than '
                              'inputs, "forward-mode" tends to be more performant. Otherwise, '
                              'prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError(
                "ember.autograd.functional.jacobian: `create_graph=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `create_graph=False` or `strategy="reverse-mode"`.')
        if strict:
            raise EmberError(
                "ember.autograd.functional.jacobian: `strict=True` and "
                '`strategy="forward-mode"` are not supported together (yet). Please either '
                'set `strict=False` or `strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or "
                                      "forward-over-reverse Hessian is only implemented for "
                                      "`vectorize=True`.")
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        inputs = _preprocess(inputs, create_graph, need_graph=True)
        outputs = func(*inputs)
        is_outputs_tuple, outputs = _as_tuple(outputs, "outputs of the user-provided "
                                              "function", "jacobian")
        _check_requires_grad(outputs, "outputs", strict)
        if vectorize and strict:
            raise EmberError("ember.autograd.functional.jacobian: `strict=True` and "
                             "`vectorized=True` are not supported together. Please either "
                             "set `strict=False` or `vectorize=False`.")
        if strategy == "forward-mode":
            jac = _jacobian_forward(outputs, inputs)
        else:
            jac = _jacobian_reverse(outputs, inputs, create_graph, strict)
    return _unpack(_postprocess(jac, create_graph), (is_outputs_tuple, is_inputs_tuple))


def _single_output(func, fn_name: str, strict: bool, squeeze: bool):
    """``func`` checked to return one single-element tensor (made 0-d with
    ``squeeze``)."""
    from ..tensor import Tensor

    def checked(*inp):
        out = func(*inp)
        is_tuple, outs = _as_tuple(out, "outputs of the user-provided function", fn_name)
        _check_requires_grad(outs, "outputs", strict)
        if is_tuple or not isinstance(out, Tensor):
            raise EmberError(f"The function given to {fn_name} should return a single Tensor")
        if out.numel() != 1:
            raise EmberError(f"The Tensor returned by the function given to {fn_name} should "
                             "contain a single element")
        return out.squeeze() if squeeze else out
    return checked


def hessian(func: Callable, inputs, create_graph: bool = False, strict: bool = False,
            vectorize: bool = False, outer_jacobian_strategy: str = "reverse-mode"):
    """The Hessian of a scalar function ``func`` at ``inputs`` (the Jacobian of its
    gradient).

    Args:
        func: returns a tensor with a single element.
        outer_jacobian_strategy: how the outer Jacobian is computed (see
            :func:`jacobian`'s ``strategy``); the inner one is reverse-mode.
        (the others as in :func:`jacobian`)

    Returns:
        For an input of shape ``T``, a tensor of shape ``T + T``; for a tuple of inputs,
        a tuple of tuples, ``[i][j]`` of shape ``inputs[i].shape + inputs[j].shape``.

    Example::

        >>> ember.autograd.functional.hessian(lambda x: (x ** 3).sum(),
        ...                                   ember.tensor([1.0, 2.0]))
        tensor([[ 6.,  0.],
                [ 0., 12.]])
    """
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("forward-mode", "reverse-mode"):
        raise EmberValueError('Expected strategy to be either "forward-mode" or '
                              '"reverse-mode".')
    scalar = _single_output(func, "hessian", strict, squeeze=True)

    def jac_func(*inp):
        jac = jacobian(scalar, inp, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(jac_func, inputs, create_graph=create_graph, strict=strict,
                   vectorize=vectorize, strategy=outer_jacobian_strategy)
    return _unpack(res, (is_inputs_tuple, is_inputs_tuple))


def _scalar_and_gradient(func, inputs, v, create_graph, strict, fn_name):
    """The shared start of vhp and hvp: (flags, inputs, v, outputs, gradient)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", fn_name)
    inputs = _preprocess(inputs, create_graph, need_graph=True)
    v = _v_or_default(v, inputs, is_inputs_tuple, create_graph, fn_name,
                      "The vector v can only be None if the input to the user-provided "
                      "function is a single Tensor with a single element.")
    outputs = _single_output(func, fn_name, strict, squeeze=False)(*inputs)
    jac = _grad((outputs,), inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict)
    return is_inputs_tuple, inputs, v, outputs, jac


def vhp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The vector-Hessian product ``v^T H`` of a scalar function ``func`` at ``inputs``.

    Args:
        v: shaped like ``inputs``; may be omitted when ``inputs`` is one single-element
            tensor.
        (the others as in :func:`vjp`)

    Returns:
        ``(func_output, vhp)``, ``vhp`` shaped like ``inputs``.

    Example::

        >>> ember.autograd.functional.vhp(lambda x: (x ** 3).sum(),
        ...                               ember.tensor([1.0, 2.0]), ember.ones(2))
        (tensor(9.), tensor([ 6., 12.]))
    """
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs, v, outputs, jac = _scalar_and_gradient(
            func, inputs, v, create_graph, strict, "vhp")
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _grad(jac, inputs, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "double_back")
    return (_postprocess((outputs,), create_graph)[0],
            _unpack(_postprocess(res, create_graph), is_inputs_tuple))


def hvp(func: Callable, inputs, v=None, create_graph: bool = False, strict: bool = False):
    """The Hessian-vector product ``H v`` of a scalar function ``func`` at ``inputs``
    (by the double-backward trick; equal to :func:`vhp` for a twice-differentiable
    function, whose Hessian is symmetric).

    Returns:
        ``(func_output, hvp)``, ``hvp`` shaped like ``inputs``.

    Example::

        >>> ember.autograd.functional.hvp(lambda x: (x ** 3).sum(),
        ...                               ember.tensor([1.0, 2.0]), ember.ones(2))
        (tensor(9.), tensor([ 6., 12.]))
    """
    from ..ops.creation import zeros_like
    with grad_mode.enable_grad():
        is_inputs_tuple, inputs, v, outputs, jac = _scalar_and_gradient(
            func, inputs, v, create_graph, strict, "hvp")
        grad_jac = tuple(zeros_like(x).requires_grad_() for x in inputs)
        double_back = _grad(jac, inputs, grad_jac, create_graph=True)
        _check_requires_grad(jac, "hessian", strict)
    with grad_mode.set_grad_enabled(create_graph or grad_mode.is_grad_enabled()):
        res = _grad(double_back, grad_jac, v, create_graph=create_graph)
        res = _fill_in_zeros(res, inputs, strict, create_graph, "double_back_trick")
    return (_postprocess((outputs,), create_graph)[0],
            _unpack(_postprocess(res, create_graph), is_inputs_tuple))
