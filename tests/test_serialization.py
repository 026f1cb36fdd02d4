"""ember.save / ember.load: round trips, PyTorch interop, hostile files, atomic writes."""
import io
import json
import os
import pickle
from collections import OrderedDict

import numpy as np
import pytest

import ember
from ember.serialization import CheckpointError

try:
    import torch
    import safetensors.torch as st
except ImportError:  # the interop tests need PyTorch
    torch = st = None

needs_torch = pytest.mark.skipif(torch is None, reason="PyTorch is not installed")

ALL_DTYPES = [ember.bool, ember.uint8, ember.int8, ember.int16, ember.int32, ember.int64,
              ember.float16, ember.bfloat16, ember.float32, ember.float64]


def _sample(dtype, shape, seed=0):
    rng = np.random.default_rng(seed)
    if dtype is ember.bool:
        return ember.tensor(rng.random(shape) > 0.5)
    if dtype.is_floating_point:
        return ember.tensor(rng.standard_normal(shape) * 100, dtype=dtype)
    info = np.iinfo(dtype.np)
    return ember.tensor(rng.integers(info.min, info.max, shape, endpoint=True), dtype=dtype)


def _same(a, b):
    assert isinstance(b, ember.Tensor)
    assert a.dtype is b.dtype and tuple(a.shape) == tuple(b.shape)
    np.testing.assert_array_equal(a.numpy().astype(np.float64), b.numpy().astype(np.float64))


def _roundtrip(obj, tmp_path):
    path = tmp_path / "obj.safetensors"
    ember.save(obj, path)
    return ember.load(path)


def _assert_tree_equal(a, b):
    assert type(a) is type(b), (type(a), type(b))
    if isinstance(a, ember.Tensor):
        _same(a, b)
        assert a.requires_grad == b.requires_grad
    elif isinstance(a, dict):
        assert list(a) == list(b)
        for k in a:
            _assert_tree_equal(a[k], b[k])
    elif isinstance(a, (list, tuple)):
        assert len(a) == len(b)
        for x, y in zip(a, b):
            _assert_tree_equal(x, y)
    elif isinstance(a, float) and np.isnan(a):
        assert np.isnan(b)
    else:
        assert a == b


# Round trips ------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", ALL_DTYPES, ids=lambda d: d.name)
@pytest.mark.parametrize("shape", [(), (0,), (3, 0, 2), (1,), (2, 3, 4)])
def test_roundtrip_every_dtype_and_shape(dtype, shape, tmp_path):
    t = _sample(dtype, shape)
    out = _roundtrip(t, tmp_path)
    _same(t, out)


def test_roundtrip_extreme_values(tmp_path):
    t = {"f32": ember.tensor([np.inf, -np.inf, np.nan, -0.0, 1e-45]),
         "i64": ember.tensor([np.iinfo(np.int64).min, np.iinfo(np.int64).max])}
    out = _roundtrip(t, tmp_path)
    np.testing.assert_array_equal(out["f32"].numpy(), t["f32"].numpy())
    assert np.signbit(out["f32"].numpy()[3])
    assert out["i64"].tolist() == t["i64"].tolist()


def test_roundtrip_non_contiguous_views(tmp_path):
    base = ember.arange(60.0).reshape(3, 4, 5)
    views = {"t": base.transpose(0, 2), "step": base[:, ::2, 1:4], "neg": base.flip(0),
             "expanded": ember.tensor([1.0, 2.0]).expand(3, 2), "col": base[:, 1, 2]}
    assert not views["t"].is_contiguous()
    out = _roundtrip(views, tmp_path)
    for k, v in views.items():
        _same(v, out[k])
        assert out[k].is_contiguous()


def test_loaded_tensors_are_writable_and_independent(tmp_path):
    t = ember.arange(4.0)
    out = _roundtrip({"a": t}, tmp_path)["a"]
    out.add_(1.0)
    assert out.tolist() == [1.0, 2.0, 3.0, 4.0]
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]


