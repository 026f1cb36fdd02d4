"""PyTorch's remaining top-level functions in ember, part one: window functions,
settings, tensor queries, the in-place, ``*_copy`` and split forms and the functional
dropouts, against PyTorch (values, dtypes, gradients) and their errors (the math,
samplers and makers: ``test_toplevel_math.py``)."""
import os
import warnings

import numpy as np
import pytest

import ember
from ember import settings
from ember.ops import toplevel_extra
from tests.ops.optable import OpCase, S, generate, nc, rand

torch = pytest.importorskip("torch")

F = ("float32", "float64")


def r(rng, dtype, *shape, low=-2.0, high=2.0):
    return rand(rng, shape, dtype, low, high)


def t2n(t):
    return t.detach().double().numpy() if t.is_floating_point() else t.detach().numpy()


def e2n(t):
    return t.detach().numpy().astype(np.float64) if t.dtype.is_floating_point else \
        t.detach().numpy()


def close(e, t, rtol=1e-6, atol=1e-7):
    assert tuple(e.shape) == tuple(t.shape), f"shape {tuple(e.shape)} vs {tuple(t.shape)}"
    assert e.dtype.name == str(t.dtype).removeprefix("torch."), (e.dtype, t.dtype)
    np.testing.assert_allclose(e2n(e), t2n(t), rtol=rtol, atol=atol)


def pair(arr, requires_grad=False):
    return (ember.tensor(arr, requires_grad=requires_grad),
            torch.tensor(arr, requires_grad=requires_grad))



# the op table: forward and gradients against PyTorch and finite differences ---------------
CASES = [
    OpCase("view_copy", ember.view_copy, torch.view_copy,
           lambda rng, d: [S(r(rng, d, 2, 6), (3, 4)), S(r(rng, d, 2, 3), (-1,)),
                           S(r(rng, d, 0, 3), (3, 0))], dtypes=F),
    OpCase("permute_copy", ember.permute_copy, torch.permute_copy,
           lambda rng, d: [S(r(rng, d, 2, 3, 4), (2, 0, 1)), S(nc(r(rng, d, 3, 4)), (1, 0))],
           dtypes=F),
    OpCase("expand_copy", ember.expand_copy, torch.expand_copy,
           lambda rng, d: [S(r(rng, d, 3, 1), (2, 3, 4)), S(r(rng, d, 1), (0,))], dtypes=F),
    OpCase("transpose_copy", ember.transpose_copy, torch.transpose_copy,
           lambda rng, d: [S(r(rng, d, 2, 3, 4), 0, 2), S(nc(r(rng, d, 3, 4)), -1, -2)],
           dtypes=F),
    OpCase("t_copy", ember.t_copy, torch.t_copy,
           lambda rng, d: [S(r(rng, d, 2, 3)), S(r(rng, d, 4)), S(r(rng, d))], dtypes=F),
    OpCase("squeeze_copy", ember.squeeze_copy, torch.squeeze_copy,
           lambda rng, d: [S(r(rng, d, 2, 1, 3, 1)), S(r(rng, d, 2, 1, 3), 1),
                           S(r(rng, d, 1, 2, 1), (0, 2))], dtypes=F),
    OpCase("unsqueeze_copy", ember.unsqueeze_copy, torch.unsqueeze_copy,
           lambda rng, d: [S(r(rng, d, 2, 3), -1), S(r(rng, d), 0)], dtypes=F),
    OpCase("select_copy", ember.select_copy, torch.select_copy,
           lambda rng, d: [S(r(rng, d, 3, 4), 1, -1), S(nc(r(rng, d, 3, 4)), 0, 2)], dtypes=F),
    OpCase("slice_copy", ember.slice_copy, torch.slice_copy,
           lambda rng, d: [S(r(rng, d, 7, 3), 0, 1, 6, 2), S(r(rng, d, 3, 8), 1, -5),
                           S(r(rng, d, 4), 0, None, 100), S(r(rng, d, 4), 0, 3, 1)], dtypes=F),
    OpCase("diagonal_copy", ember.diagonal_copy, torch.diagonal_copy,
           lambda rng, d: [S(r(rng, d, 3, 4)), S(r(rng, d, 2, 3, 4), 1, 1, 2),
                           S(r(rng, d, 4, 3), -1)], dtypes=F),
    OpCase("alias_copy", ember.alias_copy, torch.alias_copy,
           lambda rng, d: [S(nc(r(rng, d, 3, 4)))], dtypes=F),
    OpCase("narrow_copy", ember.narrow_copy, torch.narrow_copy,
           lambda rng, d: [S(r(rng, d, 5, 3), 0, 1, 3), S(r(rng, d, 3, 5), -1, 4, 1)],
           dtypes=F),
    OpCase("split_copy", ember.split_copy, torch.split_copy,
           lambda rng, d: [S(r(rng, d, 5, 3), 2), S(r(rng, d, 3, 4), 3, 1)], dtypes=F),
    OpCase("split_with_sizes_copy", ember.split_with_sizes_copy, torch.split_with_sizes_copy,
           lambda rng, d: [S(r(rng, d, 5, 3), [2, 3]), S(r(rng, d, 3, 4), [1, 0, 3], 1)],
           dtypes=F),
    OpCase("unbind_copy", ember.unbind_copy, torch.unbind_copy,
           lambda rng, d: [S(r(rng, d, 3, 2)), S(r(rng, d, 2, 3), 1)], dtypes=F),
]

