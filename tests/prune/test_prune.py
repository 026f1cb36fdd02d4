"""Pruning: accuracy after 80% sparsity and fine-tuning, masks through optimizer steps,
parity with torch.nn.utils.prune, structured pruning and shrink, remove, the report."""
import numpy as np
import pytest

import ember
from ember import nn, prune
from ember.data import DataLoader, TensorDataset
from ember.data.datasets import Digits
from ember.errors import EmberValueError
from ember.nn import functional as F


def _digits(train):
    ds = Digits(train=train)
    return ember.tensor(ds._images.reshape(len(ds), -1)), ember.tensor(np.array(ds._labels))


@pytest.fixture(scope="module")
def digits():
    return _digits(True), _digits(False)


def _mlp():
    return nn.Sequential(nn.Linear(64, 128), nn.ReLU(), nn.Linear(128, 64), nn.ReLU(),
                         nn.Linear(64, 10))


def _accuracy(model, x, y):
    model.eval()
    with ember.no_grad():
        pred = model(x).numpy().argmax(1)
    model.train()
    return float((pred == y.numpy()).mean())


def _fit(model, data, epochs, callbacks=(), lr=3e-3):
    (x, y), _ = data
    loader = DataLoader(TensorDataset(x, y), batch_size=64, shuffle=True)
    opt = ember.optim.Adam(model.parameters(), lr=lr)
    trainer = ember.train.Trainer(model, opt, F.cross_entropy, train_loader=loader,
                                  max_epochs=epochs, callbacks=list(callbacks),
                                  progress_bar=False, eval_every_n_epochs=None, seed=0)
    trainer.fit()
    return trainer


def test_eighty_percent_sparsity_keeps_accuracy(digits):
    ember.manual_seed(0)
    model = _mlp()
    _fit(model, digits, epochs=8)
    (_, _), (xt, yt) = digits
    dense = _accuracy(model, xt, yt)
    assert dense > 0.93
    # Gradual pruning while fine-tuning: 50%, 70%, then 80% and two epochs at 80%.
    cb = prune.PruningCallback(schedule=[0.5, 0.7, 0.8, 0.8, 0.8])
    _fit(model, digits, epochs=5, callbacks=[cb], lr=1e-3)
    assert cb.history == pytest.approx([0.5, 0.7, 0.8, 0.8, 0.8], abs=1e-3)
    report = prune.sparsity_report(model)
    assert report.total["sparsity"] == pytest.approx(0.8, abs=1e-3)
    assert all(row["pruned"] and row["zeros"] > 0 for row in report.layers.values())
    sparse = _accuracy(model, xt, yt)
    assert sparse >= dense - 0.02, (dense, sparse)
    assert "total" in str(report) and "(pruned)" in str(report)


def test_masks_hold_through_optimizer_steps():
    ember.manual_seed(1)
    layer = nn.Linear(32, 16)
    opt = ember.optim.AdamW(layer.parameters(), lr=0.1, weight_decay=0.1)  # built before
    prune.l1_unstructured(layer, "weight", amount=0.8)
    mask = layer.weight_mask.numpy().copy()
    assert mask.mean() == pytest.approx(0.2, abs=1 / 512)
    assert layer.weight_orig is opt.param_groups[0]["params"][0]
    for _ in range(5):
        loss = layer(ember.randn(8, 32)).pow(2).sum()
        opt.zero_grad()
        loss.backward()
        assert not layer.weight_orig.grad.numpy()[mask == 0].any()
        opt.step()
    w = layer.weight.detach().numpy()
    assert np.all(w[mask == 0] == 0.0)
    assert np.all(w[mask == 1] != 0.0)
    assert prune.is_pruned(layer)
    assert sorted(layer.state_dict()) == ["bias", "weight_mask", "weight_orig"]


