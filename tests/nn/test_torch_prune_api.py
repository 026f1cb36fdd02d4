"""ember.nn.utils.prune against torch.nn.utils.prune: the same masks for the same
weights (ties included), the reparametrisation (weight_orig parameter, weight_mask
buffer, forward pre-hook), state-dict keys, chaining, remove, errors, and pruned
modules under ember.jit."""
import numpy as np
import pytest

import ember
from ember.nn.utils import prune
from ember.nn.utils.prune_topk import topk_indices

torch = pytest.importorskip("torch")
import torch.nn.utils.prune as tprune  # noqa: E402


def _copy_to_torch(module, ref):
    ref.load_state_dict({k: torch.tensor(v.detach().numpy()) for k, v in
                         module.state_dict().items()})
    return ref


def _linear(i=12, o=9, seed=0, dtype=ember.float32):
    ember.manual_seed(seed)
    m = ember.nn.Linear(i, o).to(dtype)
    ref = torch.nn.Linear(i, o).to(getattr(torch, dtype.name))
    return m, _copy_to_torch(m, ref)


def _conv(seed=0):
    ember.manual_seed(seed)
    m = ember.nn.Conv2d(3, 8, 3)
    return m, _copy_to_torch(m, torch.nn.Conv2d(3, 8, 3))


def _same_masks(m, ref, name="weight", rtol=0.0):
    np.testing.assert_array_equal(getattr(m, name + "_mask").numpy(),
                                  getattr(ref, name + "_mask").numpy())
    np.testing.assert_allclose(getattr(m, name).detach().numpy(),
                               getattr(ref, name).detach().numpy(), rtol=rtol, atol=0)


def _set_weight(m, ref, values, name="weight"):
    with ember.no_grad():
        getattr(m, name).copy_(ember.tensor(values))
    with torch.no_grad():
        getattr(ref, name).copy_(torch.tensor(values))


# Masks equal torch's ----------------------------------------------------------------------
@pytest.mark.parametrize("amount", [0.0, 0.3, 0.5, 1.0, 0, 7, 108])
def test_l1_unstructured_masks(amount):
    m, ref = _linear()
    prune.l1_unstructured(m, "weight", amount=amount)
    tprune.l1_unstructured(ref, "weight", amount=amount)
    _same_masks(m, ref)
    assert int((m.weight_mask == 0).sum()) == int((ref.weight_mask == 0).sum())


@pytest.mark.parametrize("n,dim,amount", [(1, 0, 0.4), (2, 1, 3), (float("inf"), 0, 0.5),
                                          (-float("inf"), -1, 2), (3, 1, 0.6), (0, 0, 1),
                                          (2, 0, 1.0), (-1, 0, 2)])
def test_ln_structured_masks_conv(n, dim, amount):
    m, ref = _conv(1)
    prune.ln_structured(m, "weight", amount=amount, n=n, dim=dim)
    tprune.ln_structured(ref, "weight", amount=amount, n=n, dim=dim)
    _same_masks(m, ref)


@pytest.mark.parametrize("dim", [0, 1])
def test_ln_structured_frobenius_on_a_matrix(dim):
    m, ref = _linear(seed=dim)
    prune.ln_structured(m, "weight", amount=0.5, n="fro", dim=dim)
    tprune.ln_structured(ref, "weight", amount=0.5, n="fro", dim=dim)
    _same_masks(m, ref)


def test_ln_structured_nuclear_norm():
    ember.manual_seed(2)
    m = ember.nn.Conv1d(3, 6, 4)
    ref = _copy_to_torch(m, torch.nn.Conv1d(3, 6, 4))
    prune.ln_structured(m, "weight", amount=2, n="nuc", dim=0)
    tprune.ln_structured(ref, "weight", amount=2, n="nuc", dim=0)
    _same_masks(m, ref)


def test_importance_scores_and_bias():
    m, ref = _linear(seed=3)
    scores = np.random.default_rng(0).standard_normal((9, 12)).astype(np.float32)
    prune.l1_unstructured(m, "weight", amount=0.4, importance_scores=ember.tensor(scores))
    tprune.l1_unstructured(ref, "weight", amount=0.4, importance_scores=torch.tensor(scores))
    _same_masks(m, ref)
    prune.l1_unstructured(m, "bias", amount=3)
    tprune.l1_unstructured(ref, "bias", amount=3)
    _same_masks(m, ref, "bias")
    m2, ref2 = _conv(4)
    conv_scores = np.random.default_rng(1).standard_normal((8, 3, 3, 3)).astype(np.float32)
    prune.ln_structured(m2, "weight", 0.5, 2, 0, importance_scores=ember.tensor(conv_scores))
    tprune.ln_structured(ref2, "weight", 0.5, 2, 0, importance_scores=torch.tensor(conv_scores))
    _same_masks(m2, ref2)