generate(CASES, globals())


def test_copies_are_contiguous_new_memory_and_keep_grads():
    base = ember.arange(24.0).reshape(2, 3, 4).requires_grad_(True)
    calls = [(ember.permute_copy, ((2, 0, 1),)), (ember.transpose_copy, (0, 2)),
             (ember.expand_copy, ((2, 2, 3, 4),)), (ember.select_copy, (2, 1)),
             (ember.diagonal_copy, (0, 1, 2)), (ember.detach_copy, ()),
             (ember.alias_copy, ()), (ember.slice_copy, (2, 0, 4, 3)),
             (ember.view_copy, ((4, 6),)), (ember.squeeze_copy, ()),
             (ember.unsqueeze_copy, (0,)), (ember.narrow_copy, (1, 1, 2))]
    for fn, args in calls:
        out = fn(base, *args)
        assert out.is_contiguous(), fn.__name__
        assert out.data_ptr() != base.data_ptr(), fn.__name__
        assert out.requires_grad == (fn is not ember.detach_copy), fn.__name__
        with ember.no_grad():
            out.fill_(-1.0)
        assert base.min().item() == 0.0, f"{fn.__name__} shares memory"
    for fn, arg in [(ember.split_copy, 2), (ember.split_with_sizes_copy, [1, 3]),
                    (ember.unbind_copy, None)]:
        pieces = fn(base, *(() if arg is None else (arg,)), **({"dim": 2} if arg else {}))
        assert isinstance(pieces, tuple)
        assert all(p.is_contiguous() for p in pieces)
    # gradients through every piece of a split copy, against torch
    x, tx = pair(np.arange(10.0).reshape(5, 2), requires_grad=True)
    w = np.arange(1.0, 11.0).reshape(5, 2)
    parts = np.split(w, [2, 4])
    sum((p * ember.tensor(c)).sum() for p, c in zip(ember.split_copy(x, 2), parts)).backward()
    sum((p * torch.tensor(c)).sum() for p, c in zip(torch.split_copy(tx, 2), parts)).backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy())


def test_view_copy_to_dtype_and_unfold_copy():
    x, tx = pair(np.arange(6, dtype=np.float32))
    close(ember.view_copy(x, ember.int32), torch.view_copy(tx, torch.int32))
    if hasattr(ember, "unfold_copy"):
        close(ember.unfold_copy(x, 0, 2, 2), torch.unfold_copy(tx, 0, 2, 2))