def test_repeated_pruning_counts_the_remaining_weights():
    ember.manual_seed(2)
    layer = nn.Linear(20, 10)
    prune.l1_unstructured(layer, "weight", amount=0.5)
    prune.l1_unstructured(layer, "weight", amount=0.5)
    assert (layer.weight == 0).float().mean().item() == pytest.approx(0.75)
    prune.l1_unstructured(layer, "weight", amount=10)
    assert int((layer.weight == 0).sum().item()) == 160
    with pytest.raises(EmberValueError, match="amount must be in"):
        prune.l1_unstructured(layer, "weight", amount=1.5)
    with pytest.raises(EmberValueError, match="no parameter 'wieght'.*'weight_orig'"):
        prune.l1_unstructured(layer, "wieght", amount=0.5)


def test_remove_makes_pruning_permanent():
    ember.manual_seed(3)
    layer = nn.Linear(12, 6)
    prune.ln_structured(layer, "weight", amount=0.5, n=2, dim=0)
    expected = layer.weight.detach().numpy().copy()
    prune.remove(layer, "weight")
    assert not prune.is_pruned(layer)
    assert isinstance(layer._parameters["weight"], nn.Parameter)
    assert sorted(layer.state_dict()) == ["bias", "weight"]
    np.testing.assert_array_equal(layer.weight.detach().numpy(), expected)
    assert int((~layer.weight.detach().numpy().any(axis=1)).sum()) == 3
    # Without the mask, training moves the formerly pruned weights again.
    opt = ember.optim.SGD(layer.parameters(), lr=0.1)
    layer(ember.randn(4, 12)).pow(2).sum().backward()
    opt.step()
    assert np.all(layer.weight.detach().numpy() != 0)
    with pytest.raises(EmberValueError, match="is not pruned"):
        prune.remove(layer, "weight")


@pytest.fixture
def torch_prune():
    return pytest.importorskip("torch.nn.utils.prune")


def _twins(shape_in=30, shape_out=12, conv=False):
    torch = pytest.importorskip("torch")
    ember.manual_seed(4)
    if conv:
        ours, theirs = nn.Conv2d(3, 8, 3), torch.nn.Conv2d(3, 8, 3)
    else:
        ours, theirs = nn.Linear(shape_in, shape_out), torch.nn.Linear(shape_in, shape_out)
    with torch.no_grad():
        theirs.weight.copy_(torch.from_numpy(ours.weight.detach().numpy()))
        theirs.bias.copy_(torch.from_numpy(ours.bias.detach().numpy()))
    return ours, theirs


@pytest.mark.parametrize("amount", [0.3, 0.8, 17])
def test_l1_unstructured_matches_torch(amount, torch_prune):
    ours, theirs = _twins()
    prune.l1_unstructured(ours, "weight", amount=amount)
    torch_prune.l1_unstructured(theirs, "weight", amount=amount)
    np.testing.assert_array_equal(ours.weight_mask.numpy(), theirs.weight_mask.numpy())
    prune.l1_unstructured(ours, "weight", amount=0.4)
    torch_prune.l1_unstructured(theirs, "weight", amount=0.4)
    np.testing.assert_array_equal(ours.weight_mask.numpy(), theirs.weight_mask.numpy())


@pytest.mark.parametrize("n,dim,conv", [(1, 0, False), (2, 0, False), (2, 1, False),
                                        (1, 0, True), (2, 1, True), (float("inf"), 0, False)])
