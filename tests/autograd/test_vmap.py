"""ember.func.vmap (and stack_module_state, linearize) against torch.func on the same
functions: values, gradients, structures, composition with grad/jacrev, randomness and
PyTorch's error messages."""
import numpy as np
import pytest

import ember
from ember import EmberError
from .oracle import assert_same, check, needs_torch, torch

pytestmark = [needs_torch,
              pytest.mark.filterwarnings("ignore:.*vmap.*"),
              pytest.mark.filterwarnings("ignore:`torch.jit.script` is deprecated")]

RNG = np.random.default_rng(0)
A = RNG.uniform(-1, 1, (4, 3))
B = RNG.uniform(-1, 1, (3, 4))
V = RNG.uniform(-1, 1, 3)
IMG = RNG.uniform(-1, 1, (3, 2, 5, 5))
KER = RNG.uniform(-1, 1, (4, 2, 3, 3))


def t(m, data, requires_grad=False, dtype=None):
    return m.tensor(data, dtype=dtype or m.float64, requires_grad=requires_grad)


def F(m):
    return m.func


@pytest.mark.parametrize("fn, in_dims, out_dims, shapes", [
    (lambda m: lambda a: a.sin() * 2, 0, 0, [(4, 3)]),
    (lambda m: lambda a: a.sin() * 2, 1, 0, [(4, 3)]),
    (lambda m: lambda a: a.exp(), -1, -1, [(2, 3, 4)]),
    (lambda m: lambda a: a.sum(), 0, 0, [(5, 3)]),
    (lambda m: lambda a: a.max(), 1, 0, [(5, 3)]),
    (lambda m: lambda a, b: a @ b, (0, None), 1, [(4, 3), (3, 2)]),
    (lambda m: lambda a, b: m.dot(a, b), (0, 1), 0, [(4, 3), (3, 4)]),
    (lambda m: lambda a: m.softmax(a, dim=-1), 0, 0, [(4, 2, 3)]),
    (lambda m: lambda a, w: m.nn.functional.linear(a, w), (0, None), 0, [(4, 2, 3), (5, 3)]),
    (lambda m: lambda a: a.t() @ a, 2, 0, [(3, 2, 4)]),
    (lambda m: lambda a: a.reshape(-1).cumsum(0), 0, 0, [(1, 3, 2)]),
    (lambda m: lambda a: a * 3, 0, 0, [(4, 0)]),
])
def test_values_and_gradients_match_torch(fn, in_dims, out_dims, shapes):
    datas = [RNG.uniform(-1, 1, s) for s in shapes]

    def run(m):
        args = [t(m, d, True) for d in datas]
        out = F(m).vmap(fn(m), in_dims=in_dims, out_dims=out_dims)(*args)
        weights = t(m, np.linspace(-1, 1, out.numel()).reshape(tuple(out.shape)))
        grads = m.autograd.grad((out * weights).sum(), args, allow_unused=True)
        return out, grads
    check(run)


def test_conv2d_per_example_and_noncontiguous_input():
    def run(m):
        x = t(m, IMG.transpose(1, 0, 2, 3).copy(), True)  # batch at dim 1
        w = t(m, KER, True)
        conv = lambda img, k: m.nn.functional.conv2d(img.unsqueeze(0), k, padding=1)[0]  # noqa
        out = F(m).vmap(conv, in_dims=(1, None))(x, w)
        xt = t(m, A.T, True)  # a transposed (non-contiguous) input
        out2 = F(m).vmap(lambda r: (r * r).sum())(xt.t())
        return out, m.autograd.grad(out.sum() + out2.sum(), (x, w, xt))
    check(run)


def test_nested_pytrees_in_and_out():
    c = RNG.uniform(-1, 1, (4, 2))

    def run(m):
        p = {"w": t(m, B), "b": t(m, V), "c": t(m, c)}
        xs = [t(m, A), t(m, A.T)]

        def f(params, pair, scale):
            h = pair[0] @ params["w"] + pair[1].sum()
            return {"h": h * scale, "s": (h.sum() + params["c"].sum(), params["b"] * scale)}
        out = F(m).vmap(f, in_dims=({"w": None, "b": None, "c": 0}, [0, 1], None),
                        out_dims={"h": 1, "s": (0, None)})
        return out(p, xs, 2.0)
    check(run)


def test_kwargs_unbatched_and_none_in_dims():
    def run(m):
        f = lambda a, b, c=None, *, scale: a * b + c * scale  # noqa: E731
        return F(m).vmap(f, in_dims=(0, None, None))(t(m, A), t(m, V), t(m, V), scale=3.0)
    check(run)


def test_output_not_depending_on_batch_is_broadcast():
    def run(m):
        v = t(m, V)
        return (F(m).vmap(lambda a: v * 2)(t(m, A)),
                F(m).vmap(lambda a: (a * 2, v), out_dims=(0, None))(t(m, A)),
                F(m).vmap(lambda a: (a, 1.5), out_dims=(1, None))(t(m, A)))
    check(run)


