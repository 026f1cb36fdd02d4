"""ZeroRedundancyOptimizer (ZeRO stages 1 and 2): the same trajectory as the plain
optimizer on one process, each rank holding about 1/N of the optimizer state, and a
consolidated state dict that the plain optimizer loads."""
import json

import pytest

from .harness import check, needs_mpi, run_mpi

SCRIPT = r"""
import io, json
import numpy as np
import ember, ember.nn as nn, ember.nn.functional as F
import ember.distributed as dist
from ember.distributed import DistributedDataParallel as DDP, ZeroRedundancyOptimizer as ZeRO
from mpi4py import MPI

dist.init_process_group("mpi", timeout=60)
rank, world = dist.get_rank(), dist.get_world_size()
comm = MPI.COMM_WORLD
B, D = 4, 12

def make(seed):
    ember.manual_seed(seed)
    layers = []
    for _ in range(6):
        layers += [nn.Linear(D, D), nn.Tanh()]
    return nn.Sequential(*layers, nn.Linear(D, 1)).double()

def batch(step, n=None):
    rs = np.random.RandomState(step)
    x, y = rs.randn(world * B, D), rs.randn(world * B, 1)
    if n is not None:
        x, y = x[n * B:(n + 1) * B], y[n * B:(n + 1) * B]
    return ember.tensor(x), ember.tensor(y)

def flat(m):
    return np.concatenate([p.detach().numpy().ravel() for p in m.parameters()])

def state_bytes(opt):
    return sum(v.numpy().nbytes for s in opt.state.values() for v in s.values()
               if isinstance(v, ember.Tensor))

results = {}
for stage, opt_cls, kw, bucket_view in ((1, ember.optim.Adam, dict(lr=0.01), False),
                                        (2, ember.optim.Adam, dict(lr=0.01), True),
                                        (1, ember.optim.SGD, dict(lr=0.1, momentum=0.9), True),
                                        (2, ember.optim.SGD, dict(lr=0.1, momentum=0.9), False)):
    name = f"zero{stage}-{opt_cls.__name__}"
    if stage == 1:   # gradients averaged by DDP
        model = DDP(make(seed=rank))
        params = model.module
    else:            # gradients reduce-scattered by the optimizer
        model = params = make(seed=0)
    opt = ZeRO(model.parameters(), opt_cls, stage=stage, parameters_as_bucket_view=bucket_view,
               **kw)
    ref = make(seed=0)
    ref_opt = opt_cls(ref.parameters(), **kw)
    for step in range(10):
        x, y = batch(step, rank)
        opt.zero_grad()
        F.mse_loss(model(x), y).backward()
        opt.step()
        digests = comm.allgather(flat(params).tobytes())
        assert len(set(digests)) == 1, f"{name} step {step}: ranks differ"
        xa, ya = batch(step)
        ref_opt.zero_grad()
        F.mse_loss(ref(xa), ya).backward()
        ref_opt.step()
        if stage == 2:   # only this rank's shard of the gradients is kept
            for p in params.parameters():
                assert (p.grad is not None) == (opt.owner[id(p)] == rank)
    err = float(np.abs(flat(params) - flat(ref)).max())
    assert err < 1e-12, (name, err)
    mine = opt.optimizer_state_bytes()
    every = comm.allgather(mine)
    full = state_bytes(ref_opt)
    assert sum(every) == full, (every, full)
    assert max(every) <= 1.25 * full / world, (name, every, full)
    results[name] = {"max_err": err, "state_bytes_per_rank": every, "plain_state_bytes": full}

    # consolidation: rank 0 gets the whole state, which the plain optimizer loads
    opt.consolidate_state_dict(to=0)
    if rank == 0:
        sd = opt.state_dict()
        plain = opt_cls(ref.parameters(), **kw)
        plain.load_state_dict(sd)
        for p in ref.parameters():
            for key, value in ref_opt.state[p].items():
                # (equal to rounding: the averaged gradients were summed in another order)
                assert np.allclose(plain.state[p][key].numpy(), value.numpy(), rtol=1e-9,
                                   atol=1e-12), (name, key)
        buf = io.BytesIO(); ember.save(sd, buf); blob = buf.getvalue()
    else:
        try:
            opt.state_dict()
        except dist.DistributedError as e:
            assert "consolidate_state_dict" in str(e)
        else:
            raise AssertionError("state_dict on a rank without the consolidated state")
        blob = None
    # a fresh ZeRO optimizer loads the full state dict and continues identically
    blob = comm.bcast(blob, root=0)
    fresh = ZeRO(model.parameters(), opt_cls, stage=stage, **kw)
    fresh.load_state_dict(ember.load(io.BytesIO(blob)))
    for p in params.parameters():
        if opt.owner[id(p)] == rank:
            for key, value in opt.optim.state[p].items():
                assert np.array_equal(fresh.optim.state[p][key].numpy(), value.numpy())
        else:
            assert p not in fresh.optim.state

# Trainer(strategy="zero1" | "zero2") equals one process on the full batch
from ember.data import DataLoader, TensorDataset
from ember.distributed import DistributedSampler
rs = np.random.RandomState(0)
data = TensorDataset(ember.tensor(rs.randn(world * B * 4, D)),
                     ember.tensor(rs.randn(world * B * 4, 1)))

def fit(strategy):
    net = make(seed=0)
    loader = (DataLoader(data, batch_size=B, sampler=DistributedSampler(data, shuffle=False))
              if strategy else DataLoader(data, batch_size=B * world))
    opt = ember.optim.Adam(net.parameters(), lr=0.01)
    sched = ember.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    trainer = ember.train.Trainer(net, opt, F.mse_loss, train_loader=loader, max_epochs=2,
                                  scheduler=sched, progress_bar=False, strategy=strategy)
    trainer.fit()
    return net, trainer

ref, _ = fit(None)
for strategy in ("zero1", "zero2"):
    net, trainer = fit(strategy)
    assert isinstance(trainer.optimizer, ZeRO) and trainer.optimizer.stage == int(strategy[-1])
    assert trainer.optimizer.param_groups[0]["lr"] == 0.01 * 0.5 ** 4   # the scheduler reached it
    err = float(np.abs(flat(net) - flat(ref)).max())
    assert err < 1e-12, (strategy, err)
    results[f"trainer_{strategy}_err"] = err

if rank == 0:
    print("RESULTS " + json.dumps(results))
print(f"rank {rank} ok")
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_zero_equals_the_plain_optimizer(n):
    out = check(run_mpi(SCRIPT, n, timeout=120))
    for r in range(n):
        assert f"rank {r} ok" in out
    results = json.loads(next(l for l in out.splitlines() if l.startswith("RESULTS "))[8:])
    for name, r in results.items():
        if name.startswith("zero"):
            assert len(r["state_bytes_per_rank"]) == n
        print(name, r)
    assert results["trainer_zero1_err"] < 1e-12 and results["trainer_zero2_err"] < 1e-12


def test_zero_arguments_are_checked():
    import ember
    import ember.distributed as dist
    dist.init_process_group("single")
    try:
        w = ember.nn.Linear(2, 2)
        with pytest.raises(dist.DistributedError, match="stage must be 1 or 2, got 3"):
            dist.ZeroRedundancyOptimizer(w.parameters(), ember.optim.SGD, stage=3, lr=0.1)
        with pytest.raises(dist.DistributedError, match="optimizer_class must be"):
            dist.ZeroRedundancyOptimizer(w.parameters(), object, lr=0.1)
        opt = dist.ZeroRedundancyOptimizer(w.parameters(), ember.optim.SGD, lr=0.1)
        with pytest.raises(NotImplementedError, match="partition across ranks is fixed"):
            opt.add_param_group({"params": [ember.zeros(2, requires_grad=True)]})
        with pytest.raises(dist.DistributedError, match="call consolidate_state_dict"):
            opt.state_dict()
        assert opt.param_groups[0]["momentum"] == 0  # the algorithm's defaults show
    finally:
        dist.destroy_process_group()
