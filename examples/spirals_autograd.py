"""Train a small classifier with ember's eager autograd (the main job until ember.nn lands).

A two-layer perceptron learns to separate two interleaved spirals: a problem a linear
model cannot solve. Everything runs through ember tensors and ``loss.backward()``;
the update is Adam, written with in-place ops under ``no_grad``.

    python examples/spirals_autograd.py [--steps 1500] [--seed 0]
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402


def spirals(n_per_class: int, generator) -> tuple[ember.Tensor, ember.Tensor]:
    """Two interleaved spirals with a little noise: points (2n, 2), labels (2n,)."""
    t = ember.rand(n_per_class, generator=generator) * 3 * math.pi + 0.5
    noise = ember.randn(2, n_per_class, 2, generator=generator) * 0.04
    arm = ember.stack([t * ember.cos(t), t * ember.sin(t)], dim=1) / (3 * math.pi)
    points = ember.cat([arm + noise[0], -arm + noise[1]])
    labels = ember.cat([ember.zeros(n_per_class, dtype=ember.int64),
                        ember.ones(n_per_class, dtype=ember.int64)])
    return points, labels


def init_linear(fan_in: int, fan_out: int, generator):
    bound = 1 / math.sqrt(fan_in)
    w = (ember.rand(fan_in, fan_out, generator=generator) * 2 - 1) * bound
    b = (ember.rand(fan_out, generator=generator) * 2 - 1) * bound
    return w.requires_grad_(), b.requires_grad_()


def cross_entropy(logits: ember.Tensor, labels: ember.Tensor) -> ember.Tensor:
    log_probs = logits - ember.logsumexp(logits, dim=1, keepdim=True)
    return -ember.gather(log_probs, 1, labels.unsqueeze(1)).mean()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1500)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--hidden", type=int, default=64)
    parser.add_argument("--lr", type=float, default=0.01)
    args = parser.parse_args()

    gen = ember.Generator().manual_seed(args.seed)
    x_train, y_train = spirals(500, gen)
    x_test, y_test = spirals(250, gen)
    params = [*init_linear(2, args.hidden, gen), *init_linear(args.hidden, args.hidden, gen),
              *init_linear(args.hidden, 2, gen)]
    moments = [(ember.zeros_like(p), ember.zeros_like(p)) for p in params]
    beta1, beta2, eps = 0.9, 0.999, 1e-8

    def model(x):
        w1, b1, w2, b2, w3, b3 = params
        h = ember.tanh(x @ w1 + b1)
        h = ember.tanh(h @ w2 + b2)
        return h @ w3 + b3

    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        loss = cross_entropy(model(x_train), y_train)
        for p in params:
            p.grad = None
        loss.backward()
        with ember.no_grad():
            for p, (m, v) in zip(params, moments):
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).add_(p.grad * p.grad, alpha=1 - beta2)
                m_hat = m / (1 - beta1 ** step)
                v_hat = v / (1 - beta2 ** step)
                p.sub_(args.lr * m_hat / (v_hat.sqrt() + eps))
        if step % max(1, args.steps // 10) == 0 or step == 1:
            print(f"step {step:5d}  loss {loss.item():.4f}")
    elapsed = time.perf_counter() - start

    with ember.no_grad():
        accuracy = (model(x_test).argmax(dim=1) == y_test).float().mean().item()
    print(f"test accuracy {accuracy:.3f} after {args.steps} steps "
          f"({elapsed / args.steps * 1e3:.2f} ms/step)")
    if accuracy < 0.9:
        sys.exit("the demo did not learn the spirals (accuracy below 0.9)")


if __name__ == "__main__":
    main()