def test_per_sample_gradients():
    x, y = RNG.uniform(-1, 1, (6, 3)), RNG.uniform(-1, 1, 6)

    def run(m):
        params = {"w": t(m, B[:, :2].T.copy()), "b": t(m, V[:2])}

        def loss(p, xi, yi):
            h = (p["w"] @ xi + p["b"]).tanh()
            return ((h.sum() - yi) ** 2)
        f = F(m)
        return (f.vmap(f.grad(loss), in_dims=(None, 0, 0))(params, t(m, x), t(m, y)),
                f.vmap(f.grad_and_value(loss), in_dims=(None, 0, 0))(params, t(m, x), t(m, y)))
    check(run)


def test_composition_with_jacrev_vjp_and_nesting():
    def run(m):
        f = F(m)
        x = t(m, A)
        g = lambda a: a.sin() * a.sum()  # noqa: E731
        out = [f.vmap(f.jacrev(g))(x), f.jacrev(f.vmap(g))(x),
               f.vmap(f.vmap(lambda a: a.exp() * 2))(x),
               f.vmap(f.vmap(lambda a, b: a * b, in_dims=(None, 0)), in_dims=(0, None))(
                   t(m, V), t(m, V[:2]))]
        _, vjp_fn = f.vjp(g, x[0])
        out.append(f.vmap(vjp_fn)(t(m, A)))
        out.append(f.vmap(f.hessian(lambda a: (a ** 3).sum()))(x))
        return out
    check(run)


def test_grad_of_vmap_through_backward():
    def run(m):
        x = t(m, A, True)
        w = t(m, V, True)
        out = F(m).vmap(lambda r: (r * w).tanh().sum())(x)
        (out ** 2).sum().backward()
        return out, x.grad, w.grad
    check(run)


def test_empty_batch():
    def run(m):
        f = F(m)
        return (f.vmap(lambda a: a.sum())(t(m, np.zeros((0, 3)))),
                f.vmap(lambda a, b: a * b, in_dims=(1, None), out_dims=1)(
                    t(m, np.zeros((2, 0, 3))), t(m, V)))
    check(run)


def test_chunk_size_gives_same_values():
    def run(m):
        return F(m).vmap(lambda a: a.cos(), chunk_size=3)(t(m, A))
    check(run)


def test_randomness_modes():
    x = ember.zeros(5, 4)
    with pytest.raises(EmberError, match="called random operation while in randomness error"):
        ember.vmap(lambda a: a + ember.randn(4))(x)
    with pytest.raises(EmberError, match="randomness error mode"):  # any enclosing 'error'
        ember.vmap(ember.vmap(lambda a: a + ember.randn(()), randomness="different"))(x)
    same = ember.vmap(lambda a: a + ember.randn(4), randomness="same")(x).numpy()
    assert np.all(same == same[0]) and same.std() > 0
    drop = ember.vmap(lambda a: ember.nn.functional.dropout(a + 1, 0.5), randomness="same")(x)
    assert np.all(drop.numpy() == drop.numpy()[0])
    diff = ember.vmap(lambda a: a + ember.rand(4), randomness="different")(x).numpy()
    assert len({tuple(r) for r in diff}) == 5
    # a random op outside the function is unaffected, and an error leaves no hook behind
    assert ember.randn(3).shape == (3,)
    from ember.ops import random
    assert random._draw_hook is None


def test_randomness_same_repeats_per_inner_element_only():
    x = ember.zeros(3, 2, 4)
    out = ember.vmap(ember.vmap(lambda a: a + ember.randn(4), randomness="same"),
                     randomness="different")(x).numpy()
    assert np.all(out[:, 0] == out[:, 1])
    assert not np.allclose(out[0], out[1])


def _same_error(fn):
    """fn(torch) and fn(ember) raise the same kind of error with the same message."""
    with pytest.raises(Exception) as expected:
        fn(torch)
    with pytest.raises(EmberError) as got:
        fn(ember)
    assert isinstance(got.value, type(expected.value)), (got.value, expected.value)
    assert str(got.value).replace("ember.", "torch.") == str(expected.value)


