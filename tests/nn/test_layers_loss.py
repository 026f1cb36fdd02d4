"""Loss modules against PyTorch, through the module test template."""
import numpy as np
import pytest

import ember
from ember import nn

from .module_template import run_module_test, torch

tnn = torch.nn
rng0 = np.random.default_rng(0)
N, C = 6, 4
X = rng0.standard_normal((N, C))
Y = rng0.standard_normal((N, C))
P = rng0.uniform(0.05, 0.95, (N, C))
Q = rng0.uniform(0.05, 0.95, (N, C))
LABELS = rng0.integers(0, C, N)
W = rng0.uniform(0.5, 2.0, C)
SIGNS = np.where(rng0.random(N) < 0.5, -1.0, 1.0)


def _softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def _w(lib):
    return lib.tensor(W)


# (name, kwargs made per library, inputs, input_grads)
CASES = [
    ("L1Loss", lambda lib: {}, [X, Y], True),
    ("L1Loss", lambda lib: {"reduction": "sum"}, [X, Y], True),
    ("MSELoss", lambda lib: {"reduction": "none"}, [X, Y], True),
    ("MSELoss", lambda lib: {}, [X, Y], True),
    ("SmoothL1Loss", lambda lib: {"beta": 0.5}, [X, Y], True),
    ("HuberLoss", lambda lib: {"delta": 0.5, "reduction": "sum"}, [X, Y], True),
    ("CrossEntropyLoss", lambda lib: {}, [X, LABELS], (True, False)),
    ("CrossEntropyLoss", lambda lib: {"weight": _w(lib), "ignore_index": 2,
                                      "label_smoothing": 0.1}, [X, LABELS], (True, False)),
    ("CrossEntropyLoss", lambda lib: {"reduction": "none"},
     [rng0.standard_normal((N, C, 3)), rng0.integers(0, C, (N, 3))], (True, False)),
    ("CrossEntropyLoss", lambda lib: {"label_smoothing": 0.2}, [X, _softmax(Y)],
     (True, False)),
    ("NLLLoss", lambda lib: {"weight": _w(lib)}, [np.log(_softmax(X)), LABELS],
     (True, False)),
    ("NLLLoss", lambda lib: {"ignore_index": 1, "reduction": "sum"},
     [np.log(_softmax(X)), LABELS], (True, False)),
    ("BCELoss", lambda lib: {}, [P, Q], (True, False)),
    ("BCELoss", lambda lib: {"weight": _w(lib), "reduction": "none"}, [P, Q], (True, False)),
    ("BCEWithLogitsLoss", lambda lib: {}, [X, Q], True),
    ("BCEWithLogitsLoss", lambda lib: {"weight": _w(lib), "pos_weight": _w(lib) * 2},
     [X, Q], (True, False)),
    ("KLDivLoss", lambda lib: {"reduction": "batchmean"}, [np.log(P), Q], True),
    ("KLDivLoss", lambda lib: {"log_target": True, "reduction": "sum"},
     [np.log(P), np.log(Q)], True),
    ("CosineEmbeddingLoss", lambda lib: {"margin": 0.2}, [X, Y, SIGNS], (True, True, False)),
    ("MarginRankingLoss", lambda lib: {"margin": 0.1}, [X[:, 0], Y[:, 0], SIGNS],
     (True, True, False)),
    ("HingeEmbeddingLoss", lambda lib: {"margin": 0.5}, [X, np.sign(Y)], (True, False)),
    ("SoftMarginLoss", lambda lib: {}, [X, np.sign(Y)], (True, False)),
    ("MultiLabelSoftMarginLoss", lambda lib: {"weight": _w(lib)}, [X, (Y > 0) * 1.0],
     (True, False)),
    ("TripletMarginLoss", lambda lib: {"margin": 0.5, "p": 1.5, "swap": True},
     [X, Y, P], True),
    ("PoissonNLLLoss", lambda lib: {}, [X, np.abs(Y)], (True, False)),
    ("PoissonNLLLoss", lambda lib: {"log_input": False, "full": True}, [P, 3 * Q],
     (True, False)),
    ("GaussianNLLLoss", lambda lib: {"full": True}, [X, Y, P], True),
    ("TripletMarginWithDistanceLoss", lambda lib: {"margin": 0.5, "swap": True},
     [X, Y, P], True),
    ("TripletMarginWithDistanceLoss",
     lambda lib: {"distance_function": lambda a, b: ((a - b) ** 2).sum(-1),
                  "reduction": "none"}, [X, Y, P], True),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_loss_module(case, dtype):
    name, make_kwargs, inputs, grads = CASES[case]
    e = getattr(nn, name)(**make_kwargs(ember))
    t = getattr(tnn, name)(**make_kwargs(torch))
    run_module_test(e, t, inputs, dtype=dtype, input_grads=grads)


def test_weight_is_a_buffer_in_the_state_dict():
    e = nn.CrossEntropyLoss(weight=ember.tensor(W))
    t = tnn.CrossEntropyLoss(weight=torch.tensor(W))
    assert list(e.state_dict()) == list(t.state_dict()) == ["weight"]
    assert list(nn.BCEWithLogitsLoss(pos_weight=ember.ones(2)).state_dict()) == ["pos_weight"]
    assert list(nn.CrossEntropyLoss().state_dict()) == []


def test_legacy_reduction_flags():
    with pytest.warns(UserWarning, match="reduction='sum'"):
        assert nn.MSELoss(size_average=False).reduction == "sum"
    with pytest.warns(UserWarning, match="reduction='none'"):
        assert nn.L1Loss(reduce=False).reduction == "none"


def test_triplet_with_distance_margin_error():
    with pytest.raises(ValueError, match="greater than 0"):
        nn.TripletMarginWithDistanceLoss(margin=0.0)


def test_cross_entropy_errors_name_the_shapes():
    loss = nn.CrossEntropyLoss()
    with pytest.raises(ember.EmberError, match="out of"):
        loss(ember.zeros(2, 3), ember.tensor([0, 3]))
    with pytest.raises(ember.EmberError):
        loss(ember.zeros(2, 3), ember.tensor([0.5, 1.0]))
