"""The names a ported PyTorch script still reaches for: ember.compile, the
ember.backends.{cudnn,cuda,mps,mkldnn,openmp} flags, and the deprecated
ember.cuda.amp / ember.cpu.amp aliases, against PyTorch's defaults and behaviour."""
import warnings

import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember import compile_api
from ember.compiler import CompiledFunction
from ember.compiler.module import CompiledModule

torch = pytest.importorskip("torch")


@pytest.fixture(autouse=True)
def _fresh_compile_warnings():
    compile_api._warned.clear()
    yield
    compile_api._warned.clear()


def _mlp_pair(seed=0):
    ember.manual_seed(seed)
    net = ember.nn.Sequential(ember.nn.Linear(5, 7), ember.nn.Tanh(), ember.nn.Linear(7, 3))
    ref = torch.nn.Sequential(torch.nn.Linear(5, 7), torch.nn.Tanh(), torch.nn.Linear(7, 3))
    ref.load_state_dict({k: torch.tensor(v.numpy()) for k, v in net.state_dict().items()})
    return net, ref


# ember.compile ------------------------------------------------------------------------
def test_compile_module_matches_eager_and_torch():
    net, ref = _mlp_pair()
    compiled = ember.compile(net)
    assert isinstance(compiled, CompiledModule)
    x = np.random.default_rng(1).standard_normal((4, 5)).astype(np.float32)
    out = compiled(ember.tensor(x))
    np.testing.assert_allclose(out.detach().numpy(), net(ember.tensor(x)).detach().numpy(),
                               rtol=1e-6)
    np.testing.assert_allclose(out.detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)
    out.sum().backward()
    ref(torch.tensor(x)).sum().backward()
    np.testing.assert_allclose(net[0].weight.grad.numpy(), ref[0].weight.grad.numpy(),
                               rtol=1e-5, atol=1e-6)
    assert len(compiled.cache) == 1  # it really traced


def test_compile_function_and_decorator_forms():
    def f(x):
        return (x * 2).sin().sum()

    x = ember.tensor([0.1, 0.2, 0.3])
    expected = float(np.sin(np.array([0.2, 0.4, 0.6], np.float32)).sum())
    plain = ember.compile(f)
    assert isinstance(plain, CompiledFunction) and plain.fallback  # fullgraph=False

    @ember.compile
    def g(x):
        return (x * 2).sin().sum()

    @ember.compile(mode="max-autotune", fullgraph=True, dynamic=True)
    def h(x):
        return (x * 2).sin().sum()

    for fn in (plain, g, h):
        assert isinstance(fn, CompiledFunction)
        assert float(fn(x)) == pytest.approx(expected, rel=1e-6)
    assert not h.fallback
    assert g.__name__ == "g"


def test_compile_disable_returns_the_object_itself():
    def f(x):
        return x + 1
    net = ember.nn.Linear(2, 2)
    assert ember.compile(f, disable=True) is f
    assert ember.compile(net, disable=True) is net
    assert ember.compile(disable=True)(f) is f


def test_compile_known_settings_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for backend in ("inductor", "eager", "aot_eager", "cudagraphs", None):
            ember.compile(lambda x: x, backend=backend)
        for mode in ("default", "reduce-overhead", "max-autotune",
                     "max-autotune-no-cudagraphs", "lite", None):
            ember.compile(lambda x: x, mode=mode)
        ember.compile(lambda x: x, options={"triton.cudagraphs": False})


def test_compile_unknown_mode_and_backend_warn_once_and_are_ignored():
    with pytest.warns(UserWarning, match="mode='turbo'") as record:
        f1 = ember.compile(lambda x: x * 3, mode="turbo")
        f2 = ember.compile(lambda x: x * 3, mode="turbo")
    assert sum("turbo" in str(w.message) for w in record) == 1
    with pytest.warns(UserWarning, match="backend='my_backend'"):
        f3 = ember.compile(lambda x: x * 3, backend="my_backend")
    with pytest.warns(UserWarning, match="backend="):
        f4 = ember.compile(lambda x: x * 3, backend=lambda gm, inputs: gm.forward)
    x = ember.tensor([1.0, 2.0])
    for fn in (f1, f2, f3, f4):
        np.testing.assert_array_equal(fn(x).numpy(), [3.0, 6.0])


def test_compile_mode_and_options_together_raise_like_torch():
    with pytest.raises(RuntimeError, match="Either mode or options"):
        ember.compile(lambda x: x, mode="default", options={})
    with pytest.raises(RuntimeError, match="Either mode or options"):
        torch.compile(lambda x: x, mode="default", options={})
    with pytest.raises(ember.EmberError, match="expected a function or a Module"):
        ember.compile(3)


