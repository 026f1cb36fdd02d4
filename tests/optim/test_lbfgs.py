"""ember.optim.LBFGS against torch.optim.LBFGS: a convex quadratic, the Rosenbrock
function and a small network, with and without the strong-Wolfe line search; the same
number of closure evaluations, state dicts (lists, None entries, Python numbers) that
resume exactly, the stopping rules, ember.jit, and the argument errors."""
import copy

import numpy as np
import pytest

import ember
from ember import nn, optim
from ember.compiler import TraceError
from ember.errors import EmberTypeError
from ember.optim import OptimizerError

from .optim_oracle import assert_state_dicts_match, to_ember, torch

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")

RNG = np.random.default_rng(0)
N = 8
_M = RNG.standard_normal((N, N))
A = _M @ _M.T / N + 0.5 * np.eye(N)  # symmetric positive definite
B = RNG.standard_normal(N)


def quadratic(x, lib):
    a, b = lib.tensor(A, dtype=x.dtype), lib.tensor(B, dtype=x.dtype)
    return 0.5 * (x * (a @ x)).sum() - (b * x).sum()


def rosenbrock(x, lib=None):
    return ((1 - x[:-1]) ** 2 + 100 * (x[1:] - x[:-1] ** 2) ** 2).sum()


class Problem:
    """The same objective minimised by ember's and PyTorch's LBFGS from the same start;
    ``problem`` is "quadratic", "rosenbrock" or "network"."""

    def __init__(self, problem, options, dtype=np.float64):
        self.problem, self.options = problem, options
        rng = np.random.default_rng(1)
        if problem == "network":
            self.x = rng.standard_normal((16, 3)).astype(dtype)
            self.y = np.sin(self.x.sum(1, keepdims=True)).astype(dtype)
            shapes = [(4, 3), (4,), (1, 4), (1,)]
            init = [0.5 * rng.standard_normal(s).astype(dtype) for s in shapes]
        elif problem == "rosenbrock":
            init = [np.linspace(-1.5, 1.2, 6).astype(dtype)]
        else:
            init = [rng.standard_normal(N).astype(dtype)]
        self.ep = [ember.tensor(a, requires_grad=True) for a in init]
        self.tp = [torch.tensor(a, requires_grad=True) for a in init]
        self.eo = optim.LBFGS(self.ep, **options)
        self.to = torch.optim.LBFGS(self.tp, **options)
        self.calls = {"ember": 0, "torch": 0}

    def loss(self, params, lib):
        if self.problem == "network":
            w1, b1, w2, b2 = params
            x, y = lib.tensor(self.x), lib.tensor(self.y)
            return ((lib.tanh(x @ w1.T + b1) @ w2.T + b2 - y) ** 2).mean()
        objective = quadratic if self.problem == "quadratic" else rosenbrock
        return objective(params[0], lib)

    def closure(self, name):
        params, opt, lib = ((self.ep, self.eo, ember) if name == "ember" else
                            (self.tp, self.to, torch))

        def closure():
            self.calls[name] += 1
            opt.zero_grad()
            loss = self.loss(params, lib)
            loss.backward()
            return loss
        return closure

    def step(self, *others):
        """One LBFGS step of each; returns the losses they return."""
        out = [self.eo.step(self.closure("ember")).item(),
               self.to.step(self.closure("torch")).item()]
        for opt in others:
            params = opt.param_groups[0]["params"]

            def closure(params=params, opt=opt):
                opt.zero_grad()
                loss = self.loss(params, ember)
                loss.backward()
                return loss
            opt.step(closure)
        return out


def assert_close(ember_params, torch_params, atol=1e-10):
    for e, t in zip(ember_params, torch_params):
        np.testing.assert_allclose(e.detach().numpy(), t.detach().numpy(), rtol=0, atol=atol)


CASES = [
    ("quadratic", dict()),
    ("quadratic", dict(lr=0.5, max_iter=6, history_size=3)),
    ("quadratic", dict(lr=0.1, max_iter=3, max_eval=2)),
    ("quadratic", dict(line_search_fn="strong_wolfe", max_iter=6, history_size=3)),
    ("rosenbrock", dict(line_search_fn="strong_wolfe")),
    ("rosenbrock", dict(line_search_fn="strong_wolfe", history_size=2, max_iter=7)),
    ("rosenbrock", dict(lr=0.5, max_iter=5, history_size=3)),
    ("rosenbrock", dict(line_search_fn="strong_wolfe", max_eval=6, tolerance_change=1e-6)),
    # small steps: the line search extrapolates, runs out of evaluations, and meets
    # cubics without a minimum
    ("rosenbrock", dict(lr=0.01, line_search_fn="strong_wolfe", max_iter=5)),
    ("network", dict(max_iter=5)),
    ("network", dict(line_search_fn="strong_wolfe", max_iter=8, history_size=4)),
]


