"""ember.jit's contract: guards and retraces, state updates, randomness, differentiating
through a compiled module, and the clear errors (data-dependent control flow, escaped
tracers, dynamic shapes), each with the fallback where one exists."""
from __future__ import annotations

import numpy as np
import pytest

import ember
from ember.compiler import DataDependentError, TraceError


def _close(a, b, tol=1e-6):
    np.testing.assert_allclose(np.asarray(a.detach().numpy(), np.float64),
                               np.asarray(b.detach().numpy(), np.float64), rtol=tol, atol=tol)


# Guards ---------------------------------------------------------------------------------
def test_same_signature_never_retraces_and_changes_retrace_once_with_reason():
    calls = []

    @ember.jit
    def f(x):
        calls.append(1)  # Python side effects run at trace time only
        return (x * 3).exp().sum(-1)

    x = ember.randn(4, 3)
    for _ in range(3):
        _close(f(x), (x * 3).exp().sum(-1))
    assert len(calls) == 1 and f.retraces == ["first call"]
    x5 = ember.randn(5, 3)
    _close(f(x5), (x5 * 3).exp().sum(-1))
    assert len(f.retraces) == 2 and "[4, 3] -> float32[5, 3]" in f.retraces[1]
    f(ember.randn(5, 3, dtype=ember.float64))
    assert "float64" in f.retraces[2]
    f(ember.randn(5, 3))  # back to a cached signature: no new trace
    assert len(f.retraces) == 3 and len(calls) == 3


def test_non_tensor_arguments_are_part_of_the_signature():
    f = ember.jit(lambda x, scale=2.0: x * scale)
    x = ember.ones(2)
    assert f(x).tolist() == [2.0, 2.0] and f(x, scale=3.0).tolist() == [3.0, 3.0]
    assert f.retraces[1] == ("argument structure or non-tensor values changed: (tensor) -> "
                             "(tensor, scale=3.0)")


def test_train_eval_and_grad_mode_retrace():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(3, 3), ember.nn.Dropout(0.5))
    f = ember.jit(lambda x: model(x))
    x = ember.randn(2, 3)
    f(x)
    model.eval()
    _close(f(x), model(x))
    assert "training/eval" in f.retraces[1]
    with ember.no_grad():
        _close(f(x), model(x))
    assert "grad mode" in f.retraces[2]
    f(x)
    assert len(f.retraces) == 3


def test_parameters_read_at_every_call():
    lin = ember.nn.Linear(3, 2)
    f = ember.jit(lin)
    x = ember.randn(4, 3)
    _close(f(x), lin(x))
    with ember.no_grad():
        lin.weight.mul_(2)
    _close(f(x), lin(x))
    assert len(f.compiled.retraces) == 1


# State ----------------------------------------------------------------------------------
def test_inplace_updates_of_outside_tensors_become_graph_updates():
    state = ember.zeros(3)
    counter = ember.zeros((), dtype=ember.int64)

    @ember.jit
    def accumulate(x):
        state.add_(x * 2)
        counter.add_(1)
        return state.sum()

    x = ember.tensor([1.0, 2.0, 3.0])
    for i in range(1, 4):
        out = accumulate(x)
        assert float(out) == pytest.approx(12.0 * i)
    assert state.tolist() == [6.0, 12.0, 18.0] and int(counter) == 3


def test_inplace_on_a_view_updates_the_base():
    @ember.jit
    def f(x):
        y = x.clone()
        y[:, 0] = 0.0
        y[1].mul_(10)
        return y

    x = ember.randn(3, 4)
    expected = x.clone()
    expected[:, 0] = 0.0
    expected[1].mul_(10)
    _close(f(x), expected)


def test_random_ops_draw_like_eager_with_the_same_seed():
    def f(x):
        return ember.nn.functional.dropout(x, 0.5) + ember.randn(4) * 0.1

    x = ember.ones(4)
    ember.manual_seed(3)
    eager = [f(x) for _ in range(3)]
    compiled = ember.jit(f)
    ember.manual_seed(3)
    for e in eager:
        _close(compiled(x), e)


