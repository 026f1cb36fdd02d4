"""``LoraLinear``: an ``nn.Linear`` with low-rank adapters beside it.

The base layer is kept whole (as ``base_layer``) and never written to until
:meth:`LoraLinear.merge`; each adapter is a pair of bias-free Linears ``lora_A[name]``
(``in -> r``, Kaiming-uniform) and ``lora_B[name]`` (``r -> out``, zeros, so a fresh
adapter changes nothing) with its own dropout and scaling.
"""
from __future__ import annotations

import math

from ..autograd import grad_mode
from ..errors import EmberValueError
from ..nn import Dropout, Identity, Linear, Module, ModuleDict
from ..nn import init
from ..tensor import Tensor
from .config import LoraConfig

__all__ = ["LoraLinear"]


class LoraLinear(Module):
    """``base_layer(x) + sum over active adapters of scaling * B(A(dropout(x)))``.

    Args:
        base_layer: the ``nn.Linear`` to adapt (frozen by :func:`get_peft_model`).
        adapter_name: the first adapter's name.
        config: its :class:`LoraConfig`.

    Attributes:
        active_adapter: the adapter the forward uses.
        merged_adapters: adapters currently folded into ``base_layer.weight``.
        disable_adapters: when True the forward is the base layer alone.

    >>> layer = LoraLinear(ember.nn.Linear(16, 32), "default", LoraConfig(r=4,
    ...                    target_modules=["x"]))
    >>> layer(ember.randn(2, 16)).shape
    ember.Size([2, 32])
    """

    def __init__(self, base_layer: Linear, adapter_name: str, config: LoraConfig) -> None:
        super().__init__()
        if not isinstance(base_layer, Linear):
            raise EmberValueError(f"LoraLinear: base_layer must be an nn.Linear, got "
                                  f"{type(base_layer).__name__}")
        self.base_layer = base_layer
        self.in_features, self.out_features = base_layer.in_features, base_layer.out_features
        self.lora_A = ModuleDict()
        self.lora_B = ModuleDict()
        self.lora_dropout = ModuleDict()
        self.r: dict[str, int] = {}
        self.scaling: dict[str, float] = {}
        self.active_adapter = adapter_name
        self.merged_adapters: list[str] = []
        self.disable_adapters = False
        self.update_layer(adapter_name, config)

    # Adapters ---------------------------------------------------------------------------
    def update_layer(self, adapter_name: str, config: LoraConfig) -> None:
        """Add the adapter ``adapter_name`` with ``config``'s rank, scaling and dropout."""
        if adapter_name in self.lora_A:
            raise EmberValueError(f"LoraLinear: adapter {adapter_name!r} already exists")
        weight = self.base_layer.weight
        kwargs = dict(bias=False, device=weight.device, dtype=weight.dtype)
        a = Linear(self.in_features, config.r, **kwargs)
        b = Linear(config.r, self.out_features, **kwargs)
        # As in the LoRA paper: A random, B zero, so the adapted layer starts as the base.
        init.kaiming_uniform_(a.weight, a=math.sqrt(5))
        init.zeros_(b.weight)
        self.lora_A[adapter_name] = a
        self.lora_B[adapter_name] = b
        self.lora_dropout[adapter_name] = (Dropout(config.lora_dropout)
                                           if config.lora_dropout > 0 else Identity())
        self.r[adapter_name] = config.r
        self.scaling[adapter_name] = config.scaling

    def delete_adapter(self, adapter_name: str) -> None:
        """Remove an (unmerged) adapter."""
        self._check_adapter(adapter_name)
        if adapter_name in self.merged_adapters:
            raise EmberValueError(f"LoraLinear: adapter {adapter_name!r} is merged; unmerge "
                                  f"it before deleting it")
        for table in (self.lora_A, self.lora_B, self.lora_dropout):
            del table[adapter_name]
        del self.r[adapter_name], self.scaling[adapter_name]

    def _check_adapter(self, adapter_name: str) -> None:
        if adapter_name not in self.lora_A:
            raise EmberValueError(f"LoraLinear: no adapter {adapter_name!r}; there are "
                                  f"{list(self.lora_A.keys())}")

    def delta_weight(self, adapter_name: str) -> Tensor:
        """``scaling * B.weight @ A.weight``: what the adapter adds to the base weight
        (shape ``(out_features, in_features)``)."""
        self._check_adapter(adapter_name)
        a, b = self.lora_A[adapter_name].weight, self.lora_B[adapter_name].weight
        return (b @ a) * self.scaling[adapter_name]

    # Merging ----------------------------------------------------------------------------
    def merge(self, adapter_name: str | None = None) -> None:
        """Fold the adapter into ``base_layer.weight`` (``W += scaling * B @ A``); the
        forward then skips it."""
        name = self.active_adapter if adapter_name is None else adapter_name
        self._check_adapter(name)
        if name in self.merged_adapters:
            return
        with grad_mode.no_grad():
            self.base_layer.weight.add_(self.delta_weight(name))
        self.merged_adapters.append(name)

    def unmerge(self) -> None:
        """Subtract every merged adapter from ``base_layer.weight`` again (exact up to
        float rounding)."""
        with grad_mode.no_grad():
            while self.merged_adapters:
                self.base_layer.weight.sub_(self.delta_weight(self.merged_adapters.pop()))

    @property
    def merged(self) -> bool:
        """Whether some adapter is folded into the base weight."""
        return bool(self.merged_adapters)

    # Forward ----------------------------------------------------------------------------
    @property
    def weight(self) -> Tensor:
        """The base layer's weight (so code that reads ``layer.weight`` still works)."""
        return self.base_layer.weight

    @property
    def bias(self) -> Tensor | None:
        """The base layer's bias."""
        return self.base_layer.bias

    def forward(self, x: Tensor) -> Tensor:
        if self.disable_adapters:
            if self.merged:
                self.unmerge()
            return self.base_layer(x)
        result = self.base_layer(x)
        name = self.active_adapter
        if self.merged or name not in self.lora_A:
            return result
        a, b = self.lora_A[name], self.lora_B[name]
        return result + b(a(self.lora_dropout[name](x))) * self.scaling[name]

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, "
                f"adapters={list(self.lora_A.keys())}, active={self.active_adapter!r}")
