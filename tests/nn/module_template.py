"""The module test template: one call checks an ember layer against the same PyTorch
layer.

:func:`run_module_test` copies the PyTorch module's state dict into the ember module
(through NumPy) and checks:

- the repr (PyTorch's, with ``torch`` read as ``ember``), the parameter count, the names
  and shapes of parameters and buffers, and the state-dict keys in PyTorch's order;
- the outputs in train mode and in eval mode (values, dtypes, shapes), and the buffers
  after each forward (BatchNorm's running statistics);
- every parameter's gradient and every input's gradient for a random upstream gradient;
- a state-dict round trip into a scrambled copy, which then gives the same outputs;
- one SGD step (``p -= lr * p.grad``) on both, after which the outputs still agree.

Tolerances (``TOL``): float64 agrees to 1e-10; float32 to rtol 1e-4 with an absolute
floor of 1e-5 times the largest reference magnitude (float32 sums of a few hundred
products differ in their last bits depending on the summation order).

Inputs are a list of positional inputs: NumPy arrays (floating arrays become tensors of
the dtype under test and, with ``input_grads``, require gradients; other arrays keep
their dtype), tuples or lists of them, or anything else, passed through as is.
"""
from __future__ import annotations

import copy

import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

TOL = {"float64": (1e-10, 1e-10), "float32": (1e-4, 1e-5)}


def _grad_flags(inputs, input_grads) -> list:
    if isinstance(input_grads, bool):
        return [input_grads] * len(inputs)
    return list(input_grads)


def convert_inputs(inputs, dtype: str, input_grads, lib: str) -> list:
    """The inputs as ember (``lib="ember"``) or torch tensors; ``input_grads`` is a bool
    or one bool per input."""
    fn = to_ember if lib == "ember" else to_torch
    return [fn(x, dtype, g) for x, g in zip(inputs, _grad_flags(inputs, input_grads))]


def to_torch(x, dtype: str, requires_grad: bool):
    if isinstance(x, np.ndarray):
        if np.issubdtype(x.dtype, np.floating):
            t = torch.tensor(x, dtype=getattr(torch, dtype))
            return t.requires_grad_(requires_grad)
        return torch.tensor(x)
    if isinstance(x, (tuple, list)):
        return type(x)(to_torch(v, dtype, requires_grad) for v in x)
    return x


def to_ember(x, dtype: str, requires_grad: bool):
    if isinstance(x, np.ndarray):
        if np.issubdtype(x.dtype, np.floating):
            t = ember.tensor(x.astype(dtype))
            return t.requires_grad_(requires_grad)
        return ember.tensor(x)
    if isinstance(x, (tuple, list)):
        return type(x)(to_ember(v, dtype, requires_grad) for v in x)
    return x


def leaves(x) -> list:
    """The tensors in a (nested) output or input, in order."""
    if isinstance(x, (tuple, list)):
        return [t for v in x for t in leaves(v)]
    if isinstance(x, dict):
        return [t for v in x.values() for t in leaves(v)]
    if isinstance(x, (ember.Tensor, torch.Tensor)):
        return [x]
    return []


def as_numpy(t) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        return t.detach().cpu().numpy()
    return t.detach().numpy()


_tol_override = {}


def assert_close(actual, expected, dtype: str, what: str) -> None:
    actual, expected = as_numpy(actual), as_numpy(expected)
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    assert actual.dtype == expected.dtype, f"{what}: dtype {actual.dtype} != {expected.dtype}"
    rtol, atol = _tol_override.get(dtype) or TOL.get(dtype, TOL["float32"])
    if np.issubdtype(expected.dtype, np.floating) and expected.size:
        finite = np.abs(expected[np.isfinite(expected)])
        atol = atol * max(1.0, float(finite.max()) if finite.size else 1.0)
    np.testing.assert_allclose(actual, expected, rtol=rtol, atol=atol, err_msg=what)


def load_torch_state(ember_module, torch_module) -> None:
    """Copy ``torch_module``'s state dict into ``ember_module`` through NumPy."""
    state = {k: ember.tensor(v.detach().cpu().numpy()) for k, v in
             torch_module.state_dict().items()}
    result = ember_module.load_state_dict(state)
    assert result.missing_keys == [] and result.unexpected_keys == []