# Differentiating through a compiled module -----------------------------------------------
def test_backward_through_a_compiled_module_fills_grads():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(4, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2))
    x = ember.randn(5, 4, dtype=ember.float32, requires_grad=True)
    (model(x) ** 2).sum().backward()
    expected = [p.grad.clone() for p in model.parameters()] + [x.grad.clone()]
    model.zero_grad()
    x.grad = None
    compiled = ember.jit(model)
    out = compiled(x)
    assert out.grad_fn is not None
    (out ** 2).sum().backward()
    for got, want in zip([p.grad for p in model.parameters()] + [x.grad], expected):
        _close(got, want, 1e-6)


def test_inputs_with_one_gradient_array_accumulate_separately():
    # both biases' gradient is the same array of the backward graph: stored as is, the
    # second backward would add into both .grads through one array
    w = ember.ones(3, 3)
    a, b = ember.zeros(3, requires_grad=True), ember.zeros(3, requires_grad=True)
    f = ember.jit(lambda x: (ember.nn.functional.linear(x, w, a) +
                             ember.nn.functional.linear(x, w, b)).sum())
    for _ in range(3):
        f(ember.ones(2, 3)).backward()
    np.testing.assert_array_equal(a.grad.numpy(), [6.0, 6.0, 6.0])
    np.testing.assert_array_equal(b.grad.numpy(), [6.0, 6.0, 6.0])
    assert not np.shares_memory(a.grad.numpy(), b.grad.numpy())


def test_an_incoming_gradient_passed_through_is_not_stored_as_a_grad():
    x = ember.zeros(3, requires_grad=True)
    f = ember.jit(lambda x: x.clone())  # its backward graph returns the gradient it is fed
    g = ember.ones(3)
    f(x).backward(g)
    x.grad.add_(1.0)
    np.testing.assert_array_equal(g.numpy(), [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0, 2.0])


def test_second_backward_through_compiled_call_needs_retain_graph():
    lin = ember.jit(ember.nn.Linear(2, 2))
    out = lin(ember.ones(1, 2)).sum()
    out.backward()
    with pytest.raises(ember.EmberError, match="second time"):
        out.backward()


# Clear errors -----------------------------------------------------------------------------
def test_value_dependent_control_flow_names_the_line():
    @ember.jit
    def f(x):
        if x.sum() > 0:  # the line the error must name
            return x
        return -x

    with pytest.raises(DataDependentError, match=r"test_jit.py:\d+.*ember.where"):
        f(ember.ones(3))


@pytest.mark.parametrize("body", [lambda x: x.sum().item(), lambda x: x.numpy(),
                                  lambda x: float(x.sum())])
def test_reading_values_is_refused(body):
    with pytest.raises(DataDependentError, match="value of a traced tensor"):
        ember.jit(body)(ember.ones(3))


def test_dynamic_shape_op_is_refused_and_fallback_runs_eagerly():
    def f(x):
        return ember.nonzero(x)

    x = ember.tensor([0.0, 1.0, 2.0])
    with pytest.raises(TraceError, match="nonzero.*depends on the values"):
        ember.jit(f)(x)
    g = ember.jit(f, fallback=True)
    with pytest.warns(UserWarning, match="running f eagerly"):
        assert g(x).tolist() == [[1], [2]]
    assert g(ember.tensor([3.0, 0.0, 0.0])).tolist() == [[0]]  # no second trace or warning
    assert len(g.retraces) == 1 and "runs eagerly" in g.retraces[0]


def test_escaped_tracer_is_reported_with_where_it_was_made():
    class Keeper(ember.nn.Module):
        def forward(self, x):
            self.kept = x * 2  # stored on self: escapes
            return x + 1

    with pytest.raises(TraceError, match=r"mul at .*test_jit.py:\d+.*escaped"):
        ember.jit(Keeper())(ember.ones(2))


