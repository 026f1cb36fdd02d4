"""DataLoader throughput on an augmented image pipeline: ember's ``ember.data.DataLoader``
with ``ember.data.transforms`` beside PyTorch's ``torch.utils.data.DataLoader`` with the
same pipeline written in torch ops, for 0, 1 and 2 worker processes, in one run.

    python bench/loader.py                    # 10,000 samples, 0/1/2 workers, 5 rounds
    python bench/loader.py --rounds 9         # more alternating rounds
    python bench/loader.py --workers 0 2      # only these worker counts
    python bench/loader.py --samples 20000    # a bigger dataset (a longer epoch)
    python bench/loader.py --native-blas      # unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE
                                              # (for both frameworks)

The dataset is CIFAR-like and synthetic: ``--samples`` uint8 HWC 32x32x3 images and
int labels drawn with a fixed NumPy seed, held in memory. Each sample goes through
RandomCrop(32, padding=4), RandomHorizontalFlip, ToTensor and Normalize (CIFAR-10's
mean and std); batches of 128, shuffled, collated by each library's default collate.
torchvision is not installed, so PyTorch's side is torchvision's v1 transforms written by
hand in torch ops (``F.pad``, slicing, ``flip``, ``float().div(255)``, normalisation),
drawing its randomness as torchvision does (``torch.randint``, ``torch.rand``); ember's
transforms draw from ember's default generator. Each library seeds its workers itself.

One measurement is one process running ``--epochs`` epochs, each timed after its warm-up
batch (so worker start-up is left out of the throughput; it shows as "first batch"): the
median of their samples/s. Each framework and worker count runs in its own process,
frameworks alternating, for ``--rounds`` rounds; a figure is the median over rounds, and
the ratio is of those medians: ember / PyTorch in samples/s, so above 1 means ember loads
faster. The machine is shared: quote ratios, not lone figures.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = ("ember", "torch")
BATCH_SIZE = 128
MEAN = (0.4914, 0.4822, 0.4465)  # CIFAR-10's per-channel statistics
STD = (0.2470, 0.2435, 0.2616)


def make_data(samples: int) -> tuple[np.ndarray, np.ndarray]:
    """``samples`` CIFAR-like uint8 (32, 32, 3) images and labels (the same every run)."""
    rng = np.random.default_rng(0)
    images = rng.integers(0, 256, (samples, 32, 32, 3), dtype=np.uint8)
    labels = rng.integers(0, 10, samples)
    return images, labels


class ImageDataset:
    """Images and labels in memory; item ``i`` is ``(transform(images[i]), labels[i])``.
    The same class serves both frameworks (both DataLoaders take any object with
    ``__getitem__`` and ``__len__``); it lives at module level so that a "spawn" or
    "forkserver" start method can pickle it for the workers."""

    def __init__(self, images: np.ndarray, labels: np.ndarray, transform):
        self.images, self.labels, self.transform = images, labels.tolist(), transform

    def __len__(self) -> int:
        return len(self.images)

    def __getitem__(self, i: int):
        return self.transform(self.images[i]), self.labels[i]


# PyTorch's pipeline: torchvision.transforms v1, by hand ---------------------------------
class TorchPipeline:
    """RandomCrop(32, padding=4), RandomHorizontalFlip(), ToTensor(), Normalize(MEAN, STD)
    on a uint8 HWC NumPy image, as torchvision computes them on a tensor."""

    def __init__(self):
        import torch
        self.torch, self.F = torch, torch.nn.functional
        self.mean = torch.tensor(MEAN).view(-1, 1, 1)
        self.std = torch.tensor(STD).view(-1, 1, 1)

    def __reduce__(self):  # a module cannot be pickled: rebuild in the worker
        return TorchPipeline, ()

    def __call__(self, image: np.ndarray):
        torch = self.torch
        img = torch.from_numpy(image).permute(2, 0, 1)                  # (C, H, W) uint8
        img = self.F.pad(img, (4, 4, 4, 4), mode="constant", value=0)   # RandomCrop's padding
        h, w = img.shape[-2:]
        i = torch.randint(0, h - 32 + 1, size=(1,)).item()              # RandomCrop.get_params
        j = torch.randint(0, w - 32 + 1, size=(1,)).item()
        img = img[..., i:i + 32, j:j + 32]
        if torch.rand(1) < 0.5:                                         # RandomHorizontalFlip
            img = img.flip(-1)
        img = img.contiguous().float().div(255)                         # ToTensor
        return img.sub_(self.mean).div_(self.std)                       # Normalize


def build_loader(framework: str, samples: int, workers: int):
    images, labels = make_data(samples)
    if framework == "torch":
        import torch
        torch.set_num_threads(2)  # as bench/run.py and ../shared/peers.py
        torch.manual_seed(0)
        dataset = ImageDataset(images, labels, TorchPipeline())
        return torch.utils.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                                           num_workers=workers)
    sys.path.insert(0, os.path.dirname(HERE))
    import ember
    from ember.data import transforms as T
    ember.manual_seed(0)
    pipeline = T.Compose([T.RandomCrop(32, padding=4), T.RandomHorizontalFlip(),
                          T.ToTensor(), T.Normalize(MEAN, STD)])
    dataset = ImageDataset(images, labels, pipeline)
    return ember.data.DataLoader(dataset, batch_size=BATCH_SIZE, shuffle=True,
                                 num_workers=workers)


def worker(framework: str, samples: int, workers: int, epochs: int) -> None:
    """Print one JSON line: the median over ``epochs`` epochs of the samples/s after each
    epoch's warm-up batch, and the first epoch's time to its first batch (the workers'
    start-up included)."""
    loader = build_loader(framework, samples, workers)
    rates, first = [], None
    for _ in range(epochs):
        start = time.perf_counter()
        batches = iter(loader)
        x, y = next(batches)
        first = time.perf_counter() - start if first is None else first
        assert tuple(x.shape) == (BATCH_SIZE, 3, 32, 32) and str(x.dtype).endswith("float32")
        count = 0
        start = time.perf_counter()
        for x, _ in batches:
            count += x.shape[0]
        rates.append(count / (time.perf_counter() - start))
    print(json.dumps({"samples_per_s": statistics.median(rates), "first_batch_s": first}))


# In the driver ----------------------------------------------------------------------------
def measure(framework: str, workers: int, args, env) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework,
           "--samples", str(args.samples), "--workers", str(workers),
           "--epochs", str(args.epochs)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    if done.returncode != 0:
        sys.exit(f"{framework} with {workers} workers failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--samples", type=int, default=10000,
                        help="images in the dataset, i.e. one epoch (default 10000)")
    parser.add_argument("--rounds", type=int, default=5,
                        help="alternating rounds; figures are medians over them (default 5)")
    parser.add_argument("--epochs", type=int, default=3,
                        help="timed epochs in each process; it reports their median "
                             "(default 3)")
    parser.add_argument("--workers", type=int, nargs="+", default=[0, 1, 2],
                        help="worker counts to measure (default 0 1 2)")
    parser.add_argument("--native-blas", action="store_true",
                        help="unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for both frameworks")
    parser.add_argument("--timeout", type=float, default=600,
                        help="seconds before one measurement is given up (default 600)")
    parser.add_argument("--worker", choices=FRAMEWORKS, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.samples < 2 * BATCH_SIZE:
        parser.error(f"--samples must be at least {2 * BATCH_SIZE} (a warm-up batch and more)")
    if any(w < 0 for w in args.workers):
        parser.error("--workers must be >= 0")
    return args


def main() -> None:
    args = parse_args()
    if args.worker:
        worker(args.worker, args.samples, args.workers[0], args.epochs)
        return
    env = dict(os.environ)
    if args.native_blas:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    print(f"loader throughput: {args.samples} synthetic 32x32x3 uint8 images, batch "
          f"{BATCH_SIZE}, RandomCrop(32, padding=4) + RandomHorizontalFlip + ToTensor + "
          f"Normalize; {args.rounds} rounds of {args.epochs} epochs, one process per figure; "
          f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset')}; load average "
          f"{os.getloadavg()[0]:.2f}", flush=True)
    runs = {(f, w): [] for w in args.workers for f in FRAMEWORKS}
    for r in range(args.rounds):
        for workers in args.workers:
            # Alternate which framework goes first, so neither always follows the other.
            for framework in FRAMEWORKS[::1 if r % 2 == 0 else -1]:
                runs[framework, workers].append(measure(framework, workers, args, env))
        print(f"  round {r + 1}/{args.rounds} done, load average "
              f"{os.getloadavg()[0]:.2f}", file=sys.stderr, flush=True)

    def med(framework, workers, key):
        return statistics.median(m[key] for m in runs[framework, workers])

    print(f"\n{'workers':>7} {'ember samples/s':>16} {'torch samples/s':>16} "
          f"{'ember/torch':>12} {'first batch ms (ember, torch)':>31}")
    for workers in args.workers:
        ember, torch = (med(f, workers, "samples_per_s") for f in FRAMEWORKS)
        first = "{:.0f}, {:.0f}".format(*(med(f, workers, "first_batch_s") * 1e3
                                          for f in FRAMEWORKS))
        print(f"{workers:>7} {ember:16.0f} {torch:16.0f} {ember / torch:12.2f} {first:>31}")
    print("medians over rounds; ember/torch is a ratio of throughputs (samples/s): above 1 "
          f"means ember is faster. Load average at the end {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