def test_roundtrip_nested_checkpoint(tmp_path):
    ckpt = {
        "model": OrderedDict([("fc.weight", ember.randn(3, 2)), ("fc.bias", ember.zeros(3)),
                              ("bn.num_batches_tracked", ember.tensor(7))]),
        "optim": {"state": {0: {"step": ember.tensor(3.0), "exp_avg": ember.ones(3, 2)},
                            1: {"step": ember.tensor(3.0), "exp_avg": ember.ones(3)}},
                  "param_groups": [{"params": [0, 1], "lr": 1e-3, "betas": (0.9, 0.999),
                                    "amsgrad": False, "foreach": None, "name": "all"}]},
        "epoch": 3, "best": float("nan"), "history": [0.5, 0.25, [ember.tensor([1, 2])]],
        "pair": (ember.tensor(1.5, dtype=ember.float64), "x"), "empty": {}, "none": [],
        "keys": {1: "int", 2.5: "float", False: "bool", None: "none", "s": "str"},
        "big": 2 ** 80, "unicode": "héllo ✓",
    }
    out = _roundtrip(ckpt, tmp_path)
    ckpt["model"] = dict(ckpt["model"])  # OrderedDicts load as dicts
    _assert_tree_equal(ckpt, out)


def test_numpy_scalars_load_as_python_numbers(tmp_path):
    out = _roundtrip({"acc": np.float64(0.97), "n": np.int32(5), "ok": np.bool_(True),
                      np.int64(4): "k"}, tmp_path)
    assert out == {"acc": 0.97, "n": 5, "ok": True, 4: "k"}
    assert type(out["n"]) is int and type(out["ok"]) is bool


def test_requires_grad_is_kept(tmp_path):
    w = ember.randn(2, 2, requires_grad=True)
    out = _roundtrip({"w": w, "y": (w * 2)}, tmp_path)
    assert out["w"].requires_grad and out["w"].is_leaf
    assert out["y"].requires_grad and out["y"].is_leaf


def test_shared_storage_is_saved_as_copies(tmp_path):
    w = ember.randn(4, 3)
    out = _roundtrip({"embed.weight": w, "head.weight": w, "row": w[1]}, tmp_path)
    _same(w, out["embed.weight"])
    _same(w, out["head.weight"])
    _same(w[1], out["row"])
    out["embed.weight"].zero_()
    assert out["head.weight"].abs().sum().item() > 0 and out["row"].abs().sum().item() > 0


def test_tensor_names_that_collide_stay_apart(tmp_path):
    obj = {"a.b": ember.tensor([1]), "a": {"b": ember.tensor([2])}, "": ember.tensor([3]),
           "__metadata__": ember.tensor([4])}
    out = _roundtrip(obj, tmp_path)
    assert out["a.b"].tolist() == [1] and out["a"]["b"].tolist() == [2]
    assert out[""].tolist() == [3] and out["__metadata__"].tolist() == [4]


def test_file_objects(tmp_path):
    buf = io.BytesIO()
    ember.save({"x": ember.arange(3)}, buf)
    buf.seek(0)
    assert ember.load(buf)["x"].tolist() == [0, 1, 2]
    with open(tmp_path / "f.st", "wb") as fh:
        ember.save([ember.ones(2)], fh)
    with open(tmp_path / "f.st", "rb") as fh:
        assert ember.load(fh, weights_only=False)[0].tolist() == [1.0, 1.0]
    with open(tmp_path / "f.st", "w") as fh, pytest.raises(ember.EmberTypeError, match="text mode"):
        ember.save([ember.ones(2)], fh)
    with open(tmp_path / "f.st", "r") as fh, pytest.raises(ember.EmberTypeError, match="'rb'"):
        ember.load(fh)


def test_map_location(tmp_path):
    path = tmp_path / "m.st"
    ember.save({"x": ember.ones(2)}, path)
    assert ember.load(path, map_location="cpu")["x"].device == ember.device("cpu")
    assert ember.load(path, map_location=ember.device("cpu"))["x"].device.type == "cpu"
    with pytest.raises(ember.EmberTypeError, match="map_location"):
        ember.load(path, map_location={"cuda:0": "cpu"})