def test_failed_trace_leaves_parameters_untouched():
    lin = ember.nn.Linear(2, 2)
    opt = ember.optim.SGD(lin.parameters(), lr=0.1)
    before = [p.detach().clone() for p in lin.parameters()]

    @ember.jit
    def step(x):
        opt.zero_grad()
        loss = lin(x).sum()
        loss.backward()
        opt.step()
        return loss.item()  # refused after the update was traced

    with pytest.raises(DataDependentError):
        step(ember.ones(1, 2))
    for p, b in zip(lin.parameters(), before):
        _close(p, b, 0)
        assert not isinstance(p._data, type(None)) and type(p._data) is np.ndarray


def test_checkpoint_regions_are_recomputed_not_merged():
    from ember.utils.checkpoint import checkpoint
    ember.manual_seed(0)
    lin1, lin2 = ember.nn.Linear(4, 16), ember.nn.Linear(16, 1)

    def block(x):
        return lin1(x).tanh().exp()

    def grads(x):
        loss = lin2(checkpoint(block, x)).sum()
        return ember.autograd.grad(loss, [lin1.weight])[0]

    x = ember.randn(8, 4)
    compiled = ember.jit(grads)
    _close(compiled(x), grads(x))
    regions = [i for i in compiled.graph().instrs if i.region is not None]
    assert regions, "the recomputation must stay in the graph"


def test_checkpointed_dropout_recomputes_the_forward_mask():
    # the recomputation must see the forward's random numbers (as eager mode replays
    # the RNG state), and the generator must advance as in eager mode
    from ember.utils.checkpoint import checkpoint
    ember.manual_seed(0)
    lin1, lin2 = ember.nn.Linear(4, 64), ember.nn.Linear(64, 1)

    def block(x):
        return ember.nn.functional.dropout(lin1(x).tanh(), 0.5, training=True)

    def grads(x):
        loss = lin2(checkpoint(block, x)).sum()
        return ember.autograd.grad(loss, [lin1.weight, lin2.weight])

    x = ember.randn(8, 4)
    compiled = ember.jit(grads)
    for _ in range(3):
        state = ember.get_rng_state()
        got = compiled(x)
        after_compiled = ember.rand(1).item()
        ember.set_rng_state(state)
        want = grads(x)
        assert ember.rand(1).item() == after_compiled
        for g, w in zip(got, want):
            _close(g, w)


def test_replacing_a_parameter_retraces():
    lin = ember.nn.Linear(2, 1, bias=False)
    f = ember.jit(lambda x: lin(x))
    x = ember.ones(1, 2)
    f(x)
    lin.weight = ember.nn.Parameter(ember.zeros(1, 2))
    assert float(f(x)) == 0.0
    assert "parameters" in f.retraces[-1]


# Regressions found in review ---------------------------------------------------------------
def test_tensors_made_inside_are_fresh_at_every_call():
    @ember.jit
    def f(x):
        acc = ember.tensor(0.0)
        for i in range(3):
            acc += x[i]
        return acc

    assert [float(f(ember.ones(3))) for _ in range(3)] == [3.0, 3.0, 3.0]


def test_views_and_bases_get_their_data_back_after_tracing():
    base = ember.zeros(4)
    view = base[1:3]

    @ember.jit
    def f(x):
        base.add_(x)
        return view * 1

    assert f(ember.arange(4.0)).tolist() == [1.0, 2.0]
    assert (view + 1).tolist() == [2.0, 3.0] and base.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_compiled_module_retraces_on_eval():
    model = ember.nn.Sequential(ember.nn.Dropout(0.5))
    compiled = ember.jit(model)
    x = ember.ones(64)
    compiled(x)
    model.eval()
    assert compiled(x).tolist() == [1.0] * 64 and len(compiled.retraces) == 2