def test_copies_compile_as_eager():
    def f(x):
        return ember.permute_copy(x, (1, 0)) * 2 + ember.expand_copy(x[:1], (3, 3)).t()

    x = ember.randn(3, 3)
    np.testing.assert_allclose(ember.jit(f)(x).numpy(), f(x).numpy(), rtol=1e-6)


def test_copy_errors():
    x = ember.zeros(2, 3)
    with pytest.raises(ember.EmberError, match="slice step must be positive"):
        ember.slice_copy(x, 0, 0, 2, 0)
    with pytest.raises(ember.EmberError, match="0-dim"):
        ember.slice_copy(ember.tensor(1.0))
    with pytest.raises(ember.EmberTypeError, match="must be a Tensor"):
        ember.permute_copy(np.zeros(2), (0,))
    with pytest.raises(ember.EmberTypeError, match="split_sizes"):
        ember.split_with_sizes_copy(x, 2)
    with pytest.raises(ember.ShapeError):
        ember.view_copy(x, (4, 2))


# window functions ---------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window",
                                  "bartlett_window", "kaiser_window"])
def test_windows_match_torch(name):
    for length in (0, 1, 2, 5, 16):
        for periodic in (True, False):
            for dtype in F:
                e = getattr(ember, name)(length, periodic, dtype=getattr(ember, dtype))
                t = getattr(torch, name)(length, periodic, dtype=getattr(torch, dtype))
                close(e, t, rtol=1e-5, atol=1e-6)
    assert getattr(ember, name)(4).dtype is ember.get_default_dtype()
    w = getattr(ember, name)(4, requires_grad=True)
    assert w.requires_grad and w.is_leaf
    with pytest.raises(ember.EmberTypeError, match="floating"):
        getattr(ember, name)(4, dtype=ember.int64)
    with pytest.raises(ember.EmberError, match="non-negative"):
        getattr(ember, name)(-1)
    with pytest.raises(ember.EmberTypeError, match="int"):
        getattr(ember, name)(4.0)


def test_window_parameters_match_torch():
    close(ember.hamming_window(7, False, 0.5, 0.25), torch.hamming_window(7, False, 0.5, 0.25))
    close(ember.hamming_window(6, alpha=0.6, beta=0.3, dtype=ember.float64),
          torch.hamming_window(6, True, 0.6, 0.3, dtype=torch.float64))
    for beta in (0.0, 3.5, 20.0):
        close(ember.kaiser_window(9, beta=beta, dtype=ember.float64),
              torch.kaiser_window(9, True, beta, dtype=torch.float64), rtol=1e-10, atol=1e-12)


# settings ---------------------------------------------------------------------------------
@pytest.fixture
def restore_settings():
    before = os.environ.get("EMBER_NUM_THREADS")
    saved = dict(settings._settings)
    yield
    if before is None:
        os.environ.pop("EMBER_NUM_THREADS", None)
    else:
        os.environ["EMBER_NUM_THREADS"] = before
    settings.apply_thread_count()
    settings._settings.update(saved)