@needs_torch
@pytest.mark.parametrize("problem,options", CASES, ids=str)
def test_steps_state_dict_and_resume_match_torch(problem, options):
    run = Problem(problem, options)
    start = [p.detach().numpy().copy() for p in run.ep]
    losses = [run.step() for _ in range(2)]
    np.testing.assert_allclose(*zip(*losses), rtol=1e-12)  # the closures' first losses
    assert run.calls["ember"] == run.calls["torch"]  # the same evaluations
    assert_close(run.ep, run.tp)
    esd, tsd = run.eo.state_dict(), run.to.state_dict()
    assert_state_dicts_match(esd, tsd)

    def resumed(state_dict):
        params = [ember.tensor(p.detach().numpy().copy(), requires_grad=True) for p in run.ep]
        opt = optim.LBFGS(params, **options)
        opt.load_state_dict(state_dict)
        return opt
    from_ember, from_torch = resumed(copy.deepcopy(esd)), resumed(to_ember(tsd))
    for _ in range(2):
        run.step(from_ember, from_torch)
    assert_close(run.ep, run.tp)
    for a, b in zip(from_ember.param_groups[0]["params"], run.ep):
        np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
    assert_close(from_torch.param_groups[0]["params"], run.tp)
    assert_state_dicts_match(run.eo.state_dict(), run.to.state_dict())
    assert from_ember.state_dict()["state"][0]["func_evals"] == \
        run.eo.state_dict()["state"][0]["func_evals"]
    assert max(np.abs(p.detach().numpy() - s).max() for p, s in zip(run.ep, start)) > 1e-2


def _wiggly(x, lib, k):
    return (x ** 2 + k * lib.sin(5 * x) + 0.5 * k * lib.cos(23 * x)).sum()


def _line_search(lib, x0, t0, k, max_ls, tolerance_change):
    """One strong-Wolfe line search from x0 along the steepest descent of a wiggly
    function, by ember's or (the oracle) PyTorch's private ``_strong_wolfe``."""
    x = lib.tensor(x0)

    def loss_and_grad(point):
        point = lib.tensor(point.detach().numpy().copy(), requires_grad=True)
        loss = _wiggly(point, lib, k)
        loss.backward()
        return float(loss), point.grad.reshape(-1)
    f, g = loss_and_grad(x)
    d = -g
    if lib is torch:
        from torch.optim.lbfgs import _strong_wolfe
        return _strong_wolfe(lambda _x, t, d: loss_and_grad(x + float(t) * d), [x], t0, d, f,
                             g, g.dot(d), tolerance_change=tolerance_change, max_ls=max_ls)
    from ember.optim.lbfgs import _strong_wolfe
    return _strong_wolfe(lambda t, d: loss_and_grad(x + float(t) * d), t0, d, f, g, g.dot(d),
                         tolerance_change=tolerance_change, max_ls=max_ls)


@needs_torch
def test_strong_wolfe_line_search_matches_torch():
    # random starts, trial steps (1e-3 .. 30), evaluation budgets and tolerances reach
    # every branch of the search: extrapolation, zoom, a trial moved off the bracket's
    # end, a bracket too small to continue
    rng = np.random.default_rng(0)
    trials = []
    for _ in range(40):
        trials.append((rng.uniform(-2, 2, 3), float(10 ** rng.uniform(-3, 1.5)),
                       float(rng.uniform(0, 4)), int(rng.integers(3, 25)),
                       float(10 ** rng.uniform(-9, 0))))
    trials.append((np.array([-1.9624385215152707, -0.8289881087218594, -0.39702092895374275]),
                   23.282109655450114, 0.28563438821393117, 22, 0.010758392559230983))
    # a parabola overshot (t = 0.97 of 0.5): the slope turns positive before the
    # sufficient-decrease test fails
    trials.append((np.array([1.0, -0.5, 2.0]), 0.97, 0.0, 25, 1e-9))
    for x0, t0, k, max_ls, tol in trials:
        f, g, t, evals = _line_search(ember, x0, t0, k, max_ls, tol)
        tf, tg, tt, tevals = _line_search(torch, x0, t0, k, max_ls, tol)
        assert evals == tevals
        assert f == pytest.approx(tf, rel=1e-10, abs=1e-10)
        assert float(t) == pytest.approx(float(tt), rel=1e-10, abs=1e-14)
        np.testing.assert_allclose(g.numpy(), tg.numpy(), rtol=1e-8, atol=1e-8)