def test_a_submodules_flag_or_a_new_submodule_retraces():
    # (the signature re-reads the modules only when some module changed: nn.module's
    # STATE_EPOCH; setting one flag by hand, or replacing a layer, must move it)
    model = ember.nn.Sequential(ember.nn.Linear(4, 4), ember.nn.Dropout(0.5))
    compiled = ember.jit(model)
    x = ember.ones(2, 4)
    compiled(x)
    compiled(x)
    model[1].training = False
    _close(compiled(x), model(x))
    assert len(compiled.retraces) == 2 and "training/eval" in compiled.retraces[1]
    model[0] = ember.nn.Linear(4, 4)
    _close(compiled(x), model(x))
    assert len(compiled.retraces) == 3
    compiled(x)
    assert len(compiled.retraces) == 3


def test_the_same_tensor_twice_is_part_of_the_signature():
    g = ember.jit(lambda x, y: x - y)
    a, b = ember.ones(3), ember.zeros(3)
    assert g(a, a).tolist() == [0.0] * 3 and g(a, b).tolist() == [1.0] * 3


def test_freezing_a_parameter_retraces():
    lin = ember.nn.Linear(2, 1)
    opt = ember.optim.SGD(lin.parameters(), lr=0.1)

    @ember.jit
    def step(x):
        opt.zero_grad()
        lin(x).sum().backward()
        opt.step()

    step(ember.ones(1, 2))
    lin.weight.requires_grad_(False)
    frozen = lin.weight.detach().clone()
    step(ember.ones(1, 2))
    _close(lin.weight, frozen, 0)
    assert "requires_grad" in step.retraces[-1]


def test_returning_a_parameter_keeps_its_gradient():
    lin = ember.nn.Linear(2, 2)
    w, y = ember.jit(lambda x: (lin.weight, x * 2))(ember.ones(2))
    (w.sum() + y.sum()).backward()
    assert lin.weight.grad is not None and lin.weight.grad.tolist() == [[1.0, 1.0]] * 2


def test_new_parameter_group_retraces():
    a, b = ember.nn.Parameter(ember.ones(2)), ember.nn.Parameter(ember.ones(2))
    opt = ember.optim.SGD([a], lr=0.5)

    @ember.jit
    def step():
        opt.zero_grad()
        (a.sum() + b.sum()).backward()
        opt.step()

    step()
    opt.add_param_group({"params": [b]})
    step()
    assert b.tolist() == [0.5, 0.5] and "parameter groups" in step.retraces[-1]


def test_returned_state_is_the_tensor_itself():
    state = ember.zeros(2)

    @ember.jit
    def f(x):
        state.add_(x)
        return state, x

    x = ember.ones(2)
    s, same_x = f(x)
    assert s is state and same_x is x and state.tolist() == [1.0, 1.0]


def test_modifying_a_parameter_before_backward_is_caught():
    lin = ember.nn.Linear(2, 2)
    loss = ember.jit(lin)(ember.ones(1, 2)).pow(2).sum()
    with ember.no_grad():
        lin.weight.mul_(10)
    with pytest.raises(ember.EmberError, match="modified by an inplace operation"):
        loss.backward()


@pytest.mark.parametrize("weighted", [False, True])
def test_nll_loss_differentiates_through_a_compiled_call(weighted):
    # its backward used one_hot's value checks (untraceable): the output came back with
    # no gradient at all
    x0 = np.random.default_rng(0).standard_normal((5, 4))
    target = ember.tensor([0, 1, 3, 3, 2])
    kw = {"weight": ember.tensor([1.0, 2.0, 3.0, 4.0], dtype=ember.float64)} if weighted else {}
    fn = lambda x: ember.nn.functional.nll_loss(x.log_softmax(1), target, **kw)  # noqa: E731
    grads = []
    for run in (fn, ember.jit(fn)):
        x = ember.tensor(x0, requires_grad=True)
        out = run(x)
        assert out.requires_grad
        out.backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[1], grads[0], rtol=1e-12, atol=1e-15)