@pytest.mark.parametrize("values", ["ones", "signs", "grid"])
@pytest.mark.parametrize("amount", [0.5, 1, 3, 0.95])
def test_ties_broken_as_torch_topk(values, amount):
    rng = np.random.default_rng(7)
    shape = (16, 20)  # 320 entries: amount=1..3 take partial_sort, larger nth_element
    w = {"ones": np.ones(shape), "signs": rng.choice([-0.5, 0.5], shape),
         "grid": rng.integers(-3, 4, shape) * 0.25}[values].astype(np.float32)
    m, ref = _linear(20, 16)
    _set_weight(m, ref, w)
    prune.l1_unstructured(m, "weight", amount=amount)
    tprune.l1_unstructured(ref, "weight", amount=amount)
    _same_masks(m, ref)
    # again: the second round ranks the survivors only (a PruningContainer)
    prune.l1_unstructured(m, "weight", amount=amount)
    tprune.l1_unstructured(ref, "weight", amount=amount)
    _same_masks(m, ref)


def test_structured_ties_and_global_ties():
    m, ref = _conv(5)
    w = np.repeat(np.random.default_rng(0).standard_normal((2, 3, 3, 3)), 4, axis=0)
    _set_weight(m, ref, w.astype(np.float32))  # channels in 2 groups of 4 equal norms
    prune.ln_structured(m, "weight", amount=3, n=2, dim=0)
    tprune.ln_structured(ref, "weight", amount=3, n=2, dim=0)
    _same_masks(m, ref)
    a, ta = _linear(10, 10, seed=1)
    b, tb = _linear(10, 4, seed=2)
    _set_weight(a, ta, np.full((10, 10), 0.5, np.float32))
    _set_weight(b, tb, np.full((4, 10), -0.5, np.float32))
    prune.global_unstructured([(a, "weight"), (b, "weight")], prune.L1Unstructured, amount=0.3)
    tprune.global_unstructured([(ta, "weight"), (tb, "weight")], tprune.L1Unstructured,
                               amount=0.3)
    _same_masks(a, ta)
    _same_masks(b, tb)


def test_topk_indices_matches_torch_on_random_ties():
    rng = np.random.default_rng(0)
    for trial in range(300):
        n = int(rng.integers(1, 300))
        v = rng.integers(0, 3, n).astype(np.float32)
        if trial % 3 == 0:
            v[rng.random(n) < 0.3] = np.nan
        k = int(rng.integers(0, n + 1))
        for largest in (False, True):
            expected = np.sort(torch.topk(torch.tensor(v), k, largest=largest).indices.numpy())
            np.testing.assert_array_equal(topk_indices(v, k, largest), expected)


def test_global_unstructured_with_importance_scores_and_previous_masks():
    a, ta = _linear(8, 6, seed=4)
    c, tc = _conv(6)
    prune.l1_unstructured(a, "weight", amount=0.5)
    tprune.l1_unstructured(ta, "weight", amount=0.5)
    scores = np.random.default_rng(2).standard_normal((8, 3, 3, 3)).astype(np.float32)
    prune.global_unstructured([(a, "weight"), (c, "weight"), (a, "bias")],
                              pruning_method=prune.L1Unstructured, amount=40,
                              importance_scores={(c, "weight"): ember.tensor(scores)})
    tprune.global_unstructured([(ta, "weight"), (tc, "weight"), (ta, "bias")],
                               pruning_method=tprune.L1Unstructured, amount=40,
                               importance_scores={(tc, "weight"): torch.tensor(scores)})
    _same_masks(a, ta)
    _same_masks(c, tc)
    _same_masks(a, ta, "bias")


