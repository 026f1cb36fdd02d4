"""Normalisation layers against PyTorch, through the module test template."""
import numpy as np
import pytest

import ember
from ember import nn

from .module_template import run_module_test, torch

tnn = torch.nn

CASES = [
    ("BatchNorm1d", (4,), {}, (6, 4)),
    ("BatchNorm1d", (4,), {"momentum": None, "eps": 1e-3}, (5, 4, 3)),
    ("BatchNorm1d", (4,), {"affine": False, "track_running_stats": False}, (5, 4, 3)),
    ("BatchNorm2d", (3,), {"momentum": 0.3}, (4, 3, 5, 2)),
    ("BatchNorm2d", (3,), {"track_running_stats": False}, (4, 3, 2, 2)),
    ("BatchNorm3d", (2,), {}, (2, 2, 3, 2, 2)),
    ("InstanceNorm1d", (3,), {}, (4, 3, 6)),
    ("InstanceNorm1d", (3,), {"affine": True, "track_running_stats": True}, (3, 6)),
    ("InstanceNorm2d", (3,), {"affine": True}, (2, 3, 4, 5)),
    ("InstanceNorm2d", (3,), {"track_running_stats": True, "momentum": None}, (2, 3, 4, 5)),
    ("InstanceNorm3d", (2,), {"affine": True}, (2, 2, 3, 2, 3)),
    ("LayerNorm", (5,), {}, (3, 4, 5)),
    ("LayerNorm", ((4, 5),), {"eps": 1e-3, "bias": False}, (3, 4, 5)),
    ("LayerNorm", ([5],), {"elementwise_affine": False}, (3, 5)),
    ("GroupNorm", (2, 6), {}, (3, 6, 4)),
    ("GroupNorm", (3, 3), {"affine": False, "eps": 1e-2}, (2, 3, 2, 2)),
    ("RMSNorm", (5,), {}, (3, 4, 5)),
    ("RMSNorm", ((4, 5),), {"eps": 1e-4}, (3, 4, 5)),
    ("RMSNorm", (5,), {"elementwise_affine": False}, (2, 5)),
    ("LocalResponseNorm", (3,), {"alpha": 1e-2, "beta": 0.5, "k": 2.0}, (2, 5, 4)),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_norm_module(case, dtype):
    name, args, kwargs, shape = CASES[case]
    rng = np.random.default_rng(case)
    e = getattr(nn, name)(*args, **kwargs)
    t = getattr(tnn, name)(*args, **kwargs)
    # Non-default affine parameters, so a swapped weight and bias would show.
    with torch.no_grad():
        for p in t.parameters():
            p.copy_(torch.tensor(rng.uniform(0.5, 1.5, tuple(p.shape))))
    run_module_test(e, t, [rng.standard_normal(shape) * 2 + 1], dtype=dtype)


def test_batch_norm_running_statistics_by_hand():
    m = nn.BatchNorm1d(2, momentum=None)
    batches = [ember.tensor([[1.0, 2.0], [3.0, 6.0]]), ember.tensor([[5.0, 0.0], [7.0, 0.0]])]
    for b in batches:
        m(b)
    # momentum=None: the plain average of the batch means and of the unbiased variances.
    assert m.running_mean.tolist() == pytest.approx([(2 + 6) / 2, (4 + 0) / 2])
    assert m.running_var.tolist() == pytest.approx([2.0, (8 + 0) / 2])
    assert m.num_batches_tracked.item() == 2
    m.eval()
    m(batches[0])
    assert m.num_batches_tracked.item() == 2
    m.reset_running_stats()
    assert m.running_mean.tolist() == [0, 0] and m.running_var.tolist() == [1, 1]


def test_norm_errors():
    with pytest.raises(ValueError, match=r"BatchNorm2d: expected 4D input \(got 3D"):
        nn.BatchNorm2d(3)(ember.zeros(3, 4, 4))
    with pytest.raises(ValueError, match="BatchNorm1d: expected 2D or 3D"):
        nn.BatchNorm1d(3)(ember.zeros(3))
    with pytest.raises(ValueError, match="num_channels must be divisible by num_groups"):
        nn.GroupNorm(4, 6)
    with pytest.raises(ValueError, match="to match num_features"):
        nn.InstanceNorm1d(3, affine=True)(ember.zeros(2, 4, 5))
    with pytest.warns(UserWarning, match="does not match num_features"):
        nn.InstanceNorm1d(3)(ember.zeros(2, 4, 5))
    with pytest.raises(ember.EmberError):
        nn.BatchNorm1d(3)(ember.zeros(2, 4))


def test_norm_state_dict_keys_match_torch():
    for name, args, kwargs in [("BatchNorm2d", (3,), {}), ("InstanceNorm2d", (3,), {}),
                               ("InstanceNorm1d", (3,), {"track_running_stats": True}),
                               ("BatchNorm1d", (3,), {"affine": False})]:
        e, t = getattr(nn, name)(*args, **kwargs), getattr(tnn, name)(*args, **kwargs)
        assert list(e.state_dict()) == list(t.state_dict())
        assert e.state_dict().get("num_batches_tracked", ember.tensor(0)).dtype is ember.int64
