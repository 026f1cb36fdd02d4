"""Bad input gets a clear ember error naming the op, what it was given and what it
expected — never a bare NumPy traceback."""
import numpy as np
import pytest

import ember


def test_non_broadcastable_shapes():
    with pytest.raises(ember.ShapeError, match=r"add: shapes \(2, 3\) and \(4,\) cannot be broadcast"):
        ember.ones(2, 3) + ember.ones(4)


def test_matmul_misaligned():
    with pytest.raises(ember.ShapeError, match=r"matmul.*\(3, 4\).*\(5, 6\).*4 != 5"):
        ember.ones(3, 4) @ ember.ones(5, 6)


def test_cat_mismatched_shapes():
    with pytest.raises(ember.ShapeError, match=r"cat: Sizes of tensors must match except in "
                                               r"dimension 0.*Expected size 3 but got size 4"):
        ember.cat([ember.ones(2, 3), ember.ones(2, 4)])


def test_view_incompatible_size():
    with pytest.raises(ember.ShapeError, match=r"view: shape '\[4, 2\]' is invalid for input "
                                               r"of size 6"):
        ember.ones(2, 3).view(4, 2)


def test_view_of_non_viewable_strides():
    with pytest.raises(ember.ShapeError, match=r"view:.*use \.reshape"):
        ember.ones(2, 3).t().view(6)


def test_index_out_of_range():
    with pytest.raises(ember.EmberIndexError, match=r"index 5 is out of bounds.*size 3"):
        ember.ones(3)[5]
    with pytest.raises(IndexError):  # also a plain IndexError, as in PyTorch
        ember.ones(3, 2)[:, 7]


def test_dim_out_of_range():
    with pytest.raises(ember.EmberIndexError, match=r"sum: Dimension out of range \(expected "
                                                    r"to be in range of \[-2, 1\], but got 2\)"):
        ember.ones(2, 3).sum(2)


def test_integer_tensors_cannot_require_grad():
    with pytest.raises(RuntimeError, match="only Tensors of floating point and complex dtype "
                                           "can require gradients, got dtype int64"):
        ember.tensor([1, 2], requires_grad=True)


def test_backward_of_non_scalar_needs_gradient():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(ember.EmberError, match=r"grad can be implicitly created only for "
                                               r"scalar outputs; got an output of shape \(3,\)"):
        (x * 2).backward()


def test_backward_twice_without_retain_graph():
    x = ember.ones(3, requires_grad=True)
    y = (x * x).sum()
    y.backward()
    with pytest.raises(ember.EmberError, match="backward through the graph a second time"):
        y.backward()


def test_modifying_a_saved_tensor_in_place():
    x = ember.ones(3, requires_grad=True)
    y = x * 2
    z = (y * y).sum()
    y.add_(1)
    with pytest.raises(ember.EmberError, match=r"modified by an inplace operation: "
                                               r"\[float32 \[3\]\].*MulBackward0.*version 1; "
                                               r"expected version 0"):
        z.backward()


def test_in_place_on_a_leaf_that_requires_grad():
    x = ember.ones(3, requires_grad=True)
    with pytest.raises(ember.EmberError, match="a leaf Variable that requires grad is being "
                                               "used in an in-place operation"):
        x.add_(1)


def test_errors_do_not_leak_numpy_exceptions():
    """Whatever went wrong inside, the user sees an ember error type."""
    cases = [lambda: ember.ones(2, 3) * ember.ones(3, 2),
             lambda: ember.ones(2, 3).reshape(5),
             lambda: ember.ones(2).expand(3),
             lambda: ember.stack([ember.ones(2), ember.ones(3)]),
             lambda: ember.ones(2, 2).permute(0, 0),
             lambda: ember.tensor([[1, 2], [3]])]
    for fn in cases:
        with pytest.raises(ember.EmberError):
            fn()


def test_unsupported_operand_types():
    with pytest.raises(TypeError, match="add: expected a Tensor or a number, got str"):
        ember.ones(2) + "a"
    with pytest.raises(ember.EmberTypeError, match="complex256"):
        ember.from_numpy(np.ones(2, dtype=np.clongdouble))
