"""ember beside PyTorch (and raw NumPy): eager micro-benchmarks and the reference
training steps of DESIGN.md.

    python bench/run.py                  # all workloads
    python bench/run.py --only overhead  # overhead, matmul, elementwise, mlp, cnn, gpt
    python bench/run.py --native-blas    # unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for
                                         # this run (every framework runs under it)

Each figure is the median of several timed repeats; ratios are of medians measured in
the same run. These machines are shared and noisy: quote ratios, not lone times.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

import ember  # noqa: E402

try:
    import torch  # noqa: E402
    torch.set_num_threads(2)  # as ../shared/peers.py
except ImportError:
    torch = None


def median_time(fn, number: int, repeat: int) -> float:
    """Median over ``repeat`` runs of the mean time of one call (seconds)."""
    fn()  # warm up
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def overhead(repeat: int):
    rows = []
    a_np = np.random.rand(32).astype(np.float32)
    b_np = np.random.rand(32).astype(np.float32)
    for grad in (False, True):
        ea = ember.tensor(a_np, requires_grad=grad)
        eb = ember.tensor(b_np)
        row = {"ember": median_time(lambda: ea + eb, 20000, repeat)}
        if torch is not None:
            ta = torch.tensor(a_np, requires_grad=grad)
            tb = torch.tensor(b_np)
            row["torch"] = median_time(lambda: ta + tb, 20000, repeat)
        row["numpy"] = median_time(lambda: np.add(a_np, b_np), 20000, repeat) if not grad else None
        rows.append((f"add 32 floats{' (requires_grad)' if grad else ''}", "us/op", row,
                     lambda s: s * 1e6))
    return rows


def matmul(repeat: int):
    n = 1024
    a_np = np.random.rand(n, n).astype(np.float32)
    b_np = np.random.rand(n, n).astype(np.float32)
    ea, eb = ember.from_numpy(a_np), ember.from_numpy(b_np)
    row = {"ember": median_time(lambda: ea @ eb, 5, repeat),
           "numpy": median_time(lambda: a_np @ b_np, 5, repeat)}
    if torch is not None:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        row["torch"] = median_time(lambda: ta @ tb, 5, repeat)
    flops = 2 * n ** 3
    return [("matmul 1024x1024 float32", "GFLOP/s", row, lambda s: flops / s / 1e9)]


def elementwise(repeat: int):
    n = 16 * 1024 * 1024
    a_np = np.random.rand(n).astype(np.float32)
    b_np = np.random.rand(n).astype(np.float32)
    ea, eb = ember.from_numpy(a_np), ember.from_numpy(b_np)
    row = {"ember": median_time(lambda: ea + eb, 3, repeat),
           "numpy": median_time(lambda: a_np + b_np, 3, repeat)}
    if torch is not None:
        ta, tb = torch.from_numpy(a_np), torch.from_numpy(b_np)
        row["torch"] = median_time(lambda: ta + tb, 3, repeat)
    moved = 3 * n * 4  # two reads and one write
    return [("add 16M float32", "GB/s", row, lambda s: moved / s / 1e9)]


def training(workload: str):
    def run(repeat: int):
        from training import make_step
        row = {"ember": median_time(make_step(ember, workload), 3, repeat)}
        if torch is not None:
            row["torch"] = median_time(make_step(torch, workload), 3, repeat)
        return [(f"{workload} training step", "ms/step", row, lambda s: s * 1e3)]
    return run


WORKLOADS = {"overhead": overhead, "matmul": matmul, "elementwise": elementwise,
             "mlp": training("mlp"), "cnn": training("cnn"), "gpt": training("gpt")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--native-blas", action="store_true",
                        help="re-run with OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset")
    args = parser.parse_args()
    if args.native_blas and ("OPENBLAS_CORETYPE" in os.environ or
                             "OPENBLAS_L2_SIZE" in os.environ):
        env = {k: v for k, v in os.environ.items()
               if k not in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE")}
        os.execve(sys.executable, [sys.executable] + sys.argv, env)

    print(f"ember {ember.__version__}, numpy {np.__version__}, "
          f"torch {torch.__version__ if torch else 'absent'}, "
          f"OPENBLAS_CORETYPE={os.environ.get('OPENBLAS_CORETYPE', 'unset')}")
    print(f"{'workload':34} {'unit':8} {'ember':>10} {'torch':>10} {'numpy':>10} "
          f"{'ember/torch':>12} {'ember/numpy':>12}")
    for name in args.only or list(WORKLOADS):
        for label, unit, row, convert in WORKLOADS[name](args.repeat):
            shown = {k: (convert(v) if v else None) for k, v in row.items()}
            cells = [f"{shown[k]:10.2f}" if shown.get(k) else f"{'-':>10}"
                     for k in ("ember", "torch", "numpy")]
            ratios = []
            for peer in ("torch", "numpy"):
                if row.get(peer):
                    # ratio of times: > 1 means ember is slower
                    ratios.append(f"{row['ember'] / row[peer]:12.2f}")
                else:
                    ratios.append(f"{'-':>12}")
            print(f"{label:34} {unit:8} {' '.join(cells)} {' '.join(ratios)}")
    print("ratios are time(ember) / time(peer): below 1 means ember is faster")


if __name__ == "__main__":
    main()
