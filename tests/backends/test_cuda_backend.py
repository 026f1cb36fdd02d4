"""The CUDA backend's glue, on a stand-in CuPy with two fake GPUs (``fake_cupy.py``):
loading, ``cuda`` meaning the current GPU, ops running on their tensors' GPU, transfers,
random numbers, memory statistics, streams, events and the TF32 switch. And
``ember.cuda`` without CuPy at all (as on this machine and in CI)."""
from __future__ import annotations

import importlib.util
import pathlib
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember import backends
from ember.backends import cuda as cuda_backend, cuda_memory
from ember.ops import random as ember_random
from tests.backends import fake_cupy

real_cupy = importlib.util.find_spec("cupy") is not None


def _reset():
    backends._BACKENDS.pop("cuda", None)
    backends._FAILED.pop("cuda", None)
    cuda_backend._loaded = None
    cuda_backend.matmul._allow_tf32 = False
    cuda_memory._hook = None
    cuda_memory._current.clear()
    cuda_memory._peak.clear()
    for (kind, _), dev in backends._DEVICES.items():
        if kind == "cuda":
            dev._backend = None
    for dev in [d for d in ember_random._device_gens if d.type == "cuda"]:
        del ember_random._device_gens[dev]


@pytest.fixture
def fake(monkeypatch):
    if real_cupy:
        pytest.skip("CuPy is installed: the stand-in would shadow it")
    for name, module in fake_cupy.install().items():
        monkeypatch.setitem(sys.modules, name, module)
    _reset()
    yield fake_cupy.state()
    _reset()


# Without CuPy --------------------------------------------------------------------------
@pytest.mark.skipif(real_cupy, reason="CuPy is installed here")
def test_ember_cuda_without_cupy():
    assert not ember.cuda.is_available() and ember.cuda.device_count() == 0
    assert not ember.cuda.is_bf16_supported()
    assert ember.cuda.memory_allocated() == ember.cuda.max_memory_allocated() == 0
    assert ember.cuda.memory_reserved() == 0
    ember.cuda.reset_peak_memory_stats()
    ember.cuda.empty_cache()
    ember.cuda.manual_seed(1)
    ember.cuda.manual_seed_all(1)
    for call in (ember.cuda.synchronize, ember.cuda.current_device, ember.cuda.Stream,
                 ember.cuda.Event, lambda: ember.cuda.set_device(0)):
        with pytest.raises(ember.EmberError, match="device 'cuda' is not available: ember's "
                                                   "CUDA backend needs CuPy"):
            call()
    with pytest.raises(ember.EmberError, match=r"pip install 'ember\[cuda12\]'"):
        ember.device("cuda").backend


def test_importing_ember_does_not_import_cupy():
    code = "import sys, ember; print('cupy' in sys.modules, ember.backends.cuda.matmul)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(pathlib.Path(__file__).parents[2]))
    assert out.stdout.split()[0] == "False"


def test_backend_attributes():
    assert ember.device("cpu").backend.kernel_renderer == "c"
    assert cuda_backend.CUDABackend.kernel_renderer == "cuda"
    assert not ember.device("cpu").backend.scoped


# On the stand-in -----------------------------------------------------------------------
def test_cuda_means_the_current_gpu(fake):
    assert ember.cuda.is_available() and ember.cuda.device_count() == 2
    assert ember.cuda.get_device_name() == "Fake GPU"
    assert ember.cuda.get_device_capability(1) == (9, 0)
    assert ember.cuda.is_bf16_supported()
    assert ember.zeros(3, device="cuda").device == ember.device("cuda:0")
    assert ember.ones(2).cuda().device == ember.device("cuda", 0)
    ember.cuda.set_device(1)
    try:
        assert ember.cuda.current_device() == 1
        assert ember.randn(2, device="cuda").device == ember.device("cuda:1")
    finally:
        ember.cuda.set_device(0)
    with ember.cuda.device(1):
        assert ember.tensor([1.0], device="cuda").device == ember.device("cuda:1")
    assert ember.cuda.current_device() == 0
    with pytest.raises(ember.EmberError, match=r"device 'cuda:5' is not available: CuPy "
                                               r"sees 2 GPU\(s\)"):
        ember.zeros(1, device="cuda:5")


def test_transfers_and_ops_run_on_the_tensors_gpu(fake):
    x = ember.tensor([[1.0, 2.0], [3.0, 4.0]])
    on1 = x.to("cuda:1")
    assert on1._data._device_id == 1 and fake["device"] == 0
    y = (on1 @ on1 + 1.0).relu()  # runs with cuda:1 current (the backend is scoped)
    assert y.device == ember.device("cuda:1") and y._data._device_id == 1
    np.testing.assert_array_equal(y.cpu().numpy(), (x @ x + 1.0).numpy())
    on0 = on1.to("cuda:0")
    assert on0._data._device_id == 0 and on0.tolist() == x.tolist()
    with pytest.raises(ember.EmberError, match="add: .*got cuda:0 and cuda:1"):
        on0 + on1
    assert isinstance(on0.numpy(), np.ndarray) and on0.data_ptr() != 0