def test_save_rejects_what_it_cannot_store(tmp_path):
    path = tmp_path / "bad.st"
    with pytest.raises(ember.EmberTypeError, match=r"ndarray at 'model.w'"):
        ember.save({"model": {"w": np.zeros(3)}}, path)
    with pytest.raises(ember.EmberTypeError, match=r"set at 'tags'"):
        ember.save({"tags": {1, 2}}, path)
    with pytest.raises(ember.EmberTypeError, match=r"key \(1, 2\) .* tuple"):
        ember.save({(1, 2): ember.ones(1)}, path)
    loop = {"a": []}
    loop["a"].append(loop)
    with pytest.raises(ember.EmberError, match="contains itself at 'a.0'"):
        ember.save(loop, path)
    with pytest.raises(ember.EmberTypeError, match="path or a binary file"):
        ember.save({}, 42)
    assert not path.exists()


# PyTorch interop --------------------------------------------------------------------------
@needs_torch
def test_ember_file_reads_in_torch(tmp_path):
    sd = {name: _sample(d, (2, 3), i) for i, (name, d) in
          enumerate((d.name, d) for d in ALL_DTYPES)}
    sd["scalar"] = ember.tensor(2.5)
    path = tmp_path / "sd.safetensors"
    ember.save(sd, path)
    loaded = st.load_file(str(path))
    assert sorted(loaded) == sorted(sd)
    for k, v in sd.items():
        assert str(loaded[k].dtype) == f"torch.{v.dtype.name}"
        assert tuple(loaded[k].shape) == tuple(v.shape)
        np.testing.assert_array_equal(loaded[k].float().numpy(), v.float().numpy())


@needs_torch
def test_nested_ember_file_reads_in_torch_by_dotted_name(tmp_path):
    ckpt = {"model": {"fc.weight": ember.ones(2, 2)}, "optim": {"state": {0: {
        "exp_avg": ember.zeros(2)}}}, "epoch": 1}
    path = tmp_path / "ckpt.safetensors"
    ember.save(ckpt, path)
    loaded = st.load_file(str(path))
    assert sorted(loaded) == ["model.fc.weight", "optim.state.0.exp_avg"]


@needs_torch
def test_torch_state_dict_loads_as_flat_dict(tmp_path):
    torch.manual_seed(0)
    net = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3), torch.nn.BatchNorm2d(4),
                              torch.nn.Flatten(), torch.nn.Linear(4 * 6 * 6, 10))
    net(torch.randn(2, 1, 8, 8))  # running stats and num_batches_tracked change
    sd = net.state_dict()
    sd["extra.bf16"] = torch.randn(3).to(torch.bfloat16)
    sd["extra.u16"] = torch.tensor([0, 65535], dtype=torch.uint16)
    path = tmp_path / "torch.safetensors"
    st.save_file(sd, str(path))
    out = ember.load(path)
    assert type(out) is dict and sorted(out) == sorted(sd)
    for k, v in sd.items():
        expect = "int64" if k == "extra.u16" else str(v.dtype).removeprefix("torch.")
        assert out[k].dtype.name == expect
        assert tuple(out[k].shape) == tuple(v.shape)
        np.testing.assert_array_equal(out[k].float().numpy(), v.float().numpy())


@needs_torch
def test_torch_state_dict_drives_an_ember_module(tmp_path):
    nn = ember.nn
    if not all(hasattr(m, name) for m, name in ((nn, "Linear"), (nn, "Sequential"),
                                                 (nn.functional, "linear"))):
        pytest.skip("ember.nn.Linear is not built yet")
    torch.manual_seed(0)
    tnet = torch.nn.Sequential(torch.nn.Linear(5, 4), torch.nn.Linear(4, 2))
    path = tmp_path / "mlp.safetensors"
    st.save_file(tnet.state_dict(), str(path))
    enet = nn.Sequential(nn.Linear(5, 4), nn.Linear(4, 2))
    enet.load_state_dict(ember.load(path))
    x = np.random.default_rng(0).standard_normal((3, 5)).astype(np.float32)
    expect = tnet(torch.from_numpy(x)).detach().numpy()
    np.testing.assert_allclose(enet(ember.tensor(x)).detach().numpy(), expect, rtol=1e-6,
                               atol=1e-6)


