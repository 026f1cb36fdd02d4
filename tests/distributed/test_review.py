"""Edge cases found in review, checked against the unsplit model or one process: a
pipeline stage without parameters and batches that do not divide into the micro-batches;
DDP with tied, twice-used and mixed-dtype parameters, retain_graph and a changing unused
set; ZeRO with parameter groups and a step where some parameters have no gradient; the
tensor-parallel GPT at other sizes; a user's mistakes named by an ember error; and
a rank that skips new_group or init_process_group named instead of hanging the others."""
import pytest

from .harness import check, needs_mpi, run_mpi
from .test_faults import TIMEOUT, run_fault

SCRIPT = r"""
import numpy as np
import ember, ember.nn as nn, ember.nn.functional as F
import ember.distributed as dist
from ember.distributed import DistributedDataParallel as DDP, Pipeline
from ember.distributed import ZeroRedundancyOptimizer, GPT, parallelize_gpt, parallel_slices

dist.init_process_group("mpi", timeout=60)
R, N = dist.get_rank(), dist.get_world_size()
F64 = ember.float64


def close(name, got, want, tol=1e-10):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"rank {R}: {name}: shape {got.shape} != {want.shape}"
    err = np.max(np.abs(got - want), initial=0.0)
    assert err <= tol, f"rank {R}: {name}: max error {err:.3g}"


def shard(k, rows=3, cols=4):
    return ember.tensor(np.random.RandomState(k).randn(rows, cols))


# 1. Pipeline: a first stage without parameters; batches of 10 in 4 micro-batches
def mlp(dtype):
    ember.manual_seed(0)
    return nn.Sequential(nn.Tanh(), nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Tanh(),
                         nn.Linear(8, 3)).to(dtype)

rest = 5 // (N - 1)
balance = [1] + [rest + (s < 5 - rest * (N - 1)) for s in range(N - 1)]
for dtype, tol in ((F64, 1e-10), (ember.float32, 1e-5)):
    for schedule in ("gpipe", "1f1b"):
        for batch, chunks in ((10, 4), (8, 1), (5, 5)):
            x = ember.tensor(np.random.RandomState(0).randn(batch, 4)).to(dtype)
            y = ember.tensor(np.random.RandomState(1).randint(0, 3, batch))
            ref = mlp(dtype)
            ref_loss = F.cross_entropy(ref(x), y)
            ref_loss.backward()
            want = dict(ref.named_parameters())
            pipe = Pipeline(mlp(dtype), chunks=chunks, loss_fn=F.cross_entropy,
                            schedule=schedule, balance=balance)
            loss = pipe.step(x if pipe.is_first else None, y if pipe.is_last else None)
            tag = f"pipeline {dtype.name} {schedule} {batch} rows in {chunks}"
            close(tag + " loss", loss, float(ref_loss), tol)
            for name, p in pipe.module.named_parameters():
                index, rest_ = name.split(".", 1)
                full = f"{pipe.layers[0] + int(index)}.{rest_}"
                close(f"{tag} grad {full}", p.grad.numpy(), want[full].grad.numpy(), tol)

# 2. DDP: tied, twice-used and mixed-dtype parameters, retain_graph, a changing unused set
class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb, self.out = nn.Embedding(10, 4), nn.Linear(4, 10, bias=False)
        self.out.weight = self.emb.weight
        self.mid = nn.Linear(4, 4)
        self.late = nn.Linear(4, 4).float()
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)

    def forward(self, idx, k):
        h = self.mid(self.mid(self.emb(idx)))                    # mid used twice
        h = self.late(h.float()).double()                        # a float32 parameter
        h = (self.a if k % 2 else self.b)(h)                     # unused set changes
        return self.out(h)

def tied():
    ember.manual_seed(0)
    m = Tied().double()
    m.late.float()
    return m

model, ref = tied(), tied()
ddp = DDP(model, find_unused_parameters=True, bucket_cap_mb=0.0001)
opt = ember.optim.SGD(ddp.parameters(), lr=0.1, momentum=0.9)
ref_opt = ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
tokens = lambda step, r: ember.tensor(np.random.RandomState(10 * step + r).randint(0, 10, 3))
for step in range(4):
    opt.zero_grad()
    loss = ddp(tokens(step, R), step + R * (step >= 2)).pow(2).mean()
    loss.backward(retain_graph=True)
    loss.backward()                                              # both backward passes count
    opt.step()
    ref_opt.zero_grad()
    for r in range(N):
        ref_loss = ref(tokens(step, r), step + r * (step >= 2)).pow(2).mean() / N
        ref_loss.backward(retain_graph=True)
        ref_loss.backward()
    ref_opt.step()
for (name, p), q in zip(model.named_parameters(), ref.parameters()):
    # the float32 layer rounds every gradient on the path through it
    close(f"ddp {name}", p.detach().numpy(), q.detach().numpy(), 1e-6)
assert model.out.weight is model.emb.weight

# 3. ZeRO: two groups with their own lr, momentum, a step where a layer gets no gradient
def net():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 8), nn.Linear(8, 2)).double()

def groups(m):
    return [{"params": list(m[0].parameters()), "lr": 0.1},
            {"params": list(m[2].parameters()) + list(m[3].parameters()), "lr": 0.01}]

for stage in (1, 2):
    m, r = net(), net()
    zero = ZeroRedundancyOptimizer(groups(m), ember.optim.SGD, stage=stage, lr=0.05,
                                   momentum=0.9)
    plain = ember.optim.SGD(groups(r), lr=0.05, momentum=0.9)
    for step in range(4):
        zero.zero_grad(set_to_none=step % 2 == 0)
        plain.zero_grad()
        x = shard(step, 6)
        run = (lambda k, x: k[2](k[1](k[0](x)))) if step == 2 else (lambda k, x: k(x))
        run(m, x).sum().backward()
        run(r, x).sum().backward()
        zero.step()
        plain.step()
    for p, q in zip(m.parameters(), r.parameters()):
        close(f"zero-{stage}", p.detach().numpy(), q.detach().numpy(), 1e-12)

# 4. the tensor-parallel GPT at other sizes: 3 layers, d_model 96, 6 heads
ember.manual_seed(0)
gpt = GPT(vocab_size=96, context=16, d_model=96, n_heads=6, n_layers=3, dtype=F64)
tp = parallelize_gpt(gpt)
idx = ember.tensor(np.random.RandomState(0).randint(0, 96, (2, 10)))
out, ref_out = tp(idx), gpt(idx)
close("tp gpt logits", out.detach().numpy(), ref_out.detach().numpy())
out.pow(2).mean().backward()
ref_out.pow(2).mean().backward()
full = dict(gpt.named_parameters())
for name, (p, where) in {n: (p, parallel_slices(tp)[n]) for n, p in tp.named_parameters()}.items():
    want = full[name].grad
    if where is not None:
        want = want.index_select(where[0], ember.tensor(where[1]))
    close(f"tp gpt grad {name}", p.grad.numpy(), want.numpy(), 1e-9)

# 5. a user's mistakes are ember errors naming what was wrong (no collective runs)
for what, call, says in (
        ("group a list", lambda: dist.all_reduce(ember.ones(2), group=[0, 1]), "ProcessGroup"),
        ("group an int", lambda: dist.barrier(group=3), "ProcessGroup"),
        ("functional group", lambda: dist.nn.functional.all_reduce(ember.ones(2), group="w"),
         "ProcessGroup"),
        ("ddp group", lambda: DDP(nn.Linear(2, 2), process_group=0), "ProcessGroup"),
        ("negative tag", lambda: dist.isend(ember.ones(2), (R + 1) % N, tag=-5), "tag"),
        ("huge tag", lambda: dist.irecv(ember.ones(2), (R + 1) % N, tag=1 << 40), "tag"),
        ("new_group int", lambda: dist.new_group(3), "ranks")):
    try:
        call()
    except dist.DistributedError as e:
        assert says in str(e), (what, str(e))
    else:
        raise AssertionError(f"{what}: no error")
dist.barrier()
print(f"rank {R} passed", flush=True)
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 3])
def test_review_edge_cases(n):
    out = check(run_mpi(SCRIPT, n, timeout=300))
    assert all(f"rank {r} passed" in out for r in range(n)), out


@needs_mpi
def test_a_rank_skipping_new_group_is_named():
    out = run_fault("""
if R != 1:
    dist.new_group([0, 2])       # rank 1 never calls it
    print("never reached", R)
time.sleep(10_000)
""")
    assert "never reached" not in out, out
    assert f"new_group #2 of ranks [0, 1, 2] timed out after {TIMEOUT} s" in out, out
    assert "rank 1" in out, out


@needs_mpi
def test_a_rank_stuck_before_init_process_group_is_not_waited_for_forever():
    import time
    from .harness import leftover_processes
    start = time.monotonic()
    result = run_mpi("""
import time
import ember.distributed as dist
from mpi4py import MPI          # MPI is up on every rank (MPI_Init waits for them all)
if MPI.COMM_WORLD.Get_rank() == 1:
    time.sleep(10_000)
dist.init_process_group("mpi")
print("never reached", flush=True)
""", 2, timeout=TIMEOUT + 40, env={"EMBER_DIST_TIMEOUT": str(TIMEOUT)})
    out = result.stdout + result.stderr
    assert "[harness] killed" not in out and result.returncode != 0, out
    assert time.monotonic() - start < TIMEOUT + 10, out
    assert "init_process_group timed out" in out, out
    assert "never reached" not in out
    assert leftover_processes(result) == [], out
