"""Safe persistence: :func:`save` and :func:`load` in the safetensors format, never pickle.

A file is a plain safetensors file (https://github.com/huggingface/safetensors): the
tensors of the saved object, each stored once as a contiguous copy under a dotted name
(``"model.fc.weight"``; the keys themselves for a flat ``{str: tensor}`` state dict), and
in the header's ``__metadata__`` a JSON description of the object's structure (dicts,
lists, tuples, and leaves that are tensors, numbers, strings, bools or None).

So PyTorch reads ember's files (``safetensors.torch.load_file`` gives the tensors by
name) and ember reads PyTorch's: a safetensors file without ember's metadata loads as a
flat ``{name: tensor}`` dict, ready for ``module.load_state_dict``. Loading parses JSON
and copies bytes; nothing in a file is ever executed.
"""
from __future__ import annotations

import io
import json
import os
import tempfile
from typing import Any, BinaryIO, Union

import numpy as np

from . import dtypes as dt
from .backends import CPU, Device, placement
from .errors import EmberError, EmberTypeError
from .tensor import Tensor

__all__ = ["save", "load", "CheckpointError"]

FileLike = Union[str, os.PathLike, BinaryIO]

_FORMAT = "ember"
_VERSION = "1"
_STRUCTURE_KEY = "ember.structure"
_MAX_HEADER = 100 * 1024 * 1024  # the safetensors format's own limit on the JSON header
_CHUNK = 64 * 1024 * 1024

# safetensors dtype codes for the dtypes ember has; bfloat16 is written by
# safetensors.numpy as "BF16" (from ml_dtypes' bfloat16), as PyTorch writes it.
_DTYPES = {"BOOL": dt.bool, "U8": dt.uint8, "I8": dt.int8, "I16": dt.int16,
           "I32": dt.int32, "I64": dt.int64, "F16": dt.float16, "BF16": dt.bfloat16,
           "F32": dt.float32, "F64": dt.float64, "C64": dt.complex64}
# Unsigned types ember lacks: read into int64, values kept (uint64 only where they fit).
_WIDENED = {"U16": np.uint16, "U32": np.uint32, "U64": np.uint64}
_NUMPY_SCALARS = (np.bool_, np.integer, np.floating)


def _safetensors(what: str):
    """The safetensors package (imported on first use, so ``import ember`` works
    without it)."""
    try:
        import safetensors
        import safetensors.numpy  # noqa: F401
    except ImportError as exc:
        raise EmberError(f"{what}: ember's files are safetensors files, and the "
                         f"safetensors package is not installed ({exc}); pip install "
                         f"safetensors") from None
    return safetensors


class CheckpointError(EmberError):
    """A file that :func:`load` can't read: not a safetensors file (a pickle, a
    ``torch.save`` archive, random bytes), truncated, or with a corrupted header."""


# Saving -------------------------------------------------------------------------------
def _path_text(keys: tuple) -> str:
    return ".".join(str(k) for k in keys) or "<root>"


class _Encoder:
    """Walks the object once, collecting tensors (as contiguous host arrays) and
    building the JSON structure that refers to them by name."""

    def __init__(self):
        self.arrays: dict[str, np.ndarray] = {}
        self._open: set[int] = set()  # containers being walked, to catch cycles

    def _name_for(self, keys: tuple) -> str:
        base = ".".join(str(k) for k in keys) or "tensor"
        name, n = base, 1
        while name in self.arrays or name == "__metadata__":
            name, n = f"{base}#{n}", n + 1
        return name

    def encode(self, obj, keys: tuple = ()):
        if isinstance(obj, Tensor):
            name = self._name_for(keys)
            if obj.dtype is dt.complex128:
                raise EmberTypeError(f"save: tensor at {_path_text(keys)!r} is complex128, "
                                     "which the safetensors format cannot hold (PyTorch's "
                                     "safetensors cannot either): save ember.view_as_real(t)"
                                     " (float64) or t.to(ember.complex64)")
            host = obj._device.backend.to_numpy(obj._data)
            # (not np.ascontiguousarray, which turns 0-d arrays into 1-d ones)
            self.arrays[name] = host if host.flags.c_contiguous else host.copy(order="C")
            node = {"tensor": name}
            if obj.requires_grad:
                node["requires_grad"] = True
            return node
        if isinstance(obj, _NUMPY_SCALARS):  # stored as the Python number
            return {"value": obj.item()}
        if obj is None or isinstance(obj, (bool, int, float, str)):
            return {"value": obj}
        if isinstance(obj, (dict, list, tuple)):
            if id(obj) in self._open:
                raise EmberError(f"save: the object contains itself at "
                                 f"{_path_text(keys)!r}; ember.save needs a tree")
            self._open.add(id(obj))
            try:
                if isinstance(obj, dict):
                    return {"dict": [[self._key(k, keys), self.encode(v, keys + (k,))]
                                     for k, v in obj.items()]}
                kind = "tuple" if isinstance(obj, tuple) else "list"
                return {kind: [self.encode(v, keys + (i,)) for i, v in enumerate(obj)]}
            finally:
                self._open.discard(id(obj))
        raise EmberTypeError(
            f"save: can't save a {type(obj).__name__} at {_path_text(keys)!r}; ember.save "
            "stores tensors, dicts, lists and tuples of them, and numbers, strings, bools "
            "and None (it never pickles)")

    @staticmethod
    def _key(key, keys: tuple):
        if isinstance(key, _NUMPY_SCALARS):
            return key.item()
        if key is None or isinstance(key, (bool, int, float, str)):
            return key
        raise EmberTypeError(f"save: dict key {key!r} at {_path_text(keys)!r} is a "
                             f"{type(key).__name__}; keys must be str, int, float, bool or "
                             f"None")