# Hostile files ----------------------------------------------------------------------------
def _good_bytes():
    buf = io.BytesIO()
    ember.save({"w": ember.arange(6.0).reshape(2, 3), "step": 4}, buf)
    return buf.getvalue()


def _load_bytes(data, tmp_path, name="hostile.bin"):
    path = tmp_path / name
    path.write_bytes(data)
    return ember.load(path)


def test_truncated_files(tmp_path):
    data = _good_bytes()
    header_end = 8 + int.from_bytes(data[:8], "little")
    for cut in (0, 1, 7, 8, 12, header_end - 1, header_end, header_end + 5, len(data) - 1):
        with pytest.raises(CheckpointError, match="truncated|not a safetensors|fewer than"):
            _load_bytes(data[:cut], tmp_path)


def test_trailing_bytes_are_rejected(tmp_path):
    with pytest.raises(CheckpointError, match="corrupted"):
        _load_bytes(_good_bytes() + b"\x00" * 16, tmp_path)


def test_random_bytes(tmp_path):
    rng = np.random.default_rng(1)
    for size in (3, 64, 4096):
        with pytest.raises(CheckpointError):
            _load_bytes(rng.integers(0, 256, size, dtype=np.uint8).tobytes(), tmp_path)


def _with_header(header: dict, payload: bytes) -> bytes:
    raw = json.dumps(header).encode()
    raw += b" " * (-len(raw) % 8)
    return len(raw).to_bytes(8, "little") + raw + payload


def test_header_claiming_huge_sizes(tmp_path):
    data = (2 ** 63).to_bytes(8, "little") + b'{"a": 1}'
    with pytest.raises(CheckpointError, match=r"header length says 9223372036854775808 bytes"):
        _load_bytes(data, tmp_path)
    huge = {"w": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40], "data_offsets": [0, 8]}}
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        _load_bytes(_with_header(huge, b"\x00" * 8), tmp_path)
    offsets = {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 2 ** 62]}}
    with pytest.raises(CheckpointError, match="truncated or corrupted"):
        _load_bytes(_with_header(offsets, b"\x00" * 8), tmp_path)


def test_corrupted_headers(tmp_path):
    data = bytearray(_good_bytes())
    data[9] = ord("#")  # inside the JSON
    with pytest.raises(CheckpointError, match="not valid JSON"):
        _load_bytes(bytes(data), tmp_path)
    for header in (b"[1,2,3] ", b"abcd"):
        with pytest.raises(CheckpointError, match="no JSON header"):
            _load_bytes(len(header).to_bytes(8, "little") + header, tmp_path)
    bad_meta = {"__metadata__": {"format": "ember", "ember.version": "1",
                                 "ember.structure": '{"tensor": "nope"}'}}
    with pytest.raises(CheckpointError, match="lacks"):
        _load_bytes(_with_header(bad_meta, b""), tmp_path)
    bad_meta["__metadata__"]["ember.structure"] = '{"eval": "os.system"}'
    with pytest.raises(CheckpointError, match="unknown node kind 'eval'"):
        _load_bytes(_with_header(bad_meta, b""), tmp_path)
    bad_meta["__metadata__"]["ember.structure"] = "{not json"
    with pytest.raises(CheckpointError, match="not valid JSON"):
        _load_bytes(_with_header(bad_meta, b""), tmp_path)
    bad_meta["__metadata__"]["ember.version"] = "99"
    with pytest.raises(CheckpointError, match="version '99'"):
        _load_bytes(_with_header(bad_meta, b""), tmp_path)


def test_unsupported_dtype(tmp_path):
    header = {"w": {"dtype": "F8_E4M3", "shape": [8], "data_offsets": [0, 8]}}
    with pytest.raises(CheckpointError, match="'w' .* dtype F8_E4M3"):
        _load_bytes(_with_header(header, b"\x00" * 8), tmp_path)


class _Marker:
    """Unpickling this would create a file: the proof that something ran."""

    def __init__(self, path):
        self.path = path

    def __reduce__(self):
        return (open, (self.path, "w"))


