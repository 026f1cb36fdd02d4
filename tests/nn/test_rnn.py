"""RNN, LSTM, GRU and their cells against PyTorch: outputs, final states and every
gradient (through the module template), dropout between layers, default initialisation,
double backward, and the errors for bad input."""
import numpy as np
import pytest

import ember
import ember.nn as nn
from ember.errors import EmberTypeError, ShapeError

from .module_template import run_module_test

torch = pytest.importorskip("torch")


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _pair(name, *args, **kwargs):
    torch.manual_seed(0)
    return getattr(nn, name)(*args, **kwargs), getattr(torch.nn, name)(*args, **kwargs)


X = _rand(5, 3, 4)        # (L, N, H_in)
XB = _rand(3, 5, 4)       # (N, L, H_in)
XU = _rand(5, 4)          # unbatched (L, H_in)

# name, constructor kwargs, inputs
LAYER_CASES = [
    ("RNN", {}, (X,)),
    ("RNN", {"nonlinearity": "relu", "num_layers": 2}, (X, _rand(2, 3, 6, seed=1))),
    ("RNN", {"bidirectional": True, "batch_first": True}, (XB,)),
    ("RNN", {"bias": False}, (XU, _rand(1, 6, seed=1))),
    ("LSTM", {}, (X,)),
    ("LSTM", {"num_layers": 2, "bidirectional": True},
     (X, (_rand(4, 3, 6, seed=1), _rand(4, 3, 6, seed=2)))),
    ("LSTM", {"proj_size": 3, "num_layers": 2, "batch_first": True},
     (XB, (_rand(2, 3, 3, seed=1), _rand(2, 3, 6, seed=2)))),
    ("LSTM", {"proj_size": 2, "bidirectional": True}, (XU,)),
    ("LSTM", {"bias": False}, (XU, (_rand(1, 6, seed=1), _rand(1, 6, seed=2)))),
    ("GRU", {}, (X, _rand(1, 3, 6, seed=1))),
    ("GRU", {"num_layers": 2, "bidirectional": True, "batch_first": True}, (XB,)),
    ("GRU", {"bias": False, "num_layers": 3}, (XU,)),
]


@pytest.mark.parametrize("name,kwargs,inputs", LAYER_CASES,
                         ids=[f"{n}-{'-'.join(f'{k}={v}' for k, v in kw.items())}-{i}"
                              for i, (n, kw, _) in enumerate(LAYER_CASES)])
def test_layer_matches_torch_float64(name, kwargs, inputs):
    ember_module, torch_module = _pair(name, 4, 6, **kwargs)
    run_module_test(ember_module, torch_module, inputs, dtype="float64")


@pytest.mark.parametrize("name,kwargs,inputs", [LAYER_CASES[1], LAYER_CASES[6], LAYER_CASES[10]])
def test_layer_matches_torch_float32(name, kwargs, inputs):
    ember_module, torch_module = _pair(name, 4, 6, **kwargs)
    run_module_test(ember_module, torch_module, inputs, dtype="float32")


CELL_CASES = [
    ("RNNCell", {}, (_rand(3, 4),)),
    ("RNNCell", {"nonlinearity": "relu", "bias": False}, (_rand(3, 4), _rand(3, 6, seed=1))),
    ("RNNCell", {}, (_rand(4), _rand(6, seed=1))),
    ("LSTMCell", {}, (_rand(3, 4),)),
    ("LSTMCell", {"bias": False}, (_rand(3, 4), (_rand(3, 6, seed=1), _rand(3, 6, seed=2)))),
    ("LSTMCell", {}, (_rand(4), (_rand(6, seed=1), _rand(6, seed=2)))),
    ("GRUCell", {}, (_rand(3, 4), _rand(3, 6, seed=1))),
    ("GRUCell", {"bias": False}, (_rand(4),)),
]


@pytest.mark.parametrize("name,kwargs,inputs", CELL_CASES)
@pytest.mark.parametrize("dtype", ["float64", "float32"])
def test_cell_matches_torch(name, kwargs, inputs, dtype):
    ember_module, torch_module = _pair(name, 4, 6, **kwargs)
    run_module_test(ember_module, torch_module, inputs, dtype=dtype)


def test_dropout_between_layers_runs_in_eval_like_torch():
    ember_module, torch_module = _pair("LSTM", 4, 6, num_layers=2, dropout=0.3)
    run_module_test(ember_module, torch_module, (X,), dtype="float64",
                    deterministic_train=False)