@pytest.mark.parametrize("chain", ["l1-l1", "ln-l1", "l1-ln", "ln-ln", "mask-l1-ln"])
def test_chained_pruning_matches_torch(chain):
    m, ref = _conv(7)
    mask = (np.random.default_rng(3).random((8, 3, 3, 3)) > 0.2).astype(np.float32)
    steps = {"l1": lambda lib, mod: lib.l1_unstructured(mod, "weight", amount=0.3),
             "ln": lambda lib, mod: lib.ln_structured(mod, "weight", amount=2, n=1, dim=0),
             "mask": lambda lib, mod: lib.custom_from_mask(
                 mod, "weight", mask=(ember.tensor(mask) if lib is prune else
                                      torch.tensor(mask)))}
    for step in chain.split("-"):
        steps[step](prune, m)
        steps[step](tprune, ref)
        _same_masks(m, ref)
    hooks = list(m._forward_pre_hooks.values())
    assert len(hooks) == 1
    if "-" in chain:
        assert isinstance(hooks[0], prune.PruningContainer)
        assert len(hooks[0]) == len(chain.split("-"))


def test_float64_and_prune_method():
    m, ref = _linear(5, 4, seed=8, dtype=ember.float64)
    prune.ln_structured(m, "weight", amount=0.5, n=2, dim=1)
    tprune.ln_structured(ref, "weight", amount=0.5, n=2, dim=1)
    _same_masks(m, ref)
    assert m.weight_mask.dtype is ember.float64
    t = np.random.default_rng(4).standard_normal((4, 6))
    got = prune.L1Unstructured(amount=5).prune(ember.tensor(t))
    expected = tprune.L1Unstructured(amount=5).prune(torch.tensor(t))
    np.testing.assert_array_equal(got.numpy(), expected.numpy())


# The reparametrisation ----------------------------------------------------------------------
def test_state_dict_parameters_and_remove_as_torch():
    m, ref = _linear(seed=9)
    weight = m.weight
    prune.random_unstructured(m, "weight", amount=0.25)
    tprune.random_unstructured(ref, "weight", amount=0.25)
    assert list(m.state_dict()) == list(ref.state_dict()) == ["bias", "weight_orig",
                                                              "weight_mask"]
    assert [n for n, _ in m.named_parameters()] == [n for n, _ in ref.named_parameters()]
    assert [n for n, _ in m.named_buffers()] == ["weight_mask"]
    assert m.weight_orig is weight  # the same Parameter: an optimizer keeps working
    assert not isinstance(m.weight, ember.nn.Parameter)
    assert int((m.weight_mask == 0).sum()) == 27 == int((ref.weight_mask == 0).sum())
    assert prune.is_pruned(m) and prune.is_pruned(ember.nn.Sequential(m))
    masked = m.weight.detach().numpy().copy()
    prune.remove(m, "weight")
    tprune.remove(ref, "weight")
    assert list(m.state_dict()) == list(ref.state_dict())  # (as torch re-registers it)
    assert m.weight is weight and isinstance(m.weight, ember.nn.Parameter)
    np.testing.assert_array_equal(m.weight.detach().numpy(), masked)
    assert not prune.is_pruned(m) and not m._forward_pre_hooks


def test_state_dict_loads_into_torch_and_back():
    m, ref = _conv(10)
    prune.ln_structured(m, "weight", amount=0.5, n=2, dim=0)
    tprune.identity(ref, "weight")
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in m.state_dict().items()})
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6)).astype(np.float32)
    np.testing.assert_allclose(m(ember.tensor(x)).detach().numpy(),
                               ref(torch.tensor(x)).detach().numpy(), rtol=1e-5, atol=1e-6)
    fresh = ember.nn.Conv2d(3, 8, 3)
    prune.identity(fresh, "weight")
    fresh.load_state_dict({k: ember.tensor(v.numpy()) for k, v in ref.state_dict().items()})
    np.testing.assert_array_equal(fresh(ember.tensor(x)).detach().numpy(),
                                  m(ember.tensor(x)).detach().numpy())


