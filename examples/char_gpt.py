"""Train a small character-level GPT on a text file and sample from it.

    python examples/char_gpt.py [TEXT_FILE] [--steps 300] [--sample 300]

The model is the DESIGN.md "gpt" workload (context 64, d_model 128, 4 heads, 2 pre-norm
blocks, GELU MLP 4×) over the file's characters, trained with AdamW. The default text
(examples/data/embers.txt) is written for ember and ships with it.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ember  # noqa: E402
import ember.nn as nn  # noqa: E402
import ember.nn.functional as F  # noqa: E402
from ember.models import GPT  # noqa: E402  (DESIGN.md's gpt)

DEFAULT_TEXT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "embers.txt")


def batches(data: ember.Tensor, context: int, batch_size: int, generator):
    """Random windows of ``context + 1`` characters: (inputs, next-character targets)."""
    while True:
        starts = ember.randint(0, data.shape[0] - context - 1, (batch_size,), generator=generator)
        windows = ember.stack([data[s: s + context + 1] for s in starts.tolist()])
        yield windows[:, :-1], windows[:, 1:]


def sample(model: GPT, prompt: ember.Tensor, length: int, generator) -> list[int]:
    model.eval()
    out = prompt.tolist()
    with ember.no_grad():
        for _ in range(length):
            idx = ember.tensor([out[-model.context:]])
            probs = F.softmax(model(idx)[0, -1], dim=-1)
            out.append(ember.multinomial(probs, 1, generator=generator).item())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("text", nargs="?", default=DEFAULT_TEXT)
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=3e-3)
    parser.add_argument("--sample", type=int, default=300, help="characters to generate")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    with open(args.text, encoding="utf-8") as f:
        text = f.read()
    chars = sorted(set(text))
    index = {c: i for i, c in enumerate(chars)}
    data = ember.tensor([index[c] for c in text])
    ember.manual_seed(args.seed)
    gen = ember.Generator().manual_seed(args.seed)
    model = GPT(vocab_size=len(chars))
    optimizer = ember.optim.AdamW(model.parameters(), lr=args.lr, weight_decay=0.01)
    scheduler = ember.optim.lr_scheduler.OneCycleLR(optimizer, max_lr=args.lr,
                                                    total_steps=args.steps)
    print(f"{len(text):,} characters, vocabulary {len(chars)}, "
          f"{sum(p.numel() for p in model.parameters()):,} parameters")
    stream = batches(data, model.context, args.batch_size, gen)
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        x, y = next(stream)
        model.train()
        logits = model(x)
        loss = F.cross_entropy(logits.reshape(-1, len(chars)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        scheduler.step()
        if step % max(1, args.steps // 10) == 0 or step == 1:
            rate = step / (time.perf_counter() - start)
            print(f"step {step:5d}  loss {loss.item():.4f}  "
                  f"(uniform guess: {math.log(len(chars)):.2f})  {rate:.1f} steps/s")
    prompt = data[:8]
    generated = sample(model, prompt, args.sample, gen)
    print("---\n" + "".join(chars[i] for i in generated))


if __name__ == "__main__":
    main()
