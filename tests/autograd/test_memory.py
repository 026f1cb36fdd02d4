"""The graph is freed by reference counting alone (no cycles between tensors and nodes):
saved tensors die after a backward without retain_graph, the rest when the output dies.
The garbage collector is disabled in each test, so a cycle would keep objects alive."""
import gc
import weakref

import pytest

import ember


@pytest.fixture(autouse=True)
def no_gc():
    gc.collect()
    gc.disable()
    yield
    gc.enable()


def test_saved_intermediate_freed_by_backward():
    x = ember.randn(4, requires_grad=True)
    h = x.exp()
    y = (h * h).sum()
    ref = weakref.ref(h)
    del h
    assert ref() is not None  # saved by the mul node
    y.backward()
    assert ref() is None


def test_retain_graph_keeps_saved_tensors_until_output_dies():
    x = ember.randn(4, requires_grad=True)
    h = x.exp()
    y = (h * h).sum()
    ref_h, ref_node = weakref.ref(h), weakref.ref(y.grad_fn)
    del h
    y.backward(retain_graph=True)
    assert ref_h() is not None and ref_node() is not None
    del y
    assert ref_h() is None and ref_node() is None


def test_graph_freed_when_output_dropped_without_backward():
    x = ember.randn(3, requires_grad=True)
    y = x.sin() * x.cos()
    z = y.sum()
    refs = [weakref.ref(y), weakref.ref(y.grad_fn), weakref.ref(z.grad_fn)]
    del y, z
    assert all(r() is None for r in refs)


def test_view_and_in_place_graph_freed():
    a = ember.randn(5, requires_grad=True)
    x = a * 1
    v = x[1:3]
    v.mul_(2)
    loss = (x * x).sum()
    refs = [weakref.ref(x), weakref.ref(v), weakref.ref(x.grad_fn), weakref.ref(v.grad_fn)]
    loss.backward()
    del x, v, loss
    assert all(r() is None for r in refs)


def test_retain_grad_and_hooks_do_not_keep_tensor_alive():
    x = ember.randn(3, requires_grad=True)
    y = x * 2
    y.retain_grad()
    y.register_hook(lambda g: g * 2)
    ref = weakref.ref(y)
    z = (y * 3).sum()
    del y
    z.backward()
    del z
    assert ref() is None


def test_create_graph_grad_freed():
    x = ember.randn(3, requires_grad=True)
    g, = ember.autograd.grad((x ** 3).sum(), x, create_graph=True)
    refs = [weakref.ref(g), weakref.ref(g.grad_fn)]
    gg, = ember.autograd.grad(g.sum(), x)
    del g
    assert all(r() is None for r in refs)


class _ExpSavingOutput(ember.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        y = x.exp()
        ctx.save_for_backward(x, y)
        return y

    @staticmethod
    def backward(ctx, g):
        x, y = ctx.saved_tensors
        return g * y


def test_custom_function_saving_its_output_has_no_cycle():
    x = ember.randn(3, requires_grad=True)
    y = _ExpSavingOutput.apply(x)
    refs = [weakref.ref(y), weakref.ref(y.grad_fn), weakref.ref(y.grad_fn.params["ctx"])]
    z = (y * 2).sum()
    del y, z
    assert all(r() is None for r in refs)


def test_custom_function_saved_tensors_freed_by_backward():
    a = ember.randn(3, requires_grad=True)
    x = a * 1
    y = _ExpSavingOutput.apply(x)
    ref_x = weakref.ref(x)
    z = y.sum()
    del x
    assert ref_x() is not None
    z.backward()
    assert ref_x() is None
    assert a.grad is not None
