"""The NCCL process group (``ember.distributed.nccl``) where there is no GPU: the error
without CuPy, the dtype and reduce-op mapping, and — under mpiexec, with a stand-in
``nccl`` module and CUDA runtime (``fake_nccl``) whose calls read the buffers at the
addresses they are given and reduce them with MPI — every collective and DDP's gradient
all-reduce on ``fakegpu`` tensors, through the NCCL group's own code."""
from __future__ import annotations

import sys

import numpy as np
import pytest

import ember
import ember.distributed as dist
from ember.distributed import DistributedError, nccl

from .harness import check, needs_mpi, run_mpi


def test_nccl_without_cupy_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "cupy", None)  # import cupy raises ImportError
    with pytest.raises(DistributedError, match="backend 'nccl' needs CuPy with NCCL.*mpi"):
        dist.init_process_group("nccl")
    assert not dist.is_initialized()


def test_an_unknown_backend_names_nccl():
    with pytest.raises(DistributedError, match="'mpi', 'nccl'"):
        dist.init_process_group("gloo")


@pytest.mark.parametrize("dtype,op,expected", [
    ("float32", "sum", ("NCCL_FLOAT32", "NCCL_SUM", None)),
    ("float32", "avg", ("NCCL_FLOAT32", "NCCL_SUM", None)),   # a sum, divided after
    ("float64", "max", ("NCCL_FLOAT64", "NCCL_MAX", None)),
    ("float16", "min", ("NCCL_FLOAT16", "NCCL_MIN", None)),
    ("int64", "product", ("NCCL_INT64", "NCCL_PROD", None)),
    ("int32", "sum", ("NCCL_INT32", "NCCL_SUM", None)),
    ("int8", "sum", ("NCCL_INT8", "NCCL_SUM", None)),
    ("uint8", "max", ("NCCL_UINT8", "NCCL_MAX", None)),
    ("int16", "sum", ("NCCL_INT32", "NCCL_SUM", "int32")),    # NCCL has no int16
    ("bool", "sum", ("NCCL_UINT8", "NCCL_MAX", None)),        # logical or
    ("bool", "product", ("NCCL_UINT8", "NCCL_MIN", None)),    # logical and
])
def test_dtypes_and_reduce_ops_map_to_nccl(dtype, op, expected):
    assert nccl.reduction_spec(np.dtype(dtype), op) == expected


def test_bfloat16_and_bad_ops():
    if ember.bfloat16.np is not None:
        assert nccl.reduction_spec(ember.bfloat16.np, "sum")[0] == "NCCL_BFLOAT16"
    with pytest.raises(DistributedError, match="unknown reduce op 'mean'"):
        nccl.reduction_spec(np.float32, "mean")
    with pytest.raises(DistributedError, match="cannot reduce arrays of dtype complex64"):
        nccl.reduction_spec(np.complex64, "sum")


