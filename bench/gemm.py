"""ember's own GEMM against OpenBLAS, both driven by ember's BLAS driver on its threads,
on the products of the reference workloads, alternating in one process.

    python bench/gemm.py              # float32, ~1 minute on 2 cores
    python bench/gemm.py --float64
    python bench/gemm.py --rounds 11

Each shape is timed with the own GEMM on and off in alternating rounds (the driver's
plans rebuilt at each switch); a cell is the median over rounds of the time per call.
"own / OpenBLAS" above 1 means the own GEMM is faster. Layouts: ``nt`` is x @ W.T (a
Linear's forward), ``nn`` g @ W (its input gradient), ``tn`` g.T @ x (its weight
gradient).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from ember.backends import cpu_blas  # noqa: E402

SHAPES = (  # (layout, m, k, n)
    ("nt", 64, 784, 512), ("nt", 128, 784, 512), ("nt", 128, 512, 512),  # mlp
    ("nn", 128, 512, 784), ("tn", 512, 128, 784),
    ("nt", 64, 1600, 128),                                                 # cnn
    ("nt", 1024, 128, 384), ("nt", 1024, 512, 128), ("nn", 1024, 384, 128),  # gpt
    ("tn", 384, 1024, 128), ("tn", 128, 1024, 512),
    ("nt", 1024, 1024, 1024),  # large: over OWN_GEMM_MAX_FLOPS, OpenBLAS's either way
)


def operands(layout, m, k, n, dtype, rng):
    a = rng.standard_normal((m, k)).astype(dtype)
    b = rng.standard_normal((k, n)).astype(dtype)
    if layout == "nt":
        b = np.ascontiguousarray(b.T).T
    elif layout == "tn":
        a = np.ascontiguousarray(a.T).T
    return a, b


def use_own(on: bool) -> None:
    cpu_blas.OWN_GEMM = on
    cpu_blas._PLANS.plans.clear()


def per_call(a, b, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        cpu_blas.matmul(a, b)
    return (time.perf_counter() - start) / calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--float64", action="store_true")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args()
    if cpu_blas._driver() is None:
        sys.exit("bench/gemm.py: the BLAS driver is off (EMBER_BLAS, no OpenBLAS or no C "
                 "compiler): nothing to compare")
    initial = cpu_blas.OWN_GEMM
    dtype = np.float64 if args.float64 else np.float32
    rng = np.random.default_rng(0)
    print(f"{'layout':<6} {'m x k x n':>16} {'own GF/s':>9} {'OpenBLAS GF/s':>14} "
          f"{'own / OpenBLAS':>15}")
    for layout, m, k, n in SHAPES:
        a, b = operands(layout, m, k, n, dtype, rng)
        flops = 2 * m * k * n
        calls = max(3, int(2e8 / flops))
        times: dict = {True: [], False: []}
        for _ in range(args.rounds):
            for on in (True, False):
                use_own(on)
                cpu_blas.matmul(a, b)
                times[on].append(per_call(a, b, calls))
        own, blas = (statistics.median(times[on]) for on in (True, False))
        print(f"{layout:<6} {f'{m} x {k} x {n}':>16} {flops / own / 1e9:>9.1f} "
              f"{flops / blas / 1e9:>14.1f} {blas / own:>15.2f}")
    use_own(initial)


if __name__ == "__main__":
    main()
