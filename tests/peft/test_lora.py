"""LoRA: trainable share, the forward against its formula, frozen base weights, exact
merging, adapter files, several adapters, errors."""
import os

import numpy as np
import pytest

import ember
from ember import nn, peft
from ember.errors import EmberValueError
from ember.nn import functional as F

TARGETS = ["qkv", "proj", "fc1", "fc2"]


def _gpt(dtype=None, **kw):
    ember.manual_seed(0)
    return ember.models.GPT(dtype=dtype, **kw)


def _tokens(b=4, t=16, seed=1):
    ember.manual_seed(seed)
    return ember.randint(0, 256, (b, t))


def _train(model, steps=4, lr=1e-2, x=None):
    x = _tokens() if x is None else x
    opt = ember.optim.AdamW(model.trainable_parameters(), lr=lr, weight_decay=0.01)
    losses = []
    for _ in range(steps):
        logits = model(x[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, 256), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return losses


def _snapshot(module):
    return {n: p.detach().numpy().copy() for n, p in module.named_parameters()}


def test_trainable_share_below_two_percent_at_gpt2_width(capsys):
    # r * (1/in + 1/out) bounds the share per layer, so < 2% needs d_model of a few
    # hundred: the reference blocks at GPT-2's width (768) with r=8 on every projection.
    model = peft.get_peft_model(_gpt(d_model=768, n_heads=12, n_layers=1),
                                peft.LoraConfig(r=8, target_modules=TARGETS))
    trainable, total = model.get_nb_trainable_parameters()
    d = 768
    assert trainable == 8 * ((d + 3 * d) + (d + d) + (d + 4 * d) + (4 * d + d))
    assert trainable / total < 0.02
    model.print_trainable_parameters()
    out = capsys.readouterr().out
    assert out.startswith(f"trainable params: {trainable:,d} || all params: {total:,d}")
    assert f"trainable%: {100 * trainable / total:.4f}" in out
    assert sum(p.numel() for p in model.trainable_parameters()) == trainable


def test_reference_gpt_share_is_the_rank_arithmetic():
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=8, target_modules=TARGETS))
    trainable, total = model.get_nb_trainable_parameters()
    assert trainable == 2 * 8 * ((128 + 384) + 256 + (128 + 512) + (512 + 128))
    names = [n for n, _ in model.named_trainable_parameters()]
    assert all(".lora_A." in n or ".lora_B." in n for n in names)
    assert len(names) == 2 * 4 * 2


def test_lora_linear_forward_is_the_formula():
    ember.manual_seed(3)
    base = nn.Linear(6, 5, dtype=ember.float64)
    layer = peft.LoraLinear(base, "default", peft.LoraConfig(r=3, lora_alpha=6,
                                                             target_modules=["x"]))
    with ember.no_grad():
        layer.lora_B["default"].weight.copy_(ember.randn(5, 3, dtype=ember.float64))
    x = ember.randn(4, 6, dtype=ember.float64)
    w, b = base.weight.detach().numpy(), base.bias.detach().numpy()
    a_w = layer.lora_A["default"].weight.detach().numpy()
    b_w = layer.lora_B["default"].weight.detach().numpy()
    xn = x.numpy()
    expected = xn @ w.T + b + (6 / 3) * (xn @ a_w.T) @ b_w.T
    np.testing.assert_allclose(layer(x).detach().numpy(), expected, rtol=0, atol=1e-12)
    # Fresh adapters start as the identity change: B is zero, A Kaiming-uniform.
    fresh = peft.LoraLinear(nn.Linear(64, 32), "a", peft.LoraConfig(r=8, target_modules=["x"]))
    assert not fresh.lora_B["a"].weight.detach().numpy().any()
    a = fresh.lora_A["a"].weight.detach().numpy()
    assert a.std() > 0 and np.abs(a).max() <= 1 / np.sqrt(64)