SCRIPT = r"""
import numpy as np
import ember, ember.nn as nn, ember.nn.functional as F
import ember.distributed as dist
from ember.distributed import DistributedDataParallel as DDP, DistributedError
import ember.distributed.nccl as ember_nccl
from tests.distributed import fake_nccl
from tests.fake_device import FAKE

ember_nccl.load_runtime = fake_nccl.FakeRuntime
group = dist.init_process_group("nccl", timeout=60)
rank, world = dist.get_rank(), dist.get_world_size()
assert dist.get_backend() == "nccl" and group.device == FAKE, group

def on(values, dtype=ember.float32):
    return ember.tensor(values, dtype=dtype).to(FAKE)

def used(name):  # NCCL calls made since the last check
    names = [c[0] for c in fake_nccl.calls]
    fake_nccl.calls.clear()
    assert name in names, (name, names)

r = float(rank + 1)
t = on([r, 2 * r]); dist.all_reduce(t); used("allReduce")
assert t.numpy().tolist() == [3.0, 6.0] and t.device == FAKE
t = on([r, -r], ember.float64); dist.all_reduce(t, op=dist.ReduceOp.AVG)
assert t.numpy().tolist() == [1.5, -1.5]
t = on([r, -r]); dist.all_reduce(t, op=dist.ReduceOp.MAX)
assert t.numpy().tolist() == [2.0, -1.0]
t = on([rank == 0, False, True], ember.bool); dist.all_reduce(t)
assert t.numpy().tolist() == [True, False, True]
t = on([rank == 0, True], ember.bool); dist.all_reduce(t, op=dist.ReduceOp.PRODUCT)
assert t.numpy().tolist() == [False, True]
t = on([300 * (rank + 1), -7], ember.int16); dist.all_reduce(t)
assert t.numpy().tolist() == [900, -14] and t.dtype is ember.int16
t = on([0.5 * r, 1.0], ember.float16); dist.all_reduce(t)
assert t.numpy().tolist() == [1.5, 2.0]
t = on([r, r]); dist.broadcast(t, src=1); used("bcast")
assert t.numpy().tolist() == [2.0, 2.0]
out = on(np.zeros((2, 2))); dist.all_gather_into_tensor(out, on([r, 10 * r]))
used("allGather"); assert out.numpy().tolist() == [[1, 10], [2, 20]]
outs = [on([0.0]), on([0.0])]; dist.all_gather(outs, on([r]))
assert [o.item() for o in outs] == [1.0, 2.0]
out = on([0.0, 0.0]); dist.reduce_scatter_tensor(out, on([r, 1, 2, 3 * r]))
used("reduceScatter"); assert out.numpy().tolist() == ([3, 2] if rank == 0 else [4, 9])
t = on([r, 1]); dist.reduce(t, dst=0, op=dist.ReduceOp.AVG); used("reduce")
assert t.numpy().tolist() == ([1.5, 1.0] if rank == 0 else [2.0, 1.0])
got = [on([0.0, 0.0]), on([0.0, 0.0])] if rank == 1 else None
dist.gather(on([r, -r]), got, dst=1); used("groupEnd")
assert rank == 0 or [g.numpy().tolist() for g in got] == [[1, -1], [2, -2]]
t = on([0.0]); dist.scatter(t, [on([5.0]), on([6.0])] if rank == 0 else None, src=0)
assert t.item() == [5.0, 6.0][rank]
out = on([0.0, 0.0]); dist.all_to_all_single(out, on([10 * r, 10 * r + 1]))
assert out.numpy().tolist() == [10 + rank, 20 + rank]
if rank == 0:
    dist.send(on([7.0, 8.0]), dst=1); used("send")
else:
    t = on([0.0, 0.0]); dist.recv(t, src=0); used("recv")
    assert t.numpy().tolist() == [7.0, 8.0]
dist.barrier(); used("allReduce")

# a tensor of another device is a clear error, raised before any rank waits
try:
    dist.all_reduce(ember.ones(2))
except DistributedError as e:
    assert "on fakegpu" in str(e) and "on cpu" in str(e) and ".to('fakegpu')" in str(e), e
else:
    raise AssertionError("a CPU tensor reached the NCCL group")

# DDP on the fake GPU: 5 SGD steps equal one process on the concatenated batch
def make(seed):
    ember.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 16), nn.Tanh(), nn.Linear(16, 3)).double().to(FAKE)

def batch(step, part=None):
    rs = np.random.RandomState(100 + step)
    x, y = rs.randn(8, 6), rs.randint(0, 3, 8)
    if part is not None:
        x, y = x[4 * part:4 * part + 4], y[4 * part:4 * part + 4]
    return ember.tensor(x).to(FAKE), ember.tensor(y).to(FAKE)

model = DDP(make(seed=rank), bucket_cap_mb=0.0005)
opt = ember.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
ref = make(seed=0)
ref_opt = ember.optim.SGD(ref.parameters(), lr=0.1, momentum=0.9)
fake_nccl.calls.clear()
for step in range(5):
    x, y = batch(step, rank)
    opt.zero_grad(); F.cross_entropy(model(x), y).backward(); opt.step()
    x, y = batch(step)
    ref_opt.zero_grad(); F.cross_entropy(ref(x), y).backward(); ref_opt.step()
reduced = [c for c in fake_nccl.calls if c[0] == "allReduce"]
assert len(reduced) >= 5 * model.stats["buckets"] and model.stats["buckets"] >= 2, reduced
for p, q in zip(model.module.parameters(), ref.parameters()):
    assert p.device == FAKE and p.grad.device == FAKE
    assert np.abs(p.detach().numpy() - q.detach().numpy()).max() < 1e-12
print("OK", rank)
"""


@needs_mpi
def test_collectives_and_ddp_through_the_nccl_group_under_mpiexec():
    out = check(run_mpi(SCRIPT, 2, timeout=120))
    assert "OK 0" in out and "OK 1" in out
