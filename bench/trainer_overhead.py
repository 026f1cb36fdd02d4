"""The cost of ``ember.train.Trainer`` over a hand-written loop: time per optimizer step
on DESIGN.md's mlp workload (784-512-512-10, ReLU, batch 128, cross-entropy, Adam lr 1e-3),
eager and with ``compile=True``.

    python bench/trainer_overhead.py                # 100 steps an epoch, 9 rounds
    python bench/trainer_overhead.py --rounds 15    # more alternating rounds
    python bench/trainer_overhead.py --steps 200    # longer epochs
    python bench/trainer_overhead.py --native-blas  # unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE

Four loops train the same model (built by training.py, from the same seed) on the same
batches: one ``ember.data.DataLoader`` over ``--steps`` x 128 synthetic samples, in order:

* hand:         ``for x, y in loader: zero_grad(); loss = loss_fn(x, y); loss.backward();
                optimizer.step()``;
* Trainer:      ``Trainer(model, optimizer, F.cross_entropy, train_loader=loader,
                progress_bar=False)``, one ``fit`` per epoch;
* hand + jit:   the same loop calling ``ember.jit`` of a step function (zero_grad, loss,
                backward, step) on each batch;
* Trainer + jit: the Trainer with ``compile=True``.

Each loop first runs one untimed epoch (tracing and compiling for the jit pair). Then,
in each round, each loop runs one timed epoch, the order rotating from round to round;
a figure is the median over rounds of an epoch's time per step, data loading included
(the same loader for both sides). The ratio is Trainer / hand in time per step: 1.05
means the Trainer costs 5% more. The machine is shared: quote the ratio, not the times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH_SIZE = 128
LOOPS = ("hand", "trainer", "hand_jit", "trainer_jit")


def make_loader(ember, steps: int):
    """A DataLoader of ``steps`` mlp batches (784 float32 features, 10 classes)."""
    import numpy as np
    rng = np.random.default_rng(0)
    x = rng.standard_normal((steps * BATCH_SIZE, 784), dtype=np.float32)
    y = rng.integers(0, 10, steps * BATCH_SIZE)
    dataset = ember.data.TensorDataset(ember.from_numpy(x), ember.from_numpy(y))
    return ember.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=False)


def make_epoch(ember, kind: str, loader):
    """A zero-argument function running one epoch of loop ``kind`` over ``loader``."""
    from training import build
    ember.manual_seed(0)
    model, optimizer, loss_fn = build(ember, "mlp")
    if kind.startswith("trainer"):
        from ember.train import Trainer
        trainer = Trainer(model, optimizer, ember.nn.functional.cross_entropy,
                          train_loader=loader, max_epochs=1, progress_bar=False,
                          compile=kind == "trainer_jit")

        def epoch():
            trainer.max_epochs = trainer.epoch + 1
            trainer.fit()
        return epoch

    def step(x, y):
        optimizer.zero_grad()
        loss = loss_fn(x, y)
        loss.backward()
        optimizer.step()
        return loss
    if kind == "hand_jit":
        step = ember.jit(step)

    def epoch():
        for x, y in loader:
            step(x, y)
    return epoch


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=100,
                        help="optimizer steps (batches of 128) in one epoch (default 100)")
    parser.add_argument("--rounds", type=int, default=9,
                        help="timed epochs of each loop; figures are medians (default 9)")
    parser.add_argument("--native-blas", action="store_true",
                        help="unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE (for every loop)")
    return parser.parse_args()


def main() -> None:
    args = parse_args()
    blas_vars = ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")
    if args.native_blas and any(v in os.environ for v in blas_vars):
        # OpenBLAS reads these when NumPy loads it: start again without them.
        env = {k: v for k, v in os.environ.items() if k not in blas_vars}
        os.execve(sys.executable, [sys.executable, os.path.abspath(__file__), *sys.argv[1:]],
                  env)
    sys.path.insert(0, os.path.dirname(HERE))
    sys.path.insert(0, HERE)
    import ember
    loader = make_loader(ember, args.steps)
    print(f"Trainer overhead: mlp, batch {BATCH_SIZE}, {args.steps} steps an epoch, "
          f"{args.rounds} rounds; OPENBLAS_CORETYPE="
          f"{os.environ.get('OPENBLAS_CORETYPE', 'unset')}; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    epochs = {}
    for kind in LOOPS:
        epochs[kind] = make_epoch(ember, kind, loader)
        epochs[kind]()  # warm-up: first calls, tracing and compiling
    per_step = {kind: [] for kind in LOOPS}
    for r in range(args.rounds):
        for i in range(len(LOOPS)):
            kind = LOOPS[(r + i) % len(LOOPS)]
            start = time.perf_counter()
            epochs[kind]()
            per_step[kind].append((time.perf_counter() - start) / args.steps)
    med = {kind: statistics.median(times) * 1e3 for kind, times in per_step.items()}

    print(f"\n{'loop':10} {'hand ms/step':>13} {'Trainer ms/step':>16} {'Trainer/hand':>13} "
          f"{'overhead us/step':>17}")
    for label, hand, trainer in (("eager", "hand", "trainer"),
                                 ("jit", "hand_jit", "trainer_jit")):
        print(f"{label:10} {med[hand]:13.2f} {med[trainer]:16.2f} "
              f"{med[trainer] / med[hand]:13.3f} {(med[trainer] - med[hand]) * 1e3:17.0f}")
    print("medians over rounds; Trainer/hand is a ratio of times per step (target: at most "
          f"1.05). Load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
