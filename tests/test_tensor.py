"""What a tensor is: device, conversion to Python and NumPy, shape attributes."""
import operator

import numpy as np
import pytest

import ember

try:
    import torch
except ImportError:
    torch = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch (the oracle) not installed")


# Devices ----------------------------------------------------------------------------------
def test_device_of_a_tensor():
    x = ember.ones(2, 3)
    assert repr(x.device) == "device(type='cpu')"
    assert x.device == ember.device("cpu") and str(x.device) == "cpu"
    assert x.device.type == "cpu" and x.device.index is None
    assert not x.is_cuda


def test_device_objects_need_no_hardware():
    assert repr(ember.device("cuda")) == "device(type='cuda')"
    assert repr(ember.device("cuda:1")) == "device(type='cuda', index=1)"
    assert ember.device("cuda", 1) == ember.device("cuda:1")
    assert ember.device(ember.device("cpu")) is ember.device("cpu")
    with pytest.raises(ember.EmberError, match="device: unknown device type 'tpu'"):
        ember.device("tpu")
    with pytest.raises(ember.EmberError, match="device: invalid device string 'cuda:x'"):
        ember.device("cuda:x")


def test_to_cpu_returns_self():
    x = ember.ones(2)
    assert x.to("cpu") is x and x.cpu() is x
    assert x.to(ember.device("cpu")) is x and x.to(device="cpu") is x


def test_to_cuda_raises_a_clear_error_without_cuda():
    x = ember.ones(2)
    for call in (lambda: x.to("cuda"), lambda: x.to("cuda:0"), x.cuda,
                 lambda: x.to(device="cuda", dtype=ember.float64)):
        with pytest.raises(ember.EmberError, match="to: device 'cuda' is not available: "
                                                   "ember's CUDA backend needs CuPy"):
            call()


def test_to_forms():
    x = ember.ones(2)
    assert x.to(ember.ones(1, dtype=ember.float64)).dtype is ember.float64
    y = x.to("cpu", ember.float16)
    assert y.dtype is ember.float16 and y.device == ember.device("cpu")
    assert x.to(ember.device("cpu"), ember.int8).dtype is ember.int8
    assert x.to(device="cpu", dtype=ember.bool).dtype is ember.bool
    assert x.to(ember.float64, False, True).dtype is ember.float64
    assert x.to("cpu", ember.float32, False, True) is not x
    assert x.to(non_blocking=True) is x
    if torch is not None:
        assert x.to(torch.float64).dtype is ember.float64


def test_to_is_differentiable():
    x = ember.tensor([1.0, 2.0], requires_grad=True)
    y = x.to(ember.float64)
    (y * y).sum().backward()
    assert x.grad.dtype is ember.float32 and x.grad.tolist() == [2.0, 4.0]


def test_to_bad_arguments():
    x = ember.ones(2)
    with pytest.raises(ember.EmberTypeError, match="to: invalid arguments"):
        x.to(ember.float64, ember.float32)
    with pytest.raises(ember.EmberTypeError, match="to: unexpected keyword arguments"):
        x.to(dtypes=ember.float64)
    with pytest.raises(ember.EmberError, match="device: unknown device type 'float80'"):
        x.to("float80")


# Conversion to Python and NumPy -----------------------------------------------------------
def test_numpy_shares_memory():
    x = ember.zeros(3)
    a = x.numpy()
    a[0] = 4.0
    x[1] = 5.0
    assert x.tolist() == [4.0, 5.0, 0.0] and a.tolist() == [4.0, 5.0, 0.0]
    assert np.shares_memory(np.asarray(x), a)


def test_numpy_refuses_requires_grad():
    x = ember.ones(2, requires_grad=True)
    for call in (x.numpy, lambda: np.asarray(x)):
        with pytest.raises(ember.EmberError, match=r"Can't call numpy\(\) on Tensor that "
                                                   r"requires grad"):
            call()
    assert x.detach().numpy().tolist() == [1.0, 1.0]
    assert x.numpy(force=True).tolist() == [1.0, 1.0]