def test_ln_structured_matches_torch(n, dim, conv, torch_prune):
    ours, theirs = _twins(conv=conv)
    prune.ln_structured(ours, "weight", amount=0.5, n=n, dim=dim)
    torch_prune.ln_structured(theirs, "weight", amount=0.5, n=n, dim=dim)
    np.testing.assert_array_equal(ours.weight_mask.numpy(), theirs.weight_mask.numpy())
    x = np.random.default_rng(0).standard_normal((2, 3, 6, 6) if conv else (2, 30))
    x = x.astype(np.float32)
    theirs_out = theirs(torch_prune.torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(ours(ember.tensor(x)).detach().numpy(), theirs_out, atol=1e-5)


@pytest.mark.parametrize("amount", [2, 0.4])
def test_repeated_ln_structured_matches_torch(amount, torch_prune):
    # torch counts a repeated structured amount (share or int) over the channels left.
    ours, theirs = _twins(conv=False)
    for _ in range(2):
        prune.ln_structured(ours, "weight", amount=amount, n=1, dim=0)
        torch_prune.ln_structured(theirs, "weight", amount=amount, n=1, dim=0)
        np.testing.assert_array_equal(ours.weight_mask.numpy(), theirs.weight_mask.numpy())


def test_global_unstructured_matches_torch(torch_prune):
    (a, ta), (b, tb) = _twins(30, 12), _twins(12, 7)
    prune.global_unstructured([(a, "weight"), (b, "weight")], amount=0.6)
    torch_prune.global_unstructured([(ta, "weight"), (tb, "weight")],
                                    pruning_method=torch_prune.L1Unstructured, amount=0.6)
    np.testing.assert_array_equal(a.weight_mask.numpy(), ta.weight_mask.numpy())
    np.testing.assert_array_equal(b.weight_mask.numpy(), tb.weight_mask.numpy())


def test_structured_pruning_and_shrink_make_the_mlp_smaller():
    ember.manual_seed(5)
    model = _mlp()
    with ember.no_grad():  # non-zero biases, so the removed channels' constants matter
        for layer in (model[0], model[2]):
            layer.bias.copy_(ember.randn(layer.bias.shape[0]) * 0.5)
    prune.ln_structured(model[0], "weight", amount=0.5, n=1, dim=0)
    prune.ln_structured(model[2], "weight", amount=0.25, n=2, dim=0)
    x = ember.randn(16, 64)
    model.eval()
    with ember.no_grad():
        before = model(x).numpy()
        hidden = model[0](x).numpy()
    kept = np.flatnonzero(model[0].weight.detach().numpy().any(axis=1))
    count = sum(p.numel() for p in model.parameters())
    removed = prune.shrink(model)
    assert removed == {"0": 64, "2": 16}
    assert model[0].weight.shape == (64, 64) and model[2].weight.shape == (48, 64)
    assert model[4].weight.shape == (10, 48)
    smaller = sum(p.numel() for p in model.parameters())
    assert smaller == 64 * 64 + 64 + 48 * 64 + 48 + 10 * 48 + 10 < count
    assert not prune.is_pruned(model)
    with ember.no_grad():
        np.testing.assert_allclose(model[0](x).numpy(), hidden[:, kept], rtol=0, atol=1e-6)
        np.testing.assert_allclose(model(x).numpy(), before, rtol=0, atol=1e-5)


def test_shrink_conv_net_keeps_outputs():
    ember.manual_seed(6)
    model = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                          nn.Conv2d(16, 32, 3), nn.ReLU(), nn.Flatten(),
                          nn.Linear(32 * 2 * 2, 10))
    prune.ln_structured(model[0], "weight", amount=0.5, n=2, dim=0)
    prune.ln_structured(model[3], "weight", amount=0.5, n=2, dim=0)
    x = ember.randn(4, 1, 8, 8)
    model.eval()
    with ember.no_grad():
        before = model(x).numpy()
    removed = prune.shrink(model)
    assert removed == {"0": 8, "3": 16}
    assert model[0].weight.shape == (8, 1, 3, 3) and model[3].weight.shape == (16, 8, 3, 3)
    assert model[6].weight.shape == (10, 16 * 4)
    with ember.no_grad():
        np.testing.assert_allclose(model(x).numpy(), before, rtol=0, atol=1e-5)