@pytest.mark.parametrize("protocol", [0, 2, pickle.HIGHEST_PROTOCOL])
def test_pickle_file_is_refused_and_never_run(tmp_path, protocol):
    marker = tmp_path / "marker"
    path = tmp_path / "evil.pt"
    with open(path, "wb") as fh:
        pickle.dump({"w": _Marker(str(marker))}, fh, protocol=protocol)
    with pytest.raises(CheckpointError) as info:
        ember.load(path)
    if protocol >= 2:
        assert "pickle" in str(info.value)
    assert not marker.exists()


@needs_torch
def test_torch_save_file_is_refused(tmp_path):
    marker = tmp_path / "marker"
    path = tmp_path / "model.pt"
    torch.save({"w": torch.ones(2), "evil": _Marker(str(marker))}, path)
    with pytest.raises(CheckpointError, match="torch.save"):
        ember.load(path)
    assert not marker.exists()


def test_other_formats_are_refused(tmp_path):
    buf = io.BytesIO()
    np.save(buf, np.zeros(3))
    with pytest.raises(CheckpointError, match="NumPy .npy"):
        _load_bytes(buf.getvalue(), tmp_path)
    with pytest.raises(CheckpointError, match="0 bytes"):
        _load_bytes(b"", tmp_path)
    with pytest.raises(FileNotFoundError):
        ember.load(tmp_path / "missing.safetensors")


# Atomic writes ----------------------------------------------------------------------------
def _leftovers(directory):
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


@pytest.mark.parametrize("error", [OSError("disk full"), KeyboardInterrupt()])
def test_crash_mid_write_keeps_the_old_file(tmp_path, monkeypatch, error):
    path = tmp_path / "ckpt.safetensors"
    ember.save({"w": ember.zeros(100), "epoch": 1}, path)
    before = path.read_bytes()

    def crash(fileobj, data):
        fileobj.write(data[:len(data) // 2])
        fileobj.flush()
        raise error

    monkeypatch.setattr(ember.serialization, "_write_all", crash)
    with pytest.raises(type(error)):
        ember.save({"w": ember.ones(100), "epoch": 2}, path)
    assert path.read_bytes() == before
    assert ember.load(path)["epoch"] == 1
    assert _leftovers(tmp_path) == []


def test_failed_rename_keeps_the_old_file(tmp_path, monkeypatch):
    path = tmp_path / "ckpt.safetensors"
    ember.save({"epoch": 1}, path)

    def no_rename(src, dst):
        raise PermissionError("rename refused")

    monkeypatch.setattr(os, "replace", no_rename)
    with pytest.raises(PermissionError):
        ember.save({"epoch": 2}, path)
    assert ember.load(path) == {"epoch": 1}
    assert _leftovers(tmp_path) == []


def test_save_fsyncs_file_and_directory(tmp_path, monkeypatch):
    synced = []
    real_fsync = os.fsync

    def spy(fd):
        synced.append(os.path.realpath(f"/proc/self/fd/{fd}") if os.path.exists("/proc/self")
                      else fd)
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", spy)
    path = tmp_path / "ckpt.safetensors"
    ember.save({"w": ember.ones(3)}, path)
    assert len(synced) == 2
    if os.path.exists("/proc/self"):
        assert synced[0].startswith(str(tmp_path / ".ckpt.safetensors."))  # the temp file
        assert synced[1] == str(tmp_path)


def test_modes_symlinks_and_missing_directories(tmp_path):
    path = tmp_path / "ckpt.safetensors"
    ember.save({"a": 1}, path)
    mask = os.umask(0)
    os.umask(mask)
    assert path.stat().st_mode & 0o777 == 0o666 & ~mask
    os.chmod(path, 0o640)
    ember.save({"a": 2}, path)
    assert path.stat().st_mode & 0o777 == 0o640
    link = tmp_path / "latest"
    link.symlink_to(path)
    ember.save({"a": 3}, link)
    assert link.is_symlink() and ember.load(path) == {"a": 3}
    with pytest.raises(FileNotFoundError, match="parent directory"):
        ember.save({"a": 1}, tmp_path / "no" / "such.st")
    with pytest.raises(IsADirectoryError):
        ember.save({"a": 1}, tmp_path)