def test_compile_fullgraph_decides_between_raising_and_running_eagerly():
    def branchy(x):
        return x * 2 if float(x.sum()) > 0 else x * -1

    x = ember.tensor([1.0, 2.0])
    with pytest.raises(ember.EmberError):
        ember.compile(branchy, fullgraph=True)(x)
    with pytest.warns(UserWarning, match="eagerly"):
        np.testing.assert_array_equal(ember.compile(branchy)(x).numpy(), [2.0, 4.0])


# ember.backends -----------------------------------------------------------------------
def test_cudnn_defaults_match_torch_and_flags_restore():
    cudnn, tc = ember.backends.cudnn, torch.backends.cudnn
    for name in ("enabled", "benchmark", "deterministic", "allow_tf32"):
        assert getattr(cudnn, name) == getattr(tc, name), name
    assert cudnn.is_available() == ember.cuda.is_available()
    if not cudnn.is_available():
        assert cudnn.version() is None
    else:
        assert cudnn.version() is None or cudnn.version() > 0
    before = (cudnn.benchmark, cudnn.deterministic)
    try:
        cudnn.benchmark, cudnn.deterministic = True, True
        assert (ember.backends.cudnn.benchmark, ember.backends.cudnn.deterministic) == \
            (True, True)
        with cudnn.flags(enabled=True, benchmark=False, deterministic=False):
            assert (cudnn.enabled, cudnn.benchmark, cudnn.deterministic) == (True, False, False)
        assert (cudnn.benchmark, cudnn.deterministic) == (True, True)
        prev = cudnn.set_flags(_benchmark=False)
        assert prev[1] is True and cudnn.benchmark is False and cudnn.deterministic is True
    finally:
        cudnn.benchmark, cudnn.deterministic = before
    assert cudnn.is_acceptable(ember.zeros(2)) is False  # a CPU tensor


def test_cudnn_flags_do_not_change_results():
    x = ember.randn(1, 2, 6, 6)
    w = ember.randn(3, 2, 3, 3)
    base = F.conv2d(x, w).numpy()
    with ember.backends.cudnn.flags(enabled=True, benchmark=True, deterministic=True):
        np.testing.assert_array_equal(F.conv2d(x, w).numpy(), base)


def test_cuda_flags_defaults_match_torch():
    cuda, tc = ember.backends.cuda, torch.backends.cuda
    for name in ("allow_tf32", "allow_fp16_reduced_precision_reduction",
                 "allow_bf16_reduced_precision_reduction"):
        assert getattr(cuda.matmul, name) == getattr(tc.matmul, name), name
    for name in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled",
                 "cudnn_sdp_enabled", "fp16_bf16_reduction_math_sdp_allowed"):
        assert getattr(cuda, name)() == getattr(tc, name)(), name
    assert isinstance(cuda.is_built(), bool)
    assert cuda.is_built() or not ember.cuda.is_available()
    assert cuda.is_flash_attention_available() is False
    assert hasattr(cuda, "load") and hasattr(cuda, "CUDABackend")  # the backend is intact


def test_cuda_sdp_switches_and_deprecated_sdp_kernel():
    cuda = ember.backends.cuda
    try:
        cuda.enable_flash_sdp(False)
        cuda.enable_math_sdp(True)
        assert cuda.flash_sdp_enabled() is False and cuda.math_sdp_enabled() is True
        with pytest.warns(FutureWarning, match="sdp_kernel"):
            with cuda.sdp_kernel(enable_flash=True, enable_math=False):
                assert cuda.flash_sdp_enabled() and not cuda.math_sdp_enabled()
        assert cuda.flash_sdp_enabled() is False and cuda.math_sdp_enabled() is True
    finally:
        cuda.enable_flash_sdp(True)
    q = ember.randn(1, 2, 4, 8)
    with pytest.warns(FutureWarning):
        with cuda.sdp_kernel(enable_flash=False, enable_mem_efficient=False):
            out = F.scaled_dot_product_attention(q, q, q)
    np.testing.assert_allclose(out.numpy(), F.scaled_dot_product_attention(q, q, q).numpy())
    assert cuda.preferred_linalg_library() == "default"
    with pytest.raises(RuntimeError, match="Unknown input value"):
        cuda.preferred_linalg_library("bogus")
    try:
        assert cuda.preferred_linalg_library("magma") == "magma"
        assert cuda.preferred_linalg_library() == "magma"
    finally:
        cuda.preferred_linalg_library("default")


def test_cuda_matmul_flag_is_settable():
    m = ember.backends.cuda.matmul
    try:
        m.allow_fp16_reduced_precision_reduction = False
        assert ember.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is False
    finally:
        m.allow_fp16_reduced_precision_reduction = True


