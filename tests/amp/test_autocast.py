"""ember.amp.autocast against torch.autocast("cpu"): output dtypes and values per op,
gradients through an autocast region, nesting, the decorator, threads, the cast cache,
ember.jit, and a small model trained in bfloat16."""
import threading

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.ops import registry

try:
    import torch
    import torch.nn.functional as TF
except ImportError:  # the comparisons skip; the semantic tests still run
    torch = TF = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")
AUTOCAST_DTYPES = ("bfloat16", "float16")


def _arrays(seed=0):
    rng = np.random.default_rng(seed)
    r = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {
        "x": r(4, 6), "w": r(5, 6), "b": r(5), "a3": r(2, 4, 6), "b3": r(2, 6, 3),
        "m": r(6, 3), "c": r(3), "img": r(2, 3, 7, 7), "k": r(4, 3, 3, 3), "kb": r(4),
        "seq": r(2, 3, 9), "k1": r(4, 3, 3), "kt": r(3, 2, 3, 3), "q": r(1, 2, 5, 8),
        "kk": r(1, 2, 5, 8), "v": r(1, 2, 5, 8), "p": rng.uniform(0.05, 0.95, (4, 6))
        .astype(np.float32), "t": rng.integers(0, 6, size=4), "ln_w": r(6), "ln_b": r(6),
        "gx": r(2, 4, 5), "gw": r(4), "y": r(4, 6), "pw": np.array([0.25], np.float32),
    }