def test_a_backward_that_reads_values_is_an_error_not_a_missing_gradient():
    class Scaled(ember.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * float(g.sum().item())

    x = ember.ones(3, requires_grad=True)
    with pytest.raises(DataDependentError, match="item"):
        ember.jit(lambda x: Scaled.apply(x))(x)
    with pytest.warns(UserWarning, match="eagerly"):
        out = ember.jit(lambda x: Scaled.apply(x), fallback=True)(x)
    out.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [3.0, 3.0, 3.0])


@pytest.mark.parametrize("index", [
    lambda t: t, lambda t: (slice(None), t % 3), lambda t: (t, 1), lambda t: (1, t % 3),
    lambda t: t.reshape(2, 2), lambda t: (t, t % 3), lambda t: t * 0])
def test_indexing_with_a_traced_integer_tensor_matches_eager(index):
    w0 = np.random.default_rng(1).standard_normal((5, 3))
    t = ember.tensor([4, 0, 2, 2])
    results = []
    for run in (lambda w, t: w[index(t)], ember.jit(lambda w, t: w[index(t)])):
        w = ember.tensor(w0, requires_grad=True)
        out = run(w, t)
        (out * out).sum().backward()  # repeated indices add up in the gradient
        results.append((out.detach().numpy(), w.grad.numpy()))
    np.testing.assert_array_equal(results[1][0], results[0][0])
    np.testing.assert_allclose(results[1][1], results[0][1], rtol=1e-15)


def test_a_traced_index_out_of_range_is_an_index_error_when_run():
    f = ember.jit(lambda w, t: w[t])
    f(ember.ones(5, 3), ember.tensor([1, 2]))
    with pytest.raises(ember.EmberIndexError, match="index 7 is out of bounds for dimension 0 "
                                                    "with size 5"):
        f(ember.ones(5, 3), ember.tensor([7, 0]))


def test_assigning_through_a_traced_integer_index_matches_eager():
    def f(w, t, v):
        y = w * 1.0
        y[t] = v * 2
        y[:, t % 2] = 0.5 * y[:, t % 2]
        return y
    w0, v0 = np.random.default_rng(2).standard_normal((5, 3)), np.arange(3.0)
    t = ember.tensor([4, 1])
    results = []
    for run in (f, ember.jit(f)):
        w, v = ember.tensor(w0, requires_grad=True), ember.tensor(v0, requires_grad=True)
        out = run(w, t, v)
        (out ** 2).sum().backward()
        results.append((out.detach().numpy(), w.grad.numpy(), v.grad.numpy()))
    for got, want in zip(results[1], results[0]):
        np.testing.assert_allclose(got, want, rtol=1e-14)
    with pytest.raises(ember.EmberIndexError, match="setitem: index 5 is out of bounds"):
        ember.jit(f)(ember.tensor(w0), ember.tensor([5, 0]), ember.tensor(v0))


@pytest.mark.parametrize("change", ["del", "clear", "del_then_clear", "insert_list",
                                    "insert_sequential"])
def test_a_compiled_module_retraces_when_a_container_it_iterates_changes(change):
    x = ember.randn(3, 2)
    d = ember.nn.ModuleDict({"a": ember.nn.Linear(2, 2), "b": ember.nn.Linear(2, 2)})
    lst = ember.nn.ModuleList([ember.nn.Linear(2, 2)])
    seq = ember.nn.Sequential(ember.nn.Linear(2, 2))

    class Net(ember.nn.Module):
        def __init__(self):
            super().__init__()
            self.d, self.lst, self.seq = d, lst, seq

        def forward(self, x):
            for layer in list(self.d.values()) + list(self.lst):
                x = layer(x)
            return self.seq(x)
    net = Net()
    compiled = ember.jit(net)
    compiled(x)
    if change == "del":
        del d["b"]
    elif change == "clear":
        d.clear()
    elif change == "del_then_clear":
        del d["b"]
        compiled(x)
        d.clear()
    elif change == "insert_list":
        lst.insert(0, ember.nn.Linear(2, 2))
    else:
        seq.insert(0, ember.nn.Linear(2, 2))
    np.testing.assert_allclose(compiled(x).detach().numpy(), net(x).detach().numpy(),
                               rtol=1e-6)
    assert len(compiled.retraces) == (3 if change == "del_then_clear" else 2)


