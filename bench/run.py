"""ember beside PyTorch (and raw NumPy): eager micro-benchmarks and the reference
training steps of DESIGN.md.

    python bench/run.py                  # every workload
    python bench/run.py --only gpt       # overhead, matmul, elementwise, mlp, cnn, gpt
    python bench/run.py --rounds 5       # more alternating rounds (default 3)
    python bench/run.py --native-blas    # unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for
                                         # this run (every framework runs under it)

Each framework runs each workload in its own process (so one library's idle BLAS or
OpenMP threads never compete with another's), in alternating rounds; a figure is the
median over rounds of each process's median time. Ratios are of those medians, from the
same run. These machines are shared and noisy: quote ratios, not lone times.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = ("ember", "torch", "numpy")
# workload: (unit, how a median time in seconds becomes the unit, frameworks)
WORKLOADS = {
    "overhead": ("us/op", lambda s: s * 1e6, FRAMEWORKS),
    "overhead_grad": ("us/op", lambda s: s * 1e6, ("ember", "torch")),
    "matmul": ("GFLOP/s", lambda s: 2 * 1024 ** 3 / s / 1e9, FRAMEWORKS),
    "elementwise": ("GB/s", lambda s: 3 * 4 * 16 * 2 ** 20 / s / 1e9, FRAMEWORKS),
    "mlp": ("ms/step", lambda s: s * 1e3, ("ember", "torch")),
    "cnn": ("ms/step", lambda s: s * 1e3, ("ember", "torch")),
    "gpt": ("ms/step", lambda s: s * 1e3, ("ember", "torch")),
}
LABELS = {"overhead": "add 32 floats", "overhead_grad": "add 32 floats (requires_grad)",
          "matmul": "matmul 1024x1024 float32", "elementwise": "add 16M float32",
          "mlp": "mlp training step", "cnn": "cnn training step", "gpt": "gpt training step"}


# In the worker process ------------------------------------------------------------------
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


def make_call(framework: str, workload: str):
    """(function to time, calls per timing) for one framework and workload."""
    import numpy as np
    rng = np.random.default_rng(0)
    if framework == "numpy":
        lib = None
    elif framework == "torch":
        import torch as lib
        lib.set_num_threads(2)  # as ../shared/peers.py
    else:
        sys.path.insert(0, os.path.dirname(HERE))
        import ember as lib
    if workload in ("mlp", "cnn", "gpt"):
        sys.path.insert(0, HERE)
        from training import make_step
        return make_step(lib, workload), 3
    if workload.startswith("overhead"):
        a, b = rng.random(32, dtype=np.float32), rng.random(32, dtype=np.float32)
        number = 20000
    elif workload == "matmul":
        a, b = rng.random((1024, 1024), dtype=np.float32), rng.random((1024, 1024), dtype=np.float32)
        number = 5
    else:
        a, b = rng.random(16 * 2 ** 20, dtype=np.float32), rng.random(16 * 2 ** 20, dtype=np.float32)
        number = 3
    if lib is not None:
        a, b = lib.from_numpy(a), lib.from_numpy(b)
        if workload == "overhead_grad":
            a.requires_grad_(True)
    op = (lambda: a @ b) if workload == "matmul" else (lambda: a + b)
    return op, number


def worker(framework: str, workload: str, repeat: int) -> None:
    fn, number = make_call(framework, workload)
    print(json.dumps({"seconds": median_time(fn, number, repeat)}))


# In the driver ----------------------------------------------------------------------------
def measure(framework: str, workload: str, repeat: int, env) -> float | None:
    cmd = [sys.executable, os.path.abspath(__file__), "--worker", framework, workload,
           "--repeat", str(repeat)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        if "No module named 'torch'" in done.stderr:
            return None
        sys.exit(f"{framework} {workload} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])["seconds"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=sorted(WORKLOADS), action="append")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--native-blas", action="store_true",
                        help="unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for every framework")
    parser.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "WORKLOAD"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(*args.worker, args.repeat)
        return

    env = dict(os.environ)
    if args.native_blas:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    print(f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"{args.rounds} rounds of {args.repeat} timings, one process per figure")
    print(f"{'workload':32} {'unit':8} {'ember':>9} {'torch':>9} {'numpy':>9} "
          f"{'ember/torch':>12} {'ember/numpy':>12}")
    for workload in args.only or list(WORKLOADS):
        unit, convert, frameworks = WORKLOADS[workload]
        samples = {f: [] for f in frameworks}
        for _ in range(args.rounds):
            for framework in frameworks:
                seconds = measure(framework, workload, args.repeat, env)
                if seconds is not None:
                    samples[framework].append(seconds)
        med = {f: statistics.median(s) for f, s in samples.items() if s}
        cells = [f"{convert(med[f]):9.2f}" if f in med else f"{'-':>9}" for f in FRAMEWORKS]
        ratios = [f"{med['ember'] / med[p]:12.2f}" if p in med else f"{'-':>12}"
                  for p in ("torch", "numpy")]
        print(f"{LABELS[workload]:32} {unit:8} {' '.join(cells)} {' '.join(ratios)}")
    print("ratios are time(ember) / time(peer): below 1 means ember is faster")


if __name__ == "__main__":
    main()
