"""The main job: train a small CNN on the 8×8 Digits, evaluate, save, reload, check.

    python examples/train_digits_cnn.py [--epochs 15] [--batch-size 32] [--out digits_cnn.safetensors]

Uses ember.nn, ember.optim and ember.data exactly as a PyTorch script would use
torch.nn, torch.optim and torch.utils.data. Exits non-zero if the model does not reach
97% test accuracy or the reloaded model does not predict exactly as the trained one.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402
import ember.nn as nn  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember.data import DataLoader  # noqa: E402
from ember.data.datasets import Digits  # noqa: E402


def make_model() -> nn.Module:
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Dropout(0.25),
        nn.Linear(64 * 4 * 4, 128), nn.ReLU(),
        nn.Linear(128, 10))


def evaluate(model: nn.Module, loader: DataLoader) -> tuple[float, float, ember.Tensor]:
    """Mean loss, accuracy and all predictions over ``loader``."""
    model.eval()
    total_loss, correct, count, predictions = 0.0, 0, 0, []
    with ember.no_grad():
        for images, labels in loader:
            logits = model(images)
            total_loss += F.cross_entropy(logits, labels, reduction="sum").item()
            predicted = logits.argmax(dim=1)
            correct += (predicted == labels).sum().item()
            count += labels.shape[0]
            predictions.append(predicted)
    return total_loss / count, correct / count, ember.cat(predictions)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--epochs", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--compile", action="store_true",
                        help="run each training step through ember.jit")
    parser.add_argument("--out", default=None, help="where to save the model "
                        "(default: a temporary file, removed at the end)")
    args = parser.parse_args()

    ember.manual_seed(args.seed)
    train_set, test_set = Digits(train=True), Digits(train=False)
    train_loader = DataLoader(train_set, batch_size=args.batch_size, shuffle=True,
                              generator=ember.Generator().manual_seed(args.seed))
    test_loader = DataLoader(test_set, batch_size=256)
    model = make_model()
    optimizer = ember.optim.Adam(model.parameters(), lr=args.lr)
    scheduler = ember.optim.lr_scheduler.CosineAnnealingLR(optimizer, T_max=args.epochs)
    print(f"Digits: {len(train_set)} train / {len(test_set)} test images; "
          f"{sum(p.numel() for p in model.parameters()):,} parameters")

    def train_step(images, labels):
        logits = model(images)
        loss = F.cross_entropy(logits, labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        return loss.detach(), (logits.argmax(dim=1) == labels).sum()

    step = ember.jit(train_step) if args.compile else train_step
    start = time.perf_counter()
    for epoch in range(1, args.epochs + 1):
        model.train()
        seen, loss_sum, correct, tic = 0, 0.0, 0, time.perf_counter()
        for images, labels in train_loader:
            loss, hits = step(images, labels)
            seen += labels.shape[0]
            loss_sum += loss.item() * labels.shape[0]
            correct += hits.item()
        scheduler.step()
        test_loss, test_acc, _ = evaluate(model, test_loader)
        rate = seen / (time.perf_counter() - tic)
        print(f"epoch {epoch:2d}/{args.epochs}  loss {loss_sum / seen:.4f}  "
              f"train acc {correct / seen:.3f}  test loss {test_loss:.4f}  "
              f"test acc {test_acc:.3f}  {rate:,.0f} img/s")
    print(f"trained in {time.perf_counter() - start:.1f} s")

    _, accuracy, predictions = evaluate(model, test_loader)
    path = args.out or os.path.join(tempfile.mkdtemp(), "digits_cnn.safetensors")
    ember.save(model.state_dict(), path)
    reloaded = make_model()
    reloaded.load_state_dict(ember.load(path))
    _, reloaded_accuracy, reloaded_predictions = evaluate(reloaded, test_loader)
    same = bool((predictions == reloaded_predictions).all())
    print(f"saved to {path}; reloaded model predicts the same: {same} "
          f"(test accuracy {reloaded_accuracy:.3f})")
    if args.out is None:
        os.remove(path)
        os.rmdir(os.path.dirname(path))
    if not same:
        sys.exit("the reloaded model's predictions differ")
    if accuracy < 0.97:
        sys.exit(f"test accuracy {accuracy:.3f} is below 0.97")


if __name__ == "__main__":
    main()