def check_structure(ember_module, torch_module) -> None:
    assert repr(ember_module) == repr(torch_module).replace("torch", "ember")
    e_params = [(n, tuple(p.shape)) for n, p in ember_module.named_parameters()]
    t_params = [(n, tuple(p.shape)) for n, p in torch_module.named_parameters()]
    assert e_params == t_params
    assert sum(p.numel() for p in ember_module.parameters()) == \
        sum(p.numel() for p in torch_module.parameters())
    e_bufs = [(n, tuple(b.shape)) for n, b in ember_module.named_buffers()]
    t_bufs = [(n, tuple(b.shape)) for n, b in torch_module.named_buffers()]
    assert e_bufs == t_bufs
    assert list(ember_module.state_dict()) == list(torch_module.state_dict())


def compare_state(ember_module, torch_module, dtype: str, when: str) -> None:
    t_state = torch_module.state_dict()
    for key, value in ember_module.state_dict().items():
        assert_close(value, t_state[key], dtype, f"{key} {when}")


def _forward(module, inputs, kwargs):
    return module(*inputs, **kwargs)


def _upstream(outputs, rng) -> list:
    return [rng.standard_normal(tuple(o.shape)) for o in leaves(outputs)
            if o.requires_grad]


def check_backward(ember_module, torch_module, e_in, t_in, e_out, t_out, dtype, rng,
                   mode: str) -> None:
    e_outs = [o for o in leaves(e_out) if o.requires_grad]
    t_outs = [o for o in leaves(t_out) if o.requires_grad]
    assert len(e_outs) == len(t_outs), f"{mode}: outputs needing grads differ"
    if not t_outs:
        return
    grads = [g.astype(dtype) for g in _upstream(t_out, rng)]
    torch.autograd.backward(t_outs, [torch.tensor(g) for g in grads])
    ember.autograd.backward(e_outs, [ember.tensor(g) for g in grads])
    t_params = dict(torch_module.named_parameters())
    for name, p in ember_module.named_parameters():
        tp = t_params[name]
        if tp.grad is None:
            assert p.grad is None, f"{mode}: {name} has a grad in ember only"
            continue
        assert p.grad is not None, f"{mode}: {name} has no grad in ember"
        assert_close(p.grad, tp.grad, dtype, f"{mode}: grad of {name}")
    for i, (e, t) in enumerate(zip(leaves(e_in), leaves(t_in))):
        if t.requires_grad:
            assert_close(e.grad, t.grad, dtype, f"{mode}: grad of input {i}")


def run_module_test(ember_module, torch_module, inputs, *, kwargs=None,
                    dtype: str = "float64", input_grads=True,
                    deterministic_train: bool = True, backward: bool = True,
                    sgd_step: bool = True, seed: int = 0, tol: dict | None = None) -> None:
    """Check ``ember_module`` against ``torch_module`` (same constructor arguments).

    Args:
        inputs: positional inputs (NumPy arrays, nested tuples of them, or other values).
        kwargs: keyword inputs, converted the same way.
        dtype: ``"float64"`` or ``"float32"``: both modules and the floating inputs.
        input_grads: floating inputs require gradients (and theirs are compared); a bool
            or one bool per positional input.
        deterministic_train: train-mode outputs can be compared (False for dropout).
        backward: compare gradients.
        sgd_step: take one SGD step on both and compare the outputs after it.
        tol: ``{dtype: (rtol, atol)}`` overriding ``TOL`` (say why where it is used).
    """
    _tol_override.clear()
    _tol_override.update(tol or {})
    try:
        _run(ember_module, torch_module, inputs, kwargs, dtype, input_grads,
             deterministic_train, backward, sgd_step, seed)
    finally:
        _tol_override.clear()


