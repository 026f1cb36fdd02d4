"""How much quantization saved and what it cost: size on disk and accuracy against the
float model."""
from __future__ import annotations

import io


from ..autograd import no_grad
from ..nn.module import Module
from ..serialization import save

__all__ = ["quantized_size_bytes", "evaluate_accuracy", "report"]


def quantized_size_bytes(model: Module) -> int:
    """The size in bytes of ``model.state_dict()`` saved with :func:`ember.save` (int8
    weights are stored as int8): the model's size on disk, float or quantized."""
    buffer = io.BytesIO()
    save(model.state_dict(), buffer)
    return len(buffer.getvalue())


def evaluate_accuracy(model: Module, loader) -> float:
    """Top-1 accuracy, in percent, of ``model`` over ``(input, target)`` batches."""
    model.eval()
    correct = total = 0
    with no_grad():
        for inputs, targets in loader:
            logits = model(inputs).numpy()
            correct += int((logits.argmax(axis=-1) == targets.numpy()).sum())
            total += len(logits)
    return 100.0 * correct / max(total, 1)


def report(float_model: Module, quant_model: Module, loader, print_fn=print) -> dict:
    """Print and return the size and accuracy of the float and quantized models.

    Returns ``{"float_bytes", "quant_bytes", "size_ratio", "float_accuracy",
    "quant_accuracy", "accuracy_drop"}`` (accuracies in percent).
    """
    result = {"float_bytes": quantized_size_bytes(float_model),
              "quant_bytes": quantized_size_bytes(quant_model),
              "float_accuracy": evaluate_accuracy(float_model, loader),
              "quant_accuracy": evaluate_accuracy(quant_model, loader)}
    result["size_ratio"] = result["float_bytes"] / result["quant_bytes"]
    result["accuracy_drop"] = result["float_accuracy"] - result["quant_accuracy"]
    print_fn(f"{'':10}{'size (bytes)':>14}{'accuracy (%)':>14}\n"
             f"{'float':10}{result['float_bytes']:>14,}{result['float_accuracy']:>14.2f}\n"
             f"{'int8':10}{result['quant_bytes']:>14,}{result['quant_accuracy']:>14.2f}\n"
             f"size {result['size_ratio']:.2f}x smaller, accuracy "
             f"{-result['accuracy_drop']:+.2f} points")
    return result