# name -> f(lib, F, T, I): lib is ember or torch, F its functional module, T turns an
# array into a floating tensor of the case's source dtype, I into an int64 tensor. The
# calls are written once: ember's names and signatures are PyTorch's.
CASES = {
    "linear": lambda lib, F, T, I: F.linear(T("x"), T("w"), T("b")),
    "matmul": lambda lib, F, T, I: lib.matmul(T("a3"), T("m")),
    "mm": lambda lib, F, T, I: lib.mm(T("x"), T("m")),
    "bmm": lambda lib, F, T, I: lib.bmm(T("a3"), T("b3")),
    "addmm": lambda lib, F, T, I: lib.addmm(T("c"), T("x"), T("m")),
    "baddbmm": lambda lib, F, T, I: lib.baddbmm(T("c"), T("a3"), T("b3")),
    "einsum": lambda lib, F, T, I: lib.einsum("ij,jk->ik", T("x"), T("m")),
    "conv1d": lambda lib, F, T, I: F.conv1d(T("seq"), T("k1"), padding=1),
    "conv2d": lambda lib, F, T, I: F.conv2d(T("img"), T("k"), T("kb"), stride=2),
    "conv_transpose2d": lambda lib, F, T, I: F.conv_transpose2d(T("img"), T("kt")),
    "prelu": lambda lib, F, T, I: F.prelu(T("x"), T("pw")),
    "scaled_dot_product_attention":
        lambda lib, F, T, I: F.scaled_dot_product_attention(T("q"), T("kk"), T("v")),
    "layer_norm": lambda lib, F, T, I: F.layer_norm(T("x"), (6,), T("ln_w"), T("ln_b")),
    "group_norm": lambda lib, F, T, I: F.group_norm(T("gx"), 2, T("gw"), T("gw")),
    "softmax": lambda lib, F, T, I: F.softmax(T("x"), dim=-1),
    "log_softmax": lambda lib, F, T, I: F.log_softmax(T("x"), dim=-1),
    "cross_entropy": lambda lib, F, T, I: F.cross_entropy(T("x"), I("t")),
    "nll_loss": lambda lib, F, T, I: F.nll_loss(T("x"), I("t")),
    "mse_loss": lambda lib, F, T, I: F.mse_loss(T("x"), T("y")),
    "l1_loss": lambda lib, F, T, I: F.l1_loss(T("x"), T("y")),
    "smooth_l1_loss": lambda lib, F, T, I: F.smooth_l1_loss(T("x"), T("y")),
    "huber_loss": lambda lib, F, T, I: F.huber_loss(T("x"), T("y")),
    "binary_cross_entropy": lambda lib, F, T, I: F.binary_cross_entropy(T("p"), T("p")),
    "binary_cross_entropy_with_logits":
        lambda lib, F, T, I: F.binary_cross_entropy_with_logits(T("x"), T("p")),
    "sum": lambda lib, F, T, I: T("x").sum(),
    "mean": lambda lib, F, T, I: T("x").mean(dim=0),
    "prod": lambda lib, F, T, I: T("p").prod(dim=1),
    "relu": lambda lib, F, T, I: F.relu(T("x")),
    "gelu": lambda lib, F, T, I: F.gelu(T("x")),
    "exp": lambda lib, F, T, I: lib.exp(T("x")),
    "add": lambda lib, F, T, I: T("x") + T("y"),
    "cat": lambda lib, F, T, I: lib.cat([T("x"), T("y")]),
    "stack": lambda lib, F, T, I: lib.stack([T("x"), T("y")]),
    # not on PyTorch's lower-precision list: their inputs' dtypes
    "mv": lambda lib, F, T, I: lib.mv(T("m").T, T("c")[:3].repeat(2)),
    "dot": lambda lib, F, T, I: lib.dot(T("c"), T("c")),
    "addmv": lambda lib, F, T, I: lib.addmv(T("b"), T("w"), T("ln_w")),
    # PyTorch's CPU float32 list
    "kl_div": lambda lib, F, T, I: F.kl_div(T("x"), T("p"), reduction="batchmean"),
    "poisson_nll_loss": lambda lib, F, T, I: F.poisson_nll_loss(T("x"), T("p")),
    "hinge_embedding_loss": lambda lib, F, T, I: F.hinge_embedding_loss(T("x"), T("y").sign()),
    "soft_margin_loss": lambda lib, F, T, I: F.soft_margin_loss(T("x"), T("y").sign()),
    "margin_ranking_loss":
        lambda lib, F, T, I: F.margin_ranking_loss(T("c"), T("c") * 0.5, T("c").sign()),
    "triplet_margin_loss": lambda lib, F, T, I: F.triplet_margin_loss(T("x"), T("y"), T("p")),
    "cosine_embedding_loss":
        lambda lib, F, T, I: F.cosine_embedding_loss(T("x"), T("y"), T("ln_w")[:4].sign()),
}

# Mixed inputs: one tensor in the autocast dtype, the others float32.
MIXED = {
    "linear": lambda lib, F, L, H: F.linear(L("x"), H("w"), H("b")),
    "matmul": lambda lib, F, L, H: lib.matmul(L("x"), H("m")),
    "conv2d": lambda lib, F, L, H: F.conv2d(L("img"), H("k"), H("kb")),
    "scaled_dot_product_attention":
        lambda lib, F, L, H: F.scaled_dot_product_attention(L("q"), H("kk"), H("v")),
    "layer_norm": lambda lib, F, L, H: F.layer_norm(L("x"), (6,), H("ln_w"), H("ln_b")),
    "add": lambda lib, F, L, H: L("x") + H("y"),
    "mul": lambda lib, F, L, H: L("x") * H("y"),
    "cat": lambda lib, F, L, H: lib.cat([L("x"), H("y")]),
    "stack": lambda lib, F, L, H: lib.stack([L("x"), H("y")]),
    "mse_loss": lambda lib, F, L, H: F.mse_loss(L("x"), H("y")),
}

TOL = {"float32": 1e-5, "bfloat16": 4e-2, "float16": 4e-3}


def _inputs(lib, arrays):
    def floating(dtype):
        def make(name):
            t = lib.tensor(arrays[name])
            return t.to(getattr(lib, dtype))
        return make

    def ints(name):
        return lib.tensor(arrays[name])
    return floating, ints


