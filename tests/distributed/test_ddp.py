"""DistributedDataParallel and DistributedSampler: N ranks under mpiexec train exactly
as one process on the concatenated batch. One job per world size runs every check."""

import numpy as np
import pytest

from .harness import check, needs_mpi, run_mpi

SCRIPT = r"""
import hashlib, json, math
import numpy as np
import ember, ember.nn as nn, ember.nn.functional as F
import ember.distributed as dist
from ember.distributed import DistributedDataParallel as DDP, DistributedError
from mpi4py import MPI

dist.init_process_group("mpi", timeout=60)
rank, world = dist.get_rank(), dist.get_world_size()
comm = MPI.COMM_WORLD
B, D, H, C = 4, 6, 16, 3

def make(dtype, seed):
    ember.manual_seed(seed)
    net = nn.Sequential(nn.Linear(D, H), nn.Tanh(), nn.Linear(H, H), nn.Tanh(),
                        nn.Linear(H, C))
    return net.to(dtype)

def batch(step, dtype, n=None):
    rs = np.random.RandomState(1000 + step)
    x = rs.randn(world * B, D)
    y = rs.randint(0, C, world * B)
    if n is None:
        return ember.tensor(x).to(dtype), ember.tensor(y)
    return ember.tensor(x[n * B:(n + 1) * B]).to(dtype), ember.tensor(y[n * B:(n + 1) * B])

def flat(module):
    return np.concatenate([p.detach().numpy().ravel() for p in module.parameters()])

def same_everywhere(module, what):
    digest = hashlib.sha256(flat(module).tobytes()).hexdigest()
    digests = comm.allgather(digest)
    assert len(set(digests)) == 1, f"{what}: ranks differ: {digests}"

results = {}

# 1. 20 steps equal one process on the whole batch (float64 SGD+momentum, float32 Adam)
for dtype, opt_cls, kw, tol in ((ember.float64, ember.optim.SGD, dict(lr=0.1, momentum=0.9), 1e-12),
                                (ember.float32, ember.optim.SGD, dict(lr=0.05), 1e-6),
                                (ember.float64, ember.optim.Adam, dict(lr=0.01), 1e-12)):
    model = DDP(make(dtype, seed=rank), bucket_cap_mb=0.0005)  # rank 0's weights win
    opt = opt_cls(model.parameters(), **kw)
    ref = make(dtype, seed=0) if rank == 0 else None
    ref_opt = opt_cls(ref.parameters(), **kw) if rank == 0 else None
    same_everywhere(model, "after wrap")
    for step in range(20):
        x, y = batch(step, dtype, rank)
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        opt.step()
        same_everywhere(model, f"step {step}")
        if rank == 0:
            xa, ya = batch(step, dtype)
            ref_opt.zero_grad()
            F.cross_entropy(ref(xa), ya).backward()
            ref_opt.step()
    if rank == 0:
        err = float(np.abs(flat(model.module) - flat(ref)).max())
        assert err <= tol, (dtype, opt_cls.__name__, err)
        results[f"{dtype.name}-{opt_cls.__name__}"] = err
    stats = dict(model.stats)

# the overlap: with small buckets, all-reduces start before the backward pass ends
assert stats["buckets"] >= 3, stats
assert stats["started_during_backward"] >= stats["buckets"] - 1, stats
assert stats["bytes_per_step"] == 8 * sum(p.numel() for p in model.parameters()), stats
assert stats["steps"] == 20
results["stats"] = {k: v for k, v in stats.items() if k != "bucket_bytes"}

# 2. no_sync: two micro-batches, gradients summed, equal the large batch
model = DDP(make(ember.float64, seed=rank))
ref = make(ember.float64, seed=0)
x0, y0 = batch(0, ember.float64, rank)
x1, y1 = batch(1, ember.float64, rank)
with model.no_sync():
    (F.cross_entropy(model(x0), y0) / 2).backward()
local = [p.grad.numpy().copy() for p in model.parameters()]
model(x1).sum()  # a forward outside backward changes nothing
(F.cross_entropy(model(x1), y1) / 2).backward()
xa0, ya0 = batch(0, ember.float64)
xa1, ya1 = batch(1, ember.float64)
loss = (F.cross_entropy(ref(xa0), ya0) + F.cross_entropy(ref(xa1), ya1)) / 2
loss.backward()
for p, q in zip(model.parameters(), ref.parameters()):
    assert np.abs(p.grad.numpy() - q.grad.numpy()).max() < 1e-13
# inside no_sync the gradients were this rank's own (they differ between ranks)
grads = comm.allgather(float(local[0].sum()))
assert len(set(grads)) == world, grads

# 3. gradient_as_bucket_view: the same gradients, and .grad views the bucket
model = DDP(make(ember.float64, seed=rank), gradient_as_bucket_view=True)
ref = make(ember.float64, seed=0)
for step in range(2):          # the second backward accumulates onto the first
    x, y = batch(step, ember.float64, rank)
    F.cross_entropy(model(x), y).backward()
    xa, ya = batch(step, ember.float64)
    F.cross_entropy(ref(xa), ya).backward()
for p, q in zip(model.parameters(), ref.parameters()):
    assert p.grad.numpy().base is not None
    assert np.abs(p.grad.numpy() - q.grad.numpy()).max() < 1e-13

# 4. find_unused_parameters: a branch used only on rank 0; one never used
class Branchy(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(D, C).double()
        self.b = nn.Linear(D, C).double()
        self.never = nn.Linear(D, C).double()
    def forward(self, x, use_b):
        return self.a(x) + self.b(x) if use_b else self.a(x)

ember.manual_seed(3)
model = DDP(Branchy(), find_unused_parameters=True)
x, y = batch(0, ember.float64, rank)
F.cross_entropy(model(x, rank == 0), y).backward()
assert model.module.never.weight.grad is None
gb = model.module.b.weight.grad.numpy()
assert np.all(np.isfinite(gb)) and np.abs(gb).max() > 0
assert len(set(comm.allgather(gb.tobytes()))) == 1
# without the flag, an unused parameter is an error that names it
model = DDP(Branchy())
try:
    F.cross_entropy(model(x, True), y).backward()
except DistributedError as e:
    assert "'never.weight'" in str(e) and "find_unused_parameters=True" in str(e), e
else:
    raise AssertionError("an unused parameter was not reported")

# 5. buffers follow rank 0; the state dict keeps the module. prefix
net = nn.Sequential(nn.Linear(D, H), nn.BatchNorm1d(H)).double()
model = DDP(net)
model(batch(0, ember.float64, rank)[0])
model(batch(1, ember.float64, rank)[0])
local = net[1].running_mean.numpy().copy()   # updated by this rank's batch
model.eval()
model(batch(2, ember.float64, rank)[0])       # the forward starts with rank 0's buffers
mean = net[1].running_mean.numpy()
assert len(set(comm.allgather(mean.tobytes()))) == 1
assert len(set(comm.allgather(local.tobytes()))) == world
assert sorted(model.state_dict()) == sorted("module." + k for k in net.state_dict())

# 6. DistributedSampler shards: disjoint, padded, the same permutation everywhere
from ember.distributed import DistributedSampler
for n, drop in ((10, False), (10, True), (3, False)):
    s = DistributedSampler(list(range(n)), shuffle=True, seed=7, drop_last=drop)
    s.set_epoch(2)
    mine = list(s)
    every = comm.allgather(mine)
    assert all(len(m) == len(s) for m in every)
    union = [i for m in every for i in m]
    if drop:
        assert len(set(union)) == len(union) == world * (n // world)
    else:
        assert set(union) == set(range(n)) and len(union) == world * math.ceil(n / world)

# 7. Trainer(strategy="ddp") with gradient accumulation equals one process on the full
# batch (the DistributedSampler's shards of batch k together are batch k of the whole)
from ember.data import DataLoader, TensorDataset
rs = np.random.RandomState(0)
data = TensorDataset(ember.tensor(rs.randn(world * B * 8, D)),
                     ember.tensor(rs.randint(0, C, world * B * 8)))

def fit(strategy):
    net = make(ember.float64, seed=0)
    if strategy:
        loader = DataLoader(data, batch_size=B,
                            sampler=DistributedSampler(data, shuffle=False))
    else:
        loader = DataLoader(data, batch_size=B * world)
    trainer = ember.train.Trainer(net, ember.optim.Adam(net.parameters(), lr=0.01),
                                  F.cross_entropy, train_loader=loader, max_epochs=2,
                                  grad_accumulation_steps=2, progress_bar=False,
                                  strategy=strategy)
    trainer.fit()
    return net, trainer

net, trainer = fit("ddp")
assert isinstance(trainer.model, DDP) and trainer.global_step == 8
assert trainer.model.stats["steps"] == 8   # one all-reduce per step, not per batch
assert len(set(comm.allgather(flat(net).tobytes()))) == 1
if rank == 0:
    ref, _ = fit(None)
    err = float(np.abs(flat(net) - flat(ref)).max())
    assert err < 1e-12, err
    results["trainer_ddp_err"] = err

if rank == 0:
    print("RESULTS " + json.dumps(results))
print(f"rank {rank} ok")
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_ddp_equals_one_process(n):
    out = check(run_mpi(SCRIPT, n, timeout=120))
    for r in range(n):
        assert f"rank {r} ok" in out
    line = next(l for l in out.splitlines() if l.startswith("RESULTS "))
    print(line)


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False),
                                                   (2, 4, False), (7, 2, True), (0, 2, False)])
def test_sampler_assignment_equals_pytorch_without_shuffle(n, replicas, drop_last):
    torch_data = pytest.importorskip("torch.utils.data")
    from ember.distributed import DistributedSampler
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = torch_data.DistributedSampler(range(n), replicas, rank, shuffle=False,
                                               drop_last=drop_last)
        assert list(ours) == list(theirs)
        assert len(ours) == len(theirs)


def test_sampler_shuffle_is_seeded_by_seed_and_epoch():
    from ember.distributed import DistributedSampler
    shards = [DistributedSampler(range(11), 3, r, seed=5) for r in range(3)]
    first = [list(s) for s in shards]
    union = [i for shard in first for i in shard]
    assert len(union) == 12 and set(union) == set(range(11))
    assert first == [list(DistributedSampler(range(11), 3, r, seed=5)) for r in range(3)]
    for s in shards:
        s.set_epoch(1)
    second = [list(s) for s in shards]
    assert second != first and set(i for sh in second for i in sh) == set(range(11))
    assert [list(DistributedSampler(range(11), 3, r, seed=6)) for r in range(3)] != first


def test_sampler_rejects_bad_arguments():
    from ember.data.errors import DataError
    from ember.distributed import DistributedSampler
    with pytest.raises(DataError, match=r"Invalid rank 3, rank should be in the interval \[0, 2\]"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
    with pytest.raises(DataError, match="num_replicas must be at least 1"):
        DistributedSampler(range(4), num_replicas=0, rank=0)
    with pytest.raises(DataError, match="needs a map-style dataset"):
        DistributedSampler(iter(range(4)), num_replicas=1, rank=0)


def test_ddp_in_a_world_of_one_process_is_plain_training():
    import ember
    import ember.distributed as dist
    import ember.nn.functional as F
    dist.init_process_group("single")
    try:
        ember.manual_seed(0)
        net = ember.nn.Linear(3, 2).double()
        ember.manual_seed(0)
        ref = ember.nn.Linear(3, 2).double()
        model = dist.DistributedDataParallel(net)
        x = ember.randn(5, 3).double()
        F.mse_loss(model(x), x[:, :2]).backward()
        F.mse_loss(ref(x), x[:, :2]).backward()
        assert np.array_equal(net.weight.grad.numpy(), ref.weight.grad.numpy())
        assert model.stats["steps"] == 1 and model.stats["bytes_per_step"] == 8 * 8
        with pytest.raises(dist.DistributedError, match="bucket_cap_mb must be positive"):
            dist.DistributedDataParallel(net, bucket_cap_mb=0)
    finally:
        dist.destroy_process_group()
