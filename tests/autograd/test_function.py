"""Custom autograd Functions against PyTorch's ``torch.autograd.Function``."""
import pytest

import ember
from ember import EmberError
from .oracle import check, check_raises, needs_torch

pytestmark = needs_torch


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=m.float64, requires_grad=requires_grad)


def functions(m):
    """The same custom Functions, written against module ``m``."""

    class ScaledCube(m.autograd.Function):
        """x³·k·scale with a non-tensor positional and keyword argument."""
        @staticmethod
        def forward(ctx, x, k, scale=1.0):
            ctx.save_for_backward(x)
            ctx.k, ctx.scale = k, scale
            return x ** 3 * k * scale

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return g * 3 * x ** 2 * ctx.k * ctx.scale, None, None

    class Exp(m.autograd.Function):
        """Saves its output; the backward uses it (double backward goes through it)."""
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            y, = ctx.saved_tensors
            return g * y

    class MulAdd(m.autograd.Function):
        """Two differentiable outputs and a non-differentiable integer mask."""
        @staticmethod
        def forward(ctx, x, y):
            ctx.save_for_backward(x, y)
            mask = (x > 0).long()
            ctx.mark_non_differentiable(mask)
            return x * y, x + y, mask

        @staticmethod
        def backward(ctx, g_prod, g_sum, g_mask):
            x, y = ctx.saved_tensors
            gx = g_prod * y + g_sum if ctx.needs_input_grad[0] else None
            gy = g_prod * x + g_sum if ctx.needs_input_grad[1] else None
            return gx, gy

    class Recorder(m.autograd.Function):
        """Reports needs_input_grad and returns only None grads for what is not needed."""
        seen = []

        @staticmethod
        def forward(ctx, x, flag, y):
            return x * y

        @staticmethod
        def backward(ctx, g):
            Recorder.seen.append(tuple(ctx.needs_input_grad))
            return g * 2, None, None

    class Double(m.autograd.Function):
        """Modifies its input in place (mark_dirty)."""
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g * 2

    return ScaledCube, Exp, MulAdd, Recorder, Double


def test_save_for_backward_non_tensor_args_and_double_backward():
    def run(m):
        ScaledCube, *_ = functions(m)
        x = t(m, [1.0, -2.0, 0.5], True)
        y = ScaledCube.apply(x, 2, scale=0.5)
        g, = m.autograd.grad(y.sum(), x, create_graph=True)
        gg, = m.autograd.grad(g.sum(), x)
        return y, g, gg, y.grad_fn.name()
    check(run)


def test_saved_output_first_and_second_order():
    def run(m):
        _, Exp, *_ = functions(m)
        x = t(m, [1.0, -2.0], True)
        e = Exp.apply(x)
        g, = m.autograd.grad((e * e).sum(), x, create_graph=True)
        gg, = m.autograd.grad(g.sum(), x)
        return e, g, gg
    check(run)


def test_multiple_outputs_non_differentiable_and_needs_input_grad():
    def run(m):
        _, _, MulAdd, *_ = functions(m)
        x = t(m, [1.0, -2.0], True)
        w = t(m, [3.0, 4.0])
        a, b, mask = MulAdd.apply(x, w)
        (a * 2 + b * 3).sum().backward()
        return x.grad, w.grad, mask, mask.requires_grad, a.grad_fn.name()
    check(run)


def test_unused_output_gets_zero_grad():
    def run(m):
        _, _, MulAdd, *_ = functions(m)
        x = t(m, [1.0, -2.0], True)
        w = t(m, [0.5, 4.0], True)
        a, b, mask = MulAdd.apply(x, w)
        a.sum().backward()  # b's gradient is materialized as zeros
        return x.grad, w.grad
    check(run)


def test_needs_input_grad_and_none_grads():
    def run(m):
        *_, Recorder, _ = functions(m)
        Recorder.seen.clear()
        x = t(m, [1.0, 2.0], True)
        y = t(m, [3.0, 4.0])
        Recorder.apply(x, "flag", y).sum().backward()
        return x.grad, Recorder.seen
    check(run)


def test_no_graph_when_no_input_requires_grad():
    def run(m):
        _, Exp, *_ = functions(m)
        y = Exp.apply(t(m, [1.0]))
        with m.no_grad():
            z = Exp.apply(t(m, [1.0], True))
        return y.requires_grad, y.grad_fn is None, z.requires_grad
    check(run)


def test_mark_dirty_in_place_function():
    def run(m):
        *_, Double = functions(m)
        a = t(m, [1.0, 2.0], True)
        x = a * 1
        y = Double.apply(x)
        (y * y).sum().backward()
        return y is x, x, a.grad, x.grad_fn.name()
    check(run)


def test_mark_dirty_on_view_updates_base():
    def run(m):
        *_, Double = functions(m)
        a = t(m, [1.0, 2.0, 3.0], True)
        x = a * 1
        Double.apply(x[1:])
        (x * x).sum().backward()
        return x, a.grad
    check(run)


def test_mark_dirty_on_leaf_raises():
    def run(m):
        *_, Double = functions(m)
        Double.apply(t(m, [1.0], True))
    check_raises(run, EmberError, "a leaf Variable that requires grad")


def test_saved_input_modified_in_place_raises():
    def run(m):
        ScaledCube, *_ = functions(m)
        a = t(m, [1.0, 2.0], True)
        x = a * 1
        y = ScaledCube.apply(x, 1)
        x.add_(1)
        y.sum().backward()
    check_raises(run, EmberError, "modified by an inplace operation")


def test_saved_output_modified_in_place_raises():
    def run(m):
        _, Exp, *_ = functions(m)
        e = Exp.apply(t(m, [1.0, -2.0], True))
        e.mul_(2)
        e.sum().backward()
    check_raises(run, EmberError, "modified by an inplace operation")


def test_wrong_number_of_gradients_raises():
    def run(m):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x, k):
                return x * k

            @staticmethod
            def backward(ctx, g):
                return g
        Bad.apply(t(m, [1.0], True), 2.0).sum().backward()
    check_raises(run, EmberError, "returned an incorrect number of gradients")


def test_gradient_of_wrong_shape_raises():
    def run(m):
        class Bad(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return m.ones(3, dtype=m.float64)
        Bad.apply(t(m, [1.0, 2.0], True)).sum().backward()
    check_raises(run, EmberError, "returned an invalid gradient at index 0")


def test_broadcast_gradient_is_summed_to_input_shape():
    def run(m):
        class Wide(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x * 2

            @staticmethod
            def backward(ctx, g):
                return g.expand(3, 2) * 1
        x = t(m, [1.0, 2.0], True)
        Wide.apply(x).sum().backward()
        return x.grad
    check(run)


def test_backward_through_function_twice_needs_retain_graph():
    def run(m):
        _, Exp, *_ = functions(m)
        x = t(m, [1.0], True)
        y = Exp.apply(x).sum()
        y.backward()
        y.backward()
    check_raises(run, EmberError, "second time")


def test_returned_input_is_a_new_tensor():
    def run(m):
        class Identity(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                return x

            @staticmethod
            def backward(ctx, g):
                return g * 3
        x = t(m, [1.0, 2.0], True)
        y = Identity.apply(x)
        y.sum().backward()
        return y is x, y.grad_fn.name(), x.grad
    check(run)


def test_save_for_backward_rejects_non_tensors():
    class Bad(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x, 3)
            return x * 2
    with pytest.raises(TypeError, match="save_for_backward"):
        Bad.apply(ember.ones(1, requires_grad=True))
