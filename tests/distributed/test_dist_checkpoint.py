"""Distributed checkpoints: a resumed run equals the uninterrupted one; the consolidated
file loads into a plain optimizer; an interrupted save is never taken as complete."""
import os
import subprocess
import sys

import numpy as np
import pytest

from .harness import ROOT, check, needs_mpi, run_mpi

SCRIPT = r"""
import sys
import numpy as np
import ember, ember.nn as nn, ember.nn.functional as F
import ember.distributed as dist
from ember.distributed import DistributedDataParallel as DDP, ZeroRedundancyOptimizer as ZeRO
from ember.distributed.checkpoint import save_checkpoint, load_checkpoint, is_complete
from mpi4py import MPI

dist.init_process_group("mpi", timeout=60)
rank, world = dist.get_rank(), dist.get_world_size()
comm = MPI.COMM_WORLD
root = sys.argv[1]
B, D = 4, 10

def make(seed):
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                         nn.Linear(16, 1)).double()

def batch(step):
    rs = np.random.RandomState(step)
    x, y = rs.randn(world * B, D), rs.randn(world * B, 1)
    return ember.tensor(x[rank * B:(rank + 1) * B]), ember.tensor(y[rank * B:(rank + 1) * B])

def flat(m):
    return np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])

def setup(kind, seed):
    if kind == "zero2":
        net = make(seed=0 if seed == 0 else seed + rank)
        return net, net, ZeRO(net.parameters(), ember.optim.Adam, stage=2, lr=0.01)
    net = make(seed=seed + rank)
    model = DDP(net)
    return net, model, ember.optim.Adam(model.parameters(), lr=0.01)

def train(model, opt, steps):
    for step in steps:
        x, y = batch(step)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()

for kind in ("zero2", "ddp"):
    net, model, opt = setup(kind, 0)
    train(model, opt, range(6))
    straight = flat(net)

    net, model, opt = setup(kind, 0)
    train(model, opt, range(3))
    path = f"{root}/{kind}"
    save_checkpoint(path, model, opt, extra={"step": 3})
    assert is_complete(path)
    net, model, opt = setup(kind, 100)       # other weights, no state: all from the file
    if kind == "zero2":                      # ZeRO-2 without DDP: different start weights
        assert not np.array_equal(flat(net), straight)
    extra = load_checkpoint(path, model, opt)
    assert extra == {"step": 3}, extra
    train(model, opt, range(3, 6))
    assert np.array_equal(flat(net), straight), (kind, np.abs(flat(net) - straight).max())
    assert len(set(comm.allgather(flat(net).tobytes()))) == 1
    if rank == 0:
        np.save(f"{root}/{kind}-straight.npy", straight)
print(f"rank {rank} ok")
"""


def _plain_continue(out_file, steps, world=2, B=4, D=10):
    """Load a consolidated file into a plain model and Adam; train on the full batch."""
    import ember
    import ember.nn as nn
    import ember.nn.functional as F
    state = ember.load(out_file)
    net = nn.Sequential(nn.Linear(D, 16), nn.Tanh(), nn.Linear(16, 16), nn.Tanh(),
                        nn.Linear(16, 1)).double()
    net.load_state_dict(state["model"])
    opt = ember.optim.Adam(net.parameters(), lr=0.01)
    opt.load_state_dict(state["optimizer"])
    for step in steps:
        rs = np.random.RandomState(step)
        x, y = rs.randn(world * B, D), rs.randn(world * B, 1)
        opt.zero_grad()
        F.mse_loss(net(ember.tensor(x)), ember.tensor(y)).backward()
        opt.step()
    return np.concatenate([p.detach().numpy().ravel() for p in net.parameters()]), state


@needs_mpi
def test_resume_and_consolidate(tmp_path):
    out = check(run_mpi(SCRIPT, 2, timeout=120, args=[str(tmp_path)]))
    assert "rank 0 ok" in out and "rank 1 ok" in out
    files = sorted(os.listdir(tmp_path / "zero2"))
    assert files == ["COMPLETE", "model.safetensors", "optimizer-rank00000-of-00002.safetensors",
                     "optimizer-rank00001-of-00002.safetensors"]
    assert sorted(os.listdir(tmp_path / "ddp")) == ["COMPLETE", "model.safetensors",
                                                    "optimizer.safetensors"]
    # consolidation, by the command line: a plain optimizer continues the run
    for kind in ("zero2", "ddp"):
        target = tmp_path / f"{kind}.safetensors"
        done = subprocess.run([sys.executable, "-m", "ember.distributed.checkpoint",
                               "consolidate", str(tmp_path / kind), str(target)],
                              capture_output=True, text=True, cwd=ROOT)
        assert done.returncode == 0, done.stderr
        params, state = _plain_continue(str(target), range(3, 6))
        assert state["extra"] == {"step": 3}
        assert sorted(state["optimizer"]["state"]) == list(range(6))
        straight = np.load(tmp_path / f"{kind}-straight.npy")
        assert np.abs(params - straight).max() < 1e-12


def test_an_interrupted_checkpoint_is_not_complete(tmp_path):
    import ember
    import ember.distributed as dist
    from ember.distributed.checkpoint import (DistributedCheckpointError, consolidate,
                                              is_complete, load_checkpoint, main,
                                              save_checkpoint)
    dist.init_process_group("single")
    try:
        net = ember.nn.Linear(3, 2)
        opt = dist.ZeroRedundancyOptimizer(net.parameters(), ember.optim.SGD, lr=0.1,
                                           momentum=0.9)
        net(ember.randn(4, 3)).sum().backward()
        opt.step()
        save_checkpoint(tmp_path / "c", net, opt, extra={"step": 1})
        assert is_complete(tmp_path / "c")
        os.unlink(tmp_path / "c" / "COMPLETE")   # as if a rank died before the end
        with pytest.raises(DistributedCheckpointError, match="COMPLETE marker is missing"):
            load_checkpoint(tmp_path / "c", net, opt)
        with pytest.raises(DistributedCheckpointError, match="not a complete"):
            consolidate(tmp_path / "c", tmp_path / "out.safetensors")
        assert main(["consolidate", str(tmp_path / "c"), str(tmp_path / "o")]) == 1
        assert main(["merge"]) == 2
        # saved again, then a plain optimizer is refused the shards
        save_checkpoint(tmp_path / "c", net, opt)
        with pytest.raises(DistributedCheckpointError, match="sharded"):
            load_checkpoint(tmp_path / "c", net, ember.optim.SGD(net.parameters(), lr=0.1))
        os.unlink(tmp_path / "c" / "optimizer-rank00000-of-00001.safetensors")
        with pytest.raises(DistributedCheckpointError, match="missing: optimizer-rank00000"):
            load_checkpoint(tmp_path / "c", net, opt)
    finally:
        dist.destroy_process_group()