def _run(lib, fn, src, autocast_dtype, arrays):
    floating, ints = _inputs(lib, arrays)
    F_ = F if lib is ember else TF
    with lib.autocast("cpu", dtype=getattr(lib, autocast_dtype)):
        return fn(lib, F_, floating(src), ints)


def _dtype_name(t):
    return str(t.dtype).split(".")[-1]


def _assert_close(ours, theirs, dtypes):
    tol = max(TOL[d] for d in dtypes)
    a = ours.float().numpy()
    b = theirs.float().numpy()
    scale = max(1.0, float(np.abs(b).max()) if b.size else 1.0)
    np.testing.assert_allclose(a, b, rtol=tol, atol=tol * scale)


@needs_torch
@pytest.mark.parametrize("autocast_dtype", AUTOCAST_DTYPES)
@pytest.mark.parametrize("src", ("float32", "bfloat16"))
@pytest.mark.parametrize("name", sorted(CASES))
def test_output_dtype_and_value_match_torch(name, src, autocast_dtype):
    if name in ("cat", "stack") and src == "bfloat16" and autocast_dtype == "float16":
        pytest.skip("PyTorch raises on bfloat16 inputs to its promote ops under float16")
    arrays = _arrays()
    ours = _run(ember, CASES[name], src, autocast_dtype, arrays)
    theirs = _run(torch, CASES[name], src, autocast_dtype, arrays)
    assert _dtype_name(ours) == _dtype_name(theirs), (name, src, autocast_dtype)
    assert tuple(ours.shape) == tuple(theirs.shape)
    _assert_close(ours, theirs, (src, autocast_dtype, _dtype_name(ours)))


@needs_torch
@pytest.mark.parametrize("autocast_dtype", AUTOCAST_DTYPES)
@pytest.mark.parametrize("name", sorted(MIXED))
def test_mixed_input_dtypes_match_torch(name, autocast_dtype):
    arrays = _arrays(1)
    results = []
    for lib in (ember, torch):
        low, _ = _inputs(lib, arrays)
        F_ = F if lib is ember else TF
        with lib.autocast("cpu", dtype=getattr(lib, autocast_dtype)):
            results.append(MIXED[name](lib, F_, low(autocast_dtype), low("float32")))
    ours, theirs = results
    assert _dtype_name(ours) == _dtype_name(theirs), (name, autocast_dtype)
    _assert_close(ours, theirs, (autocast_dtype,))


def test_float64_and_integer_inputs_are_not_autocast():
    a = ember.randn(3, 3, dtype=ember.float64)
    with ember.autocast("cpu"):
        assert ember.matmul(a, a).dtype is ember.float64
        assert F.cross_entropy(a, ember.tensor([0, 1, 2])).dtype is ember.float64
        i = ember.ones(3, 3, dtype=ember.int64)
        assert ember.matmul(i, i).dtype is ember.int64


# Gradients ------------------------------------------------------------------------------
def _mlp_pair(seed=0):
    ember.manual_seed(seed)
    ours = ember.nn.Sequential(ember.nn.Linear(6, 16), ember.nn.ReLU(), ember.nn.Linear(16, 5))
    theirs = torch.nn.Sequential(torch.nn.Linear(6, 16), torch.nn.ReLU(),
                                 torch.nn.Linear(16, 5))
    theirs.load_state_dict({k: torch.tensor(v.numpy()) for k, v in ours.state_dict().items()})
    return ours, theirs