def _run(ember_module, torch_module, inputs, kwargs, dtype, input_grads, deterministic_train,
         backward, sgd_step, seed):
    kwargs = kwargs or {}
    rng = np.random.default_rng(seed)
    t_dtype = getattr(torch, dtype)
    torch_module.to(t_dtype)
    ember_module.to(getattr(ember, dtype))
    check_structure(ember_module, torch_module)
    load_torch_state(ember_module, torch_module)
    compare_state(ember_module, torch_module, dtype, "after loading")

    modes = ("train", "eval") if deterministic_train else ("eval",)
    for mode in modes:
        ember_module.train(mode == "train")
        torch_module.train(mode == "train")
        ember_module.zero_grad()
        torch_module.zero_grad()
        e_in = convert_inputs(inputs, dtype, input_grads, "ember")
        t_in = convert_inputs(inputs, dtype, input_grads, "torch")
        e_kw = {k: to_ember(v, dtype, False) for k, v in kwargs.items()}
        t_kw = {k: to_torch(v, dtype, False) for k, v in kwargs.items()}
        e_out = _forward(ember_module, e_in, e_kw)
        t_out = _forward(torch_module, t_in, t_kw)
        e_leaves, t_leaves = leaves(e_out), leaves(t_out)
        assert len(e_leaves) == len(t_leaves), f"{mode}: number of outputs differs"
        for i, (e, t) in enumerate(zip(e_leaves, t_leaves)):
            assert_close(e, t, dtype, f"{mode}: output {i}")
        compare_state(ember_module, torch_module, dtype, f"after a {mode} forward")
        if backward:
            check_backward(ember_module, torch_module, e_in, t_in, e_out, t_out, dtype,
                           rng, mode)

    # State-dict round trip: a scrambled copy loaded from the state dict behaves the same.
    ember_module.eval()
    e_in = convert_inputs(inputs, dtype, False, "ember")
    e_kw = {k: to_ember(v, dtype, False) for k, v in kwargs.items()}
    with ember.no_grad():
        before = leaves(_forward(ember_module, e_in, e_kw))
    clone = copy.deepcopy(ember_module)
    with ember.no_grad():
        for p in clone.parameters():
            p.add_(1.0)
    clone.load_state_dict(ember_module.state_dict())
    with ember.no_grad():
        after = leaves(_forward(clone, e_in, e_kw))
    for i, (a, b) in enumerate(zip(after, before)):
        assert_close(a, b, dtype, f"state-dict round trip: output {i}")

    if sgd_step and backward and any(True for _ in torch_module.parameters()):
        _check_sgd_step(ember_module, torch_module, inputs, kwargs, dtype, rng,
                        input_grads, deterministic_train)


def _check_sgd_step(ember_module, torch_module, inputs, kwargs, dtype, rng, input_grads,
                    deterministic_train):
    mode = deterministic_train
    ember_module.train(mode)
    torch_module.train(mode)
    ember_module.zero_grad()
    torch_module.zero_grad()
    e_kw = {k: to_ember(v, dtype, False) for k, v in kwargs.items()}
    t_kw = {k: to_torch(v, dtype, False) for k, v in kwargs.items()}
    e_out = _forward(ember_module, convert_inputs(inputs, dtype, input_grads, "ember"), e_kw)
    t_out = _forward(torch_module, convert_inputs(inputs, dtype, input_grads, "torch"), t_kw)
    grads = [g.astype(dtype) for g in _upstream(t_out, rng)]
    t_outs = [o for o in leaves(t_out) if o.requires_grad]
    e_outs = [o for o in leaves(e_out) if o.requires_grad]
    if not t_outs:
        return
    torch.autograd.backward(t_outs, [torch.tensor(g) for g in grads])
    ember.autograd.backward(e_outs, [ember.tensor(g) for g in grads])
    lr = 0.1
    with torch.no_grad():
        for p in torch_module.parameters():
            if p.grad is not None:
                p.sub_(lr * p.grad)
    with ember.no_grad():
        for p in ember_module.parameters():
            if p.grad is not None:
                p.sub_(lr * p.grad)
    compare_state(ember_module, torch_module, dtype, "after an SGD step")
    ember_module.eval()
    torch_module.eval()
    with ember.no_grad():
        e_after = leaves(_forward(ember_module, convert_inputs(inputs, dtype, False, "ember"),
                                  e_kw))
    with torch.no_grad():
        t_after = leaves(_forward(torch_module, convert_inputs(inputs, dtype, False, "torch"),
                                  t_kw))
    for i, (e, t) in enumerate(zip(e_after, t_after)):
        assert_close(e, t, dtype, f"after an SGD step: output {i}")
