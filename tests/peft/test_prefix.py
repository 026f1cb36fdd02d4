"""Prefix tuning on the GPT: the attention formula, training with a frozen base,
disabling, adapter files, errors."""
import numpy as np
import pytest

import ember
from ember import nn, peft
from ember.errors import EmberValueError
from ember.models.gpt import Block
from ember.nn import functional as F


def _gpt():
    ember.manual_seed(0)
    return ember.models.GPT(n_layers=2)


def _tokens(b=4, t=17, seed=1):
    ember.manual_seed(seed)
    return ember.randint(0, 256, (b, t))


def test_prefix_attention_is_the_formula():
    ember.manual_seed(2)
    block = Block(16, 2).to(ember.float64)
    pb = peft.PrefixBlock(block, peft.PrefixTuningConfig(num_virtual_tokens=3, init_std=0.5))
    x = ember.randn(1, 4, 16, dtype=ember.float64)
    with ember.no_grad():
        out = pb(x).numpy()
        h = block.qkv(block.ln1(x)).numpy()[0]
        pk, pv = pb.prefix_key.detach().numpy(), pb.prefix_value.detach().numpy()
        heads = []
        for i in range(2):
            q, k, v = (h[:, j * 16 + i * 8: j * 16 + (i + 1) * 8] for j in range(3))
            k, v = np.concatenate([pk[i], k]), np.concatenate([pv[i], v])
            s = q @ k.T / np.sqrt(8)
            s[np.triu(np.ones((4, 4), bool), 1).nonzero()[0],
              3 + np.triu(np.ones((4, 4), bool), 1).nonzero()[1]] = -np.inf
            w = np.exp(s - s.max(1, keepdims=True))
            heads.append((w / w.sum(1, keepdims=True)) @ v)
        y = x.numpy()[0] + np.concatenate(heads, 1) @ block.proj.weight.detach().numpy().T \
            + block.proj.bias.detach().numpy()
        expected = y + block.fc2(F.gelu(block.fc1(block.ln2(ember.tensor(y))))).numpy()
    np.testing.assert_allclose(out[0], expected, rtol=0, atol=1e-12)


def test_prefixes_train_while_the_base_stays_bitwise_equal(tmp_path):
    gpt = _gpt()
    before = {n: p.detach().numpy().copy() for n, p in gpt.named_parameters()}
    x = _tokens()
    with ember.no_grad():
        base_out = gpt(x).numpy()
    model = peft.get_peft_model(gpt, peft.PrefixTuningConfig(num_virtual_tokens=8))
    trainable, total = model.get_nb_trainable_parameters()
    assert trainable == 2 * 2 * 8 * 128
    opt = ember.optim.AdamW(model.trainable_parameters(), lr=3e-2)
    losses = []
    for _ in range(8):
        loss = F.cross_entropy(model(x[:, :-1]).reshape(-1, 256), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0] - 0.05
    with ember.no_grad():
        with model.disable_adapter():
            np.testing.assert_allclose(model(x).numpy(), base_out, rtol=0, atol=2e-6)
        tuned = model(x).numpy()
    assert np.abs(tuned - base_out).max() > 1e-3
    path = str(tmp_path / "prefix.safetensors")
    model.save_adapter(path)
    plain = model.unload()
    after = {n: p.detach().numpy() for n, p in plain.named_parameters()}
    assert after.keys() == before.keys()
    assert all(np.array_equal(before[n], after[n]) for n in before)
    other = peft.get_peft_model(_gpt(), peft.PrefixTuningConfig(num_virtual_tokens=8))
    other.load_adapter(path)
    with ember.no_grad():
        np.testing.assert_allclose(other(x).numpy(), tuned, rtol=0, atol=1e-6)


def test_prefix_errors():
    with pytest.raises(EmberValueError, match="found no attention block"):
        peft.get_peft_model(nn.Sequential(nn.Linear(4, 4)), peft.PrefixTuningConfig(4))
    with pytest.raises(EmberValueError, match="num_virtual_tokens must be a positive int"):
        peft.PrefixTuningConfig(num_virtual_tokens=0)
