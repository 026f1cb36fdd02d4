"""ember.models.GPT: DESIGN.md's gpt, with the parameter names and shapes of the
PyTorch twin in bench/training.py, and the same outputs for the same weights."""
import os
import sys

import numpy as np
import pytest

import ember

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "bench"))


def test_gpt_matches_the_bench_model_of_pytorch():
    torch = pytest.importorskip("torch")
    import training
    torch.manual_seed(0)
    twin = training.build(torch, "gpt")[0].double()
    model = ember.models.GPT().to(ember.float64)
    want = {k: tuple(v.shape) for k, v in twin.state_dict().items()}
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == want
    model.load_state_dict({k: ember.tensor(v.numpy()) for k, v in twin.state_dict().items()})
    idx = np.random.default_rng(0).integers(0, 256, (2, 64))
    got = model(ember.tensor(idx)).detach().numpy()
    np.testing.assert_allclose(got, twin(torch.tensor(idx)).detach().numpy(), rtol=1e-9,
                               atol=1e-10)
