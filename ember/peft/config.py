"""The configurations of ember's parameter-efficient fine-tuning methods: plain
dataclasses that validate their fields and round-trip through JSON (``to_dict`` /
``from_dict``), so an adapter file carries the config it was trained with."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any

from ..errors import EmberValueError

__all__ = ["LoraConfig", "PrefixTuningConfig", "config_from_dict"]

_BIAS_MODES = ("none", "all", "lora_only")


@dataclass
class LoraConfig:
    """Low-rank adaptation (Hu et al., 2021): each targeted ``nn.Linear`` computes
    ``base(x) + (lora_alpha / r) * B(A(dropout(x)))`` with ``A: in -> r`` and
    ``B: r -> out``; only A and B train.

    Args:
        r: the rank of the update (> 0).
        lora_alpha: the update is scaled by ``lora_alpha / r``.
        lora_dropout: dropout probability on the adapter's input (the base path has none).
        target_modules: which Linear layers to adapt. A list of names, each matching a
            module whose dotted name equals it or ends with ``"." + name`` (``"qkv"``
            matches ``blocks.0.qkv``) — an entry with regex characters is matched as a
            regular expression against the whole name; or one string, matched as a
            regular expression against the whole dotted name.
        bias: ``"none"`` (no bias trains), ``"all"`` (every bias of the model trains) or
            ``"lora_only"`` (the biases of the adapted layers train).
        fan_in_fan_out: the base layer stores its weight as ``(in, out)``; ember's Linear
            stores ``(out, in)``, so for it this must be False.

    >>> cfg = ember.peft.LoraConfig(r=8, lora_alpha=16, target_modules=["qkv", "proj"])
    """
    r: int = 8
    lora_alpha: float = 16
    lora_dropout: float = 0.0
    target_modules: list[str] | str | None = None
    bias: str = "none"
    fan_in_fan_out: bool = False
    peft_type: str = field(default="LORA", init=False)

    def __post_init__(self) -> None:
        if not isinstance(self.r, int) or isinstance(self.r, bool) or self.r <= 0:
            raise EmberValueError(f"LoraConfig: r must be a positive int, got {self.r!r}")
        if not self.lora_alpha > 0:
            raise EmberValueError(f"LoraConfig: lora_alpha must be > 0, got {self.lora_alpha!r}")
        if not 0.0 <= self.lora_dropout < 1.0:
            raise EmberValueError(f"LoraConfig: lora_dropout must be in [0, 1), got "
                                  f"{self.lora_dropout!r}")
        if self.bias not in _BIAS_MODES:
            raise EmberValueError(f"LoraConfig: bias must be one of {_BIAS_MODES}, got "
                                  f"{self.bias!r}")
        if self.target_modules is None:
            raise EmberValueError("LoraConfig: target_modules is required: the names (or "
                                  "name suffixes, or a regex) of the Linear layers to adapt, "
                                  "e.g. ['qkv', 'proj']")
        if isinstance(self.target_modules, (tuple, set)):
            self.target_modules = sorted(self.target_modules) if isinstance(
                self.target_modules, set) else list(self.target_modules)
        if isinstance(self.target_modules, list) and not all(
                isinstance(t, str) for t in self.target_modules):
            raise EmberValueError(f"LoraConfig: target_modules must hold strings, got "
                                  f"{self.target_modules!r}")

    @property
    def scaling(self) -> float:
        """``lora_alpha / r``, the factor on the low-rank update."""
        return self.lora_alpha / self.r

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (with ``peft_type``)."""
        return dataclasses.asdict(self)


@dataclass
class PrefixTuningConfig:
    """Prefix tuning (Li & Liang, 2021): every attention layer gets
    ``num_virtual_tokens`` trainable key and value vectors per head, prepended to the
    keys and values its queries attend to; the base model is frozen.

    Args:
        num_virtual_tokens: the prefix length (> 0).
        init_std: the standard deviation of the prefixes' normal initialisation.

    >>> cfg = ember.peft.PrefixTuningConfig(num_virtual_tokens=8)
    """
    num_virtual_tokens: int = 8
    init_std: float = 0.02
    peft_type: str = field(default="PREFIX_TUNING", init=False)

    def __post_init__(self) -> None:
        n = self.num_virtual_tokens
        if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
            raise EmberValueError(f"PrefixTuningConfig: num_virtual_tokens must be a positive "
                                  f"int, got {n!r}")
        if not self.init_std >= 0:
            raise EmberValueError(f"PrefixTuningConfig: init_std must be >= 0, got "
                                  f"{self.init_std!r}")

    def to_dict(self) -> dict[str, Any]:
        """The fields as a JSON-ready dict (with ``peft_type``)."""
        return dataclasses.asdict(self)


def config_from_dict(data: dict[str, Any]) -> LoraConfig | PrefixTuningConfig:
    """Rebuild a config from :meth:`to_dict`'s output (as read back from an adapter
    file)."""
    kinds = {"LORA": LoraConfig, "PREFIX_TUNING": PrefixTuningConfig}
    if not isinstance(data, dict):
        raise EmberValueError(f"adapter config: expected a mapping, got "
                              f"{type(data).__name__}")
    data = dict(data)
    kind = data.pop("peft_type", None)
    if kind not in kinds:
        raise EmberValueError(f"adapter config: unknown peft_type {str(kind)[:40]!r}, "
                              f"expected one of {sorted(kinds)}")
    try:
        return kinds[kind](**data)
    except TypeError as exc:  # an unknown key, or a value of the wrong type
        raise EmberValueError(f"adapter config: bad {kind} config: {exc}") from None