def test_array_protocol():
    x = ember.ones(2, dtype=ember.int32)
    assert np.asarray(x).dtype == np.int32
    assert np.asarray(x, dtype=np.float64).dtype == np.float64
    assert np.array(x).tolist() == [1, 1]
    out = np.add(ember.ones(2), 1)  # ufuncs give tensors back, as with torch
    assert isinstance(out, ember.Tensor) and out.tolist() == [2.0, 2.0]


def test_item():
    assert ember.tensor(3.5).item() == 3.5 and isinstance(ember.tensor(3.5).item(), float)
    assert ember.tensor([3]).item() == 3 and isinstance(ember.tensor([3]).item(), int)
    assert ember.tensor([[True]]).item() is True
    assert ember.tensor(3, dtype=ember.float16).item() == 3.0
    assert abs(ember.tensor(0.1, dtype=ember.bfloat16).item() - 0.10009765625) < 1e-12
    with pytest.raises(ember.EmberError, match="item: a Tensor with 2 elements cannot be "
                                               "converted to Scalar"):
        ember.tensor([1.0, 2.0]).item()
    with pytest.raises(ember.EmberError, match="item: a Tensor with 0 elements"):
        ember.tensor([]).item()


@needs_torch
@pytest.mark.parametrize("data,dtype", [([[1, 2], [3, 4]], None), (2.5, None),
                                        ([True, False], None), ([1.5, 2.25], "float16"),
                                        ([1.5], "bfloat16"), ([[]], None)])
def test_tolist_matches_torch(data, dtype):
    kw = lambda lib: {} if dtype is None else {"dtype": getattr(lib, dtype)}  # noqa: E731
    e, t = ember.tensor(data, **kw(ember)).tolist(), torch.tensor(data, **kw(torch)).tolist()
    assert e == t
    assert [type(v) for v in np.ravel(e)] == [type(v) for v in np.ravel(t)]


def test_len_and_iteration():
    x = ember.tensor([[1, 2], [3, 4], [5, 6]])
    assert len(x) == 3
    rows = list(x)
    assert [r.tolist() for r in rows] == [[1, 2], [3, 4], [5, 6]]
    assert all(isinstance(r, ember.Tensor) and r.shape == (2,) for r in rows)
    assert [v.item() for v in ember.tensor([1.0, 2.0])] == [1.0, 2.0]
    assert list(ember.ones(0)) == []
    with pytest.raises(TypeError, match="len\\(\\) of a 0-d tensor"):
        len(ember.tensor(1.0))
    with pytest.raises(TypeError, match="iteration over a 0-d tensor"):
        iter(ember.tensor(1.0))


def test_bool_float_int_index():
    assert bool(ember.tensor([0.0])) is False and bool(ember.tensor(3)) is True
    with pytest.raises(ember.EmberError, match="bool: Boolean value of Tensor with 2 values "
                                               "is ambiguous"):
        bool(ember.tensor([1, 2]))
    with pytest.raises(ember.EmberError, match="with 0 values is ambiguous"):
        bool(ember.tensor([]))
    assert float(ember.tensor([2])) == 2.0 and isinstance(float(ember.tensor([2])), float)
    assert int(ember.tensor(2.7)) == 2 and int(ember.tensor(-2.7)) == -2
    assert int(ember.tensor([True])) == 1
    assert complex(ember.tensor(2.0)) == 2 + 0j
    assert [10, 20, 30][ember.tensor(1)] == 20 and [10, 20, 30][ember.tensor([2])] == 30
    assert operator.index(ember.tensor(2, dtype=ember.int8)) == 2
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        [10, 20][ember.tensor(1.0)]
    with pytest.raises(TypeError, match="only integer tensors of a single element"):
        operator.index(ember.tensor([1, 2]))
    with pytest.raises(ember.EmberError, match="item: a Tensor with 2 elements"):
        float(ember.tensor([2, 3]))