def test_gradients_and_a_training_step_on_the_gpu_equal_cpu(fake):
    ember.manual_seed(0)
    model = ember.nn.Sequential(ember.nn.Linear(5, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2))
    twin = ember.nn.Sequential(ember.nn.Linear(5, 8), ember.nn.Tanh(), ember.nn.Linear(8, 2))
    twin.load_state_dict(model.state_dict())
    twin.to("cuda")
    x, y = ember.randn(6, 5), ember.randint(0, 2, (6,))
    for net, dev in ((model, "cpu"), (twin, "cuda")):
        opt = ember.optim.AdamW(net.parameters(), lr=0.1)
        for _ in range(2):
            opt.zero_grad()
            ember.nn.functional.cross_entropy(net(x.to(dev)), y.to(dev)).backward()
            opt.step()
    for p, q in zip(twin.parameters(), model.parameters()):
        assert p.device == ember.device("cuda:0")
        # (the CPU's eager C kernels round a little differently from NumPy's steps)
        np.testing.assert_allclose(p.detach().cpu().numpy(), q.detach().numpy(), rtol=1e-5,
                                   atol=1e-7)


def test_random_numbers_come_from_the_gpus_generator(fake):
    ember.cuda.manual_seed(5)
    a = ember.randn(4, device="cuda")
    ember.cuda.manual_seed(5)
    b = ember.randn(4, device="cuda")
    assert a.tolist() == b.tolist() and a.device == ember.device("cuda:0")
    ember.manual_seed(7)  # seeds every device's generator
    c = ember.rand(3, device="cuda:1")
    ember.manual_seed(7)
    assert ember.rand(3, device="cuda:1").tolist() == c.tolist()
    assert ember.randperm(5, device="cuda").sort().values.tolist() == [0, 1, 2, 3, 4]
    assert ember.randint(0, 3, (10,), device="cuda").dtype is ember.int64
    x = ember.ones(50, device="cuda")
    assert ember.nn.functional.dropout(x, 0.5).device == ember.device("cuda:0")
    g = ember.Generator(device="cuda")
    with pytest.raises(NotImplementedError, match="re-seed it with manual_seed"):
        g.get_state()


def test_memory_statistics_count_the_pool(fake):
    ember.cuda.reset_peak_memory_stats()
    base = ember.cuda.memory_allocated()
    big = ember.zeros(1000, dtype=ember.float32, device="cuda")
    assert ember.cuda.memory_allocated() == base + 4096  # 4000 bytes, in 512-byte blocks
    peak = ember.cuda.max_memory_allocated()
    assert peak >= base + 4096
    del big
    assert ember.cuda.memory_allocated() == base
    assert ember.cuda.max_memory_allocated() == peak
    ember.cuda.reset_peak_memory_stats()
    assert ember.cuda.max_memory_allocated() == base
    assert ember.cuda.memory_reserved() >= ember.cuda.memory_allocated()
    ember.cuda.empty_cache()
    assert fake["freed"] >= 1


def test_tf32_switch_sets_cupys_compute_type(fake):
    ember.backends.cuda.matmul.allow_tf32 = True
    ember.zeros(1, device="cuda")  # loads the backend: the setting is applied then
    assert fake["tf32"][-1] == (np.dtype(np.float32), 7)
    ember.backends.cuda.matmul.allow_tf32 = False
    assert fake["tf32"][-1] == (np.dtype(np.float32), 1)


def test_streams_and_events(fake):
    start, end = ember.cuda.Event(enable_timing=True), ember.cuda.Event(enable_timing=True)
    start.record()
    end.record()
    end.synchronize()
    assert start.elapsed_time(end) == pytest.approx(1.5) and end.query()
    with pytest.raises(ember.EmberError, match="enable_timing=True"):
        ember.cuda.Event().elapsed_time(end)
    s = ember.cuda.Stream()
    with ember.cuda.stream(s):
        assert ember.cuda.current_stream() == s
    s.wait_stream(ember.cuda.current_stream())
    assert s.query() and len(s._stream.waited) == 1
    ember.cuda.synchronize()
    ember.cuda.synchronize("cuda:1")


def test_checkpoints_between_gpu_and_cpu(fake, tmp_path):
    x = ember.randn(3, 2).cuda()
    path = tmp_path / "x.safetensors"
    ember.save({"x": x}, path)
    assert ember.load(path)["x"].device == ember.device("cpu")
    back = ember.load(path, map_location="cuda")["x"]
    assert back.device == ember.device("cuda:0") and back.tolist() == x.tolist()


def test_bfloat16_needs_a_cupy_that_holds_it(fake, monkeypatch):
    backend = ember.device("cuda:0").backend
    monkeypatch.setattr(backend, "supports_bfloat16", False)
    with pytest.raises(ember.EmberTypeError, match="bfloat16 tensors need CuPy 14"):
        ember.ones(2, dtype=ember.bfloat16).to("cuda:0")