def test_set_num_threads_reaches_the_built_kernels(restore_settings):
    from ember.backends import cpu_blas
    from ember.ops import conv_forward
    x, w = ember.randn(4, 8, 12, 12), ember.randn(8, 8, 3, 3)
    a = ember.randn(256, 256)
    before_conv, before_mm = ember.nn.functional.conv2d(x, w), a @ a
    if conv_forward.FORWARD.available(np.float32):  # (a C compiler: the loop was built)
        assert conv_forward.FORWARD.built["float"] is not None
    ember.set_num_threads(1)
    assert ember.get_num_threads() == 1 and os.environ["EMBER_NUM_THREADS"] == "1"
    for real, found in conv_forward.FORWARD.built.items():
        assert found is None or found[1] == 1, real
    assert not conv_forward._PLANS.plans  # (plans baked the old count in)
    if cpu_blas._state.get("driver"):
        assert cpu_blas._state["driver"][4] == 1
    # the same numbers on one thread
    np.testing.assert_allclose(ember.nn.functional.conv2d(x, w).numpy(),
                               before_conv.numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose((a @ a).numpy(), before_mm.numpy(), rtol=1e-5, atol=1e-4)
    for real, found in conv_forward.FORWARD.built.items():
        assert found is None or found[1] == 1, real
    ember.set_num_threads(3)
    assert ember.get_num_threads() == 3
    if cpu_blas._state.get("driver"):
        assert cpu_blas._state["driver"][4] == 3


def test_thread_setting_errors(restore_settings):
    for bad, error in [(0, ember.EmberError), (-2, ember.EmberError),
                       (2.5, ember.EmberTypeError), ("2", ember.EmberTypeError),
                       (True, ember.EmberTypeError)]:
        with pytest.raises(error):
            ember.set_num_threads(bad)
        with pytest.raises(error):
            ember.set_num_interop_threads(bad)
    ember.set_num_interop_threads(3)
    assert ember.get_num_interop_threads() == 3


def test_deterministic_settings_follow_torch(restore_settings):
    # (what torch 2.13 reports; asked here once, as torch's first call takes seconds)
    assert ember.are_deterministic_algorithms_enabled() is False
    for mode, warn_only, debug in [(True, False, 2), (True, True, 1), (False, True, 0),
                                   (False, False, 0)]:
        ember.use_deterministic_algorithms(mode, warn_only=warn_only)
        assert ember.are_deterministic_algorithms_enabled() is mode
        assert ember.is_deterministic_algorithms_warn_only_enabled() is warn_only
        assert ember.get_deterministic_debug_mode() == debug
    for mode, debug in [("warn", 1), ("error", 2), ("default", 0), (2, 2), (1, 1), (0, 0)]:
        ember.set_deterministic_debug_mode(mode)
        assert ember.get_deterministic_debug_mode() == debug
        assert ember.are_deterministic_algorithms_enabled() is (debug > 0)
        assert ember.is_deterministic_algorithms_warn_only_enabled() is (debug == 1)
    with pytest.raises(ember.EmberTypeError):
        ember.use_deterministic_algorithms(1)
    with pytest.raises(ember.EmberError, match="0, 1, or 2"):
        ember.set_deterministic_debug_mode(5)
    with pytest.raises(ember.EmberError):
        ember.set_deterministic_debug_mode("loud")


def test_other_settings(restore_settings):
    assert ember.get_default_device() == ember.device("cpu")
    ember.set_default_device("cpu")
    ember.set_default_device(None)
    with pytest.raises(ember.EmberError):
        ember.set_default_device("cuda:7")
    assert ember.get_float32_matmul_precision() == "highest"
    ember.set_float32_matmul_precision("medium")
    assert ember.get_float32_matmul_precision() == "medium"
    with pytest.warns(UserWarning, match="no effect"):
        ember.set_float32_matmul_precision("HIGH")
    assert ember.get_float32_matmul_precision() == "medium"
    assert ember.set_flush_denormal(True) is False
    assert ember.set_flush_denormal(False) is False
    with pytest.raises(ember.EmberTypeError):
        ember.set_flush_denormal(1)
    assert ember.is_warn_always_enabled() is False
    ember.set_warn_always(True)
    assert ember.is_warn_always_enabled() is True
    with pytest.raises(ember.EmberTypeError):
        ember.set_warn_always(1)


# queries ----------------------------------------------------------------------------------
class Local:
    pass


def test_queries_match_torch():
    for dtype in ("float32", "float64", "int64", "int32", "uint8", "bool", "float16"):
        e = ember.zeros(2, dtype=getattr(ember, dtype))
        t = torch.zeros(2, dtype=getattr(torch, dtype))
        assert ember.typename(e) == torch.typename(t).replace("torch.", "ember.")
    for obj in ([], 3, len, int, Local, Local(), np.float32, warnings.warn):
        assert ember.typename(obj) == torch.typename(obj), obj
    assert ember.is_complex(ember.zeros(2)) is False
    for value in ([[0.0]], [1.5], [True], [0], -3):
        assert ember.is_nonzero(ember.tensor(value)) is torch.is_nonzero(torch.tensor(value))
    with pytest.raises(ember.EmberError, match="no values"):
        ember.is_nonzero(ember.zeros(0))
    with pytest.raises(ember.EmberError, match="more than one"):
        ember.is_nonzero(ember.zeros(2))
    assert ember.is_same_size(ember.zeros(2, 3), ember.ones(2, 3)) is True
    assert ember.is_same_size(ember.zeros(2), ember.zeros(1, 2)) is False
    assert ember.is_storage(ember.zeros(2)) is False
    with pytest.raises(ember.EmberTypeError):
        ember.is_complex(3)


# in-place functions -------------------------------------------------------------------------
def _inplace_case(name, rng):
    """(input array, args, kwargs) for ``name``."""
    unit = rng.uniform(0.1, 0.9, (3, 4))
    if name in ("acosh_", "arccosh_"):
        return unit + 1.5, (), {}
    if name in ("gcd_", "lcm_"):
        return rng.integers(1, 30, (3, 4)), (torch.tensor(rng.integers(1, 30, (3, 4))),), {}
    if name in ("clamp_", "clip_"):
        return unit, (0.3, 0.6), {}
    if name == "clamp_min_":
        return unit, (0.5,), {}
    if name == "clamp_max_":
        return unit, (0.5,), {}
    if name == "fill_":
        return unit, (2.5,), {}
    if name in ("xlogy_",):
        return unit, (torch.tensor(unit + 1.0),), {}
    if name == "ldexp_":
        return unit, (torch.tensor(rng.integers(-3, 3, (3, 4))),), {}
    if name == "logit_":
        return unit, (1e-3,), {}
    if name == "nan_to_num_":
        return np.array([np.nan, np.inf, -np.inf, 1.0]), (0.5, 9.0, -9.0), {}
    if name == "round_":
        return unit * 100, (), {"decimals": 1}
    if name == "addmv_":
        return unit[0], (torch.tensor(unit.T), torch.tensor(unit[:, 0])), {"beta": 0.5,
                                                                          "alpha": 2.0}
    if name == "index_put_":
        return unit, ((torch.tensor([0, 2, 0]), torch.tensor([1, 3, 1])),
                      torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64), True), {}
    if name == "resize_as_":
        return unit, (torch.zeros(2, 6),), {}
    return unit, (), {}


