"""In-place ops under autograd against PyTorch: version counters, leaves, and views of
non-leaf tensors (the base's graph is rewritten, other views follow)."""
import pytest

import ember
from ember import EmberError
from .oracle import check, check_raises, needs_torch

pytestmark = needs_torch


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


# Version counters -----------------------------------------------------------------------
def test_version_counter_counts_in_place_writes():
    def run(m):
        x = t(m, [1.0, 2.0, 3.0])
        v = x[1:]
        versions = []
        for op in (lambda: x.add_(1), lambda: v.mul_(2), lambda: x.__setitem__(0, 5.0),
                   lambda: x.zero_()):
            op()
            versions.append((x._version, v._version) if m is not ember
                            else (x._version_value, v._version_value))
        return versions
    check(run)


def test_modifying_saved_input_raises():
    def run(m):
        a = t(m, [1.0, 2.0], True)
        b = a * 2
        c = b * b
        b.add_(1)
        c.sum().backward()
    check_raises(run, EmberError, "modified by an inplace operation")


def test_modifying_saved_input_through_a_view_raises():
    def run(m):
        a = t(m, [1.0, 2.0, 3.0], True)
        b = a * 2
        c = b.sin()
        b[1:].mul_(3)
        c.sum().backward()
    check_raises(run, EmberError, "modified by an inplace operation")


def test_modifying_saved_output_raises():
    def run(m):
        b = t(m, [1.0, 2.0], True).exp()  # exp's VJP reads its output
        b.add_(1)
        b.sum().backward()
    check_raises(run, EmberError, "modified by an inplace operation")


def test_modifying_unsaved_tensor_is_fine():
    def run(m):
        a = t(m, [1.0, 2.0], True)
        b = a + 1  # add saves nothing
        c = b + 2
        b.mul_(3)
        (c * 1).sum().backward()
        return a.grad, b
    check(run)


def test_in_place_on_leaf_requiring_grad_raises():
    check_raises(lambda m: t(m, [1.0], True).add_(1), EmberError,
                 "a leaf Variable that requires grad is being used in an in-place operation")


def test_in_place_on_view_of_leaf_requiring_grad_raises():
    check_raises(lambda m: t(m, [1.0, 2.0], True)[:1].add_(1), EmberError,
                 "a view of a leaf Variable that requires grad is being used in an in-place")


def test_in_place_on_leaf_under_no_grad_is_allowed():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        with m.no_grad():
            x.mul_(3)
        (x * x).sum().backward()
        return x, x.grad, x.is_leaf
    check(run)


def test_in_place_chain_grads():
    def run(m):
        a = t(m, [0.5, 1.0, 2.0], True)
        w = t(m, [2.0, -1.0, 3.0], True)
        x = a * 2
        x.mul_(w)
        x.add_(a)
        x.sin_()
        x.sum().backward()
        return x, a.grad, w.grad, x.grad_fn.name()
    check(run)


# Views of non-leaf tensors --------------------------------------------------------------
def test_in_place_on_slice_of_non_leaf():
    def run(m):
        a = t(m, [1.0, 2.0, 3.0, 4.0, 5.0], True)
        w = t(m, [2.0, 3.0], True)
        x = a * 1
        x[1:3].mul_(w)
        (x ** 2).sum().backward()
        return x, a.grad, w.grad
    check(run)


def test_overlapping_views_and_view_of_view():
    def run(m):
        a = t(m, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0], True)
        w = t(m, [2.0, 3.0, 4.0], True)
        x = a * 1
        v1, v2 = x[1:4], x[2:6]
        v3 = v2[1:3]
        v1.mul_(w)
        v3.add_(w[:2] * 2)
        loss = (x ** 2).sum() + (v2 ** 3).sum() + (v1 * v3[:1]).sum()
        loss.backward()
        return x, v1, v2, v3, a.grad, w.grad
    check(run)


def test_in_place_through_transpose_and_reshape_views():
    def run(m):
        a = t(m, [[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], True)
        x = a * 2
        x.t()[0].mul_(3)
        r = x.view(-1)
        r[3:].sin_()
        (x * a).sum().backward()
        return x, a.grad
    check(run)


def test_setitem_on_non_leaf_with_grad_value():
    def run(m):
        a = t(m, [1.0, 2.0, 3.0], True)
        v = t(m, [10.0, 20.0], True)
        x = a.exp()
        y = x * 1
        y[0:2] = v * v
        y.sum().backward()
        return y, a.grad, v.grad
    check(run)


def test_view_created_before_base_modified_sees_new_graph():
    def run(m):
        a = t(m, [1.0, 2.0, 3.0], True)
        x = a * 1
        v = x[:2]
        x.mul_(a)  # v was made before: its value and graph follow the base
        v.sum().backward()
        return v, a.grad
    check(run)


def test_in_place_on_view_does_not_affect_unrelated_grads():
    def run(m):
        a = t(m, [1.0, 2.0, 3.0], True)
        b = t(m, [4.0, 5.0, 6.0], True)
        x = a + b
        y = x * 1
        y[1:].zero_()
        (y * b).sum().backward()
        return a.grad, b.grad
    check(run)


def test_retain_grad_follows_in_place_op():
    def run(m):
        a = t(m, [1.0, 2.0], True)
        y = a * 2
        y.retain_grad()
        y.mul_(3)
        (y * y).sum().backward()
        return y.grad, a.grad
    check(run)


def test_ops_that_save_only_their_index_allow_modifying_the_input():
    """gather/sort read only the index in backward: changing the input in place is fine
    (as in PyTorch), while changing the index is caught."""
    a = ember.tensor([3.0, 1.0, 2.0], requires_grad=True)
    x = a * 1
    values, _ = x.sort()
    x.add_(1)
    values.backward(ember.tensor([1.0, 2.0, 3.0]))
    assert a.grad.tolist() == [3.0, 1.0, 2.0]
    y = ember.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    index = ember.tensor([[1], [0]])
    out = ember.gather(y * 1, 1, index)
    index.add_(0)
    with pytest.raises(ember.EmberError, match="modified by an inplace operation"):
        out.sum().backward()
