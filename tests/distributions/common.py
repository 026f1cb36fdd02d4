"""Shared helpers for the ember.distributions tests: the same float64 parameters as
ember and torch tensors, and comparisons of results."""
import numpy as np

import ember

F64 = np.float64


def e2n(t):
    return t.detach().numpy().astype(np.float64) if t.dtype.is_floating_point else \
        t.detach().numpy()


def t2n(t):
    return t.detach().double().numpy() if t.is_floating_point() else t.detach().numpy()


def close(e, t, rtol=1e-10, atol=1e-12, what=""):
    """ember tensor ``e`` equals torch tensor ``t``: shape, dtype and values."""
    assert tuple(e.shape) == tuple(t.shape), f"{what}: shape {tuple(e.shape)} vs " \
                                             f"{tuple(t.shape)}"
    assert e.dtype.name == str(t.dtype).removeprefix("torch."), (what, e.dtype, t.dtype)
    np.testing.assert_allclose(e2n(e), t2n(t), rtol=rtol, atol=atol, equal_nan=True,
                               err_msg=what)


def tensors(torch, args, requires_grad=True):
    """(ember args, torch args): NumPy float arrays become leaf tensors (with grad),
    anything else passes through."""
    e_args, t_args = [], []
    for a in args:
        if isinstance(a, np.ndarray):
            grad = requires_grad and a.dtype.kind == "f"
            e_args.append(ember.tensor(a, requires_grad=grad))
            t_args.append(torch.tensor(a, requires_grad=grad))
        else:
            e_args.append(a)
            t_args.append(a)
    return e_args, t_args


def leaves(args):
    return [a for a in args if getattr(a, "requires_grad", False)]
