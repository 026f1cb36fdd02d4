"""``ember.autograd.graph.queue_callback``: run after the backward pass finishes, and the
order in which leaves get their gradients (last layer first)."""
import pytest

import ember
from ember.autograd.graph import queue_callback
from ember.errors import EmberError


def test_callback_runs_after_every_gradient_is_accumulated():
    w1 = ember.tensor([1.0, 2.0], requires_grad=True)
    w2 = ember.tensor([3.0, 4.0], requires_grad=True)
    seen = []

    def hook(grad):
        queue_callback(lambda: seen.append((w1.grad.tolist(), w2.grad.tolist())))
    w2.register_hook(hook)
    ((w1 * w2).sum() + w1.sum()).backward()
    assert seen == [([4.0, 5.0], [1.0, 2.0])]


def test_callbacks_run_in_order_and_may_queue_more():
    x = ember.tensor(2.0, requires_grad=True)
    order = []

    def second():
        order.append("second")
        queue_callback(lambda: order.append("third"))
    x.register_hook(lambda g: (queue_callback(lambda: order.append("first")),
                               queue_callback(second)) and None)
    (x * x).backward()
    assert order == ["first", "second", "third"]
    (x * 3).backward()  # the queue was emptied: a new pass runs only its own callbacks
    assert order == ["first", "second", "third", "first", "second", "third"]


def test_callback_not_run_when_the_backward_raises():
    x = ember.tensor(2.0, requires_grad=True)
    ran = []

    def hook(g):
        queue_callback(lambda: ran.append(1))
        raise RuntimeError("hook failed")
    x.register_hook(hook)
    with pytest.raises(RuntimeError, match="hook failed"):
        (x * x).backward()
    assert ran == []
    with pytest.raises(EmberError, match="only be queued during a backward pass"):
        queue_callback(lambda: None)


def test_queue_outside_backward_is_an_error():
    with pytest.raises(EmberError, match="no backward pass is running"):
        queue_callback(lambda: None)


def test_leaves_get_their_gradients_from_the_last_layer_back():
    net = ember.nn.Sequential(ember.nn.Linear(3, 4), ember.nn.Tanh(), ember.nn.Linear(4, 2))
    order = []
    for name, p in net.named_parameters():
        p.register_hook(lambda g, name=name: order.append(name))
    mid = net[1](net[0](ember.randn(5, 3)))
    mid.register_hook(lambda g: order.append("hidden"))
    net[2](mid).sum().backward()
    # the last layer's parameters are ready before the hidden activation's gradient
    assert order.index("2.weight") < order.index("hidden") < order.index("0.weight")
