"""``PeftModel``: a frozen base model with LoRA adapters, and :func:`get_peft_model`.

The wrapper owns the base model as ``base_model`` and forwards calls (and unknown
attributes) to it. Adapters live inside the base model's tree, in the
:class:`~ember.peft.lora.LoraLinear` layers that replaced the targeted Linears.
"""
from __future__ import annotations

import contextlib
import os
import re
from typing import Iterator

from .. import serialization
from ..autograd import grad_mode
from ..errors import EmberValueError
from ..nn import Linear, Module, Parameter
from ..tensor import Tensor
from .config import LoraConfig, PrefixTuningConfig, config_from_dict
from .lora import LoraLinear

__all__ = ["PeftModel", "get_peft_model", "count_parameters"]

_ADAPTER_FORMAT = "ember.peft.adapter"
_REGEX_CHARS = set("^$*+?[](){}|\\")


def count_parameters(module: Module) -> tuple[int, int]:
    """``(trainable, total)`` element counts of ``module``'s parameters."""
    trainable = total = 0
    for p in module.parameters():
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return trainable, total


def _matches(name: str, targets: list[str] | str) -> bool:
    if isinstance(targets, str):
        return re.fullmatch(targets, name) is not None
    for key in targets:
        if name == key or name.endswith("." + key):
            return True
        if _REGEX_CHARS & set(key) and re.fullmatch(key, name):
            return True
    return False


def _set_child(root: Module, dotted: str, new: Module) -> None:
    parent_name, _, child = dotted.rpartition(".")
    parent = root.get_submodule(parent_name)
    setattr(parent, child, new)


class _AdapterWrapper(Module):
    """What every PEFT wrapper shares: the base model, forwarding, parameter counts."""

    def __init__(self, model: Module) -> None:
        super().__init__()
        self.base_model = model

    def forward(self, *args, **kwargs):
        return self.base_model(*args, **kwargs)

    def __getattr__(self, name: str):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return getattr(self.__dict__["_modules"]["base_model"], name)

    def trainable_parameters(self) -> Iterator[Parameter]:
        """The parameters that train (what to give the optimizer)."""
        return (p for p in self.parameters() if p.requires_grad)

    def named_trainable_parameters(self) -> Iterator[tuple[str, Parameter]]:
        """``(dotted name, parameter)`` for the parameters that train."""
        return ((n, p) for n, p in self.named_parameters() if p.requires_grad)

    def get_nb_trainable_parameters(self) -> tuple[int, int]:
        """``(trainable, all)`` parameter element counts."""
        return count_parameters(self)

    def print_trainable_parameters(self) -> None:
        """Print ``trainable params: X || all params: Y || trainable%: Z``."""
        trainable, total = count_parameters(self)
        share = 100.0 * trainable / total if total else 0.0
        print(f"trainable params: {trainable:,d} || all params: {total:,d} || "
              f"trainable%: {share:.4f}")


