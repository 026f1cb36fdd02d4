"""ember beside its peers: eager micro-benchmarks against PyTorch and raw NumPy, and the
reference training steps of DESIGN.md in ember eager, ember.jit, PyTorch eager,
torch.compile and jax.jit.

    python bench/run.py                  # every workload
    python bench/run.py --only gpt       # one workload (repeat --only for several)
    python bench/run.py --rounds 5       # more alternating rounds (default 3)
    python bench/run.py --native-blas    # unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE for
                                         # this run (every framework runs under it)
    python bench/run.py --only mlp --only cnn --only gpt \\
        --python-peers /work/peers-venv/bin/python   # peers from another environment

Each framework runs each workload in its own process (so one library's idle BLAS or
OpenMP threads never compete with another's), in alternating rounds; a figure is the
median over rounds of each process's median time. Ratios are of those medians, from the
same run. These machines are shared and noisy: quote ratios, not lone times.

The training steps all come from training.py (ember, PyTorch) or its functional twin
training_jax.py (JAX). ``ember.jit`` and ``torch.compile`` wrap the whole step function
(zero_grad, loss, backward, optimizer step); JAX jits loss, gradient and update as one
function. Besides the step time, each framework's first call is timed on its own (it
includes compilation): "cold" in the first process, with a fresh compile cache
(EMBER_CACHE_DIR, TORCHINDUCTOR_CACHE_DIR, JAX_COMPILATION_CACHE_DIR set to a new
directory) holding only what installing put there (for ember, the hand-written kernels
`ember kernels` builds: the set-up commands run it), "warm" in later processes reusing
that directory. For ember, "bare" is one more first call on an empty cache (nothing
built: a user who skipped `ember kernels`). Peak memory is the worker's peak resident
set (ru_maxrss), and how much of it came after the import.

PyTorch and JAX are not dependencies of ember; a framework that is not installed shows
"-". The peers (torch, torch.compile, jax) run under ``--python-peers`` (default
$EMBER_BENCH_PEERS_PYTHON, else this interpreter), so JAX can live in a throwaway
environment. While ``ember.jit`` is missing or fails, its cells show "-" too and the
error is printed to stderr.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
FRAMEWORKS = ("ember", "torch", "numpy")
TRAINING_FRAMEWORKS = ("ember", "ember_jit", "torch", "torch_compile", "jax")
PEERS = ("torch", "torch_compile", "jax")
# A failure of a compiled framework shows "-"; one of ember or PyTorch eager stops the run.
COMPILED = ("ember_jit", "torch_compile", "jax")
MODULE = {"ember": "ember", "ember_jit": "ember", "torch": "torch", "torch_compile": "torch",
          "jax": "jax", "numpy": "numpy"}
TRAINING = ("mlp", "cnn", "gpt")
# micro-benchmark: (unit, how a median time in seconds becomes the unit, frameworks)
WORKLOADS = {
    "overhead": ("us/op", lambda s: s * 1e6, FRAMEWORKS),
    "overhead_grad": ("us/op", lambda s: s * 1e6, ("ember", "torch")),
    "matmul": ("GFLOP/s", lambda s: 2 * 1024 ** 3 / s / 1e9, FRAMEWORKS),
    "elementwise": ("GB/s", lambda s: 3 * 4 * 16 * 2 ** 20 / s / 1e9, FRAMEWORKS),
}
LABELS = {"overhead": "add 32 floats", "overhead_grad": "add 32 floats (requires_grad)",
          "matmul": "matmul 1024x1024 float32", "elementwise": "add 16M float32"}


# In the worker process ------------------------------------------------------------------
def median_time(fn, number: int, repeat: int, warmup: int = 1) -> float:
    """Median over ``repeat`` runs of the mean time of one call (seconds)."""
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - start) / number)
    return statistics.median(times)


def peak_mb() -> float:
    """This process's peak resident set so far, in MB (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def import_framework(framework: str):
    """The library module for ``framework`` (None for raw NumPy)."""
    if framework == "numpy":
        return None
    if framework.startswith("torch"):
        import torch
        torch.set_num_threads(2)  # as ../shared/peers.py
        return torch
    if framework == "jax":
        import jax
        return jax
    sys.path.insert(0, os.path.dirname(HERE))
    import ember
    return ember


def make_call(framework: str, workload: str):
    """(function to time, calls per timing) for one micro-benchmark."""
    import numpy as np
    rng = np.random.default_rng(0)
    lib = import_framework(framework)
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


def make_training_step(framework: str, lib, workload: str):
    """The zero-argument training step of ``workload`` in ``framework``."""
    sys.path.insert(0, HERE)
    if framework == "jax":
        from training_jax import make_step as make_jax_step
        return make_jax_step(workload)
    from training import make_step
    step = make_step(lib, workload)
    if framework == "torch_compile":
        return lib.compile(step)
    if framework == "ember_jit":
        if not hasattr(lib, "jit"):
            raise NotImplementedError("ember.jit does not exist yet")
        return lib.jit(step)
    return step


