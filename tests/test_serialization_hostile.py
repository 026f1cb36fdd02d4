"""ember.load on hostile files: each gives a clear CheckpointError at once, never a hang,
a huge allocation, a builtin error from deep inside, or garbage values."""
import json
import pickle
import struct
import time

import numpy as np
import pytest

import ember
from ember.errors import EmberError
from ember.serialization import CheckpointError

pytest.importorskip("safetensors")


def _file(header, body=b""):
    text = header if isinstance(header, bytes) else json.dumps(header).encode()
    return struct.pack("<Q", len(text)) + text + body


def _ember_meta(structure: str) -> dict:
    return {"__metadata__": {"format": "ember", "ember.version": "1",
                             "ember.structure": structure}}


F32x2 = {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]}

HOSTILE = {
    "empty": b"",
    "two_bytes": b"\x01\x02",
    "header_length_2_pow_63": struct.pack("<Q", 2 ** 63) + b"{}",
    "header_length_past_end": struct.pack("<Q", 1000) + b'{"a":1}',
    "not_json": struct.pack("<Q", 5) + b"hello",
    "json_list": _file([1, 2]),
    "not_utf8": struct.pack("<Q", 4) + b"\xff\xfe\xfd\xfc",
    "unknown_dtype": _file({"x": {"dtype": "F99", "shape": [2], "data_offsets": [0, 8]}},
                           b"\0" * 8),
    "shape_overflows": _file({"x": {"dtype": "F32", "shape": [2 ** 40, 2 ** 40],
                                    "data_offsets": [0, 8]}}, b"\0" * 8),
    "offsets_past_end": _file({"x": {"dtype": "F32", "shape": [2 ** 28],
                                     "data_offsets": [0, 2 ** 30]}}, b"\0" * 8),
    "size_disagrees_with_shape": _file({"x": {"dtype": "F32", "shape": [3],
                                              "data_offsets": [0, 8]}}, b"\0" * 8),
    "overlapping_tensors": _file({"x": F32x2, "y": F32x2}, b"\0" * 8),
    "reversed_offsets": _file({"x": {"dtype": "F32", "shape": [0],
                                     "data_offsets": [8, 0]}}, b"\0" * 8),
    "negative_dim": _file({"x": {"dtype": "F32", "shape": [-2], "data_offsets": [0, 8]}},
                          b"\0" * 8),
    "missing_shape": _file({"x": {"dtype": "F32"}}, b"\0" * 8),
    "metadata_list": _file({"__metadata__": [1]}),
    "structure_not_json": _file(_ember_meta("{nope")),
    "structure_nested_100000_deep": _file(_ember_meta("[" * 100000 + "]" * 100000)),
    "structure_names_missing_tensor": _file(_ember_meta('{"tensor": "zz"}')),
    "structure_is_a_number": _file(_ember_meta("5")),
    "pickle": pickle.dumps({"a": 1}),
    "zip_archive": b"PK\x03\x04" + b"\0" * 100,
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_file_raises_checkpoint_error_quickly(name, tmp_path):
    path = tmp_path / name
    path.write_bytes(HOSTILE[name])
    start = time.perf_counter()
    with pytest.raises(CheckpointError, match="load: "):
        ember.load(path)
    assert time.perf_counter() - start < 2.0


def test_truncated_real_checkpoint_at_every_cut(tmp_path):
    path = tmp_path / "ok.safetensors"
    ember.save({"a": ember.arange(6.0).reshape(2, 3), "b": [ember.tensor([1, 2]), "x"]}, path)
    data = path.read_bytes()
    for cut in list(range(0, 40, 3)) + [len(data) // 2, len(data) - 1]:
        cut_path = tmp_path / f"cut{cut}"
        cut_path.write_bytes(data[:cut])
        with pytest.raises(CheckpointError):
            ember.load(cut_path)


def test_a_directory_raises_an_ember_error_that_is_also_an_os_error(tmp_path):
    with pytest.raises(CheckpointError, match="is a directory") as info:
        ember.load(tmp_path)
    assert isinstance(info.value, IsADirectoryError)


def test_a_missing_file_raises_an_ember_error_that_is_also_file_not_found(tmp_path):
    with pytest.raises(EmberError, match="does not exist") as info:
        ember.load(tmp_path / "nope.safetensors")
    assert isinstance(info.value, FileNotFoundError)


def test_bool_bytes_other_than_0_and_1_load_as_true(tmp_path):
    path = tmp_path / "bools"
    path.write_bytes(_file({"x": {"dtype": "BOOL", "shape": [3], "data_offsets": [0, 3]}},
                           b"\x05\x00\xff"))
    x = ember.load(path)["x"]
    assert x.dtype is ember.bool
    assert x.tolist() == [True, False, True]
    assert (x == ember.tensor([True, False, True])).all().item()
    np.testing.assert_array_equal(x.numpy().view(np.uint8), [1, 0, 1])
