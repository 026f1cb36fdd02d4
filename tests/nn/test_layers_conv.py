"""Convolution layers against PyTorch, through the module test template."""
import numpy as np
import pytest

import ember
from ember import nn

from .module_template import run_module_test, torch

tnn = torch.nn

# (class, constructor args, constructor kwargs, input shape, forward kwargs)
CASES = [
    ("Conv1d", (3, 4, 3), {}, (2, 3, 9), {}),
    ("Conv1d", (4, 6, 2), {"stride": 2, "padding": 1, "dilation": 2, "groups": 2}, (2, 4, 11), {}),
    ("Conv1d", (3, 4, 4), {"padding": "same", "bias": False}, (2, 3, 9), {}),
    ("Conv1d", (3, 4, 3), {"padding": 2, "padding_mode": "circular"}, (3, 7), {}),
    ("Conv2d", (3, 5, 3), {}, (2, 3, 7, 6), {}),
    ("Conv2d", (4, 6, (3, 2)), {"stride": (2, 1), "padding": (1, 2), "dilation": (1, 2),
                                "groups": 2}, (2, 4, 8, 7), {}),
    ("Conv2d", (3, 4, (4, 3)), {"padding": "same", "dilation": 2}, (1, 3, 9, 8), {}),
    ("Conv2d", (3, 4, 3), {"padding": "valid", "bias": False}, (3, 6, 6), {}),
    ("Conv2d", (2, 4, 3), {"padding": 1, "padding_mode": "reflect"}, (2, 2, 5, 6), {}),
    ("Conv2d", (2, 2, 3), {"padding": (2, 1), "padding_mode": "replicate", "groups": 2},
     (2, 2, 5, 6), {}),
    ("Conv3d", (2, 4, 3), {"padding": 1, "stride": (1, 2, 1)}, (2, 2, 4, 5, 4), {}),
    ("ConvTranspose1d", (3, 4, 3), {"stride": 2, "padding": 1, "output_padding": 1},
     (2, 3, 6), {}),
    ("ConvTranspose1d", (4, 6, 3), {"groups": 2, "dilation": 2, "bias": False}, (4, 5), {}),
    ("ConvTranspose2d", (3, 4, 3), {}, (2, 3, 5, 4), {}),
    ("ConvTranspose2d", (4, 2, (3, 2)), {"stride": (2, 3), "padding": (1, 0),
                                         "output_padding": (1, 2), "groups": 2,
                                         "dilation": (2, 1)}, (2, 4, 4, 3), {}),
    ("ConvTranspose2d", (3, 2, 3), {"stride": 2, "padding": 1}, (1, 3, 5, 5),
     {"output_size": (10, 10)}),
    ("ConvTranspose3d", (2, 3, 2), {"stride": 2}, (1, 2, 3, 2, 3), {}),
]


@pytest.mark.parametrize("dtype", ["float64", "float32"])
@pytest.mark.parametrize("case", range(len(CASES)),
                         ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
@pytest.mark.filterwarnings("ignore:Using padding=.same. with even kernel")
def test_conv_module(case, dtype):
    name, args, kwargs, shape, fwd = CASES[case]
    rng = np.random.default_rng(case)
    e = getattr(nn, name)(*args, **kwargs)
    t = getattr(tnn, name)(*args, **kwargs)
    run_module_test(e, t, [rng.standard_normal(shape)], kwargs=fwd, dtype=dtype)


def test_conv_errors_name_the_layer_and_shapes():
    conv = nn.Conv2d(3, 8, 3)
    with pytest.raises(ember.ShapeError, match=r"Conv2d: expected input with 3 channels.*"
                                               r"\(2, 4, 8, 8\)"):
        conv(ember.zeros(2, 4, 8, 8))
    with pytest.raises(ember.ShapeError, match=r"Conv2d: expected a 3-D .* or 4-D .*\(8, 8\)"):
        conv(ember.zeros(8, 8))
    with pytest.raises(ember.ShapeError, match="ConvTranspose1d: expected input with 3"):
        nn.ConvTranspose1d(3, 2, 2)(ember.zeros(1, 2, 5))
    with pytest.raises(ValueError, match="in_channels must be divisible by groups"):
        nn.Conv1d(3, 4, 2, groups=2)
    with pytest.raises(ValueError, match="out_channels must be divisible by groups"):
        nn.Conv1d(4, 3, 2, groups=2)
    with pytest.raises(ValueError, match="strided"):
        nn.Conv2d(1, 1, 3, stride=2, padding="same")
    with pytest.raises(ValueError, match="Invalid padding string"):
        nn.Conv2d(1, 1, 3, padding="full")
    with pytest.raises(ValueError, match="padding_mode must be one of"):
        nn.Conv2d(1, 1, 3, padding_mode="mirror")
    with pytest.raises(ValueError, match='Only "zeros" padding mode'):
        nn.ConvTranspose2d(1, 1, 3, padding_mode="reflect")
    with pytest.raises(ValueError, match="valid sizes range from"):
        nn.ConvTranspose2d(1, 1, 3, stride=2)(ember.zeros(1, 1, 4, 4), output_size=(20, 20))


def test_conv_weight_shapes_and_repr():
    assert nn.Conv2d(4, 6, (3, 5), groups=2).weight.shape == (6, 2, 3, 5)
    assert nn.ConvTranspose2d(4, 6, 3, groups=2).weight.shape == (4, 3, 3, 3)
    for args, kwargs in [((3, 4, 3), {"padding": "same", "padding_mode": "reflect"}),
                         ((3, 4, 3), {"stride": 2, "bias": False, "dilation": 2})]:
        assert repr(nn.Conv2d(*args, **kwargs)) == repr(tnn.Conv2d(*args, **kwargs))
    assert repr(nn.ConvTranspose1d(3, 4, 3, output_padding=1, stride=2)) == \
        repr(tnn.ConvTranspose1d(3, 4, 3, output_padding=1, stride=2))