def test_converges_on_rosenbrock_with_line_search():
    x = ember.tensor(np.linspace(-1.5, 1.2, 6), requires_grad=True)
    opt = optim.LBFGS([x], line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        loss = rosenbrock(x)
        loss.backward()
        return loss
    first = opt.step(closure).item()
    for _ in range(3):
        opt.step(closure)
    assert first > 100 and rosenbrock(x).item() < 1e-10
    np.testing.assert_allclose(x.detach().numpy(), np.ones(6), atol=1e-5)


def test_quadratic_minimum():
    x = ember.tensor(np.zeros(N), requires_grad=True)
    opt = optim.LBFGS([x], line_search_fn="strong_wolfe", tolerance_grad=1e-12,
                      tolerance_change=1e-14)

    def closure():
        opt.zero_grad()
        loss = quadratic(x, ember)
        loss.backward()
        return loss
    for _ in range(3):
        opt.step(closure)
    np.testing.assert_allclose(x.detach().numpy(), np.linalg.solve(A, B), atol=1e-8)


@needs_torch
def test_float32_matches_torch():
    run = Problem("quadratic", dict(max_iter=5), dtype=np.float32)
    for _ in range(2):
        run.step()
    assert run.eo.state[run.ep[0]]["d"].dtype == ember.float32
    assert_close(run.ep, run.tp, atol=1e-5)


@needs_torch
def test_already_optimal_returns_after_one_evaluation():
    run = Problem("quadratic", dict(tolerance_grad=1e3))
    losses = run.step()
    assert run.calls == {"ember": 1, "torch": 1}
    assert losses[0] == pytest.approx(losses[1])
    assert_state_dicts_match(run.eo.state_dict(), run.to.state_dict())
    assert list(run.eo.state[run.ep[0]]) == ["func_evals", "n_iter"]


@needs_torch
def test_parameter_without_gradient():
    # a parameter the loss does not use: its gradient stays None (read as zeros)
    p, unused = ember.tensor([1.0, -2.0], requires_grad=True), ember.ones(3, requires_grad=True)
    tp, tunused = torch.tensor([1.0, -2.0], requires_grad=True), torch.ones(3, requires_grad=True)
    eo, to = optim.LBFGS([p, unused], max_iter=4), torch.optim.LBFGS([tp, tunused], max_iter=4)
    for param, opt in ((p, eo), (tp, to)):
        def closure(param=param, opt=opt):
            opt.zero_grad()
            loss = ((param - 3.0) ** 2).sum() + (param[0] * param[1]) ** 2
            loss.backward()
            return loss
        opt.step(closure)
    assert_close([p, unused], [tp, tunused])
    assert unused.tolist() == [1.0, 1.0, 1.0]


def test_jit_raises_a_clear_error_and_falls_back():
    def build():
        model = nn.Linear(3, 1, dtype=ember.float64)
        with ember.no_grad():
            model.weight.copy_(ember.tensor([[0.1, -0.2, 0.3]]))
            model.bias.zero_()
        return model, optim.LBFGS(model.parameters(), max_iter=3)
    x = ember.tensor(np.random.default_rng(2).standard_normal((5, 3)))

    def trainer(model, opt):
        def train(x):
            def closure():
                opt.zero_grad()
                loss = (model(x) ** 2).mean()
                loss.backward()
                return loss
            return opt.step(closure)
        return train
    model, opt = build()
    with pytest.raises(TraceError, match="LBFGS.step cannot be compiled.*fallback=True"):
        ember.jit(trainer(model, opt))(x)
    eager_model, eager_opt = build()
    trainer(eager_model, eager_opt)(x)
    model, opt = build()
    with pytest.warns(UserWarning, match="running train eagerly"):
        ember.jit(trainer(model, opt), fallback=True)(x)
    np.testing.assert_array_equal(model.weight.detach().numpy(),
                                  eager_model.weight.detach().numpy())
    assert np.abs(model.weight.detach().numpy()).max() < 0.3


def _p():
    return ember.zeros(2, requires_grad=True)


def test_bad_arguments():
    with pytest.raises(OptimizerError, match="^LBFGS: Invalid learning rate: -1$"):
        optim.LBFGS([_p()], lr=-1)
    if torch is not None:
        with pytest.raises(ValueError, match="^Invalid learning rate: -1$"):
            torch.optim.LBFGS([torch.zeros(2, requires_grad=True)], lr=-1)
    with pytest.raises(OptimizerError, match=r"LBFGS doesn't support per-parameter options "
                                             r"\(parameter groups\)"):
        optim.LBFGS([{"params": [_p()]}, {"params": [_p()], "lr": 0.1}])
    with pytest.raises(OptimizerError, match="only 'strong_wolfe' is supported"):
        optim.LBFGS([_p()], line_search_fn="backtracking")
    with pytest.raises(OptimizerError, match="history_size must be a positive int"):
        optim.LBFGS([_p()], history_size=0)


def test_step_needs_a_closure_and_one_group():
    opt = optim.LBFGS([_p()])
    with pytest.raises(EmberTypeError, match="LBFGS.step: needs a closure"):
        opt.step()
    opt.add_param_group({"params": [_p()]})
    with pytest.raises(OptimizerError, match="parameter groups"):
        opt.step(lambda: ember.tensor(0.0))


def test_defaults():
    opt = optim.LBFGS([_p()], max_iter=8)
    group = {k: v for k, v in opt.param_groups[0].items() if k != "params"}
    assert group == dict(lr=1, max_iter=8, max_eval=10, tolerance_grad=1e-7,
                         tolerance_change=1e-9, history_size=100, line_search_fn=None)
    if torch is not None:
        assert opt.defaults == torch.optim.LBFGS([torch.zeros(1)], max_iter=8).defaults
