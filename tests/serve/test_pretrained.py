"""save_pretrained / load_pretrained: round trips, and clear errors on directories that
are missing, corrupted or hostile."""
import json
import os
import pickle

import numpy as np
import pytest

import ember
from ember.config.models import mlp
from ember.pretrained import (CONFIG_FILE, WEIGHTS_FILE, PretrainedError,
                              read_pretrained_config)


def _config(directory):
    with open(os.path.join(directory, CONFIG_FILE)) as f:
        return json.load(f)


def _write_config(directory, config):
    with open(os.path.join(directory, CONFIG_FILE), "w") as f:
        json.dump(config, f)


def test_mlp_round_trip(mlp_dir):
    directory, model = mlp_dir
    loaded = ember.load_pretrained(directory)
    x = ember.randn(5, 64)
    np.testing.assert_array_equal(loaded(x).detach().numpy(), model(x).detach().numpy())
    config = _config(directory)
    assert config["model"]["name"] == "mlp" and config["model"]["sizes"] == [64, 32, 10]
    assert config["inputs"] == [{"name": "input", "shape": [None, 64], "dtype": "float32"}]
    assert not loaded.training


def test_cnn_round_trip_with_named_input(cnn_dir):
    directory, model = cnn_dir
    spec, = read_pretrained_config(directory).inputs
    assert (spec.name, spec.shape, spec.dtype) == ("image", (None, 1, 8, 8), "float32")
    x = ember.randn(3, 1, 8, 8)
    np.testing.assert_array_equal(ember.load_pretrained(directory)(x).detach().numpy(),
                                  model(x).detach().numpy())


def test_gpt_declares_token_input_without_examples(tmp_path, gpt_model):
    options = {"name": "gpt", "vocab_size": 256, "context": 48, "d_model": 32,
               "n_heads": 4, "n_layers": 2}
    ember.save_pretrained(gpt_model, tmp_path, options)
    spec, = read_pretrained_config(tmp_path).inputs
    assert (spec.shape, spec.dtype) == ((None, None), "int64")
    idx = ember.randint(0, 256, (2, 7))
    np.testing.assert_array_equal(ember.load_pretrained(tmp_path)(idx).detach().numpy(),
                                  gpt_model(idx).detach().numpy())


def test_onnx_export_alongside(tmp_path):
    pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    model = mlp([64, 32, 10]).eval()
    ember.save_pretrained(model, tmp_path, {"name": "mlp", "sizes": [64, 32, 10]},
                          example_inputs=ember.zeros(2, 64), export_onnx=True)
    assert _config(tmp_path)["onnx"] is True
    x = np.random.default_rng(0).standard_normal((5, 64)).astype(np.float32)
    session = ort.InferenceSession(str(tmp_path / "model.onnx"))
    got, = session.run(None, {"input": x})
    np.testing.assert_allclose(got, model(ember.from_numpy(x)).detach().numpy(), rtol=1e-5,
                               atol=1e-6)


def test_save_rejects_a_config_that_builds_another_model(tmp_path):
    model = mlp([64, 32, 10])
    with pytest.raises(PretrainedError, match="state dict differs"):
        ember.save_pretrained(model, tmp_path, {"name": "mlp", "sizes": [64, 16, 10]},
                              example_inputs=ember.zeros(1, 64))
    with pytest.raises(PretrainedError, match="example_inputs"):
        ember.save_pretrained(model, tmp_path, {"name": "mlp", "sizes": [64, 32, 10]})
    with pytest.raises(PretrainedError, match="bad model config.*sizes"):
        ember.save_pretrained(model, tmp_path, {"name": "mlp"},
                              example_inputs=ember.zeros(1, 64))
    assert not os.path.exists(tmp_path / CONFIG_FILE)


@pytest.fixture
def copy_dir(mlp_dir, tmp_path):
    import shutil
    target = tmp_path / "copy"
    shutil.copytree(mlp_dir[0], target)
    return target


def test_missing_directory_and_files(tmp_path, copy_dir):
    with pytest.raises(PretrainedError, match="is not a directory"):
        ember.load_pretrained(tmp_path / "nowhere")
    with pytest.raises(PretrainedError, match="no config.json"):
        ember.load_pretrained(tmp_path)
    os.remove(copy_dir / WEIGHTS_FILE)
    with pytest.raises(PretrainedError, match="has no model.safetensors"):
        ember.load_pretrained(copy_dir)


@pytest.mark.parametrize("mutate, message", [
    (lambda c: "{not json", "not valid JSON"),
    (lambda c: [1, 2], "not an ember model config"),
    (lambda c: {**c, "version": 99}, "version 99"),
    (lambda c: {**c, "model": {"name": "resnet"}}, "bad model config.*model.name"),
    (lambda c: {**c, "model": {"name": "mlp", "sizes": [64, 32, 10], "evil": 1}},
     "bad model config.*evil"),
    (lambda c: {**c, "inputs": []}, "non-empty list"),
    (lambda c: {**c, "inputs": [{"name": "x", "shape": [None, -1], "dtype": "float32"}]},
     "shape must be"),
    (lambda c: {**c, "inputs": [{"name": "x", "shape": [None, 64], "dtype": "object"}]},
     "dtype must be one of"),
    (lambda c: {**c, "onnx": True}, "model.onnx, which is missing"),
])
def test_corrupt_config(copy_dir, mutate, message):
    config = mutate(_config(copy_dir))
    if isinstance(config, str):
        (copy_dir / CONFIG_FILE).write_text(config)
    else:
        _write_config(copy_dir, config)
    with pytest.raises(PretrainedError, match=message):
        ember.load_pretrained(copy_dir)


def test_import_builder_needs_permission(copy_dir):
    _write_config(copy_dir, {**_config(copy_dir), "model": {
        "import": "tests.serve.models:slow_mlp", "options": {"sizes": [64, 32, 10]}}})
    with pytest.raises(PretrainedError, match="allow_import=True"):
        ember.load_pretrained(copy_dir)
    with pytest.raises(PretrainedError, match="don't fit"):  # slow_mlp nests the MLP
        ember.load_pretrained(copy_dir, allow_import=True)


def test_pickled_or_mismatched_weights(copy_dir, tmp_path):
    (copy_dir / WEIGHTS_FILE).write_bytes(pickle.dumps({"a": 1}))
    with pytest.raises(PretrainedError, match="pickle"):
        ember.load_pretrained(copy_dir)
    ember.save(mlp([64, 16, 10]).state_dict(), copy_dir / WEIGHTS_FILE)
    with pytest.raises(PretrainedError, match="(?s)don.t fit.*size mismatch"):
        ember.load_pretrained(copy_dir)
    (copy_dir / WEIGHTS_FILE).write_bytes(b"\x10\x00\x00\x00\x00\x00\x00\x00{\"a\": 1}")
    with pytest.raises(PretrainedError, match="truncated|corrupt|safetensors"):
        ember.load_pretrained(copy_dir)


def test_oversized_config(copy_dir):
    (copy_dir / CONFIG_FILE).write_bytes(b" " * (2 << 20))
    with pytest.raises(PretrainedError, match="at most"):
        ember.load_pretrained(copy_dir)
