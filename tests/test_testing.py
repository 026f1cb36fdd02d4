"""ember.testing.assert_close and make_tensor against torch.testing: the same inputs
pass or fail the same way, with the same messages."""
import numpy as np
import pytest

import ember
from ember.testing import assert_close, make_tensor

torch = pytest.importorskip("torch")

NAN, INF = float("nan"), float("inf")


def _outcome(m, case):
    try:
        case(m)
    except Exception as exc:  # noqa: BLE001  (the exception is what is compared)
        return type(exc), str(exc)
    return None, None


def _same(case):
    got_type, got = _outcome(ember, case)
    expected_type, expected = _outcome(torch, case)
    if expected_type is None:
        assert got_type is None, got
        return
    assert got_type is not None and issubclass(got_type, expected_type), (got_type, got)
    assert got.replace("ember.tensor.Tensor", "ember.Tensor").replace("ember.", "torch.") \
        == expected


def ac(m):
    return m.testing.assert_close


T = [  # cases run on both frameworks
    lambda m: ac(m)(m.tensor([1., 2., 3.]), m.tensor([1., 2.5, 3.])),
    lambda m: ac(m)(m.tensor([[1., 2.], [3., 4.]]), m.tensor([[1., 2.5], [3., 0.]])),
    lambda m: ac(m)(m.tensor([1, 2, 3]), m.tensor([1, 4, 3])),
    lambda m: ac(m)(m.tensor(1.), m.tensor(2.)),
    lambda m: ac(m)(m.tensor(1), m.tensor(3)),
    lambda m: ac(m)(m.tensor(True), m.tensor(False)),
    lambda m: ac(m)(m.tensor([True, False]), m.tensor([True, True])),
    lambda m: ac(m)(m.tensor([3], dtype=m.uint8), m.tensor([200], dtype=m.uint8)),
    lambda m: ac(m)(1.0, 1.5),
    lambda m: ac(m)(1, 2),
    lambda m: ac(m)(1, 1.0),
    lambda m: ac(m)(2, 3, rtol=0.5, atol=0),
    lambda m: ac(m)(1.0, NAN, equal_nan=True),
    lambda m: ac(m)(NAN, NAN, equal_nan=True),
    lambda m: ac(m)(True, False),
    lambda m: ac(m)(None, None),
    lambda m: ac(m)(None, 1),
    lambda m: ac(m)(m.ones(2), m.ones(3)),
    lambda m: ac(m)(m.ones(2), m.ones(2, dtype=m.float64)),
    lambda m: ac(m)(m.ones(2), m.ones(2, dtype=m.float64), check_dtype=False),
    lambda m: ac(m)(m.tensor([1.0]), m.tensor([1.5], dtype=m.float64), check_dtype=False),
    lambda m: ac(m)(m.tensor([1.0], dtype=m.float16), m.tensor([1.0005]), check_dtype=False),
    lambda m: ac(m)(m.tensor([1], dtype=m.int32), m.tensor([1], dtype=m.int64)),
    lambda m: ac(m)(m.tensor([1], dtype=m.int32), m.tensor([1.5]), check_dtype=False),
    lambda m: ac(m)(m.ones(2), m.ones(2), rtol=1e-3),
    lambda m: ac(m)(m.ones(2), m.ones(2), atol=1e-3),
    lambda m: ac(m)(m.tensor([NAN]), m.tensor([NAN])),
    lambda m: ac(m)(m.tensor([NAN]), m.tensor([NAN]), equal_nan=True),
    lambda m: ac(m)(m.tensor([1., NAN]), m.tensor([1., 2.])),
    lambda m: ac(m)(m.tensor([0., INF]), m.tensor([1., INF])),
    lambda m: ac(m)(m.tensor([1., INF]), m.tensor([1., -INF])),
    lambda m: ac(m)(m.tensor([0., 1.]), m.tensor([0., 1. + 1e-6])),
    lambda m: ac(m)(m.tensor([0., 1.], dtype=m.float16), m.tensor([0., 1.01], dtype=m.float16)),
    lambda m: ac(m)(m.ones(2, dtype=m.bfloat16), m.tensor([1.0, 1.01]).to(m.bfloat16)),
    lambda m: ac(m)(m.ones(2, dtype=m.bfloat16), m.tensor([1.0, 1.05]).to(m.bfloat16)),
    lambda m: ac(m)(m.tensor([1., 2.]), m.tensor([1., 2.1]), rtol=0.1, atol=0),
    lambda m: ac(m)(m.tensor([1., 2.]), m.tensor([1., 2.1]), rtol=0.01, atol=0),
    lambda m: ac(m)(m.tensor([1., 2.]), m.tensor([1., 2.1]), rtol=0, atol=0),
    lambda m: ac(m)(m.tensor([1e-9]), m.tensor([0.0])),
    lambda m: ac(m)(m.tensor([1.0]), m.tensor([0.0])),
    lambda m: ac(m)(m.tensor([1e10]), m.tensor([1.0001e10])),
    lambda m: ac(m)(m.tensor([0.0]), m.tensor([-0.0])),
    lambda m: ac(m)(m.zeros(0), m.zeros(0)),
    lambda m: ac(m)(m.zeros(2, 0, 3), m.zeros(2, 0, 3) + 1),
    lambda m: ac(m)(m.tensor([[1.0] * 3] * 1000), m.tensor([[1.0] * 3] * 999 + [[1.0, 1.0, 2.0]])),
    lambda m: ac(m)(m.tensor([[0., 1.], [2., 3.]]).t(), m.tensor([[0., 2.], [1.5, 3.]])),
    lambda m: ac(m)(m.ones(2, 3).t(), m.ones(3, 2), check_stride=True),
    lambda m: ac(m)(m.ones(2, 3).t(), m.ones(3, 2)),
    lambda m: ac(m)(m.tensor([1.0, 2.0], requires_grad=True), m.tensor([1.0, 2.5])),
    lambda m: ac(m)(m.tensor([1.0]), m.tensor([2.0]), msg="custom"),
    lambda m: ac(m)(m.tensor([1.0]), m.tensor([2.0]), msg=lambda s: "X" + s),
    lambda m: ac(m)(m.ones(2), m.ones(3), msg="shapes"),
    lambda m: ac(m)([m.tensor([1.0]), m.tensor([2.0])], [m.tensor([1.0]), m.tensor([3.0])]),
    lambda m: ac(m)((1.0, 2.0), [1.0, 2.0]),
    lambda m: ac(m)([1.0, 2.0], [1.0, 2.5]),
    lambda m: ac(m)({"a": m.tensor([1.0])}, {"a": m.tensor([3.0])}),
    lambda m: ac(m)({"a": m.tensor([1.0])}, {"b": m.tensor([3.0])}),
    lambda m: ac(m)({"a": 1, "c": 2}, {"b": 1, "c": 2}),
    lambda m: ac(m)([m.tensor([1.0])], [m.tensor([1.0])] * 2),
    lambda m: ac(m)([[m.ones(1)], {"k": [1.0, m.zeros(2)]}],
                    [[m.ones(1)], {"k": [1.0, m.ones(2)]}]),
    lambda m: ac(m)([[m.ones(1)], {"k": [1.0, m.zeros(2)]}],
                    [[m.ones(1)], {"k": [1.0, m.ones(2)]}], msg=lambda s: s.upper()),
    lambda m: ac(m)(m.tensor([1.0]), 1.0),
    lambda m: ac(m)({"a": 1}, [1]),
    lambda m: ac(m)("a", "b"),
    lambda m: ac(m)(m.tensor([1.0]), np.array([1.0])),
    lambda m: ac(m)(np.array([1.0]), np.array([1.5])),
    lambda m: ac(m)(np.float64(1.0), 1.0),
]


