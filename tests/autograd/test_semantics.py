"""Autograd semantics against PyTorch: .grad accumulation, retain_graph, higher-order
gradients, backward(gradient=, inputs=), hooks, retain_grad, autograd.grad, grad modes,
detach, requires_grad rules, grad_fn and next_functions."""
import pytest

import ember
from ember import EmberError, EmberTypeError
from .oracle import assert_same, both, check, check_raises, needs_torch

pytestmark = [needs_torch,
              pytest.mark.filterwarnings("ignore:Using backward\\(\\) with create_graph")]

F64 = "float64"


def t(m, data, requires_grad=False):
    return m.tensor(data, dtype=getattr(m, F64), requires_grad=requires_grad)


# .grad accumulation and retain_graph ---------------------------------------------------
def test_grad_accumulates_across_backward_calls():
    def run(m):
        x = t(m, [1.0, -2.0, 3.0], True)
        (x * x).sum().backward()
        first = x.grad.clone()
        (x.sin() * 3).sum().backward()
        ref = x.grad  # accumulation happens in place, as in PyTorch
        (x ** 3).sum().backward()
        return first, x.grad, ref is x.grad
    check(run)


def test_grad_zeroed_by_setting_none():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        (x * 2).sum().backward()
        x.grad = None
        (x * 5).sum().backward()
        return x.grad
    check(run)


def test_second_backward_without_retain_graph_raises():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = (x.exp() * x).sum()
        y.backward()
        y.backward()
    check_raises(run, EmberError, "backward through the graph a second time")


def test_retain_graph_allows_second_backward():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = (x.exp() * x).sum()
        y.backward(retain_graph=True)
        first = x.grad.clone()
        y.backward()
        return first, x.grad
    check(run)


def test_graph_without_saved_tensors_can_backward_twice():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = (x + 1).sum()
        y.backward()
        y.backward()
        return x.grad
    check(run)


# Higher order ---------------------------------------------------------------------------
def test_gradients_of_gradients_to_third_order():
    def run(m):
        x = t(m, [0.5, -1.5, 2.0], True)
        y = (x ** 4 + x.sin() * x.exp()).sum()
        g1, = m.autograd.grad(y, x, create_graph=True)
        g2, = m.autograd.grad(g1.sum(), x, create_graph=True)
        g3, = m.autograd.grad(g2.sum(), x)
        return g1, g2, g3
    check(run)


def test_backward_create_graph_then_differentiate_grad():
    def run(m):
        x = t(m, [0.5, 2.0], True)
        w = t(m, [3.0, -1.0], True)
        (x * x * w).sum().backward(create_graph=True)
        gx = x.grad
        (gx * gx).sum().backward()  # accumulates into x.grad (non-leaf now) and w.grad
        return gx.requires_grad, w.grad
    check(run)


def test_mixed_partials():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = t(m, [0.5, -1.0], True)
        f = (x * x * y.exp()).sum()
        gx, = m.autograd.grad(f, x, create_graph=True)
        gxy, = m.autograd.grad(gx.sum(), y)
        return gx, gxy
    check(run)


# backward(gradient=...), inputs= -------------------------------------------------------
def test_backward_with_gradient_for_non_scalar():
    def run(m):
        x = t(m, [[1.0, 2.0], [3.0, 4.0]], True)
        y = x * x.sum(0)
        y.backward(gradient=t(m, [[1.0, -1.0], [0.5, 2.0]]))
        return x.grad
    check(run)


def test_backward_non_scalar_without_gradient_raises():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        (x * 2).backward()
    check_raises(run, EmberError, "grad can be implicitly created only for scalar outputs")


def test_backward_gradient_shape_mismatch_raises():
    with pytest.raises(EmberError, match="Mismatch in shape"):
        x = ember.ones(2, requires_grad=True)
        (x * 2).backward(ember.ones(3))


def test_backward_on_tensor_without_grad_raises():
    def run(m):
        t(m, [1.0, 2.0]).sum().backward()
    check_raises(run, EmberError, "does not require grad and does not have a grad_fn")


def test_backward_inputs_restricts_accumulation():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        z = t(m, [3.0, 4.0], True)
        h = x * z
        (h * h).sum().backward(inputs=[h, z])
        return x.grad, h.grad, z.grad
    check(run)


def test_backward_inputs_single_tensor_accumulates():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        z = t(m, [3.0, 4.0], True)
        (x * z).sum().backward(inputs=x)
        (x * z * 2).sum().backward(inputs=[x])
        return x.grad, z.grad
    check(run)


