"""``ember.peft``: parameter-efficient fine-tuning — LoRA adapters on Linear layers and
prefix tuning on attention layers, with the base model frozen.

>>> model = ember.peft.get_peft_model(ember.models.GPT(), ember.peft.LoraConfig(
...     r=8, lora_alpha=16, target_modules=["qkv", "proj", "fc1", "fc2"]))
>>> model.print_trainable_parameters()
>>> plain = model.merge_and_unload()
"""
from .config import LoraConfig, PrefixTuningConfig
from .lora import LoraLinear
from .model import PeftModel, get_peft_model
from .prefix import PrefixBlock, PrefixTuningModel

__all__ = ["LoraConfig", "PrefixTuningConfig", "LoraLinear", "PeftModel", "get_peft_model",
           "PrefixBlock", "PrefixTuningModel"]