class PeftModel(_AdapterWrapper):
    """A base model whose targeted Linear layers carry LoRA adapters (made by
    :func:`get_peft_model`). Only the active adapter's A and B (and, with
    ``bias="all"``/``"lora_only"``, some biases) have ``requires_grad``.

    Args:
        model: the base model (modified in place: its targeted Linears are replaced).
        config: the first adapter's :class:`LoraConfig`.
        adapter_name: its name.

    Attributes:
        peft_config: ``{adapter name: LoraConfig}``.
        active_adapter: the adapter the forward uses.

    >>> model = get_peft_model(ember.models.GPT(), LoraConfig(r=8, target_modules=["qkv"]))
    >>> model.print_trainable_parameters()
    """

    def __init__(self, model: Module, config: LoraConfig, adapter_name: str = "default") -> None:
        super().__init__(model)
        self.peft_config: dict[str, LoraConfig] = {}
        self.active_adapter = adapter_name
        # Restored by merge_and_unload / unload, so the plain model trains as before.
        self._requires_grad = {id(p): p.requires_grad for p in model.parameters()}
        self.add_adapter(adapter_name, config)
        self.set_adapter(adapter_name)

    # Adapters ---------------------------------------------------------------------------
    def lora_layers(self) -> Iterator[tuple[str, LoraLinear]]:
        """``(dotted name in the base model, layer)`` for every adapted layer."""
        for name, module in self.base_model.named_modules():
            if isinstance(module, LoraLinear):
                yield name, module

    def add_adapter(self, adapter_name: str, config: LoraConfig) -> None:
        """Add a new adapter (not made active: see :meth:`set_adapter`) to the Linear
        layers ``config.target_modules`` names."""
        if not isinstance(config, LoraConfig):
            raise EmberValueError(f"PeftModel.add_adapter: expected a LoraConfig, got "
                                  f"{type(config).__name__}")
        if adapter_name in self.peft_config:
            raise EmberValueError(f"PeftModel.add_adapter: adapter {adapter_name!r} already "
                                  f"exists (adapters: {list(self.peft_config)})")
        if config.fan_in_fan_out:
            raise EmberValueError("LoraConfig: fan_in_fan_out=True is for layers that store "
                                  "their weight as (in, out); ember's nn.Linear stores "
                                  "(out, in), so set fan_in_fan_out=False")
        targets = self._find_targets(config)
        for name, module in targets:
            if isinstance(module, LoraLinear):
                module.update_layer(adapter_name, config)
            else:
                _set_child(self.base_model, name, LoraLinear(module, adapter_name, config))
        self.peft_config[adapter_name] = config
        self._mark_trainable()

    def _find_targets(self, config: LoraConfig) -> list[tuple[str, Module]]:
        candidates = _adaptable_modules(self.base_model)
        linear_names = [name for name, m in candidates if isinstance(m, (Linear, LoraLinear))]
        found = []
        for name, module in candidates:
            if not name or not _matches(name, config.target_modules):
                continue
            if not isinstance(module, (Linear, LoraLinear)):
                raise EmberValueError(
                    f"LoraConfig: target_modules={config.target_modules!r} matched "
                    f"{name!r}, a {type(module).__name__}; LoRA adapts nn.Linear layers "
                    f"(the Linear layers here: {linear_names})")
            found.append((name, module))
        if not found:
            raise EmberValueError(f"LoraConfig: no module matched target_modules="
                                  f"{config.target_modules!r}; the Linear layers of this model "
                                  f"are {linear_names}")
        return found

    def set_adapter(self, adapter_name: str) -> None:
        """Make ``adapter_name`` the one the forward uses and the only one that trains
        (merged adapters are unmerged first)."""
        if adapter_name not in self.peft_config:
            raise EmberValueError(f"PeftModel.set_adapter: no adapter {adapter_name!r}; "
                                  f"there are {list(self.peft_config)}")
        for _, layer in self.lora_layers():
            if layer.merged:
                layer.unmerge()
            layer.active_adapter = adapter_name
        self.active_adapter = adapter_name
        self._mark_trainable()

    def delete_adapter(self, adapter_name: str) -> None:
        """Remove an adapter (not the active one)."""
        if adapter_name not in self.peft_config:
            raise EmberValueError(f"PeftModel.delete_adapter: no adapter {adapter_name!r}; "
                                  f"there are {list(self.peft_config)}")
        if adapter_name == self.active_adapter:
            raise EmberValueError(f"PeftModel.delete_adapter: {adapter_name!r} is active; "
                                  f"set another adapter first")
        for _, layer in self.lora_layers():
            if adapter_name in layer.lora_A:
                layer.delete_adapter(adapter_name)
        del self.peft_config[adapter_name]

    def _mark_trainable(self) -> None:
        bias = self.peft_config[self.active_adapter].bias if self.active_adapter in \
            self.peft_config else "none"
        for name, p in self.base_model.named_parameters():
            p.requires_grad_(False)
        for _, layer in self.lora_layers():
            for table in (layer.lora_A, layer.lora_B):
                if self.active_adapter in table:
                    table[self.active_adapter].weight.requires_grad_(True)
            if bias == "lora_only" and layer.bias is not None:
                layer.bias.requires_grad_(True)
        if bias == "all":
            for name, p in self.base_model.named_parameters():
                if name.endswith("bias") and ".lora_" not in name:
                    p.requires_grad_(True)

    @contextlib.contextmanager
    def disable_adapter(self):
        """Run the base model alone inside the ``with`` block.

        >>> with model.disable_adapter():
        ...     base_out = model(x)
        """
        layers = [layer for _, layer in self.lora_layers()]
        for layer in layers:
            layer.disable_adapters = True
        try:
            yield
        finally:
            for layer in layers:
                layer.disable_adapters = False

    # Merging ----------------------------------------------------------------------------
    def merge_adapter(self) -> None:
        """Fold the active adapter into the base weights (the forward then costs what
        the base model's does); :meth:`unmerge_adapter` undoes it."""
        for _, layer in self.lora_layers():
            if self.active_adapter in layer.lora_A:
                layer.merge(self.active_adapter)

    def unmerge_adapter(self) -> None:
        """Subtract merged adapters from the base weights again."""
        for _, layer in self.lora_layers():
            layer.unmerge()

    def merge_and_unload(self) -> Module:
        """Fold the active adapter into the base weights and return the plain base
        model: every LoraLinear replaced by its (updated) Linear, the parameters'
        ``requires_grad`` as they were before :func:`get_peft_model`."""
        self.merge_adapter()
        return self.unload()

    def unload(self) -> Module:
        """Return the base model with every adapter dropped (merged ones stay folded
        in)."""
        for name, layer in list(self.lora_layers()):
            _set_child(self.base_model, name, layer.base_layer)
        model = self.base_model
        for p in model.parameters():
            p.requires_grad_(self._requires_grad.get(id(p), True))
        return model

    # Saving -----------------------------------------------------------------------------
    def adapter_state_dict(self, adapter_name: str | None = None) -> dict:
        """The adapter's tensors, keyed ``"<layer>.lora_A.weight"`` /
        ``"<layer>.lora_B.weight"`` (without the adapter's name)."""
        name = self._adapter(adapter_name, "adapter_state_dict")
        state = {}
        for path, layer in self.lora_layers():
            if name in layer.lora_A:
                state[f"{path}.lora_A.weight"] = layer.lora_A[name].weight.detach()
                state[f"{path}.lora_B.weight"] = layer.lora_B[name].weight.detach()
        if self.peft_config[name].bias != "none":
            for path, layer in self.lora_layers():
                if layer.bias is not None and (self.peft_config[name].bias == "all"
                                               or name in layer.lora_A):
                    state[f"{path}.bias"] = layer.bias.detach()
        return state

    def _adapter(self, adapter_name: str | None, owner: str) -> str:
        name = self.active_adapter if adapter_name is None else adapter_name
        if name not in self.peft_config:
            raise EmberValueError(f"PeftModel.{owner}: no adapter {name!r}; there are "
                                  f"{list(self.peft_config)}")
        return name

    def save_adapter(self, path: str | os.PathLike, adapter_name: str | None = None) -> None:
        """Write one adapter (its tensors and its config, nothing of the base model) to
        ``path`` through :func:`ember.save`.

        >>> model.save_adapter("gpt-lora.safetensors")
        """
        name = self._adapter(adapter_name, "save_adapter")
        serialization.save({"format": _ADAPTER_FORMAT,
                            "config": self.peft_config[name].to_dict(),
                            "tensors": self.adapter_state_dict(name)}, path)

    def load_adapter(self, path: str | os.PathLike, adapter_name: str = "default") -> None:
        """Read an adapter written by :meth:`save_adapter` into ``adapter_name`` (added
        with the file's config if it does not exist yet). Checks every key and shape
        before copying anything."""
        config, tensors = read_adapter_file(path)
        if not isinstance(config, LoraConfig):
            raise EmberValueError(f"PeftModel.load_adapter: {os.fspath(path)!r} holds a "
                                  f"{config.peft_type} adapter, not a LoRA one")
        added = adapter_name not in self.peft_config
        if added:
            self.add_adapter(adapter_name, config)
        current = self.adapter_state_dict(adapter_name)
        try:
            self._check_adapter_tensors(path, current, tensors)
        except EmberValueError:
            if added:  # leave no half-loaded adapter behind
                self.delete_adapter(adapter_name)
            raise
        with grad_mode.no_grad():
            for key, value in tensors.items():
                current[key].copy_(value)

    @staticmethod
    def _check_adapter_tensors(path, current: dict, tensors: dict) -> None:
        missing = sorted(set(current) - set(tensors))
        unexpected = sorted(set(tensors) - set(current))
        shapes = [f"{k}: file {tuple(tensors[k].shape)}, model {tuple(current[k].shape)}"
                  for k in set(current) & set(tensors) if tensors[k].shape != current[k].shape]
        if missing or unexpected or shapes:
            raise EmberValueError(f"load_adapter: {os.fspath(path)!r} does not fit this model: "
                                  f"missing {missing}, unexpected {unexpected}, "
                                  f"shape mismatches {sorted(shapes)}")

    def extra_repr(self) -> str:
        return f"adapters={list(self.peft_config)}, active={self.active_adapter!r}"


