"""nn.init's deprecated spellings without the trailing underscore, as PyTorch's."""
import warnings

import numpy as np
import pytest

import ember
from ember.nn import init

NAMES = ("uniform", "normal", "constant", "eye", "dirac", "xavier_uniform", "xavier_normal",
         "kaiming_uniform", "kaiming_normal", "orthogonal", "sparse")


def _call(name, fn):
    if name == "constant":
        return fn(ember.empty(3, 4), 0.5)
    if name == "sparse":
        return fn(ember.empty(6, 4), 0.5)
    if name == "dirac":
        return fn(ember.empty(2, 2, 3))
    return fn(ember.empty(3, 4))


@pytest.mark.parametrize("name", NAMES)
def test_alias_warns_and_fills_like_the_underscore_form(name):
    with pytest.warns(FutureWarning, match=f"`nn.init.{name}` is now deprecated in favor of "
                                           f"`nn.init.{name}_`"):
        ember.manual_seed(0)
        old = _call(name, getattr(init, name))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ember.manual_seed(0)
        new = _call(name, getattr(init, name + "_"))
    np.testing.assert_array_equal(old.numpy(), new.numpy())
    assert getattr(init, name).__name__ == name


def test_messages_match_torch():
    torch = pytest.importorskip("torch")
    for name in NAMES:
        with warnings.catch_warnings(record=True) as seen:
            warnings.simplefilter("always")
            _call(name, getattr(init, name))
        with warnings.catch_warnings(record=True) as tseen:
            warnings.simplefilter("always")
            fn = getattr(torch.nn.init, name)
            if name in ("constant", "sparse"):
                fn(torch.empty(6, 4), 0.5)
            elif name == "dirac":
                fn(torch.empty(2, 2, 3))
            else:
                fn(torch.empty(3, 4))
        assert [str(w.message) for w in seen] == [str(w.message) for w in tseen]
        assert seen[0].category is tseen[0].category is FutureWarning


def test_dirac_and_sparse_values():
    w = init.dirac_(ember.empty(4, 2, 3, 3), groups=2)
    assert w.sum().item() == 4 and w[0, 0, 1, 1].item() == 1 and w[2, 0, 1, 1].item() == 1
    s = init.sparse_(ember.empty(10, 3), 0.3)
    assert ((s.numpy() == 0).sum(axis=0) >= 3).all()