def test_backward_on_leaf_itself():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        x.backward(t(m, [3.0, 4.0]))
        return x.grad
    check(run)


# Hooks and retain_grad ------------------------------------------------------------------
def test_hooks_leaf_and_non_leaf_modify_grad_and_remove():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        seen = []
        hx = x.register_hook(lambda g: g * 10)
        x.register_hook(lambda g: seen.append(g.clone()))  # sees the first hook's result
        y = x * 3
        hy = y.register_hook(lambda g: g + 1)
        (y * y).sum().backward()
        first = x.grad.clone()
        hx.remove()
        hy.remove()
        x.grad = None
        (x * 3 * x * 3).sum().backward()
        return first, seen, x.grad
    check(run)


def test_hook_on_intermediate_used_twice_sees_summed_grad():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        seen = []
        h = x.exp()
        h.register_hook(lambda g: seen.append(g.clone()))
        (h * 2 + h * h).sum().backward()
        return seen, x.grad
    check(run)


def test_retain_grad_non_leaf_and_order_with_hooks():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = x * 3
        y.retain_grad()
        y.register_hook(lambda g: g * 2)  # registered later, still seen by retain_grad
        z = y.exp()
        z.retain_grad()
        z.sum().backward(retain_graph=True)
        (y * 2).sum().backward()  # retained grads accumulate too
        return y.grad, z.grad, x.grad, y.retains_grad, x.retains_grad
    check(run)


def test_non_leaf_grad_is_none_without_retain_grad():
    x = ember.ones(2, requires_grad=True)
    y = x * 2
    (y * y).sum().backward()
    assert y.grad is None and x.grad is not None


def test_hook_on_tensor_without_grad_raises():
    check_raises(lambda m: t(m, [1.0]).register_hook(lambda g: g), EmberError,
                 "doesn't require gradient")


def test_retain_grad_on_tensor_without_grad_raises():
    check_raises(lambda m: t(m, [1.0]).retain_grad(), EmberError,
                 "can't retain_grad on Tensor that has requires_grad=False")


# autograd.grad --------------------------------------------------------------------------
def test_grad_allow_unused_and_materialize():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        z = t(m, [3.0, 4.0], True)
        a = m.autograd.grad((x * 2).sum(), [x, z], allow_unused=True, retain_graph=True)
        b = m.autograd.grad((x * 2).sum(), [x, z], materialize_grads=True)
        return a, b, x.grad, z.grad
    check(run)


def test_grad_unused_input_raises():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        z = t(m, [3.0, 4.0], True)
        m.autograd.grad((x * 2).sum(), [x, z])
    check_raises(run, EmberError, "appears to not have been used in the graph")


def test_grad_non_leaf_inputs():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        h = x.exp()
        y = (h * h * x).sum()
        return m.autograd.grad(y, [h, x])
    check(run)


def test_grad_multiple_outputs_with_grad_outputs():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        h = x.exp()
        outs = [h * 2, h.sum() * x, (x * x).sum()]
        gos = [t(m, [1.0, 2.0]), t(m, [3.0, -1.0]), t(m, 0.5)]
        return m.autograd.grad(outs, x, grad_outputs=gos)
    check(run)


def test_grad_does_not_touch_dot_grad_but_runs_leaf_hooks():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        w = t(m, [5.0, 6.0], True)
        calls = []
        x.register_hook(lambda g: g * 10)
        w.register_hook(lambda g: calls.append(1))  # w is not asked for: no call
        g = m.autograd.grad((x * x * w).sum(), x)
        return g, x.grad, w.grad, len(calls)
    check(run)


def test_grad_populates_retained_grads():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = x * 3
        y.retain_grad()
        g = m.autograd.grad((y * y).sum(), x)
        return g, y.grad
    check(run)


def test_grad_with_create_graph_is_differentiable():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        g, = m.autograd.grad((x ** 3).sum(), x, create_graph=True)
        return g, g.grad_fn is not None
    check(run)


def test_grad_of_input_not_requiring_grad_raises():
    with pytest.raises(EmberError, match="does not require grad"):
        ember.autograd.grad(ember.ones(2, requires_grad=True).sum(), ember.ones(2))


def test_grad_materialize_with_allow_unused_false_raises():
    x = ember.ones(2, requires_grad=True)
    with pytest.raises(ValueError, match="allow_unused"):
        ember.autograd.grad((x * 2).sum(), x, allow_unused=False, materialize_grads=True)