def test_training_moves_only_adapters_and_merge_is_exact():
    gpt = _gpt(dtype=ember.float64)
    base_before = _snapshot(gpt)
    model = peft.get_peft_model(gpt, peft.LoraConfig(r=8, lora_alpha=16, target_modules=TARGETS))
    losses = _train(model, steps=4)
    assert losses[-1] < losses[0]
    # Base weights bitwise untouched (the base Linears now sit under ".base_layer").
    after = {n.replace(".base_layer", ""): v for n, v in _snapshot(model.base_model).items()
             if ".lora_" not in n}
    assert after.keys() == base_before.keys()
    for name, value in base_before.items():
        assert np.array_equal(value, after[name]), name
    layer = model.base_model.blocks[0].qkv
    assert np.abs(layer.lora_B["default"].weight.detach().numpy()).max() > 0

    model.eval()
    x = _tokens(2, 16, seed=5)
    with ember.no_grad():
        unmerged = model(x).numpy()
        expected_w = (layer.base_layer.weight.detach().numpy()
                      + 2.0 * layer.lora_B["default"].weight.detach().numpy()
                      @ layer.lora_A["default"].weight.detach().numpy())
        model.merge_adapter()
        merged = model(x).numpy()
        np.testing.assert_allclose(layer.base_layer.weight.detach().numpy(), expected_w,
                                   rtol=0, atol=1e-15)
        model.unmerge_adapter()
        np.testing.assert_allclose(model(x).numpy(), unmerged, rtol=0, atol=1e-12)
        plain = model.merge_and_unload()
        out = plain(x).numpy()
    assert np.abs(merged - unmerged).max() < 1e-6
    assert np.abs(out - unmerged).max() < 1e-6
    assert isinstance(plain, ember.models.GPT)
    assert not any(isinstance(m, peft.LoraLinear) for m in plain.modules())
    assert set(plain.state_dict()) == set(base_before)
    assert all(p.requires_grad for p in plain.parameters())


def test_merge_float32_agrees_within_rounding():
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=8, target_modules=TARGETS))
    _train(model, steps=3)
    model.eval()
    x = _tokens(2, 16, seed=6)
    with ember.no_grad():
        unmerged = model(x).numpy()
        merged = model.merge_and_unload()(x).numpy()
    assert np.abs(merged - unmerged).max() < 1e-5 * max(1.0, np.abs(unmerged).max())


def test_adapter_file_round_trip_and_size(tmp_path):
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=8, lora_alpha=32, target_modules=TARGETS))
    _train(model, steps=2)
    path = str(tmp_path / "gpt-lora.safetensors")
    model.save_adapter(path)
    size = os.path.getsize(path)
    assert size < 300 * 1024
    assert size > 4 * 32768  # the adapter tensors (float32), and nothing of the base
    model.eval()
    x = _tokens(2, 12, seed=7)
    with ember.no_grad():
        expected = model(x).numpy()
    fresh = peft.get_peft_model(_gpt(), peft.LoraConfig(r=2, target_modules=["head"]))
    fresh.load_adapter(path, adapter_name="loaded")
    fresh.set_adapter("loaded")
    assert fresh.peft_config["loaded"].lora_alpha == 32
    assert fresh.peft_config["loaded"].target_modules == TARGETS
    fresh.eval()
    with ember.no_grad():
        np.testing.assert_allclose(fresh(x).numpy(), expected, rtol=0, atol=2e-6)
    state = fresh.adapter_state_dict("loaded")
    for key, value in model.adapter_state_dict().items():
        np.testing.assert_array_equal(state[key].numpy(), value.numpy())


def test_adapter_file_that_does_not_fit_names_the_problem(tmp_path):
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=8, target_modules=["qkv"]))
    path = str(tmp_path / "a.safetensors")
    model.save_adapter(path)
    other = peft.get_peft_model(_gpt(), peft.LoraConfig(r=4, target_modules=["qkv"]))
    with pytest.raises(EmberValueError, match="shape mismatches.*lora_A"):
        other.load_adapter(path, adapter_name="default")
    ember.save({"x": ember.ones(2)}, str(tmp_path / "b.safetensors"))
    with pytest.raises(EmberValueError, match="not an ember adapter file"):
        other.load_adapter(str(tmp_path / "b.safetensors"), adapter_name="new")