def _adaptable_modules(model: Module) -> list[tuple[str, Module]]:
    """``model``'s named modules, with the insides of LoraLinears (their base layer and
    adapters) left out."""
    out, inside = [], []
    for name, module in model.named_modules():
        if any(name.startswith(p + ".") for p in inside):
            continue
        if isinstance(module, LoraLinear):
            inside.append(name)
        out.append((name, module))
    return out


def read_adapter_file(path: str | os.PathLike):
    """``(config, tensors)`` from a file :meth:`PeftModel.save_adapter` wrote."""
    data = serialization.load(path)
    if not isinstance(data, dict) or data.get("format") != _ADAPTER_FORMAT:
        raise EmberValueError(f"load_adapter: {os.fspath(path)!r} is not an ember adapter file "
                              f"(expected what save_adapter writes)")
    tensors = data.get("tensors")
    if not isinstance(tensors, dict) or not all(
            isinstance(k, str) and isinstance(v, Tensor) for k, v in tensors.items()):
        raise EmberValueError(f"load_adapter: {os.fspath(path)!r} is corrupted: its "
                              f"'tensors' must map names to tensors")
    return config_from_dict(data.get("config")), tensors


def get_peft_model(model: Module, config: LoraConfig | PrefixTuningConfig,
                   adapter_name: str = "default") -> _AdapterWrapper:
    """Freeze ``model`` and add a trainable adapter: LoRA on the Linear layers
    ``config.target_modules`` names (:class:`PeftModel`), or prefix tuning on every
    attention layer (:class:`~ember.peft.prefix.PrefixTuningModel`).

    The model is changed in place (its targeted Linears become LoraLinears); the base
    weights are not written to until :meth:`PeftModel.merge_adapter`.

    >>> gpt = ember.models.GPT()
    >>> model = ember.peft.get_peft_model(gpt, ember.peft.LoraConfig(
    ...     r=8, target_modules=["qkv", "proj", "fc1", "fc2"]))
    >>> opt = ember.optim.AdamW(model.trainable_parameters(), lr=1e-3)
    """
    if isinstance(model, _AdapterWrapper):
        raise EmberValueError("get_peft_model: the model already has adapters; use "
                              "add_adapter on it instead")
    if isinstance(config, LoraConfig):
        return PeftModel(model, config, adapter_name)
    if isinstance(config, PrefixTuningConfig):
        from .prefix import PrefixTuningModel
        return PrefixTuningModel(model, config, adapter_name)
    raise EmberValueError(f"get_peft_model: expected a LoraConfig or PrefixTuningConfig, got "
                          f"{type(config).__name__}")