# Grad modes -----------------------------------------------------------------------------
def test_grad_modes_as_context_decorator_and_call():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        out = []
        with m.no_grad():
            out.append((x * 2).requires_grad)
            with m.enable_grad():
                out.append((x * 2).requires_grad)
            out.append(m.is_grad_enabled())

        @m.no_grad()
        def f(a):
            return a * 2

        @m.no_grad
        def f_bare(a):
            return a * 2
        out += [f(x).requires_grad, f_bare(x).requires_grad, m.is_grad_enabled()]
        m.set_grad_enabled(False)
        out.append((x * 2).requires_grad)
        m.set_grad_enabled(True)
        out.append((x * 2).requires_grad)
        with m.set_grad_enabled(False):
            out.append((x * 2).requires_grad)
        out.append(m.is_grad_enabled())

        @m.set_grad_enabled(False)
        def g(a):
            return a * 2
        out += [m.is_grad_enabled(), g(x).requires_grad]
        with m.inference_mode():
            out += [(x * 2).requires_grad, m.is_inference_mode_enabled()]
        out.append(m.is_inference_mode_enabled())

        @m.inference_mode()
        def h(a):
            return a * 2
        out += [h(x).requires_grad, (x * 2).requires_grad]
        return out
    check(run)


def test_no_grad_decorates_generators_per_step():
    def run(m):
        x = t(m, [1.0], True)

        @m.no_grad()
        def gen():
            yield (x * 2).requires_grad
            yield (x * 3).requires_grad
        g = gen()
        return [next(g), (x * 2).requires_grad, next(g), m.is_grad_enabled()]
    check(run)


def test_grad_mode_restored_after_exception():
    with pytest.raises(ValueError):
        with ember.no_grad():
            raise ValueError
    assert ember.is_grad_enabled()


# detach, requires_grad, leaves, grad_fn -------------------------------------------------
def test_detach_shares_storage_and_version():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = x * 2
        d = y.detach()
        d[0] = 10.0
        return y, d.requires_grad, d.is_leaf, y._version == d._version if m is not ember \
            else y._version_value == d._version_value
    check(run)


def test_detach_breaks_the_graph():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        y = (x * 2).detach() * x
        y.sum().backward()
        return x.grad
    check(run)


def test_requires_grad_on_integer_tensor_raises():
    check_raises(lambda m: m.tensor([1, 2]).requires_grad_(), EmberTypeError,
                 "only Tensors of floating point")
    with pytest.raises(RuntimeError, match="floating point"):
        ember.tensor([1, 2], requires_grad=True)


def test_requires_grad_false_on_non_leaf_raises():
    def run(m):
        x = t(m, [1.0], True)
        (x * 2).requires_grad_(False)
    check_raises(run, EmberError, "you can only change requires_grad flags of leaf variables")


def test_is_leaf_and_grad_fn_names():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        c = t(m, [1.0, 2.0])
        y = x * 2
        z = y.sum()
        v = y.view(2, 1)
        return [x.is_leaf, c.is_leaf, y.is_leaf, z.is_leaf, (c * 2).is_leaf,
                x.grad_fn is None, y.grad_fn.name(), z.grad_fn.name(), v.grad_fn.name(),
                (x + c).grad_fn.name(), x.exp().grad_fn.name()]
    check(run)


def test_next_functions():
    def run(m):
        x = t(m, [1.0, 2.0], True)
        c = t(m, [3.0, 4.0])
        y = x * c
        z = (y + x).sum()
        add = z.grad_fn.next_functions[0][0]
        mul, acc = add.next_functions[0][0], add.next_functions[1][0]
        return [[(n.name().split("::")[-1] if n is not None else None, i)
                 for n, i in fn.next_functions] for fn in (z.grad_fn, add, mul)] + \
            [acc.variable is x]
    check(run)


def test_output_of_no_grad_inputs_has_no_graph():
    def run(m):
        a = t(m, [1.0, 2.0])
        y = a.exp() * 2
        return y.requires_grad, y.grad_fn is None, y.is_leaf
    check(run)


def test_grad_dtype_follows_input_dtype():
    def run(m):
        x = m.tensor([1.0, 2.0], dtype=m.float32, requires_grad=True)
        (x.to(m.float64) * 3).sum().backward()
        return x.grad
    got, expected = both(run)
    assert_same(got, expected)