@needs_torch
@pytest.mark.parametrize("autocast_dtype", AUTOCAST_DTYPES)
def test_gradients_of_float32_parameters_are_float32_and_match_torch(autocast_dtype):
    ours, theirs = _mlp_pair()
    rng = np.random.default_rng(3)
    x = rng.standard_normal((8, 6)).astype(np.float32)
    t = rng.integers(0, 5, size=8)
    with ember.autocast("cpu", dtype=getattr(ember, autocast_dtype)):
        out = ours(ember.tensor(x))
        loss = F.cross_entropy(out, ember.tensor(t))
    with torch.autocast("cpu", dtype=getattr(torch, autocast_dtype)):
        tout = theirs(torch.tensor(x))
        tloss = TF.cross_entropy(tout, torch.tensor(t))
    assert _dtype_name(out) == _dtype_name(tout) == autocast_dtype
    assert loss.dtype is ember.float32 and tloss.dtype is torch.float32
    loss.backward()
    tloss.backward()
    tol = TOL[autocast_dtype]
    np.testing.assert_allclose(loss.item(), tloss.item(), rtol=tol)
    for (name, p), tp in zip(ours.named_parameters(), theirs.parameters()):
        assert p.grad.dtype is ember.float32, name
        g, tg = p.grad.numpy(), tp.grad.numpy()
        np.testing.assert_allclose(g, tg, rtol=2 * tol, atol=2 * tol * np.abs(tg).max(),
                                   err_msg=name)


def test_backward_through_cast_reaches_parameter_in_its_dtype():
    w = ember.randn(3, 4, requires_grad=True)
    x = ember.randn(2, 4)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        y = x @ w.T
    assert y.dtype is ember.bfloat16 and y.grad_fn is not None
    y.float().sum().backward()
    expected = np.broadcast_to(x.numpy().astype(np.float32).sum(0), (3, 4))
    assert w.grad.dtype is ember.float32
    np.testing.assert_allclose(w.grad.numpy(), expected, rtol=2e-2, atol=2e-2)


def test_backward_inside_the_region_gives_the_same_gradients():
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Conv2d(1, 4, 3), ember.nn.ReLU(), ember.nn.Flatten(),
                                ember.nn.Linear(4 * 6 * 6, 3))
    x, t = ember.randn(2, 1, 8, 8), ember.tensor([0, 2])

    def grads(inside):
        model.zero_grad()
        with ember.autocast("cpu"):
            loss = F.cross_entropy(model(x), t)
            if inside:
                loss.backward()
        if not inside:
            loss.backward()
        return [p.grad for p in model.parameters()]
    for a, b in zip(grads(False), grads(True)):
        assert a.dtype is b.dtype is ember.float32
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# State: nesting, decorator, threads, errors ------------------------------------------------
def test_nested_disabled_region_restores_float32():
    w, x = ember.randn(4, 4), ember.randn(2, 4)
    assert not ember.amp.is_autocast_enabled()
    with ember.autocast("cpu", dtype=ember.bfloat16):
        assert ember.amp.is_autocast_enabled()
        assert ember.amp.get_autocast_dtype("cpu") is ember.bfloat16
        with ember.autocast("cpu", enabled=False):
            assert not ember.amp.is_autocast_enabled()
            assert (x @ w).dtype is ember.float32
            with ember.autocast("cpu", dtype=ember.float16):
                assert (x @ w).dtype is ember.float16
            assert (x @ w).dtype is ember.float32
        assert (x @ w).dtype is ember.bfloat16
    assert not ember.amp.is_autocast_enabled()
    assert (x @ w).dtype is ember.float32
    assert registry._autocast.cast is None  # the hook is off again


def test_region_is_left_on_exception():
    with pytest.raises(ValueError):
        with ember.autocast("cpu"):
            raise ValueError("boom")
    assert not ember.amp.is_autocast_enabled()
    assert registry._autocast.cast is None


def test_decorator_form():
    @ember.amp.autocast("cpu", dtype=ember.float16)
    def forward(a, b):
        assert ember.amp.is_autocast_enabled()
        return a @ b

    out = forward(ember.randn(2, 3), ember.randn(3, 2))
    assert out.dtype is ember.float16
    assert not ember.amp.is_autocast_enabled()
    assert forward.__name__ == "forward"
    assert ember.autocast is ember.amp.autocast