# Shape attributes -------------------------------------------------------------------------
def test_shape_size_dim_numel():
    x = ember.ones(2, 3)
    assert x.shape == (2, 3) and x.size() == (2, 3)
    assert isinstance(x.shape, ember.Size) and isinstance(x.size(), ember.Size)
    assert x.size(1) == 3 and x.size(-1) == 3 and x.size(-2) == 2
    assert x.dim() == 2 and x.ndim == 2 and x.ndimension() == 2
    assert x.numel() == 6 and x.nelement() == 6 and ember.ones(()).numel() == 1
    assert ember.zeros(0, 3).numel() == 0
    with pytest.raises(ember.EmberIndexError, match=r"size: Dimension out of range \(expected "
                                                    r"to be in range of \[-2, 1\], but got 2\)"):
        x.size(2)
    with pytest.raises(ember.EmberIndexError, match="stride: Dimension out of range"):
        x.stride(-3)


def test_size_type():
    s = ember.ones(2, 3).shape
    assert repr(s) == "ember.Size([2, 3])" and repr(ember.Size([])) == "ember.Size([])"
    assert s == (2, 3) and s.numel() == 6 and ember.Size([]).numel() == 1
    assert isinstance(s[0], int) and s[-1] == 3
    assert isinstance(s[:1], ember.Size) and s[:1] == (2,)
    assert isinstance(s + (4,), ember.Size) and s + (4,) == (2, 3, 4)
    assert isinstance(s * 2, ember.Size) and s * 2 == (2, 3, 2, 3)
    assert ember.zeros(s).shape == s


@needs_torch
def test_strides_and_contiguity_match_torch():
    for make in (lambda lib: lib.ones(2, 3), lambda lib: lib.ones(2, 3, 4),
                 lambda lib: lib.arange(6).reshape(2, 3).T,
                 lambda lib: lib.ones(4, 5)[:, 1:3], lambda lib: lib.ones(4, 5)[::2],
                 lambda lib: lib.ones(()), lambda lib: lib.ones(3, 4).mT):
        e, t = make(ember), make(torch)
        assert e.stride() == t.stride()
        assert e.is_contiguous() == t.is_contiguous()
        assert tuple(e.shape) == tuple(t.shape)
    assert ember.ones(2, 3).stride(1) == 1 and ember.ones(2, 3).stride(-2) == 3


@needs_torch
@pytest.mark.parametrize("name", ["float16", "bfloat16", "float32", "float64", "int8", "int16",
                                  "int32", "int64", "uint8", "bool"])
def test_element_size_and_type_name(name):
    e, t = ember.ones(2, dtype=getattr(ember, name)), torch.ones(2, dtype=getattr(torch, name))
    assert e.element_size() == t.element_size()
    assert e.type() == t.type().replace("torch", "ember")
    assert e.is_floating_point() == t.is_floating_point()


def test_type_conversion():
    x = ember.ones(2)
    assert x.type(ember.float64).dtype is ember.float64
    assert x.type("ember.IntTensor").dtype is ember.int32
    assert x.type("torch.DoubleTensor").dtype is ember.float64
    assert x.type(ember.float32) is x


def test_transposes():
    x = ember.arange(6).reshape(2, 3)
    assert x.T.shape == (3, 2) and x.T.tolist() == [[0, 3], [1, 4], [2, 5]]
    assert ember.ones(2, 3, 4).T.shape == (4, 3, 2)
    assert ember.ones(2, 3, 4).mT.shape == (2, 4, 3)
    assert ember.ones(3).T.shape == (3,)
    with pytest.raises(ember.EmberError, match="mT: only supported on matrices or batches of "
                                               "matrices, got a 1-D tensor"):
        ember.ones(3).mT


def test_data_get_and_set():
    x = ember.ones(2, requires_grad=True)
    d = x.data
    assert not d.requires_grad and d.is_leaf
    d[0] = 7.0  # shares storage
    assert x.detach().tolist() == [7.0, 1.0]
    x.data = ember.tensor([3.0, 4.0, 5.0])
    assert x.shape == (3,) and x.requires_grad and x.detach().tolist() == [3.0, 4.0, 5.0]


def test_misc_predicates():
    x = ember.ones(2)
    assert x.is_leaf and not x.is_complex() and x.is_floating_point()
    assert not ember.ones(2, dtype=ember.int64).is_floating_point()
    assert ember.is_tensor(x) and not ember.is_tensor([1])
    assert ember.numel(ember.ones(2, 3)) == 6