def test_gradients_and_training_steps_match_torch():
    m, ref = _linear(seed=11)
    prune.l1_unstructured(m, "weight", amount=0.5)
    tprune.l1_unstructured(ref, "weight", amount=0.5)
    opt = ember.optim.SGD(m.parameters(), lr=0.1, weight_decay=0.01)
    topt = torch.optim.SGD(ref.parameters(), lr=0.1, weight_decay=0.01)
    rng = np.random.default_rng(5)
    for _ in range(3):
        x = rng.standard_normal((4, 12)).astype(np.float32)
        opt.zero_grad()
        topt.zero_grad()
        m(ember.tensor(x)).pow(2).sum().backward()
        ref(torch.tensor(x)).pow(2).sum().backward()
        np.testing.assert_allclose(m.weight_orig.grad.numpy(), ref.weight_orig.grad.numpy(),
                                   rtol=1e-5, atol=1e-6)
        assert np.all(m.weight_orig.grad.numpy()[m.weight_mask.numpy() == 0] == 0)
        opt.step()
        topt.step()
    np.testing.assert_allclose(m.weight_orig.detach().numpy(),
                               ref.weight_orig.detach().numpy(), rtol=1e-5, atol=1e-6)
    x = rng.standard_normal((2, 12)).astype(np.float32)
    m(ember.tensor(x))
    ref(torch.tensor(x))
    _same_masks(m, ref, rtol=1e-5)  # the hook recomputed weight from the stepped weight_orig


# Under ember.jit -----------------------------------------------------------------------------
def test_pruned_module_under_jit_equals_eager():
    ember.manual_seed(12)
    net = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
    prune.l1_unstructured(net[0], "weight", amount=0.5)
    prune.ln_structured(net[2], "weight", amount=1, n=2, dim=0)
    eager_weight = net[0].weight
    compiled = ember.jit(net)
    x = ember.randn(5, 6)
    out = compiled(x)
    assert len(compiled.cache) == 1
    np.testing.assert_allclose(out.detach().numpy(), net(x).detach().numpy(), rtol=1e-6)
    assert np.all(out.detach().numpy()[:, net[2].weight_mask.numpy()[:, 0] == 0] ==
                  net[2].bias.detach().numpy()[net[2].weight_mask.numpy()[:, 0] == 0])
    out.sum().backward()
    grad = net[0].weight_orig.grad.numpy().copy()
    net.zero_grad()
    net(x).sum().backward()
    np.testing.assert_allclose(grad, net[0].weight_orig.grad.numpy(), rtol=1e-6)
    assert isinstance(net[0].weight._data, np.ndarray)  # no traced value left behind
    assert net[0].weight is not eager_weight  # (the eager call above recomputed it)
    assert not net[0]._forward_hooks


def test_compiled_training_step_with_pruned_layer():
    ember.manual_seed(13)
    net = ember.nn.Linear(4, 3)
    ref = _copy_to_torch(net, torch.nn.Linear(4, 3))
    prune.l1_unstructured(net, "weight", amount=6)
    tprune.l1_unstructured(ref, "weight", amount=6)
    opt = ember.optim.SGD(net.parameters(), lr=0.05)

    @ember.jit
    def step(x):
        opt.zero_grad()
        loss = net(x).pow(2).mean()
        loss.backward()
        opt.step()
        return loss

    eager = ember.nn.Linear(4, 3)
    prune.identity(eager, "weight")
    eager.load_state_dict(net.state_dict())
    eager_opt = ember.optim.SGD(eager.parameters(), lr=0.05)
    x = ember.randn(6, 4)
    for _ in range(3):
        loss = step(x)
        eager_opt.zero_grad()
        eager_loss = eager(x).pow(2).mean()
        eager_loss.backward()
        eager_opt.step()
        assert float(loss) == pytest.approx(float(eager_loss), rel=1e-6)
    np.testing.assert_allclose(net.weight_orig.detach().numpy(),
                               eager.weight_orig.detach().numpy(), rtol=1e-6)
    mask = net.weight_mask.numpy()
    np.testing.assert_array_equal(mask, ref.weight_mask.numpy())
    assert np.all(net(x).detach().numpy() == eager(x).detach().numpy())


# Random methods, custom methods --------------------------------------------------------------
def test_random_methods_counts_and_seeding():
    for seed in (0, 1):
        ember.manual_seed(seed)
        a = prune.random_structured(ember.nn.Conv2d(2, 10, 3), "weight", amount=0.3, dim=0)
        assert (a.weight_mask.numpy().reshape(10, -1).sum(axis=1) == 0).sum() == 3
        assert set(np.unique(a.weight_mask.numpy().reshape(10, -1).sum(axis=1))) == {0.0, 18.0}
        b = prune.random_unstructured(ember.nn.Linear(10, 10), "weight", amount=37)
        assert int((b.weight_mask == 0).sum()) == 37
    ember.manual_seed(3)
    m1 = prune.random_unstructured(ember.nn.Linear(5, 5), "weight", amount=0.5)
    ember.manual_seed(3)
    m2 = prune.random_unstructured(ember.nn.Linear(5, 5), "weight", amount=0.5)
    np.testing.assert_array_equal(m1.weight_mask.numpy(), m2.weight_mask.numpy())
    c = ember.nn.Linear(10, 10)
    prune.global_unstructured([(c, "weight"), (c, "bias")], prune.RandomUnstructured,
                              amount=0.5)
    assert int((c.weight_mask == 0).sum()) + int((c.bias_mask == 0).sum()) == 55