def test_state_is_thread_local():
    seen = {}

    def worker():
        seen["enabled"] = ember.amp.is_autocast_enabled()
        seen["dtype"] = (ember.randn(2, 2) @ ember.randn(2, 2)).dtype

    with ember.autocast("cpu"):
        thread = threading.Thread(target=worker)
        thread.start()
        thread.join()
        assert (ember.randn(2, 2) @ ember.randn(2, 2)).dtype is ember.bfloat16
    assert seen == {"enabled": False, "dtype": ember.float32}
    assert registry._autocasting == 0


def test_threads_in_their_own_regions():
    barrier, seen = threading.Barrier(2), {}

    def worker(dtype):
        with ember.autocast("cpu", dtype=dtype):
            barrier.wait()
            seen[dtype.name] = (ember.randn(2, 2) @ ember.randn(2, 2)).dtype
            barrier.wait()

    threads = [threading.Thread(target=worker, args=(d,)) for d in (ember.bfloat16,
                                                                   ember.float16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert seen == {"bfloat16": ember.bfloat16, "float16": ember.float16}
    assert registry._autocasting == 0 and registry._autocast.cast is None


@pytest.mark.parametrize("kwargs, match", [
    ({"dtype": ember.float32}, r"autocast: unsupported dtype ember.float32 .*expected "
                               r"ember.bfloat16 or ember.float16"),
    ({"dtype": ember.int8}, r"unsupported dtype ember.int8"),
    ({"dtype": "nonsense"}, r"autocast: unsupported dtype 'nonsense'"),
    ({"device_type": "tpu"}, r"autocast: unsupported device_type 'tpu'; expected one of "
                             r"'cpu', 'cuda'"),
    ({"enabled": "yes"}, r"autocast: expected enabled to be a bool"),
])
def test_bad_arguments_raise_ember_errors(kwargs, match):
    with pytest.raises(ember.EmberError, match=match):
        ember.autocast(**kwargs)


def test_policy_names_are_registered_ops_or_public_functions():
    names = set(ember.amp.POLICY)
    public = set(dir(ember)) | set(dir(F))
    unknown = sorted(n for n in names if n not in registry.OPS and n not in public)
    assert unknown == []
    assert ember.amp.policy_of("linear") == ember.amp.LOWER_PRECISION
    assert ember.amp.policy_of("cross_entropy_loss") == ember.amp.FLOAT32
    assert ember.amp.policy_of("cat") == ember.amp.PROMOTE
    assert ember.amp.policy_of("add") is None


# The cast cache ------------------------------------------------------------------------
def _count_casts(fn):
    seen = []
    previous = registry._observer

    def observe(op, inputs, params, out):
        if op.name == "cast":
            seen.append(id(inputs[0]))
    registry._observer = observe
    try:
        fn()
    finally:
        registry._observer = previous
    return len(seen)


@pytest.mark.parametrize("cache_enabled, casts", [(True, 1 + 2), (False, 2 + 2)])
def test_parameter_casts_are_cached_within_a_region(cache_enabled, casts):
    layer = ember.nn.Linear(4, 4, bias=False)

    def run():
        with ember.autocast("cpu", cache_enabled=cache_enabled):
            layer(ember.randn(2, 4))  # casts the input and the weight
            layer(ember.randn(2, 4))  # the input again; the weight only without the cache
    assert _count_casts(run) == casts


def test_cache_sees_in_place_updates_and_is_cleared_on_exit():
    from ember.amp.autocast import _state
    layer = ember.nn.Linear(3, 3, bias=False)
    x = ember.randn(2, 3)
    with ember.autocast("cpu"):
        first = layer(x).detach()
        with ember.autocast("cpu"):  # an inner region keeps the outer one's cache
            pass
        assert len(_state.cache) == 1
        with ember.no_grad():
            layer.weight.mul_(2.0)
        second = layer(x).detach()
    assert len(_state.cache) == 0
    np.testing.assert_allclose(second.float().numpy(), 2 * first.float().numpy(),
                               rtol=1e-2, atol=1e-2)


def test_cast_made_under_no_grad_is_not_reused_with_grad():
    layer = ember.nn.Linear(3, 2)
    x = ember.randn(4, 3)
    with ember.autocast("cpu"):
        with ember.no_grad():
            layer(x)
        out = layer(x)
    out.float().sum().backward()
    assert layer.weight.grad is not None and layer.weight.grad.dtype is ember.float32


# ember.jit ------------------------------------------------------------------------------
def test_jit_retraces_inside_autocast_and_matches_eager():
    w = ember.randn(6, 5)

    def f(x):
        return F.softmax(x @ w, dim=-1), F.cross_entropy(x @ w, ember.tensor([0, 1, 2, 3]))

    compiled = ember.jit(f)
    x = ember.randn(4, 6)
    outside = compiled(x)
    with ember.autocast("cpu", dtype=ember.bfloat16):
        inside = compiled(x)
        eager_inside = f(x)
    again = compiled(x)
    eager = f(x)
    assert [t.dtype for t in outside] == [ember.float32, ember.float32]
    assert [t.dtype for t in inside] == [ember.bfloat16, ember.float32]
    assert [t.dtype for t in again] == [ember.float32, ember.float32]
    assert len(compiled.retraces) == 2
    assert "autocast state" in compiled.retraces[1]
    for ours, ref in zip(inside, eager_inside):
        np.testing.assert_allclose(ours.float().numpy(), ref.float().numpy(), rtol=1e-2,
                                   atol=1e-2)
    for ours, ref in zip(again, eager):
        np.testing.assert_allclose(ours.numpy(), ref.numpy(), rtol=1e-5, atol=1e-6)


def test_jit_records_casts_and_gradients_flow():
    layer = ember.nn.Linear(5, 3)
    x, t = ember.randn(4, 5), ember.tensor([0, 1, 2, 0])

    def loss_fn(x, t):
        return F.cross_entropy(layer(x), t)

    compiled = ember.jit(loss_fn)
    with ember.autocast("cpu"):
        loss = compiled(x, t)
        loss.backward()
    grads = [p.grad.numpy().copy() for p in layer.parameters()]
    layer.zero_grad()
    with ember.autocast("cpu"):
        loss_fn(x, t).backward()
    for g, p in zip(grads, layer.parameters()):
        assert p.grad.dtype is ember.float32
        np.testing.assert_allclose(g, p.grad.numpy(), rtol=1e-2, atol=1e-3)


# Training ---------------------------------------------------------------------------------
def _train_digits(autocast_dtype):
    from ember.data.datasets import Digits
    train, test = Digits(train=True), Digits(train=False)
    x = train.data.float().reshape(len(train), 64) / 16.0
    y = train.targets
    xt = test.data.float().reshape(len(test), 64) / 16.0
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(64, 64), ember.nn.ReLU(),
                                ember.nn.Linear(64, 10))
    opt = ember.optim.Adam(model.parameters(), lr=1e-2)
    order = np.random.default_rng(0)
    region = ember.autocast("cpu", dtype=autocast_dtype, enabled=autocast_dtype is not None)
    for _ in range(12):
        perm = order.permutation(len(train))
        for i in range(0, len(perm), 128):
            idx = ember.tensor(perm[i:i + 128])
            with region:
                loss = F.cross_entropy(model(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
    with ember.no_grad(), region:
        pred = model(xt).argmax(dim=1)
    return (pred == test.targets).float().mean().item()


def test_bfloat16_training_reaches_float32_accuracy():
    full = _train_digits(None)
    mixed = _train_digits(ember.bfloat16)
    assert full > 0.93
    assert abs(mixed - full) <= 0.01, (mixed, full)
