"""The fast no-grad in-place path gives what the general path gives, and PyTorch."""
import numpy as np
import pytest

import ember

torch = pytest.importorskip("torch")

CASES = [("add_", lambda o: (o,), {"alpha": -0.5}), ("sub_", lambda o: (o,), {"alpha": 2}),
         ("mul_", lambda o: (o,), {}), ("div_", lambda o: (o,), {}),
         ("addcmul_", lambda o: (o, o), {"value": 0.3}),
         ("addcdiv_", lambda o: (o, o + 1), {"value": -2}), ("lerp_", lambda o: (o, 0.25), {}),
         ("clamp_", lambda o: (), {"min": 0.2, "max": 0.8}), ("sqrt_", lambda o: (), {}),
         ("exp_", lambda o: (), {}), ("neg_", lambda o: (), {})]


@pytest.mark.parametrize("shape,other_shape", [((3, 4), (3, 4)), ((3, 4), (4,)), ((), ())])
@pytest.mark.parametrize("dtype", ["float32", "float64", "float16"])
@pytest.mark.parametrize("name,args,kwargs", CASES, ids=[c[0] for c in CASES])
def test_direct_path_matches_torch(name, args, kwargs, dtype, shape, other_shape):
    rng = np.random.default_rng(0)
    base = rng.uniform(0.1, 1.0, shape).astype(dtype)
    other = rng.uniform(0.1, 1.0, other_shape).astype(dtype)
    x, t = ember.tensor(base), torch.tensor(base)
    out = getattr(x, name)(*args(ember.tensor(other)), **kwargs)
    getattr(t, name)(*args(torch.tensor(other)), **kwargs)
    assert out is x and x.dtype.name == dtype and x._version[0] == 1
    tol = 2e-3 if dtype == "float16" else 1e-6
    np.testing.assert_allclose(x.numpy().astype(np.float64), t.numpy().astype(np.float64),
                               rtol=tol, atol=tol)


def test_direct_path_rejects_what_torch_rejects():
    x = ember.tensor([1, 2, 3])
    with pytest.raises(ember.EmberError, match="add_: result type float32 can't be cast"):
        x.add_(0.5)
    with pytest.raises(ember.EmberError, match="div_: result type float32 can't be cast"):
        x.div_(2)
    with pytest.raises(ember.EmberError, match=r"mul_: output with shape \[3\]"):
        ember.ones(3).mul_(ember.ones(2, 3))
    assert x.tolist() == [1, 2, 3]


def test_optimizer_style_updates_keep_storage():
    p = ember.zeros(4)
    alias = p[1:]
    p.add_(ember.ones(4), alpha=2).mul_(0.5)
    assert alias.tolist() == [1.0, 1.0, 1.0] and p._version[0] == 2


@pytest.mark.parametrize("weight", [0.1, 0.5, 0.7, 1.0, -0.6])
def test_lerp_in_place_computes_from_the_nearer_end_as_the_op(weight):
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 1000)).astype(np.float32)
    x = ember.tensor(a.copy())
    x.lerp_(ember.tensor(b), weight)
    np.testing.assert_array_equal(x.numpy(), ember.lerp(ember.tensor(a), ember.tensor(b),
                                                        weight).numpy())
    if weight == 1.0:
        np.testing.assert_array_equal(x.numpy(), b)  # exact at the far end