def _serialize(obj) -> bytes:
    encoder = _Encoder()
    structure = encoder.encode(obj)
    metadata = {"format": _FORMAT, "ember.version": _VERSION,
                _STRUCTURE_KEY: json.dumps(structure, separators=(",", ":"))}
    return _safetensors("save").numpy.save(encoder.arrays, metadata=metadata)


def _write_all(fileobj: BinaryIO, data: bytes) -> None:
    view = memoryview(data)
    for start in range(0, len(view), _CHUNK):
        fileobj.write(view[start:start + _CHUNK])


def _new_file_mode() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


def _fsync_directory(directory: str) -> None:
    # Makes the rename itself durable; some platforms can't open a directory, which
    # only loses that guarantee, not the file.
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def atomic_write(path: str, data) -> None:
    """Write ``data`` (bytes, or a function ``write(file)`` writing a binary file) to
    ``path`` atomically: into a temporary file in the same directory, flushed, synced and
    renamed over ``path``, the rename then synced. A reader sees the old file or the
    whole new one; a crash never leaves a half-written ``path``."""
    path = os.path.realpath(path)  # through a symlink to its target, keeping the link
    directory, base = os.path.split(path)
    if os.path.isdir(path):
        raise IsADirectoryError(f"save: {path} is a directory")
    if not os.path.isdir(directory):
        raise FileNotFoundError(f"save: parent directory {directory} does not exist")
    mode = os.stat(path).st_mode & 0o7777 if os.path.exists(path) else _new_file_mode()
    fd, tmp = tempfile.mkstemp(prefix=f".{base}.", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(fd, "wb") as out:
            if callable(data):
                data(out)
            else:
                _write_all(out, data)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise
    _fsync_directory(directory)


def save(obj: Any, f: FileLike) -> None:
    """Save a tensor, or a dict/list/tuple tree of tensors and plain values (a module's
    or optimizer's ``state_dict()``, a checkpoint dict), to a safetensors file.

    Args:
        obj: tensors, dicts (keys str, int, float, bool or None), lists and tuples,
            with numbers, strings, bools and None as other leaves. Every tensor is
            stored as its own contiguous copy: views and tensors that share memory
            (tied weights) load as separate tensors. ``requires_grad`` is kept; a
            Parameter loads as a tensor that requires grad. NumPy scalars are stored
            as Python numbers, namedtuples as tuples, OrderedDicts as dicts.
        f: a path, written atomically (a temporary file in the same directory,
            flushed, fsynced and renamed over the target: a crash leaves the old file
            whole), or a binary file object (then atomicity is the caller's).

    >>> ember.save({"model": model.state_dict(), "epoch": 3}, "ckpt.safetensors")
    """
    data = _serialize(obj)
    if isinstance(f, (str, os.PathLike)):
        atomic_write(os.fspath(f), data)
    elif callable(getattr(f, "write", None)):
        if isinstance(f, io.TextIOBase):
            raise EmberTypeError("save: the file object is in text mode; open it with 'wb'")
        _write_all(f, data)
    else:
        raise EmberTypeError(f"save: f must be a path or a binary file object, got "
                             f"{type(f).__name__}")


# Loading ------------------------------------------------------------------------------
class CheckpointFileError(CheckpointError, OSError):
    """A path :func:`load` can't open: missing, a directory, unreadable. Also an
    ``OSError`` (``FileNotFoundError``, ``IsADirectoryError``...), as ``torch.load``
    raises there."""


def _file_error(path: str, exc: OSError) -> CheckpointError:
    kinds = {FileNotFoundError: "does not exist", IsADirectoryError: "is a directory, not a file",
             PermissionError: "can't be read (permission denied)"}
    what = kinds.get(type(exc), f"can't be read ({exc.strerror or exc})")
    cls = type(exc).__name__ + "CheckpointError"
    err_type = type(cls, (CheckpointFileError, type(exc)), {"__module__": __name__})
    return err_type(f"load: {path!r} {what}")


def _read(f: FileLike) -> tuple[bytes, str]:
    if isinstance(f, (str, os.PathLike)):
        try:
            with open(f, "rb") as fh:
                return fh.read(), repr(os.fspath(f))
        except OSError as exc:
            raise _file_error(os.fspath(f), exc) from None
    if not callable(getattr(f, "read", None)):
        raise EmberTypeError(f"load: f must be a path or a binary file object, got "
                             f"{type(f).__name__}")
    data = f.read()
    if not isinstance(data, (bytes, bytearray)):
        raise EmberTypeError(f"load: the file object gave {type(data).__name__}, not bytes; "
                             f"open it with 'rb'")
    return bytes(data), "the file object"


def _foreign_format(data: bytes) -> str | None:
    """What a file that is not safetensors looks like, for the error message."""
    if len(data) >= 2 and data[0] == 0x80 and 2 <= data[1] <= 5:
        return ("a Python pickle (as pickle.dump or an old torch.save writes); ember never "
                "unpickles, since loading a pickle can run arbitrary code")
    if data.startswith(b"PK\x03\x04"):
        return ("a zip archive, the format torch.save writes (it holds a pickle); ember "
                "never unpickles. In PyTorch, save the state dict with "
                "safetensors.torch.save_file instead")
    if data.startswith(b"\x93NUMPY"):
        return "a NumPy .npy file"
    return None


def _parse_header(data: bytes, source: str) -> dict:
    foreign = _foreign_format(data)
    if foreign is not None:
        raise CheckpointError(f"load: {source} is not a safetensors file: it is {foreign}")
    if len(data) < 8:
        raise CheckpointError(f"load: {source} is not a safetensors file: it has "
                              f"{len(data)} bytes, fewer than the 8-byte header length that "
                              f"starts one")
    size = int.from_bytes(data[:8], "little")
    if size > len(data) - 8:
        raise CheckpointError(f"load: {source} is truncated or not a safetensors file: its "
                              f"header length says {size} bytes but only {len(data) - 8} "
                              f"follow")
    if size > _MAX_HEADER or size < 2 or data[8:9] != b"{":
        raise CheckpointError(f"load: {source} is not a safetensors file: no JSON header "
                              f"after the 8-byte length (header length {size})")
    try:
        header = json.loads(data[8:8 + size])
    except (ValueError, RecursionError) as exc:  # UnicodeDecodeError is a ValueError
        raise CheckpointError(f"load: {source} has a corrupted header: not valid JSON "
                              f"({exc})") from None
    return header  # a dict: it starts with "{"


def _to_array(name: str, info: dict, source: str) -> np.ndarray:
    code, shape = info["dtype"], info["shape"]
    if code == "BOOL":  # any nonzero byte is True (NumPy would keep the raw byte)
        return np.frombuffer(info["data"], dtype=np.uint8).reshape(shape) != 0
    if code in _DTYPES:
        arr = np.frombuffer(info["data"], dtype=_DTYPES[code].np).reshape(shape)
        return arr if arr.flags.aligned else arr.copy()
    if code in _WIDENED:
        wide = np.frombuffer(info["data"], dtype=_WIDENED[code]).reshape(shape)
        if wide.size and code == "U64" and int(wide.max()) > np.iinfo(np.int64).max:
            raise CheckpointError(f"load: tensor {name!r} in {source} is uint64 with values "
                                  f"beyond int64's range, which ember can't hold")
        return wide.astype(np.int64)
    raise CheckpointError(f"load: tensor {name!r} in {source} has dtype {code}, which ember "
                          f"does not support (supported: {', '.join(_DTYPES)}, and U16, "
                          f"U32, U64 read as int64)")


def _read_tensors(data: bytes, header: dict, source: str) -> dict[str, np.ndarray]:
    safetensors = _safetensors("load")
    try:
        entries = dict(safetensors.deserialize(data))
    except safetensors.SafetensorError as exc:
        raise CheckpointError(f"load: {source} is truncated or corrupted: {exc}") from None
    # In the order the header lists them (deserialize's order is arbitrary).
    return {name: _to_array(name, entries[name], source)
            for name in header if name != "__metadata__"}


class _Decoder:
    def __init__(self, arrays: dict[str, np.ndarray], device: Device, source: str):
        self.arrays = arrays
        self.device = device
        self.source = source

    def fail(self, what: str) -> CheckpointError:
        return CheckpointError(f"load: {self.source} has corrupted ember metadata: {what}")

    def tensor(self, arr: np.ndarray, requires_grad: bool = False) -> Tensor:
        t = Tensor._make(arr, CPU)
        if self.device != CPU:
            t = t.to(self.device)
        if requires_grad and t.dtype.is_floating_point:
            t.requires_grad_(True)
        return t

    def decode(self, node):
        if not isinstance(node, dict) or len(node) not in (1, 2):
            raise self.fail(f"unexpected node {str(node)[:80]}")
        if "tensor" in node:
            name = node["tensor"]
            if not isinstance(name, str) or name not in self.arrays:
                raise self.fail(f"it refers to a tensor {name!r} that the file lacks")
            return self.tensor(self.arrays[name], node.get("requires_grad") is True)
        if len(node) != 1:
            raise self.fail(f"unexpected node {str(node)[:80]}")
        (kind, body), = node.items()
        if kind == "value":
            if body is not None and not isinstance(body, (bool, int, float, str)):
                raise self.fail(f"a value of type {type(body).__name__}")
            return body
        if kind in ("list", "tuple") and isinstance(body, list):
            items = [self.decode(v) for v in body]
            return tuple(items) if kind == "tuple" else items
        if kind == "dict" and isinstance(body, list):
            out = {}
            for pair in body:
                if not isinstance(pair, list) or len(pair) != 2 or isinstance(pair[0],
                                                                              (list, dict)):
                    raise self.fail(f"a dict entry {str(pair)[:80]}")
                out[pair[0]] = self.decode(pair[1])
            return out
        raise self.fail(f"unknown node kind {kind!r}")


def _map_location(map_location) -> Device:
    if map_location is None:
        return CPU
    if isinstance(map_location, (str, Device)):
        try:
            return placement(map_location)  # 'cuda' is the current GPU, as in PyTorch
        except EmberError as exc:
            raise EmberError(f"load: map_location {str(map_location)!r}: {exc}") from None
    raise EmberTypeError(f"load: map_location must be None, a device or a device string, "
                         f"got {type(map_location).__name__}")


def load(f: FileLike, map_location=None, weights_only: bool = True) -> Any:
    """Load what :func:`save` wrote, or any safetensors file.

    A file written by :func:`save` gives back the saved structure (dicts, lists,
    tuples, tensors and plain values). A safetensors file from elsewhere (say
    ``safetensors.torch.save_file(model.state_dict(), path)``) gives a flat
    ``{name: tensor}`` dict, so ``model.load_state_dict(ember.load(path))`` works.

    Args:
        f: a path or a binary file object.
        map_location: the device to put the tensors on (default: the CPU).
        weights_only: accepted for compatibility with ``torch.load``; ember's files hold
            only tensors and plain data, so both values load the same way, and nothing
            in a file is ever executed.

    Raises:
        CheckpointError: the file is not a safetensors file (a pickle, a ``torch.save``
            archive, other bytes), is truncated, or has a corrupted header.

    >>> state = ember.load("ckpt.safetensors")
    """
    device = _map_location(map_location)
    data, source = _read(f)
    header = _parse_header(data, source)
    metadata = header.get("__metadata__") or {}
    if not isinstance(metadata, dict):
        raise CheckpointError(f"load: {source} has a corrupted header: __metadata__ is a "
                              f"{type(metadata).__name__}, not an object")
    arrays = _read_tensors(data, header, source)
    decoder = _Decoder(arrays, device, source)
    if metadata.get("format") != _FORMAT or _STRUCTURE_KEY not in metadata:
        return {name: decoder.tensor(arr) for name, arr in arrays.items()}
    version = metadata.get("ember.version")
    if version != _VERSION:
        raise CheckpointError(f"load: {source} was written in ember format version "
                              f"{version!r}; this ember reads version {_VERSION}")
    try:
        structure = json.loads(metadata[_STRUCTURE_KEY])
    except (TypeError, ValueError, RecursionError) as exc:
        raise decoder.fail(f"the structure is not valid JSON ({exc})") from None
    try:
        return decoder.decode(structure)
    except RecursionError:
        raise decoder.fail("the structure is nested too deeply") from None
