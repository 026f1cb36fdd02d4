"""Model directories: :func:`save_pretrained` and :func:`load_pretrained`.

A model directory holds everything needed to rebuild and serve a model, and nothing
that runs code when read:

- ``model.safetensors``: the state dict, through :func:`ember.save`;
- ``config.json``: how to build the model (a builder of :mod:`ember.config` by name,
  ``{"name": "cnn", "image_size": 8, ...}``, or ``{"import": "pkg.module:fn",
  "options": {...}}``), its declared inputs (names, shapes with ``null`` for the
  dynamic dims, dtypes) and whether an ONNX file is there;
- ``model.onnx`` (optional): the same model exported by :func:`ember.onnx.export`.

The file names are fixed, so a config can't point outside its directory; the config is
written last, so a directory being written is never mistaken for a whole one.
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

from .config.builders import build_model
from .config.errors import ConfigError
from .config.schema import MODEL_FIELDS, _by_name
from .errors import EmberError
from .serialization import CheckpointError, atomic_write, load, save
from .tensor import Tensor

__all__ = ["save_pretrained", "load_pretrained", "read_pretrained_config", "InputSpec",
           "PretrainedConfig", "PretrainedError", "declare_inputs", "CONFIG_FILE",
           "WEIGHTS_FILE", "ONNX_FILE"]

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
ONNX_FILE = "model.onnx"
_FORMAT = "ember.pretrained"
_VERSION = 1
_MAX_CONFIG_BYTES = 1 << 20
_MAX_DIMS = 16
#: the dtypes a declared input may have (their ember names)
INPUT_DTYPES = ("float16", "bfloat16", "float32", "float64", "int8", "int16", "int32",
                "int64", "uint8", "bool")


class PretrainedError(EmberError):
    """A model directory that can't be written or read: missing, incomplete, corrupted,
    or describing a model or inputs that ember can't build."""


@dataclass(frozen=True)
class InputSpec:
    """A declared model input: its name, its shape (``None`` for a dynamic dim; dim 0 is
    the batch dim when dynamic) and its dtype name (``"float32"``)."""

    name: str
    shape: tuple[int | None, ...]
    dtype: str

    def to_json(self) -> dict[str, Any]:
        return {"name": self.name, "shape": list(self.shape), "dtype": self.dtype}


@dataclass(frozen=True)
class PretrainedConfig:
    """What ``config.json`` says: the model section (as :mod:`ember.config` checks it),
    the declared inputs, the model class name and whether ``model.onnx`` exists."""

    model: dict[str, Any]
    inputs: tuple[InputSpec, ...]
    model_class: str
    has_onnx: bool

    def to_json(self) -> dict[str, Any]:
        return {"format": _FORMAT, "version": _VERSION, "model": self.model,
                "model_class": self.model_class,
                "inputs": [spec.to_json() for spec in self.inputs], "onnx": self.has_onnx}


# Saving -------------------------------------------------------------------------------
def _check_model_section(config: Any, where: str, allow_import: bool) -> dict[str, Any]:
    if not isinstance(config, Mapping):
        raise PretrainedError(f"{where}: the model config must be a mapping like "
                              f"{{'name': 'cnn', ...}} or {{'import': 'pkg.module:fn', "
                              f"'options': {{...}}}}, got {type(config).__name__}")
    if "import" in config and not allow_import:
        raise PretrainedError(
            f"{where}: the model is built by importing {config['import']!r}, which runs "
            f"code from that module; pass allow_import=True (or --allow-import to ember "
            f"serve) if you trust this directory")
    try:
        return _by_name("model", config, MODEL_FIELDS, "model")
    except ConfigError as exc:
        raise PretrainedError(f"{where}: bad model config: {exc}") from None


def declare_inputs(model, example_inputs=None, input_names: Sequence[str] | None = None,
                   dynamic_axes: Mapping[str, Sequence[int]] | None = None
                   ) -> tuple[InputSpec, ...]:
    """The :class:`InputSpec` of each example input (see :func:`save_pretrained` for the
    arguments)."""
    from .models import GPT
    if example_inputs is None:
        if isinstance(model, GPT):  # token ids, any batch and length
            name = (input_names or ["tokens"])[0]
            return (InputSpec(name, (None, None), "int64"),)
        raise PretrainedError("save_pretrained: give example_inputs (a tensor or a tuple "
                              "of tensors like those the model takes) so that the "
                              "directory declares the model's inputs")
    examples = (example_inputs,) if isinstance(example_inputs, Tensor) else tuple(
        example_inputs)
    if not examples or not all(isinstance(t, Tensor) for t in examples):
        raise PretrainedError(f"save_pretrained: example_inputs must be a tensor or a "
                              f"non-empty tuple of tensors, got "
                              f"{[type(t).__name__ for t in examples]}")
    names = list(input_names) if input_names is not None else (
        ["input"] if len(examples) == 1 else [f"input_{i}" for i in range(len(examples))])
    if len(names) != len(examples) or len(set(names)) != len(names):
        raise PretrainedError(f"save_pretrained: input_names {names} must be "
                              f"{len(examples)} distinct names, one per example input")
    axes = {name: [0] for name in names} if dynamic_axes is None else dict(dynamic_axes)
    unknown = set(axes) - set(names)
    if unknown:
        raise PretrainedError(f"save_pretrained: dynamic_axes names {sorted(unknown)} are "
                              f"not inputs; the inputs are {names}")
    specs = []
    for name, tensor in zip(names, examples):
        dynamic = {a % tensor.dim() if tensor.dim() else a for a in axes.get(name, ())}
        shape = tuple(None if i in dynamic else int(n) for i, n in enumerate(tensor.shape))
        specs.append(InputSpec(name, shape, tensor.dtype.name))
    return tuple(specs)