def test_mps_mkldnn_openmp():
    b = ember.backends
    assert b.mps.is_available() is False and b.mps.is_built() is False
    assert b.mps.is_macos13_or_newer() is False
    device = "mps" if b.mps.is_available() else "cpu"
    assert ember.zeros(2, device=device).device.type == "cpu"
    assert b.mkldnn.is_available() is False
    assert b.mkldnn.enabled is torch.backends.mkldnn.enabled is True
    with b.mkldnn.flags(enabled=False):
        assert b.mkldnn.enabled is False
    assert b.mkldnn.enabled is True
    from ember.compiler.codegen import build
    compiler = build.find_compiler()
    expected = compiler is not None and "-fopenmp" in build._optional_flags(compiler)
    assert b.openmp.is_available() is expected


# ember.cuda.amp / ember.cpu.amp ---------------------------------------------------------
def test_cuda_amp_aliases_warn_as_torch():
    with pytest.warns(FutureWarning, match=r"ember\.amp\.autocast\('cuda', args\.\.\.\)"):
        ctx = ember.cuda.amp.autocast()
    assert isinstance(ctx, ember.amp.autocast) and ctx.device == "cuda"
    assert ctx.fast_dtype is ember.float16
    with pytest.warns(FutureWarning, match=r"ember\.amp\.GradScaler\('cuda', args\.\.\.\)"):
        scaler = ember.cuda.amp.GradScaler(init_scale=1024.0)
    assert isinstance(scaler, ember.amp.GradScaler)
    if not ember.cuda.is_available():  # as torch: warn and turn off
        assert not ctx._enabled and not scaler.is_enabled()
        with pytest.warns(UserWarning, match="Disabling"):
            ember.cuda.amp.GradScaler()


def test_cuda_amp_autocast_runs_a_cpu_script_in_float32():
    net, ref = _mlp_pair(3)
    x = np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)
    with pytest.warns(FutureWarning):
        with ember.cuda.amp.autocast():
            out = net(ember.tensor(x))
    assert out.dtype is ember.float32  # CPU tensors: not autocast, as torch
    np.testing.assert_allclose(out.detach().numpy(), ref(torch.tensor(x)).detach().numpy(),
                               rtol=1e-5, atol=1e-6)


def test_cpu_amp_autocast_and_grad_scaler():
    net, ref = _mlp_pair(4)
    x = np.random.default_rng(1).standard_normal((3, 5)).astype(np.float32)
    with pytest.warns(FutureWarning, match=r"ember\.amp\.autocast\('cpu', args\.\.\.\)"):
        ctx = ember.cpu.amp.autocast()
    with ctx:
        out = net(ember.tensor(x))
    with pytest.warns(FutureWarning):
        with torch.cpu.amp.autocast():
            expected = ref(torch.tensor(x))
    assert out.dtype is ember.bfloat16 and expected.dtype is torch.bfloat16
    np.testing.assert_allclose(out.detach().float().numpy(), expected.float().detach().numpy(),
                               rtol=2e-2, atol=2e-2)
    with pytest.warns(FutureWarning, match=r"GradScaler\('cpu', args\.\.\.\)"):
        scaler = ember.cpu.amp.GradScaler(init_scale=8.0)
    assert scaler.is_enabled()
    assert float(scaler.scale(ember.tensor(2.0))) == 16.0


def test_amp_grad_scaler_takes_a_device_as_torch():
    for device in ("cpu", "cuda"):
        assert isinstance(ember.amp.GradScaler(device), ember.amp.GradScaler)


def test_cuda_amp_custom_fwd_and_bwd():
    seen = {}
    with pytest.warns(FutureWarning):
        fwd_deco = ember.cuda.amp.custom_fwd(cast_inputs=ember.float32)

    class Twice(ember.autograd.Function):
        @staticmethod
        @fwd_deco
        def forward(ctx, x):
            seen["fwd_autocast"] = ember.amp.is_autocast_enabled("cuda")
            return x * 2

        @staticmethod
        def backward(ctx, g):
            seen["bwd_autocast"] = ember.amp.is_autocast_enabled("cuda")
            return g * 2

    with pytest.warns(FutureWarning):
        Twice.backward = staticmethod(ember.cuda.amp.custom_bwd(Twice.backward))
    x = ember.tensor([1.0, 3.0], requires_grad=True)
    with ember.amp.autocast("cuda"):
        y = Twice.apply(x)
    assert seen["fwd_autocast"] is False  # cast_inputs: the forward runs autocast-free
    y.sum().backward()
    assert seen["bwd_autocast"] is False
    np.testing.assert_array_equal(y.detach().numpy(), [2.0, 6.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 2.0])


def test_cpu_namespace():
    assert ember.cpu.is_available() is torch.cpu.is_available() is True
    assert ember.cpu.device_count() == torch.cpu.device_count() == 1
    assert ember.cpu.current_device() == torch.cpu.current_device() == "cpu"
    assert ember.cpu.synchronize() is None and ember.cpu.set_device("cpu") is None
    device_type = "cpu"
    getattr(ember, device_type).synchronize()