@pytest.mark.parametrize("case", T)
def test_assert_close_matches_torch(case):
    _same(case)


def test_assert_close_message_example():
    with pytest.raises(AssertionError) as info:
        assert_close(ember.tensor([1.0, 2.0, 3.0]), ember.tensor([1.0, 2.5, 3.0]))
    assert str(info.value) == (
        "Tensor-likes are not close!\n\nMismatched elements: 1 / 3 (33.3%)\n"
        "Greatest absolute difference: 0.5 at index (1,) (up to 1e-05 allowed)\n"
        "Greatest relative difference: 0.20000000298023224 at index (1,) (up to 1.3e-06 "
        "allowed)")


def test_assert_close_passes_on_tolerance_edges():
    x = ember.tensor([1.0, 2.0], dtype=ember.float64)
    assert_close(x, x + 1e-7 * 0.99 * (1 + x.abs()))  # within atol + rtol * |expected|
    with pytest.raises(AssertionError):
        assert_close(x, x + 3e-7 * (1 + x.abs()))


# make_tensor ---------------------------------------------------------------------------
@pytest.mark.parametrize("dtype, low, high, lo, hi", [
    (ember.float32, None, None, -9, 9),
    (ember.float64, -1, 1, -1, 1),
    (ember.bfloat16, None, None, -9, 9),
    (ember.int64, None, None, -9, 9),
    (ember.int8, -200, 200, -128, 127),
    (ember.uint8, None, None, 0, 9),
    (ember.uint8, 2.5, 4, 3, 3),
    (ember.bool, None, None, 0, 1),
])
def test_make_tensor_ranges(dtype, low, high, lo, hi):
    ember.manual_seed(0)
    x = make_tensor(40, 50, dtype=dtype, device="cpu", low=low, high=high)
    assert x.shape == (40, 50) and x.dtype is dtype and x.is_contiguous()
    values = x.numpy().astype(np.float64)
    assert values.min() >= lo and values.max() <= hi
    if dtype.is_floating_point:  # (bfloat16 may round up to ``high``)
        assert values.max() < hi + (dtype is ember.bfloat16) and values.max() - values.min() > 0.8 * (hi - lo)
    else:
        assert values.min() == lo and values.max() == hi  # every integer is drawn