@pytest.mark.parametrize("case", [
    lambda m: m.func.vmap(m.add, in_dims=(0,))(m.zeros(2, 3), m.zeros(2, 3)),
    lambda m: m.func.vmap(m.add, in_dims=[0, 0])(m.zeros(2, 3), m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: x, in_dims="a")(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: x, in_dims=(None,))(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x, y: x, in_dims=(0, 0))(m.zeros(2, 3), m.zeros(3)),
    lambda m: m.func.vmap(lambda x: x)(),
    lambda m: m.func.vmap(lambda x: x, in_dims=2)(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: x, in_dims=(0,))(1.0),
    lambda m: m.func.vmap(lambda x: x, in_dims=(1.5,))(m.zeros(2)),
    lambda m: m.func.vmap(lambda x: x, in_dims=({"a": 0},))({"b": m.zeros(2)}),
    lambda m: m.func.vmap(lambda x: (x, x), out_dims=(0, 0, 0))(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: (x, 1.0))(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: None)(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: x, out_dims=None)(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: x, out_dims="a")(m.zeros(2, 3)),
    lambda m: m.func.vmap(m.sin, out_dims=2)(m.zeros(2, 3)),
    lambda m: m.func.vmap(m.sin, out_dims=-3)(m.zeros(2, 3)),
    lambda m: m.func.vmap(lambda x: x, randomness="bad"),
    lambda m: m.func.vmap(lambda x: x, chunk_size=0),
])
def test_errors_match_torch(case):
    _same_error(case)


def test_structure_error_message_prints_tree_specs():
    with pytest.raises(ValueError) as expected:
        torch.func.vmap(lambda l: l, in_dims=((0, 1),))([torch.zeros(2, 3), torch.ones(3, 2)])
    with pytest.raises(EmberError) as got:
        ember.vmap(lambda l: l, in_dims=((0, 1),))([ember.zeros(2, 3), ember.ones(3, 2)])
    assert str(got.value) == str(expected.value)


def test_ragged_outputs_raise():
    with pytest.raises(EmberError, match="different batch elements"):
        ember.vmap(lambda a: a[: int(a.sum().item())])(ember.tensor([[1.0, 0.0], [1.0, 1.0]]))


def test_stack_module_state_ensemble():
    def run(m):
        m.manual_seed(0)
        models = [m.nn.Linear(3, 2) for _ in range(3)]
        for i, model in enumerate(models):  # the same weights in both frameworks
            model.load_state_dict({k: t(m, np.full(tuple(v.shape), 0.1 * (i + 1)) + V[:v.shape[-1]],
                                         dtype=m.float32)
                                   for k, v in model.state_dict().items()})
        params, buffers = m.func.stack_module_state(models)
        base = models[0]
        run_one = lambda p, b, x: m.func.functional_call(base, (p, b), (x,))  # noqa: E731
        out = m.func.vmap(run_one, in_dims=(0, 0, None))(params, buffers,
                                                         t(m, A, dtype=m.float32))
        grads = m.autograd.grad(out.sum(), list(params.values()))
        return params, out, grads
    check(run, rtol=1e-6, atol=1e-6)


def test_stack_module_state_errors():
    with pytest.raises(EmberError, match="Expected at least one model, got 0"):
        ember.func.stack_module_state([])
    with pytest.raises(EmberError, match="same class"):
        ember.func.stack_module_state([ember.nn.Linear(2, 2), ember.nn.Tanh()])
    with pytest.raises(EmberError, match="same training/eval mode"):
        ember.func.stack_module_state([ember.nn.Linear(2, 2), ember.nn.Linear(2, 2).eval()])


def test_linearize():
    def run(m):
        x, y = t(m, A), t(m, B)
        out, jvp_fn = m.func.linearize(lambda a, b: (a @ b).tanh(), x, y)
        return out, jvp_fn(t(m, np.ones((4, 3))), t(m, B * 2)), jvp_fn(x, y)
    check(run)
    out, jvp_fn = ember.func.linearize(ember.sin, ember.ones(2))
    with pytest.raises(EmberError, match="doesn't match the shape"):
        jvp_fn(ember.ones(3))


def test_under_jit_matches_eager():
    x, w = ember.tensor(A), ember.tensor(V)

    def step(a, b):
        return ember.vmap(lambda r: (r * b).tanh().sum())(a)
    eager = step(x, w)
    assert_same(ember.jit(step)(x, w), torch.tensor(eager.numpy()))
    assert_same(ember.jit(step)(x * 2, w), torch.tensor(step(x * 2, w).numpy()))


def test_same_randomness_cannot_be_traced():
    step = ember.jit(lambda a: ember.vmap(lambda r: r + ember.randn(3), randomness="same")(a))
    with pytest.raises(EmberError, match="ember.jit cannot trace a random op"):
        step(ember.zeros(2, 3))
    different = ember.jit(lambda a: ember.vmap(lambda r: r + ember.randn(3),
                                               randomness="different")(a))(ember.zeros(2, 3))
    assert not np.allclose(different.numpy()[0], different.numpy()[1])


def test_top_level_alias_and_wraps():
    def my_fn(a):
        return a + 1
    f = ember.vmap(my_fn)
    assert ember.vmap is ember.func.vmap and f.__name__ == "my_fn"
    assert f(ember.zeros(2, 1)).tolist() == [[1.0], [1.0]]