def test_dropout_one_zeroes_the_second_layers_input_like_torch():
    # p=1 is deterministic: layer 1 sees zeros, in both frameworks
    for name in ("RNN", "LSTM", "GRU"):
        ember_module, torch_module = _pair(name, 4, 6, num_layers=2, dropout=1.0)
        ember_module.load_state_dict({k: ember.tensor(v.numpy())
                                      for k, v in torch_module.double().state_dict().items()})
        ember_module.double().train()
        torch_module.train()
        out_e = ember_module(ember.tensor(X))[0]
        out_t = torch_module(torch.tensor(X))[0]
        np.testing.assert_allclose(out_e.detach().numpy(), out_t.detach().numpy(), rtol=1e-10,
                                   atol=1e-12)


def test_dropout_only_between_layers_and_only_in_training():
    model = nn.GRU(4, 6, num_layers=2, dropout=0.5).double()
    x = ember.tensor(X)
    model.eval()
    with ember.no_grad():
        out_eval, h_eval = model(x)
        model.train()
        ember.manual_seed(1)
        out_a, h_a = model(x)
        ember.manual_seed(1)
        out_b, _ = model(x)
    # the first layer's final state never sees dropout; the second layer's input does
    np.testing.assert_allclose(h_a[0].numpy(), h_eval[0].numpy(), rtol=1e-12)
    assert not np.allclose(h_a[1].numpy(), h_eval[1].numpy())
    assert not np.allclose(out_a.numpy(), out_eval.numpy())
    np.testing.assert_array_equal(out_a.numpy(), out_b.numpy())


@pytest.mark.parametrize("name", ["RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"])
def test_default_init_statistics_match_torch(name):
    kwargs = {"num_layers": 2, "bidirectional": True} if not name.endswith("Cell") else {}
    ember_module, torch_module = _pair(name, 48, 64, **kwargs)
    bound = 1 / 8  # 1 / sqrt(hidden_size)
    t_params = dict(torch_module.named_parameters())
    for pname, p in ember_module.named_parameters():
        values = p.detach().numpy()
        ref = t_params[pname].detach().numpy()
        assert p.dtype == ember.float32
        assert np.abs(values).max() <= bound
        n = values.size
        # U(-b, b): mean 0, std b / sqrt(3); allow 5 standard errors
        assert abs(values.mean() - ref.mean()) < 5 * bound / np.sqrt(3 * n) * 2
        assert abs(values.std() - ref.std()) < 5 * bound / np.sqrt(n)
        assert abs(values.std() - bound / np.sqrt(3)) < 5 * bound / np.sqrt(n)


def test_parameter_names_shapes_and_dtype_argument():
    lstm = nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2, dtype=ember.float64)
    ref = torch.nn.LSTM(3, 5, num_layers=2, bidirectional=True, proj_size=2)
    assert [(n, tuple(p.shape)) for n, p in lstm.named_parameters()] == \
        [(n, tuple(p.shape)) for n, p in ref.named_parameters()]
    assert all(p.dtype == ember.float64 for p in lstm.parameters())
    assert len(lstm.all_weights) == 4 and len(lstm.all_weights[0]) == 5
    assert lstm.all_weights[1][0] is lstm.weight_ih_l0_reverse


def test_double_backward_matches_torch():
    for name in ("LSTM", "GRU"):
        ember_module, torch_module = _pair(name, 4, 6, num_layers=2)
        torch_module.double()
        ember_module.double().load_state_dict({k: ember.tensor(v.detach().numpy())
                                      for k, v in torch_module.state_dict().items()})
        xe = ember.tensor(X[:3], requires_grad=True)
        xt = torch.tensor(X[:3], requires_grad=True)
        (ge,) = ember.autograd.grad(ember_module(xe)[0].square().sum(), [xe],
                                    create_graph=True)
        (gt,) = torch.autograd.grad(torch_module(xt)[0].square().sum(), [xt],
                                    create_graph=True)
        (ge * ge).sum().backward()
        (gt * gt).sum().backward()
        t_params = dict(torch_module.named_parameters())
        for pname, p in ember_module.named_parameters():
            np.testing.assert_allclose(p.grad.numpy(), t_params[pname].grad.numpy(),
                                       rtol=1e-9, atol=1e-11, err_msg=f"{name} {pname}")
        np.testing.assert_allclose(xe.grad.numpy(), xt.grad.numpy(), rtol=1e-9, atol=1e-11)


def test_long_sequence_gradient_reaches_every_step():
    rnn = nn.RNN(2, 3).double()
    x = ember.tensor(_rand(40, 1, 2), requires_grad=True)
    out, _ = rnn(x)
    out[-1].sum().backward()
    assert x.grad.shape == (40, 1, 2)
    assert np.all(np.abs(x.grad.numpy()[-1]) > 0)


def test_reprs():
    assert repr(nn.LSTM(10, 20, 2, batch_first=True, dropout=0.5, bidirectional=True,
                        proj_size=3)) == ("LSTM(10, 20, proj_size=3, num_layers=2, "
                                          "batch_first=True, dropout=0.5, bidirectional=True)")
    assert repr(nn.RNNCell(3, 4, bias=False, nonlinearity="relu")) == \
        "RNNCell(3, 4, bias=False, nonlinearity=relu)"
    assert repr(nn.GRU(3, 4, bias=False)) == "GRU(3, 4, bias=False)"