def test_attention_heads_of_the_gpt():
    ember.manual_seed(7)
    gpt = ember.models.GPT(n_layers=1)
    block = gpt.blocks[0]
    dropped = prune.prune_attention_heads(block, amount=0.5, n=2)
    assert len(dropped) == 2
    hd = 32
    w = block.qkv.weight.detach().numpy()
    for h in range(4):
        rows = np.r_[h * hd:(h + 1) * hd, 128 + h * hd:128 + (h + 1) * hd,
                     256 + h * hd:256 + (h + 1) * hd]
        assert (not w[rows].any()) == (h in dropped)
        assert (not block.proj.weight.detach().numpy()[:, h * hd:(h + 1) * hd].any()) == \
            (h in dropped)
    report = prune.sparsity_report(gpt)
    assert report.layers["blocks.0.qkv.weight"]["sparsity"] == pytest.approx(0.5)
    assert report.layers["blocks.0.proj.weight"]["sparsity"] == pytest.approx(0.5)
    assert report.layers["head.weight"]["sparsity"] == 0.0


def test_a_pruned_model_trains_the_same_under_ember_jit():
    from ember import prune

    def run(compiled):
        ember.manual_seed(0)
        net = ember.nn.Sequential(ember.nn.Linear(6, 8), ember.nn.ReLU(), ember.nn.Linear(8, 3))
        prune.l1_unstructured(net[0], "weight", amount=0.5)
        opt = ember.optim.SGD(net.parameters(), lr=0.1, momentum=0.9)
        x, y = ember.randn(16, 6), ember.randint(0, 3, (16,))

        def step():
            opt.zero_grad()
            loss = ember.nn.functional.cross_entropy(net(x), y)
            loss.backward()
            opt.step()
            return loss
        step = ember.jit(step) if compiled else step
        losses = [float(step()) for _ in range(5)]
        return losses, net[0].weight_orig.detach().numpy().copy(), net(x).detach().numpy()
    eager, compiled = run(False), run(True)
    np.testing.assert_allclose(compiled[0], eager[0], rtol=1e-5)
    np.testing.assert_allclose(compiled[1], eager[1], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(compiled[2], eager[2], rtol=1e-5, atol=1e-6)


def test_masks_equal_torch_with_tied_magnitudes():
    torch = pytest.importorskip("torch")
    import torch.nn.utils.prune as torch_prune
    rng = np.random.default_rng(0)
    for _ in range(40):
        w = rng.integers(0, 4, (8, 10)).astype(np.float32)  # many equal magnitudes
        amount = float(rng.choice([0.2, 0.5, 0.73]))
        ours, theirs = nn.Linear(10, 8), torch.nn.Linear(10, 8)
        with ember.no_grad():
            ours.weight.copy_(ember.tensor(w))
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(w))
        for share in (amount, 0.3):  # a second round prunes among the survivors
            prune.l1_unstructured(ours, "weight", share)
            torch_prune.l1_unstructured(theirs, "weight", share)
        np.testing.assert_array_equal(ours.weight_mask.numpy(), theirs.weight_mask.numpy())


def test_structured_masks_equal_torch_with_tied_channel_norms():
    torch = pytest.importorskip("torch")
    import torch.nn.utils.prune as torch_prune
    rng = np.random.default_rng(1)
    for _ in range(30):
        w = np.repeat(rng.integers(0, 3, (8, 1)), 10, axis=1).astype(np.float32)
        amount = float(rng.choice([0.25, 0.5, 0.6]))
        ours, theirs = nn.Linear(10, 8), torch.nn.Linear(10, 8)
        with ember.no_grad():
            ours.weight.copy_(ember.tensor(w))
        with torch.no_grad():
            theirs.weight.copy_(torch.tensor(w))
        for share, n in ((amount, 2), (0.34, 1)):
            prune.ln_structured(ours, "weight", share, n=n, dim=0)
            torch_prune.ln_structured(theirs, "weight", share, n=n, dim=0)
        np.testing.assert_array_equal(ours.weight_mask.numpy(), theirs.weight_mask.numpy())
