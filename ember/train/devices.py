"""Where the Trainer computes: the device of the model's parameters, and batches moved
there (a DataLoader yields CPU tensors; the model may live on a GPU)."""
from __future__ import annotations

from ..backends import CPU, Device
from ..tensor import Tensor

__all__ = ["model_device", "batch_to"]


def model_device(model) -> Device:
    """The device of ``model``'s first parameter (the CPU for a model without any)."""
    for p in model.parameters():
        return p.device
    return CPU


def batch_to(batch, device: Device):
    """``batch`` with every tensor in it (in tuples, lists and dicts too) on ``device``;
    tensors already there, and anything that is not a tensor, are kept as they are."""
    if isinstance(batch, Tensor):
        return batch if batch.device is device else batch.to(device)
    if isinstance(batch, (tuple, list)):
        moved = [batch_to(b, device) for b in batch]
        if all(m is b for m, b in zip(moved, batch)):
            return batch
        return type(batch)(moved) if not hasattr(batch, "_fields") else type(batch)(*moved)
    if isinstance(batch, dict):
        return {k: batch_to(v, device) for k, v in batch.items()}
    return batch