def test_custom_method_subclass_and_identity():
    class Threshold(prune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            return default_mask * (t.abs() > 0.3).to(default_mask.dtype)

    class TThreshold(tprune.BasePruningMethod):
        PRUNING_TYPE = "unstructured"

        def compute_mask(self, t, default_mask):
            return default_mask * (t.abs() > 0.3).to(default_mask.dtype)

    m, ref = _linear(seed=14)
    prune.identity(m, "weight")
    tprune.identity(ref, "weight")
    assert float(m.weight_mask.sum()) == 108.0
    Threshold.apply(m, "weight")
    TThreshold.apply(ref, "weight")
    _same_masks(m, ref)
    prune.l1_unstructured(m, "weight", amount=0.5)
    tprune.l1_unstructured(ref, "weight", amount=0.5)
    _same_masks(m, ref)
    assert [type(h).__name__ for h in list(m._forward_pre_hooks.values())[0]] == \
        ["Identity", "Threshold", "L1Unstructured"]


# Errors --------------------------------------------------------------------------------------
@pytest.mark.parametrize("amount,error", [(-1, ValueError), (1.5, ValueError),
                                          (-0.1, ValueError), ("half", TypeError),
                                          (200, ValueError)])
def test_bad_amounts_raise_as_torch(amount, error):
    m, ref = _linear()
    with pytest.raises(error):
        tprune.l1_unstructured(ref, "weight", amount=amount)
    with pytest.raises(error):
        prune.l1_unstructured(m, "weight", amount=amount)
    assert "weight" in m._parameters and not prune.is_pruned(m)  # left as it was
    assert list(m.state_dict()) == list(ref.state_dict())  # (as torch re-registers it)


def test_structured_and_remove_errors():
    m, _ = _linear()
    with pytest.raises(ValueError, match="multidimensional"):
        prune.ln_structured(m, "bias", amount=1, n=2, dim=0)
    with pytest.raises(IndexError, match="Invalid index 2"):
        prune.ln_structured(m, "weight", amount=1, n=2, dim=2)
    with pytest.raises(ValueError, match="has to be pruned"):
        prune.remove(m, "weight")
    with pytest.raises(AttributeError):
        prune.l1_unstructured(m, "nonexistent", amount=1)
    with pytest.raises(ValueError, match="same shape"):
        prune.l1_unstructured(m, "weight", amount=1, importance_scores=ember.ones(3))
    with pytest.raises(TypeError, match="unstructured"):
        prune.global_unstructured([(m, "weight")], prune.LnStructured, amount=1, n=2)
    with pytest.raises(TypeError, match="Iterable"):
        prune.global_unstructured(3, prune.L1Unstructured, amount=1)
    with pytest.raises(TypeError):
        prune.PruningContainer().add_pruning_method("not a method")
    assert sorted(m.state_dict()) == ["bias", "weight"] and not prune.is_pruned(m)


def test_failed_second_round_keeps_the_first():
    m, _ = _linear(seed=15)
    prune.l1_unstructured(m, "weight", amount=0.5)
    mask = m.weight_mask.numpy().copy()
    with pytest.raises(ValueError):
        prune.l1_unstructured(m, "weight", amount=100)  # only 54 entries are left
    np.testing.assert_array_equal(m.weight_mask.numpy(), mask)
    assert prune.is_pruned(m)
    prune.l1_unstructured(m, "weight", amount=10)
    assert int((m.weight_mask == 0).sum()) == 64


def test_empty_and_size_one_tensors():
    m, ref = _linear(0, 3)
    prune.l1_unstructured(m, "weight", amount=0.5)
    tprune.l1_unstructured(ref, "weight", amount=0.5)
    assert tuple(m.weight_mask.shape) == (3, 0)
    m2, ref2 = _linear(1, 1, seed=1)
    prune.l1_unstructured(m2, "weight", amount=1)
    tprune.l1_unstructured(ref2, "weight", amount=1)
    _same_masks(m2, ref2)
    assert float(m2.weight_mask.sum()) == 0.0