# Errors -------------------------------------------------------------------------------
def test_input_errors_name_the_layer_and_shapes():
    lstm = nn.LSTM(10, 20, 2)
    with pytest.raises(ShapeError, match=r"LSTM: input.size\(-1\) must be equal to "
                                         r"input_size. Expected 10, got 7"):
        lstm(ember.randn(5, 3, 7))
    with pytest.raises(ShapeError, match=r"LSTM: Expected input to be 2-D .* got 4-D"):
        lstm(ember.randn(5, 3, 4, 10))
    with pytest.raises(ShapeError, match=r"LSTM: Expected hidden\[0\] size \(2, 3, 20\), "
                                         r"got \(2, 4, 20\)"):
        lstm(ember.randn(5, 3, 10), (ember.randn(2, 4, 20), ember.randn(2, 3, 20)))
    with pytest.raises(ShapeError, match=r"LSTM: Expected hidden\[1\] size \(2, 3, 20\)"):
        lstm(ember.randn(5, 3, 10), (ember.randn(2, 3, 20), ember.randn(1, 3, 20)))
    with pytest.raises(ShapeError, match="For unbatched 2-D input, hidden\\[0\\] should "
                                         "also be 2-D"):
        lstm(ember.randn(5, 10), (ember.randn(2, 3, 20), ember.randn(2, 3, 20)))
    with pytest.raises(EmberTypeError, match="LSTM: hx must be a tuple"):
        lstm(ember.randn(5, 3, 10), ember.randn(2, 3, 20))
    gru = nn.GRU(10, 20)
    with pytest.raises(ShapeError, match=r"GRU: Expected hidden size \(1, 3, 20\), got "
                                         r"\(2, 3, 20\)"):
        gru(ember.randn(5, 3, 10), ember.randn(2, 3, 20))
    with pytest.raises(EmberTypeError, match="GRU: expected hidden to be a Tensor"):
        gru(ember.randn(5, 3, 10), (ember.randn(1, 3, 20),))
    with pytest.raises(ShapeError, match="RNN: Expected sequence length to be larger than 0"):
        nn.RNN(10, 20)(ember.randn(0, 3, 10))
    with pytest.raises(EmberTypeError, match="RNN: input has dtype float64 but the layer's "
                                             "parameters are float32"):
        nn.RNN(10, 20)(ember.randn(5, 3, 10, dtype=ember.float64))


def test_cell_errors():
    cell = nn.LSTMCell(10, 20)
    with pytest.raises(ShapeError, match="LSTMCell: input has inconsistent input_size: "
                                         "got 7 expected 10"):
        cell(ember.randn(3, 7))
    with pytest.raises(ShapeError, match="LSTMCell: Expected input to be 1-D .* got 3-D"):
        cell(ember.randn(3, 4, 10))
    with pytest.raises(ShapeError, match="LSTMCell: Input batch size 3 doesn't match "
                                         r"hx\[0\] batch size 4"):
        cell(ember.randn(3, 10), (ember.randn(4, 20), ember.randn(3, 20)))
    with pytest.raises(ShapeError, match="GRUCell: hx has inconsistent hidden_size: got 21, "
                                         "expected 20"):
        nn.GRUCell(10, 20)(ember.randn(3, 10), ember.randn(3, 21))
    with pytest.raises(ShapeError, match="RNNCell: hx must be 1-D like the input"):
        nn.RNNCell(10, 20)(ember.randn(10), ember.randn(3, 20))


def test_constructor_errors():
    with pytest.raises(ValueError, match="dropout should be a number in range"):
        nn.LSTM(10, 20, dropout=1.5)
    with pytest.raises(ValueError, match="hidden_size must be greater than zero"):
        nn.GRU(10, 0)
    with pytest.raises(ValueError, match="num_layers must be greater than zero"):
        nn.RNN(10, 20, 0)
    with pytest.raises(ValueError, match="proj_size has to be smaller than hidden_size"):
        nn.LSTM(10, 20, proj_size=20)
    with pytest.raises(ValueError, match="Unknown nonlinearity 'sigmoid'"):
        nn.RNN(10, 20, nonlinearity="sigmoid")
    with pytest.raises(ValueError, match="Unknown nonlinearity"):
        nn.RNNCell(10, 20, nonlinearity="sigmoid")
    with pytest.raises(EmberTypeError, match="hidden_size should be of type int"):
        nn.LSTM(10, 2.5)
    with pytest.warns(UserWarning, match="non-zero dropout expects num_layers greater than 1"):
        nn.LSTM(10, 20, dropout=0.5)