def test_values_read_while_tracing_retrace_when_the_tensor_is_written():
    lengths = ember.tensor([3, 2])

    @ember.jit
    def f(x):
        return x * sum(lengths.tolist())  # a Python number baked into the graph
    x = ember.ones(2)
    assert f(x).tolist() == [5.0, 5.0]
    assert f(x).tolist() == [5.0, 5.0] and len(f.retraces) == 1
    lengths.add_(1)
    assert f(x).tolist() == [7.0, 7.0]
    lengths[0] = 10
    assert f(x).tolist() == [13.0, 13.0]
    assert len(f.retraces) == 3 and "whose values were read while tracing" in f.retraces[1]


@pytest.mark.parametrize("values", [[1.0, 2.0, 3.0, 4.0], [1.0, 0.0, 3.0, 0.0],
                                    [0.0, 2.0, 3.0, 4.0]])
def test_cumprod_backward_compiles_with_and_without_zeros(values):
    weights = ember.arange(1.0, 5.0, dtype=ember.float64)

    def step(x):
        y = (ember.cumprod(x, 0) * weights).sum()
        y.backward()
        return y
    x = ember.tensor(values, dtype=ember.float64, requires_grad=True)
    ember.jit(step)(x)
    compiled, x.grad = x.grad.numpy().copy(), None
    step(x)
    np.testing.assert_allclose(compiled, x.grad.numpy(), rtol=1e-12)


@pytest.mark.parametrize("singular", [False, True])
def test_det_backward_compiles(singular):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((2, 3, 3))
    if singular:
        a[1, 2] = a[1, 0] + a[1, 1]

    def step(x):
        y = ember.linalg.det(x).sum()
        y.backward()
        return y
    x = ember.tensor(a, requires_grad=True)
    ember.jit(step)(x)
    compiled, x.grad = x.grad.numpy().copy(), None
    step(x)
    np.testing.assert_allclose(compiled, x.grad.numpy(), rtol=1e-10, atol=1e-12)


def test_one_hot_compiles_and_checks_its_range_at_every_call():
    @ember.jit
    def f(t):
        return ember.nn.functional.one_hot(t, 4).sum(0)
    assert f(ember.tensor([0, 3, 3])).tolist() == [1, 0, 0, 2]
    with pytest.raises(ember.EmberError, match=r"smaller than num_classes \(4\), got 4"):
        f(ember.tensor([0, 4, 1]))
    with pytest.raises(ember.EmberError, match="non-negative, got -1"):
        f(ember.tensor([-1, 2, 1]))


def test_gaussian_nll_loss_compiles_and_checks_var_at_every_call():
    rng = np.random.default_rng(0)
    x = ember.tensor(rng.standard_normal((4, 3)), requires_grad=True)
    target = ember.tensor(rng.standard_normal((4, 3)))
    var = ember.tensor(np.abs(rng.standard_normal((4, 3))), requires_grad=True)

    def step(x, var):
        loss = ember.nn.functional.gaussian_nll_loss(x, target, var)
        loss.backward()
        return loss
    compiled = ember.jit(step)
    got = compiled(x, var).item()
    grads = (x.grad.numpy().copy(), var.grad.numpy().copy())
    x.grad = var.grad = None
    assert got == step(x, var).item()
    np.testing.assert_array_equal(grads[0], x.grad.numpy())
    np.testing.assert_array_equal(grads[1], var.grad.numpy())
    with pytest.raises(ember.EmberValueError, match="var has negative entry"):
        compiled(x, -var.detach().requires_grad_())