def test_make_tensor_shapes_noncontiguous_exclude_zero_requires_grad():
    x = make_tensor((3, 4), dtype=ember.float32, noncontiguous=True, requires_grad=True)
    assert x.shape == (3, 4) and not x.is_contiguous()
    assert x.requires_grad and x.is_leaf
    assert make_tensor(dtype=ember.float32).shape == ()
    assert make_tensor(1, dtype=ember.float32, noncontiguous=True).is_contiguous()
    ints = make_tensor(100, dtype=ember.int64, low=-1, high=1, exclude_zero=True)
    assert set(ints.tolist()) <= {-1, 1} and 1 in ints.tolist()
    floats = make_tensor(6, 7, dtype=ember.float16, low=0, high=1e-7, exclude_zero=True,
                         noncontiguous=True)
    assert not (floats.numpy() == 0).any() and not floats.is_contiguous()
    cl = make_tensor(2, 3, 4, 5, dtype=ember.float32, memory_format=ember.channels_last)
    assert cl.is_contiguous(memory_format=ember.channels_last)


@pytest.mark.parametrize("case", [
    lambda m: m.testing.make_tensor(3, dtype=m.int64, device="cpu", requires_grad=True),
    lambda m: m.testing.make_tensor(3, dtype=m.float32, device="cpu", low=2, high=1),
    lambda m: m.testing.make_tensor(3, dtype=m.float32, device="cpu", low=float("nan")),
    lambda m: m.testing.make_tensor(3, dtype=m.uint8, device="cpu", low=-20, high=-10),
    lambda m: m.testing.make_tensor(3, dtype=m.float32, device="cpu", noncontiguous=True,
                                    memory_format=m.channels_last),
])
def test_make_tensor_errors_match_torch(case):
    got_type, got = _outcome(ember, case)
    expected_type, expected = _outcome(torch, case)
    assert issubclass(got_type, expected_type) and issubclass(got_type, ember.EmberError)
    assert got.replace("ember.", "torch.") == expected