def test_corrupted_adapter_files_raise_ember_errors(tmp_path):
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=2, target_modules=["qkv"]))
    path = str(tmp_path / "a.safetensors")
    model.save_adapter(path)
    saved = ember.serialization.load(path)
    raw = open(path, "rb").read()
    (tmp_path / "half").write_bytes(raw[: len(raw) // 2])
    with pytest.raises(ember.errors.EmberError):
        model.load_adapter(str(tmp_path / "half"), adapter_name="half")
    hostile = {"noconfig": {"format": saved["format"], "tensors": saved["tensors"]},
               "strconfig": {"format": saved["format"], "config": "x",
                             "tensors": saved["tensors"]},
               "unknownkey": {"format": saved["format"],
                              "config": dict(saved["config"], zz=1),
                              "tensors": saved["tensors"]},
               "notensors": {"format": saved["format"], "config": saved["config"],
                             "tensors": {k: 1 for k in saved["tensors"]}}}
    for name, content in hostile.items():
        ember.save(content, str(tmp_path / name))
        with pytest.raises(EmberValueError):
            model.load_adapter(str(tmp_path / name), adapter_name=name)
    ember.save({"format": saved["format"], "config": dict(saved["config"], r=4),
                "tensors": saved["tensors"]}, str(tmp_path / "lies"))
    with pytest.raises(EmberValueError, match="shape mismatches"):
        model.load_adapter(str(tmp_path / "lies"), adapter_name="new")
    assert list(model.peft_config) == ["default"]  # no half-loaded adapter left


def test_two_adapters_switch_and_disable():
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=8, target_modules=TARGETS), "first")
    model.add_adapter("second", peft.LoraConfig(r=4, lora_alpha=8, target_modules=["fc1", "fc2"]))
    assert model.active_adapter == "first"
    _train(model, steps=2)
    model.set_adapter("second")
    second_params = {n for n, _ in model.named_trainable_parameters()}
    assert second_params and all(".second" in n for n in second_params)
    _train(model, steps=2, lr=5e-2)
    model.eval()
    x = _tokens(2, 12, seed=8)
    with ember.no_grad():
        out_second = model(x).numpy()
        model.set_adapter("first")
        out_first = model(x).numpy()
        with model.disable_adapter():
            out_base = model(x).numpy()
        again_first = model(x).numpy()
        base = model.unload()(x).numpy()
    assert np.abs(out_first - out_second).max() > 1e-3
    assert np.abs(out_first - out_base).max() > 1e-3
    np.testing.assert_array_equal(out_first, again_first)
    np.testing.assert_array_equal(out_base, base)


def test_bias_modes_and_dropout():
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=2, target_modules=["qkv"],
                                                        bias="lora_only"))
    names = {n for n, _ in model.named_trainable_parameters()}
    assert "base_model.blocks.0.qkv.base_layer.bias" in names
    assert "base_model.blocks.0.fc1.bias" not in names
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(r=2, target_modules=["qkv"], bias="all"))
    names = {n for n, _ in model.named_trainable_parameters()}
    assert "base_model.blocks.0.fc1.bias" in names and "base_model.head.bias" in names

    ember.manual_seed(0)
    layer = peft.LoraLinear(nn.Linear(8, 8), "d", peft.LoraConfig(r=2, lora_dropout=0.5,
                                                                  target_modules=["x"]))
    with ember.no_grad():
        layer.lora_B["d"].weight.fill_(1.0)
    x = ember.ones(64, 8)
    with ember.no_grad():
        train_out = layer(x).numpy()
        layer.eval()
        eval_out = layer(x).numpy()
        base_out = layer.base_layer(x).numpy()
    assert not np.allclose(train_out, eval_out)  # dropout acts on the adapter path
    assert not np.allclose(eval_out, base_out)


def test_target_errors_name_the_linear_layers():
    with pytest.raises(EmberValueError, match=r"no module matched.*'blocks.0.qkv'.*'head'"):
        peft.get_peft_model(_gpt(), peft.LoraConfig(target_modules=["attention"]))
    with pytest.raises(EmberValueError, match="matched 'blocks.0.ln1', a LayerNorm"):
        peft.get_peft_model(_gpt(), peft.LoraConfig(target_modules=["ln1"]))
    with pytest.raises(EmberValueError, match="target_modules is required"):
        peft.LoraConfig()
    with pytest.raises(EmberValueError, match="r must be a positive int"):
        peft.LoraConfig(r=0, target_modules=["qkv"])
    # A single string is a regular expression over the whole dotted name.
    model = peft.get_peft_model(_gpt(), peft.LoraConfig(target_modules=r"blocks\.1\.(qkv|fc2)"))
    assert [n for n, _ in model.lora_layers()] == ["blocks.1.qkv", "blocks.1.fc2"]