@pytest.mark.parametrize("name", toplevel_extra._INPLACE)
def test_inplace_functions_match_torch(name):
    rng = np.random.default_rng(len(name))
    arr, args, kwargs = _inplace_case(name, rng)
    e, t = ember.tensor(arr), torch.tensor(arr)
    def to_ember(a):
        if isinstance(a, tuple):
            return tuple(to_ember(b) for b in a)
        return ember.tensor(a.numpy()) if isinstance(a, torch.Tensor) else a
    out = getattr(ember, name)(e, *[to_ember(a) for a in args], **kwargs)
    ref = getattr(torch, name)(t, *args, **kwargs)
    assert out is e
    close(e, t, rtol=1e-6, atol=1e-12)
    close(out, ref, rtol=1e-6, atol=1e-12)


def test_inplace_functions_on_the_graph_and_errors():
    x, tx = pair(np.array([-1.0, 0.5, 2.0]), requires_grad=True)
    y = x * 2
    ember.sigmoid_(y)
    ember.clamp_(y, 0.3, 0.9)  # (sigmoid's gradient still sees sigmoid's own result)
    ty = torch.clamp(torch.sigmoid(tx * 2), 0.3, 0.9)
    (y * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    (ty * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-12)
    with pytest.raises(ember.EmberError):
        ember.exp_(ember.ones(2, requires_grad=True))
    with pytest.raises(ember.EmberTypeError, match="must be a Tensor"):
        ember.exp_(np.ones(2))
    assert "sqrt_" in ember.abs_.__doc__ and ember.abs_.__name__ == "abs_"


def test_activation_inplace_fill_and_detach():
    arr = np.array([-2.0, -0.5, 0.0, 1.5])
    for name, args in [("selu_", ()), ("celu_", (0.7,)), ("threshold_", (0.1, -5.0)),
                       ("rrelu_", (0.1, 0.3, False))]:
        e, t = pair(arr)
        assert getattr(ember, name)(e, *args) is e
        getattr(torch, name)(t, *args)
        close(e, t, rtol=1e-12)
    e, t = pair(np.array([1, 2, 3]))
    out = ember.fill(e, 2.7)
    close(out, torch.fill(t, 2.7))
    assert e.tolist() == [1, 2, 3]
    v, tv = ember.tensor(2.0, requires_grad=True), torch.tensor(2.0, requires_grad=True)
    (ember.fill(ember.zeros(3), v) * ember.tensor([1.0, 2.0, 3.0])).sum().backward()
    (torch.fill(torch.zeros(3), tv) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    assert v.grad.item() == tv.grad.item() == 6.0
    with pytest.raises(ember.EmberError, match="0-dimension"):
        ember.fill(ember.zeros(3), ember.ones(2))
    x = ember.ones(2, requires_grad=True)
    d = ember.detach(x)
    assert not d.requires_grad and d.data_ptr() == x.data_ptr()
    y = x * 1
    assert ember.detach_(y) is y and not y.requires_grad


# dropout with (input, p, train) -------------------------------------------------------------
def test_functional_dropouts():
    x = ember.ones(2, 3)
    for fn in (ember.dropout_, ember.alpha_dropout_, ember.feature_alpha_dropout_,
               ember.feature_dropout_):
        assert fn(x, 0.5, False) is x
    assert ember.feature_dropout(x, 0.5, False) is x
    assert x.tolist() == [[1.0] * 3] * 2
    ember.manual_seed(0)
    x = ember.ones(8, 16, 5)
    out = ember.feature_dropout(x, 0.5, True)
    per_channel = out.numpy()
    assert set(np.unique(per_channel)) <= {0.0, 2.0}
    assert (per_channel == per_channel[..., :1]).all()  # a whole (n, c) is kept or dropped
    assert 0.3 < (per_channel[..., 0] == 0).mean() < 0.7
    assert x.min().item() == 1.0  # (not in place)
    y = ember.ones(6, 4)
    assert ember.feature_dropout_(y, 1.0, True) is y and y.abs().sum().item() == 0.0
    z = ember.ones(1000)
    assert ember.dropout_(z, 0.5, True) is z
    assert set(np.unique(z.numpy())) == {0.0, 2.0}
    w = ember.ones(4, 6, 3)
    ember.feature_alpha_dropout_(w, 0.5, True)
    assert (w.numpy() == w.numpy()[..., :1]).all()
    with pytest.raises(ember.ShapeError, match="at least 2 dimensions"):
        ember.feature_dropout(ember.ones(4), 0.5, True)
    with pytest.raises(ember.EmberValueError):
        ember.dropout_(ember.ones(3), 1.5, True)


# split variants ---------------------------------------------------------------------------
def test_split_variants_match_torch():
    e, t = pair(np.arange(14.0).reshape(7, 2))
    for fn, args in [("unsafe_split", (3,)), ("unsafe_split", (1, 1)),
                     ("unsafe_chunk", (3,)), ("split_with_sizes", ([2, 5],)),
                     ("unsafe_split_with_sizes", ([1, 1], 1))]:
        outs, refs = getattr(ember, fn)(e, *args), getattr(torch, fn)(t, *args)
        assert isinstance(outs, tuple) and len(outs) == len(refs)
        for o, ref in zip(outs, refs):
            close(o, ref)
    with pytest.raises(ember.EmberError, match="sum exactly"):
        ember.split_with_sizes(e, [2, 2])
    with pytest.raises(ember.EmberTypeError, match="split_sizes"):
        ember.split_with_sizes(e, 3)