def training_worker(framework: str, workload: str, repeat: int, first_only: bool) -> dict:
    lib = import_framework(framework)
    after_import = peak_mb()
    step = make_training_step(framework, lib, workload)
    start = time.perf_counter()
    step()
    result = {"first_call": time.perf_counter() - start}
    if not first_only:
        # A few warm-up calls: a compiler may specialise again once optimizer state exists.
        result["seconds"] = median_time(step, 3, repeat, warmup=3)
        result["peak_mb"] = peak_mb()
        result["after_import_mb"] = peak_mb() - after_import
    return result


def worker(framework: str, workload: str, repeat: int, first_only: bool) -> None:
    """Print one JSON line: the figures, or why there are none ("missing", "error")."""
    try:
        if workload in TRAINING:
            result = training_worker(framework, workload, repeat, first_only)
        else:
            fn, number = make_call(framework, workload)
            result = {"seconds": median_time(fn, number, repeat)}
    except ModuleNotFoundError as error:
        if error.name != MODULE[framework]:
            raise
        result = {"missing": error.name}
    except Exception as error:
        if framework not in COMPILED:
            raise
        result = {"error": f"{type(error).__name__}: {error}"}
    print(json.dumps(result))


# In the driver ----------------------------------------------------------------------------
def cache_env(env: dict, directory: str) -> dict:
    """``env`` with every framework's compile cache pointed at ``directory``."""
    return {**env, "EMBER_CACHE_DIR": directory, "TORCHINDUCTOR_CACHE_DIR": directory,
            "JAX_COMPILATION_CACHE_DIR": directory,
            "JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS": "0",
            "JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES": "0"}


def measure(framework: str, workload: str, args, env, first_only: bool = False) -> dict:
    """Run one worker process; its JSON result ({"missing"} or {"error"} when none)."""
    python = args.python_peers if framework in PEERS else sys.executable
    cmd = [python, os.path.abspath(__file__), "--worker", framework, workload,
           "--repeat", str(args.repeat)] + (["--first-call-only"] if first_only else [])
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=args.timeout)
    except subprocess.TimeoutExpired:
        result = {"error": f"timed out after {args.timeout:.0f} s"}
    else:
        if done.returncode == 0:
            result = json.loads(done.stdout.strip().splitlines()[-1])
        elif framework in COMPILED:  # crashed outright
            result = {"error": (done.stderr.strip().splitlines() or ["no output"])[-1]}
        else:
            sys.exit(f"{framework} {workload} failed:\n{done.stderr}")
    if "error" in result:
        print(f"{framework} {workload}: {result['error'][:300]}", file=sys.stderr)
    return result


def run_micro(workloads, args, env) -> None:
    print(f"{'workload':32} {'unit':8} {'ember':>9} {'torch':>9} {'numpy':>9} "
          f"{'ember/torch':>12} {'ember/numpy':>12}")
    for workload in workloads:
        unit, convert, frameworks = WORKLOADS[workload]
        samples = {f: [] for f in frameworks}
        for _ in range(args.rounds):
            for framework in frameworks:
                result = measure(framework, workload, args, env)
                if "seconds" in result:
                    samples[framework].append(result["seconds"])
        med = {f: statistics.median(s) for f, s in samples.items() if s}
        cells = [f"{convert(med[f]):9.2f}" if f in med else f"{'-':>9}" for f in FRAMEWORKS]
        ratios = [f"{med['ember'] / med[p]:12.2f}" if p in med else f"{'-':>12}"
                  for p in ("torch", "numpy")]
        print(f"{LABELS[workload]:32} {unit:8} {' '.join(cells)} {' '.join(ratios)}")
    print("ratios are time(ember) / time(peer): below 1 means ember is faster\n")


def run_training(workload: str, args, env) -> dict:
    """{framework: [worker results]} for one workload; the first result of each framework
    ran with an empty compile cache, the later ones reuse it."""
    caches = {f: tempfile.mkdtemp(prefix=f"ember-bench-{f}-") for f in TRAINING_FRAMEWORKS}
    runs = {f: [] for f in TRAINING_FRAMEWORKS}
    bare = {}
    try:
        for framework in ("ember", "ember_jit"):  # an empty cache, then what installing does
            with tempfile.TemporaryDirectory(prefix="ember-bench-bare-") as empty:
                result = measure(framework, workload, args, cache_env(env, empty), True)
            bare[framework] = result.get("first_call")
            subprocess.run([sys.executable, "-c", "from ember.backends import cpu_kernels; "
                            "cpu_kernels.build()"], env=cache_env(env, caches[framework]),
                           check=True)
        for _ in range(args.rounds):
            for framework in TRAINING_FRAMEWORKS:
                if runs[framework] and "seconds" not in runs[framework][-1]:
                    continue  # missing or failed: do not try again
                runs[framework].append(
                    measure(framework, workload, args, cache_env(env, caches[framework])))
        for framework in COMPILED:  # one warm-cache first call even with --rounds 1
            if len(runs[framework]) == 1 and "seconds" in runs[framework][0]:
                runs[framework].append(measure(framework, workload, args,
                                               cache_env(env, caches[framework]), True))
    finally:
        for directory in caches.values():
            shutil.rmtree(directory, ignore_errors=True)
    for framework, seconds in bare.items():
        if runs[framework]:
            runs[framework][0]["bare_first_call"] = seconds
    return runs


