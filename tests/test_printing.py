"""repr(tensor) against PyTorch's repr, with "torch" read as "ember"."""
import math

import numpy as np
import pytest

import ember
from ember._printing import printoptions

torch = pytest.importorskip("torch")

nan, inf = math.nan, math.inf
_rng = np.random.default_rng(0)

# (id, data, dtype name or None). The same data goes through ember.tensor and torch.tensor.
CASES = [
    ("float_ints", [1.0, 2.0, 3.0], None),
    ("float_neg_ints", [-1.0, 20.0, -300.0], None),
    ("float_decimals", [0.5, -1.25, 3.14159], None),
    ("float_zeros", [0.0, 0.0], None),
    ("float_neg_zero", [-0.0, 1.0], None),
    ("float_sci_small", [1e-5, 0.5], None),
    ("float_sci_ratio", [0.001, 2.5, 10.0], None),
    ("float_sci_big", [1e9, 1.0], None),
    ("float_sci_big_ints", [1e10, 3.0], None),
    ("float_ratio_ints", [1.0, 2000.0], None),
    ("float_nan_inf", [nan, inf, -inf, 1.5], None),
    ("float_nan_ints", [nan, 1.0, -2.0], None),
    ("float_only_nan", [nan, inf], None),
    ("float_0d", 3.5, None),
    ("float_0d_int", -2.0, None),
    ("float_0d_nan", nan, None),
    ("float_0d_tiny", 1e-8, None),
    ("ints", [1, -20, 300], None),
    ("int_0d", 7, None),
    ("bools", [True, False, True], None),
    ("bool_0d", False, None),
    ("empty", [], None),
    ("empty_int", [], "int64"),
    ("empty_2d", np.zeros((0, 3)), "float32"),
    ("empty_2d_int", np.zeros((2, 0)), "int32"),
    ("matrix", [[1.5, 2.0], [3.0, -4.25]], None),
    ("matrix_int", [[1, 22], [333, 4]], None),
    ("cube", np.arange(24.0).reshape(2, 3, 4), "float32"),
    ("four_d", np.arange(16).reshape(2, 2, 2, 2), "int64"),
    ("wide_row", np.linspace(-1, 1, 40), "float32"),
    ("wide_int_row", np.arange(100, 160), "int64"),
    ("wide_matrix", _rng.standard_normal((3, 30)), "float32"),
    ("wide_bool", np.arange(50) % 3 == 0, None),
    ("summarised_vec", np.arange(2000.0), "float32"),
    ("summarised_mat", _rng.standard_normal((40, 40)), "float32"),
    ("summarised_3d", np.arange(1200).reshape(10, 12, 10), "int64"),
    ("summarised_short_dim", np.arange(2002.0).reshape(2, 1001), "float32"),
    ("float16", [1.5, 2.25], "float16"),
    ("float16_ints", [1.0, 2.0], "float16"),
    ("bfloat16", [1.5, -3.0], "bfloat16"),
    ("float64", [1.5, 2.0], "float64"),
    ("float64_0d", 1.25, "float64"),
    ("int32", [1, 2], "int32"),
    ("int8", [-1, 2], "int8"),
    ("uint8", [0, 255], "uint8"),
    ("int16_0d", 5, "int16"),
    ("float64_wide", _rng.standard_normal(14), "float64"),
    ("float16_matrix_suffix", _rng.standard_normal((2, 9)), "float16"),
    ("float_large_sci_mixed", [123456789.0, 0.001, -5.5], None),
]


def _build(lib, data, dtype):
    kwargs = {} if dtype is None else {"dtype": getattr(lib, dtype)}
    if isinstance(data, np.ndarray) and lib is torch and data.dtype == np.bool_:
        data = data.tolist()
    return lib.tensor(data, **kwargs)


def _torch_repr(t) -> str:
    return repr(t).replace("torch", "ember")


@pytest.mark.parametrize("name,data,dtype", CASES, ids=[c[0] for c in CASES])
def test_repr_matches_torch(name, data, dtype):
    assert repr(_build(ember, data, dtype)) == _torch_repr(_build(torch, data, dtype))


