"""Data-parallel training of the gpt workload on 1, 2 and 4 MPI ranks.

    python bench/distributed.py                 # 1, 2 and 4 ranks, 3 rounds
    python bench/distributed.py --ranks 1 2 --rounds 5 --steps 20

Each rank runs DESIGN.md's gpt step (batch 16 per rank: weak scaling, the global batch
grows with the ranks) under ``DistributedDataParallel``. A run prints, per world size,
the median step time, the samples per second of the whole job, the bytes all-reduced per
step (DDP's buckets), the all-reduce time from the first bucket's start to the last
one's completion, and the overlap: the share of that time hidden behind the backward
pass (1 - time blocked waiting after backward / all-reduce time).

On this 2-core machine 4 ranks are oversubscribed (two ranks per core), so the step
time at 4 ranks measures time sharing, not scaling: read the bytes and the overlap, and
the model in docs/distributed.md for larger jobs. Every rank runs single-threaded BLAS
(``OPENBLAS_NUM_THREADS=1``), the 1-rank baseline too, so the comparison is per core.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

WORKER = r'''
import json, os, sys, time
sys.path.insert(0, os.path.join(sys.argv[1], "bench"))
import numpy as np
import ember
import ember.distributed as dist
import training

dist.init_process_group("mpi", timeout=120)
rank, world = dist.get_rank(), dist.get_world_size()
steps = int(sys.argv[2])
ember.manual_seed(0)
model, _, loss_fn = training.build(ember, "gpt")
ddp = dist.DistributedDataParallel(model)
opt = ember.optim.AdamW(ddp.parameters(), lr=1e-3)
rng = np.random.default_rng(rank)
x = rng.integers(0, training.V, (16, training.T + 1))
idx, tgt = ember.from_numpy(x[:, :-1]), ember.from_numpy(x[:, 1:])

def step():
    opt.zero_grad()
    out = ddp(idx)
    loss = ember.nn.functional.cross_entropy(out.reshape(-1, out.shape[-1]), tgt.reshape(-1))
    loss.backward()
    opt.step()

for _ in range(3):
    step()
times, overlaps, spans = [], [], []
for _ in range(steps):
    dist.barrier()
    start = time.perf_counter()
    step()
    times.append(time.perf_counter() - start)
    overlaps.append(ddp.stats["overlap"])
    spans.append(ddp.stats["allreduce_time"])
mine = ember.tensor(np.array(times))
gathered = [ember.zeros(len(times), dtype=ember.float64) for _ in range(world)]
dist.all_gather(gathered, mine)
if rank == 0:
    slowest = np.max(np.stack([g.numpy() for g in gathered]), axis=0)  # a step ends on the last rank
    print("RESULT " + json.dumps({
        "world": world, "step_s": float(np.median(slowest)),
        "bytes": ddp.stats["bytes_per_step"], "buckets": ddp.stats["buckets"],
        "allreduce_s": float(np.median(spans)), "overlap": float(np.median(overlaps)),
        "samples_per_s": 16 * world / float(np.median(slowest))}))
'''


def run(world: int, steps: int) -> dict:
    from ember.distributed.launch import build_command
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(WORKER)
        path = f.name
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", EMBER_NUM_THREADS="1")
    try:
        command = build_command(world, path, [ROOT, str(steps)], cores=os.cpu_count())
        out = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600)
    finally:
        os.unlink(path)
    for line in out.stdout.splitlines():
        if line.startswith("RESULT "):
            return json.loads(line[7:])
    raise RuntimeError(f"{world} ranks failed:\n{out.stdout}\n{out.stderr}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ranks", type=int, nargs="+", default=[1, 2, 4])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--steps", type=int, default=10)
    args = parser.parse_args()
    sys.path.insert(0, ROOT)
    results: dict[int, list] = {n: [] for n in args.ranks}
    for _ in range(args.rounds):
        for n in args.ranks:
            results[n].append(run(n, args.steps))
    print(f"load average {os.getloadavg()[0]:.1f}; gpt step, batch 16 per rank, "
          f"DDP, medians of {args.rounds} rounds")
    print(f"{'ranks':>5} {'step ms':>9} {'samples/s':>10} {'vs 1 rank':>9} {'MB/step':>8} "
          f"{'buckets':>7} {'allreduce ms':>12} {'overlap':>7}")
    base = None
    for n in args.ranks:
        med = {k: statistics.median(r[k] for r in results[n])
               for k in ("step_s", "samples_per_s", "allreduce_s", "overlap")}
        base = base or med["samples_per_s"]
        r0 = results[n][0]
        print(f"{n:>5} {med['step_s'] * 1e3:>9.2f} {med['samples_per_s']:>10.0f} "
              f"{med['samples_per_s'] / base:>9.2f} {r0['bytes'] / 2 ** 20:>8.2f} "
              f"{r0['buckets']:>7} {med['allreduce_s'] * 1e3:>12.2f} {med['overlap']:>7.2f}")


if __name__ == "__main__":
    main()