def summarise(runs: list) -> dict:
    """Medians of one framework's worker results (empty when it has none)."""
    timed = [r for r in runs if "seconds" in r]
    if not timed:
        return {}
    warm = [r for r in runs[1:] if "first_call" in r]

    def median(key, results):
        return statistics.median(r[key] for r in results) if results else None
    return {"ms": median("seconds", timed) * 1e3, "cold": runs[0]["first_call"],
            "bare": runs[0].get("bare_first_call"),
            "warm": median("first_call", warm), "peak": median("peak_mb", timed),
            "after_import": median("after_import_mb", timed)}


def fmt(value, spec: str, width: int) -> str:
    return f"{'-':>{width}}" if value is None else f"{value:{width}{spec}}"


def print_training(results: dict) -> None:
    """Two tables: step times with ratios, then first-call times and memory."""
    names = TRAINING_FRAMEWORKS
    print(f"{'training step, ms':18} " + " ".join(f"{f:>13}" for f in names)
          + f" {'jit/best peer':>14} {'eager/best peer':>16}  best peer")
    for workload, figures in results.items():
        ms = {f: figures[f].get("ms") for f in names}
        peers = {p: ms[p] for p in PEERS if ms[p] is not None}
        best = min(peers, key=peers.get) if peers else None
        jit, eager = (ms[f] / peers[best] if best and ms[f] is not None else None
                      for f in ("ember_jit", "ember"))
        print(f"{workload:18} " + " ".join(fmt(ms[f], ".2f", 13) for f in names)
              + f" {fmt(jit, '.2f', 14)} {fmt(eager, '.2f', 16)}  {best or '-'}")
    print("ratios are time(ember) / time(fastest of torch, torch_compile, jax): below 1 "
          "means ember is faster\n")
    print(f"{'workload':10} {'framework':14} {'first call s':>13} {'(warm cache)':>13} "
          f"{'(bare)':>9} {'peak MB':>9} {'after import':>13}")
    for workload, figures in results.items():
        for framework in names:
            f = figures[framework]
            print(f"{workload:10} {framework:14} {fmt(f.get('cold'), '.2f', 13)} "
                  f"{fmt(f.get('warm'), '.2f', 13)} {fmt(f.get('bare'), '.2f', 9)} "
                  f"{fmt(f.get('peak'), '.0f', 9)} {fmt(f.get('after_import'), '.0f', 13)}")
    print("first call: cold = a fresh compile cache (for ember, holding the hand-written "
          "kernels `ember kernels` builds at set-up), warm = a later process reusing it, "
          "bare = ember on an empty cache; peak MB = the worker's ru_maxrss\n")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", choices=list(WORKLOADS) + list(TRAINING), action="append")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--native-blas", action="store_true",
                        help="unset OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE for every framework")
    parser.add_argument("--python-peers", metavar="PATH",
                        default=os.environ.get("EMBER_BENCH_PEERS_PYTHON", sys.executable),
                        help="interpreter for torch, torch.compile and jax "
                             "(default: $EMBER_BENCH_PEERS_PYTHON, else this one)")
    parser.add_argument("--timeout", type=float, default=1800,
                        help="seconds before one worker process is given up (default 1800)")
    parser.add_argument("--worker", nargs=2, metavar=("FRAMEWORK", "WORKLOAD"),
                        help=argparse.SUPPRESS)
    parser.add_argument("--first-call-only", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if shutil.which(args.python_peers) is None:
        parser.error(f"--python-peers: no interpreter at {args.python_peers}")
    return args


def main() -> None:
    args = parse_args()
    if args.worker:
        worker(*args.worker, args.repeat, args.first_call_only)
        return

    env = dict(os.environ)
    if args.native_blas:
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
    only = args.only or list(WORKLOADS) + list(TRAINING)
    print(f"OPENBLAS_CORETYPE={env.get('OPENBLAS_CORETYPE', 'unset')}, "
          f"{args.rounds} rounds of {args.repeat} timings, one process per figure, "
          f"peers under {args.python_peers}, load average {os.getloadavg()[0]:.1f}\n")
    micro = [w for w in only if w in WORKLOADS]
    if micro:
        run_micro(micro, args, env)
    results = {}
    for workload in (w for w in only if w in TRAINING):
        runs = run_training(workload, args, env)
        results[workload] = {f: summarise(r) for f, r in runs.items()}
    if results:
        print_training(results)


if __name__ == "__main__":
    main()