@pytest.mark.parametrize("name,data,dtype", CASES[:20], ids=[c[0] for c in CASES[:20]])
def test_str_matches_repr(name, data, dtype):
    t = _build(ember, data, dtype)
    assert str(t) == repr(t)


def test_requires_grad_suffix():
    e = ember.tensor([1.0, 2.0], requires_grad=True)
    t = torch.tensor([1.0, 2.0], requires_grad=True)
    assert repr(e) == _torch_repr(t) == "tensor([1., 2.], requires_grad=True)"


def test_grad_fn_suffix():
    e = ember.tensor([1.0, 2.5], requires_grad=True) * 2
    t = torch.tensor([1.0, 2.5], requires_grad=True) * 2
    assert repr(e) == _torch_repr(t) == "tensor([2., 5.], grad_fn=<MulBackward0>)"


def test_dtype_and_grad_suffixes_wrap_at_linewidth():
    data = _rng.standard_normal((2, 8))
    e = ember.tensor(data, dtype=ember.float64, requires_grad=True)
    t = torch.tensor(data, dtype=torch.float64, requires_grad=True)
    assert repr(e * 3) == _torch_repr(t * 3)
    assert repr(e) == _torch_repr(t)


def test_suffix_after_summary():
    e = ember.zeros(3000, dtype=ember.float16)
    t = torch.zeros(3000, dtype=torch.float16)
    assert repr(e) == _torch_repr(t)


def test_non_contiguous_view():
    data = np.arange(12.0).reshape(3, 4)
    assert repr(ember.tensor(data).T) == _torch_repr(torch.tensor(data).T)


def test_default_float64_hides_float64_shows_float32():
    old = ember.get_default_dtype()
    try:
        ember.set_default_dtype(ember.float64)
        torch.set_default_dtype(torch.float64)
        for dtype in ("float32", "float64"):
            e = ember.tensor([1.5, 2.0], dtype=getattr(ember, dtype))
            t = torch.tensor([1.5, 2.0], dtype=getattr(torch, dtype))
            assert repr(e) == _torch_repr(t)
        assert repr(ember.tensor([], dtype=ember.float32)) == \
            _torch_repr(torch.tensor([], dtype=torch.float32))
    finally:
        ember.set_default_dtype(old)
        torch.set_default_dtype(torch.float32)


OPTION_CASES = [
    dict(precision=2),
    dict(precision=6),
    dict(sci_mode=True),
    dict(sci_mode=False),
    dict(linewidth=40),
    dict(threshold=5, edgeitems=2),
    dict(profile="short"),
    dict(profile="full"),
    dict(threshold=5, edgeitems=0),
]


@pytest.mark.parametrize("options", OPTION_CASES, ids=[str(o) for o in OPTION_CASES])
def test_print_options_match_torch(options):
    data = [np.arange(20.0).reshape(4, 5) / 7, [1e-6, 3.0, 1e5], np.arange(1500), [0.0, 0.0],
            [nan, 1.0]]
    try:
        torch.set_printoptions(**options)
        with printoptions(**options):
            for d in data:
                assert repr(ember.tensor(d)) == _torch_repr(torch.tensor(d))
    finally:
        torch.set_printoptions(profile="default")
    assert repr(ember.tensor([1 / 3])) == "tensor([0.3333])"


def test_set_printoptions_rejects_unknown_profile():
    with pytest.raises(ValueError, match="unknown profile 'wide'"):
        ember.set_printoptions(profile="wide")


def test_format_0d_like_python_number():
    assert f"{ember.tensor(1.5)}" == f"{torch.tensor(1.5)}" == "1.5"
    assert f"{ember.tensor(2.0):.3f}" == "2.000"
    assert f"{ember.tensor([1, 2])}" == "tensor([1, 2])"
    with pytest.raises(TypeError):
        format(ember.tensor([1.0, 2.0]), ".2f")