def _check_rebuilds(model, section: dict[str, Any]) -> None:
    """The config must rebuild a model with exactly these parameter names and shapes,
    or the directory would fail only when loaded."""
    rebuilt = build_model(section).state_dict()
    mine = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    theirs = {k: tuple(v.shape) for k, v in rebuilt.items()}
    if mine != theirs:
        diff = sorted(set(mine) ^ set(theirs)) or sorted(
            k for k in mine if mine[k] != theirs[k])
        raise PretrainedError(f"save_pretrained: the config {section} builds a model whose "
                              f"state dict differs from this model's (first differences: "
                              f"{diff[:5]}); give the builder options this model was made "
                              f"with")


def save_pretrained(model, directory: str | os.PathLike, config: Mapping[str, Any],
                    example_inputs=None, input_names: Sequence[str] | None = None,
                    dynamic_axes: Mapping[str, Sequence[int]] | None = None,
                    export_onnx: bool = False) -> str:
    """Write ``model`` as a model directory that :func:`load_pretrained` and
    ``ember serve`` read.

    Args:
        model: an ``ember.nn.Module``.
        directory: created if missing; the files in it are replaced atomically.
        config: how to rebuild the model: a builder of :mod:`ember.config` by name with
            its options (``{"name": "mlp", "sizes": [64, 32, 10]}``; names: ``mlp``,
            ``cnn``, ``gpt``), or ``{"import": "pkg.module:fn", "options": {...}}``. It
            is checked by building the model and comparing the state dicts.
        example_inputs: a tensor or tuple of tensors shaped like the model's inputs;
            they declare the inputs (shapes and dtypes). Optional for ``ember.models.GPT``
            (then one int64 input ``tokens`` of shape ``(None, None)``).
        input_names: one name per example input (default ``input``, or ``input_0``, ...).
        dynamic_axes: ``{name: [axes]}`` whose sizes vary (default: dim 0, the batch).
        export_onnx: also write ``model.onnx`` through :func:`ember.onnx.export` (needs
            ``example_inputs`` and the ``onnx`` package).

    Returns:
        the directory path.

    >>> model = ember.config.models.mlp([64, 32, 10])
    >>> ember.save_pretrained(model, "digits_mlp", {"name": "mlp", "sizes": [64, 32, 10]},
    ...                       example_inputs=ember.zeros(1, 64))
    """
    directory = os.fspath(directory)
    section = _check_model_section(config, "save_pretrained", allow_import=True)
    inputs = declare_inputs(model, example_inputs, input_names, dynamic_axes)
    _check_rebuilds(model, section)
    os.makedirs(directory, exist_ok=True)
    save({k: v.detach() for k, v in model.state_dict().items()},
         os.path.join(directory, WEIGHTS_FILE))
    if export_onnx:
        if example_inputs is None:
            raise PretrainedError("save_pretrained: export_onnx=True needs example_inputs "
                                  "to trace the model with")
        from .onnx import export
        names = [spec.name for spec in inputs]
        axes = {spec.name: [i for i, n in enumerate(spec.shape) if n is None]
                for spec in inputs}
        export(model, example_inputs if isinstance(example_inputs, tuple)
               else (example_inputs,), os.path.join(directory, ONNX_FILE),
               input_names=names, dynamic_axes=axes)
    meta = PretrainedConfig(section, inputs, type(model).__name__, bool(export_onnx))
    atomic_write(os.path.join(directory, CONFIG_FILE),
                 (json.dumps(meta.to_json(), indent=2) + "\n").encode())
    return directory


# Loading ------------------------------------------------------------------------------
def _check_inputs(raw: Any, where: str) -> tuple[InputSpec, ...]:
    if not isinstance(raw, list) or not raw:
        raise PretrainedError(f"{where}: 'inputs' must be a non-empty list of "
                              f"{{name, shape, dtype}}, got {str(raw)[:80]}")
    specs, seen = [], set()
    for i, entry in enumerate(raw):
        at = f"{where}: inputs[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"name", "shape", "dtype"}:
            raise PretrainedError(f"{at} must be an object with exactly the keys name, "
                                  f"shape and dtype, got {str(entry)[:80]}")
        name, shape, dtype = entry["name"], entry["shape"], entry["dtype"]
        if not isinstance(name, str) or not name or len(name) > 64 or name in seen:
            raise PretrainedError(f"{at}: name must be a distinct non-empty string of at "
                                  f"most 64 characters, got {str(name)[:80]!r}")
        if (not isinstance(shape, list) or len(shape) > _MAX_DIMS or not all(
                n is None or (type(n) is int and n >= 0) for n in shape)):
            raise PretrainedError(f"{at} ({name!r}): shape must be a list of at most "
                                  f"{_MAX_DIMS} sizes (ints >= 0, or null for a dynamic "
                                  f"dim), got {str(shape)[:80]}")
        if dtype not in INPUT_DTYPES:
            raise PretrainedError(f"{at} ({name!r}): dtype must be one of "
                                  f"{', '.join(INPUT_DTYPES)}, got {str(dtype)[:40]!r}")
        seen.add(name)
        specs.append(InputSpec(name, tuple(shape), dtype))
    return tuple(specs)


def read_pretrained_config(directory: str | os.PathLike,
                           allow_import: bool = False) -> PretrainedConfig:
    """Read and check ``config.json`` of a model directory (nothing is built or
    imported). ``allow_import``: accept a model built by ``import:`` (which runs code
    when the model is built)."""
    directory = os.fspath(directory)
    path = os.path.join(directory, CONFIG_FILE)
    if not os.path.isdir(directory):
        raise PretrainedError(f"load_pretrained: {directory!r} is not a directory; give a "
                              f"model directory that save_pretrained wrote")
    if not os.path.isfile(path):
        raise PretrainedError(f"load_pretrained: {directory!r} is not a model directory: "
                              f"it has no {CONFIG_FILE} (save_pretrained writes one)")
    if os.path.getsize(path) > _MAX_CONFIG_BYTES:
        raise PretrainedError(f"load_pretrained: {path} has {os.path.getsize(path)} bytes; "
                              f"a model config is at most {_MAX_CONFIG_BYTES}")
    with open(path, "rb") as f:
        data = f.read(_MAX_CONFIG_BYTES + 1)
    try:
        raw = json.loads(data)
    except (ValueError, RecursionError) as exc:
        raise PretrainedError(f"load_pretrained: {path} is not valid JSON ({exc})") from None
    if not isinstance(raw, dict) or raw.get("format") != _FORMAT:
        raise PretrainedError(f"load_pretrained: {path} is not an ember model config (it "
                              f"lacks \"format\": \"{_FORMAT}\")")
    if raw.get("version") != _VERSION:
        raise PretrainedError(f"load_pretrained: {path} has version "
                              f"{str(raw.get('version'))[:20]}; this ember reads version "
                              f"{_VERSION}")
    section = _check_model_section(raw.get("model"), f"load_pretrained: {path}",
                                   allow_import)
    inputs = _check_inputs(raw.get("inputs"), f"load_pretrained: {path}")
    model_class = raw.get("model_class")
    has_onnx = raw.get("onnx", False)
    if not isinstance(model_class, str) or not isinstance(has_onnx, bool):
        raise PretrainedError(f"load_pretrained: {path}: 'model_class' must be a string and "
                              f"'onnx' a bool")
    if has_onnx and not os.path.isfile(os.path.join(directory, ONNX_FILE)):
        raise PretrainedError(f"load_pretrained: {path} declares {ONNX_FILE}, which is "
                              f"missing from {directory!r}")
    return PretrainedConfig(section, inputs, model_class, has_onnx)


def load_pretrained(directory: str | os.PathLike, allow_import: bool = False,
                    map_location=None):
    """Rebuild the model of a directory that :func:`save_pretrained` wrote and load its
    weights; returns the module in eval mode. Nothing in the directory is executed:
    the config is JSON, the weights safetensors; a model built by ``import:`` is
    refused unless ``allow_import`` (importing a module runs its code).

    Raises:
        PretrainedError: a missing directory or file, a corrupted config or weights
            file, weights that don't fit the model the config builds.

    >>> model = ember.load_pretrained("digits_mlp")
    """
    config = read_pretrained_config(directory, allow_import)
    directory = os.fspath(directory)
    weights = os.path.join(directory, WEIGHTS_FILE)
    if not os.path.isfile(weights):
        raise PretrainedError(f"load_pretrained: {directory!r} has no {WEIGHTS_FILE}")
    try:
        state = load(weights, map_location=map_location)
    except CheckpointError as exc:
        raise PretrainedError(f"load_pretrained: {exc}") from None
    if not isinstance(state, dict) or not all(isinstance(v, Tensor) for v in state.values()):
        raise PretrainedError(f"load_pretrained: {weights} does not hold a flat state dict "
                              f"(name -> tensor)")
    try:
        model = build_model(config.model)
    except ConfigError as exc:
        raise PretrainedError(f"load_pretrained: can't build the model of {directory!r}: "
                              f"{exc}") from None
    try:
        model.load_state_dict(state)
    except EmberError as exc:
        raise PretrainedError(f"load_pretrained: the weights in {weights} don't fit the "
                              f"model its config builds: {exc}") from None
    if map_location is not None:
        model.to(map_location)
    return model.eval()
