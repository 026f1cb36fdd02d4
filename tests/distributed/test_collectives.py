"""Every collective against its NumPy definition, on every rank, in every dtype, on 2
and 4 ranks: one mpiexec launch per world size runs all the checks (a launch costs
seconds), records each failure, and prints a summary line per rank that the test reads.
Plus the single-process world (no mpiexec) and the argument errors."""
import re

import numpy as np
import pytest

import ember
import ember.distributed as dist

from .harness import check, needs_mpi, run_mpi

SCRIPT = r'''
import sys
import numpy as np
import ember
import ember.distributed as dist
from ember.distributed import DistributedError, ReduceOp

dist.init_process_group("mpi", timeout=30)
R, N = dist.get_rank(), dist.get_world_size()
DTYPES = ["float16", "bfloat16", "float32", "float64", "int32", "int64", "bool"]
FLOATS = DTYPES[:4]
TOL = {"float16": 2e-3, "bfloat16": 2e-2, "float32": 1e-6, "float64": 1e-12}
checks, failures = [0], []


NP = {name: np.dtype(getattr(ember, name).np) for name in DTYPES}


def data(rank, shape, dtype, salt=0):
    """Rank ``rank``'s input: every rank can compute every other rank's."""
    rng = np.random.default_rng(1000 * salt + rank)
    if dtype == "bool":
        return rng.random(shape) < 0.5
    if dtype.startswith("int"):
        return rng.integers(-3, 4, shape).astype(NP[dtype])
    return rng.uniform(0.5, 1.5, shape).astype(np.float32).astype(NP[dtype])


def T(array):
    return ember.tensor(np.array(array))


def same(what, got, want):
    checks[0] += 1
    got = got.numpy() if isinstance(got, ember.Tensor) else np.asarray(got)
    want = np.asarray(want)
    ok = got.shape == want.shape and got.dtype == want.dtype
    if ok:
        if got.dtype.name in TOL:
            ok = np.allclose(got.astype(np.float64), want.astype(np.float64),
                             rtol=TOL[got.dtype.name], atol=0)
        else:
            ok = np.array_equal(got, want)
    if not ok:
        failures.append(f"{what}: got {got!r} want {want!r}")


def raises(what, fn, *needles):
    checks[0] += 1
    try:
        fn()
    except DistributedError as e:
        if not all(n in str(e) for n in needles):
            failures.append(f"{what}: message {str(e)!r} lacks {needles}")
        return
    except Exception as e:
        failures.append(f"{what}: raised {type(e).__name__}: {e}")
        return
    failures.append(f"{what}: did not raise")


def reference(arrays, op, dtype):
    """The NumPy definition of a reduction over ranks (halves computed in float32)."""
    stack = np.stack(arrays)
    if dtype == "bool":
        fn = {"sum": np.any, "max": np.any, "min": np.all, "product": np.all}[op]
        return fn(stack, axis=0)
    wide = stack.astype(np.float32) if dtype in ("float16", "bfloat16") else stack
    out = {"sum": lambda s: s.sum(0), "avg": lambda s: s.sum(0) / N,
           "max": lambda s: s.max(0), "min": lambda s: s.min(0),
           "product": lambda s: s.prod(0)}[op](wide)
    return out.astype(NP[dtype])


def ops_for(dtype):
    return ["sum", "max", "min", "product"] + (["avg"] if dtype in FLOATS else [])


SHAPE = (3, 2)
for dt in DTYPES:
    mine = data(R, SHAPE, dt)
    every = [data(r, SHAPE, dt) for r in range(N)]
    # all_reduce, every op
    for op in ops_for(dt):
        t = T(mine)
        version = t._version[0]
        dist.all_reduce(t, op=op)
        same(f"all_reduce {dt} {op}", t, reference(every, op, dt))
        checks[0] += 1
        if t._version[0] == version:
            failures.append(f"all_reduce {dt}: version not bumped")
    if dt not in FLOATS:
        raises(f"all_reduce avg {dt}", lambda: dist.all_reduce(T(mine), op=ReduceOp.AVG),
               "AVG", dt)
    # 0-d
    t = T(mine[0, 0])
    dist.all_reduce(t, op="max")
    same(f"all_reduce 0-d {dt}", t, reference([e[0, 0] for e in every], "max", dt))
    # broadcast from every root
    for src in range(N):
        t = T(mine)
        dist.broadcast(t, src=src)
        same(f"broadcast {dt} src {src}", t, every[src])
    # all_gather, all_gather_into_tensor
    out = [T(np.zeros(SHAPE, NP[dt])) for _ in range(N)]
    dist.all_gather(out, T(mine))
    for r in range(N):
        same(f"all_gather {dt} [{r}]", out[r], every[r])
    big = T(np.zeros((N * SHAPE[0], SHAPE[1]), NP[dt]))
    dist.all_gather_into_tensor(big, T(mine))
    same(f"all_gather_into_tensor {dt}", big, np.concatenate(every))
    flat = T(np.zeros(N, NP[dt]))
    dist.all_gather_into_tensor(flat, T(mine[0, 0]))
    same(f"all_gather_into_tensor 0-d {dt}", flat, np.array([e[0, 0] for e in every]))
    # reduce_scatter (list) and reduce_scatter_tensor
    for op in ("sum", "max") + (("avg",) if dt in FLOATS else ()):
        blocks = [data(R, SHAPE, dt, salt=10 + j) for j in range(N)]
        out = T(np.zeros(SHAPE, NP[dt]))
        dist.reduce_scatter(out, [T(b) for b in blocks], op=op)
        want = reference([data(r, SHAPE, dt, salt=10 + R) for r in range(N)], op, dt)
        same(f"reduce_scatter {dt} {op}", out, want)
        full = data(R, (2 * N, 3), dt, salt=20)
        out = T(np.zeros((2, 3), NP[dt]))
        dist.reduce_scatter_tensor(out, T(full), op=op)
        want = reference([data(r, (2 * N, 3), dt, salt=20) for r in range(N)], op, dt)
        same(f"reduce_scatter_tensor {dt} {op}", out, want[2 * R:2 * R + 2])
    # reduce to every root (the others keep their input)
    for dst in range(N):
        t = T(mine)
        dist.reduce(t, dst=dst, op="sum")
        same(f"reduce {dt} dst {dst}", t, reference(every, "sum", dt) if R == dst else mine)
    # gather / scatter
    for root in range(N):
        lst = [T(np.zeros(SHAPE, NP[dt])) for _ in range(N)] if R == root else None
        dist.gather(T(mine), lst, dst=root)
        if R == root:
            for r in range(N):
                same(f"gather {dt} root {root} [{r}]", lst[r], every[r])
        parts = [data(root, SHAPE, dt, salt=30 + j) for j in range(N)]
        t = T(np.zeros(SHAPE, NP[dt]))
        dist.scatter(t, [T(p) for p in parts] if R == root else None, src=root)
        same(f"scatter {dt} root {root}", t, data(root, SHAPE, dt, salt=30 + R))
    # all_to_all and all_to_all_single: rank i's block j -> rank j's block i
    blocks = [data(R, SHAPE, dt, salt=40 + j) for j in range(N)]
    out = [T(np.zeros(SHAPE, NP[dt])) for _ in range(N)]
    dist.all_to_all(out, [T(b) for b in blocks])
    for i in range(N):
        same(f"all_to_all {dt} [{i}]", out[i], data(i, SHAPE, dt, salt=40 + R))
    out = T(np.zeros((N * 2, 3), NP[dt]))
    dist.all_to_all_single(out, T(np.concatenate([data(R, (2, 3), dt, salt=50 + j)
                                                  for j in range(N)])))
    same(f"all_to_all_single {dt}", out,
         np.concatenate([data(i, (2, 3), dt, salt=50 + R) for i in range(N)]))
    # send/recv around the ring; isend/irecv the other way
    right, left = (R + 1) % N, (R - 1) % N
    got = T(np.zeros(SHAPE, NP[dt]))
    if R % 2 == 0:
        dist.send(T(mine), right)
        src = dist.recv(got, left)
    else:
        src = dist.recv(got, left)
        dist.send(T(mine), right)
    same(f"send/recv {dt}", got, every[left])
    same(f"recv returns src {dt}", np.array(src), np.array(left))
    got = T(np.zeros(SHAPE, NP[dt]))
    works = [dist.irecv(got, right, tag=7), dist.isend(T(mine), left, tag=7)]
    for w in works:
        w.wait()
    same(f"isend/irecv {dt}", got, every[right])

# Async handles: several in flight at once, completed in reverse order.
ts = [T(data(R, (5,), "float64", salt=60 + k)) for k in range(3)]
works = [dist.all_reduce(t, op="sum", async_op=True) for t in ts]
works.append(dist.barrier(async_op=True))
for w in reversed(works):
    checks[0] += 1
    if w.wait() is not True or not w.is_completed():
        failures.append("async: wait() did not complete the work")
for k, t in enumerate(ts):
    same(f"async all_reduce {k}", t,
         reference([data(r, (5,), "float64", salt=60 + k) for r in range(N)], "sum",
                   "float64"))
big = T(np.zeros((N, 4)))
w = dist.all_gather_into_tensor(big, T(np.full(4, float(R))), async_op=True)
w.wait()
same("async all_gather_into_tensor", big, np.repeat(np.arange(N, dtype=np.float64), 4)
     .reshape(N, 4))

# Non-contiguous tensors: results land in the viewed storage.
base = T(np.zeros((4, 3)) + R)
view = base.t()
dist.all_reduce(view, op="sum")
same("all_reduce non-contiguous view", base, np.full((4, 3), float(sum(range(N)))))
base = T(np.zeros((4, 6)))
strided = base[:, ::2]
if R == 0:
    strided.copy_(T(np.arange(12.0).reshape(4, 3)))
dist.broadcast(strided, src=0)
same("broadcast non-contiguous", base[:, ::2], np.arange(12.0).reshape(4, 3))
same("broadcast non-contiguous leaves the gaps", base[:, 1::2], np.zeros((4, 3)))
src = T(np.arange(6.0).reshape(2, 3) + 10 * R).t()
outs = [T(np.zeros((2, 3))).t() for _ in range(N)]
dist.all_gather(outs, src)
for r in range(N):
    same(f"all_gather non-contiguous [{r}]", outs[r], (np.arange(6.0).reshape(2, 3) + 10 * r).T)
out = T(np.zeros((3, 2 * N))).t()
dist.all_gather_into_tensor(out, T(np.ones((3, 2)) * R).t())
same("all_gather_into_tensor non-contiguous output", out,
     np.concatenate([np.full((2, 3), float(r)) for r in range(N)]))

# Subgroups: global ranks in src/dst; GroupMember.NON_GROUP_MEMBER outside.
NON = dist.GroupMember.NON_GROUP_MEMBER
pair = dist.new_group([0, 1])
odd = dist.new_group(list(range(1, N, 2)))
checks[0] += 2
if (pair is NON) != (R > 1) or (odd is NON) != (R % 2 == 0):
    failures.append(f"new_group membership wrong on rank {R}: {pair} {odd}")
if pair is NON:
    checks[0] += 2
    if (dist.get_rank(pair), dist.get_world_size(pair)) != (-1, -1):
        failures.append(f"non-member rank/size on rank {R}")
    raises("collective on a non-member group", lambda: dist.all_reduce(T(np.ones(1)), group=pair),
           "not a member")
if pair is not NON:
    t = T(np.array([R + 1.0]))
    dist.all_reduce(t, group=pair)
    same("all_reduce on [0, 1]", t, np.array([3.0]))
    same("get_rank / get_world_size of [0, 1]",
         np.array([dist.get_rank(pair), dist.get_world_size(pair)]), np.array([R, 2]))
if odd is not NON:
    members = list(range(1, N, 2))
    t = T(np.array([float(R)]))
    dist.broadcast(t, src=members[-1], group=odd)
    same("broadcast on the odd ranks, global src", t, np.array([float(members[-1])]))
    lst = [T(np.zeros(1)) for _ in members]
    dist.all_gather(lst, T(np.array([R * 2.0])), group=odd)
    same("all_gather on the odd ranks", np.concatenate([x.numpy() for x in lst]),
         np.array([2.0 * m for m in members]))
    raises("src not in the subgroup", lambda: dist.broadcast(T(np.zeros(1)), src=0, group=odd),
           "rank 0", "not in the group")
dist.barrier()

# Argument errors, raised on every rank before anything is sent.
x = T(np.zeros(3))
raises("all_gather short list", lambda: dist.all_gather([x] * (N - 1), x),
       "tensor_list", f"{N - 1} tensors", f"({N})")
raises("all_gather wrong shape",
       lambda: dist.all_gather([T(np.zeros(4))] * N, x), "tensor_list[0]", "(4,)", "(3,)")
raises("all_gather wrong dtype",
       lambda: dist.all_gather([T(np.zeros(3, np.float32))] * N, x), "float32", "float64")
raises("all_gather_into_tensor wrong output",
       lambda: dist.all_gather_into_tensor(T(np.zeros(3)), x), "output_tensor",
       f"({3 * N},)")
raises("reduce_scatter_tensor uneven", lambda: dist.reduce_scatter_tensor(
    x, T(np.zeros(N * 3 + 1))), "equal blocks")
raises("scatter without list on src", lambda: dist.scatter(x, None, src=R), "scatter_list")
raises("broadcast src out of range", lambda: dist.broadcast(x, src=N), f"rank {N}",
       "not in the group")
raises("send to a rank outside", lambda: dist.send(x, N + 3), "not in the group")
raises("unknown op", lambda: dist.all_reduce(x, op="mean"), "unknown reduce op")
raises("not a tensor", lambda: dist.all_reduce(np.zeros(3)), "ember Tensor", "ndarray")
raises("new_group bad ranks", lambda: dist.new_group([0, N]), "distinct ranks")

# A wait's own timeout names what it waited for, and the side channel says what the
# other rank is doing; the operation still completes afterwards.
if R == 0:
    got = T(np.zeros(2))
    w = dist.irecv(got, 1, tag=99)
    raises("wait timeout", lambda: w.wait(timeout=0.3), "recv from rank 1", "timed out",
           "rank 1 is waiting in barrier")
    dist.barrier()
    w.wait()
    same("late recv", got, np.array([5.0, 6.0]))
else:
    dist.barrier()
    if R == 1:
        dist.send(T(np.array([5.0, 6.0])), 0, tag=99)

dist.barrier()
for f in failures:
    print(f"FAIL rank {R}: {f}", flush=True)
print(f"SUMMARY rank {R} of {N}: {checks[0]} checks, {len(failures)} failures", flush=True)
sys.exit(1 if failures else 0)
'''


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives_against_numpy(n):
    out = check(run_mpi(SCRIPT, n, timeout=120))
    counts = {}
    for rank, checks, failures in re.findall(r"SUMMARY rank (\d+) of \d+: (\d+) checks, "
                                             r"(\d+) failures", out):
        counts[int(rank)] = int(checks)
        assert failures == "0", out
    assert sorted(counts) == list(range(n)), out
    assert min(counts.values()) > 250, counts


def test_world_of_one_process():
    dist.init_process_group("single")
    try:
        t = ember.arange(4.0)
        dist.all_reduce(t, op="avg")
        assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
        out = [ember.zeros(4)]
        dist.all_gather(out, t)
        assert out[0].tolist() == t.tolist()
        big = ember.zeros(4)
        dist.reduce_scatter_tensor(big, t)
        assert big.tolist() == t.tolist()
        lst = [ember.zeros(4)]
        dist.gather(t, lst, dst=0)
        assert lst[0].tolist() == t.tolist()
        s = ember.zeros(4)
        dist.scatter(s, [t], src=0)
        assert s.tolist() == t.tolist()
        work = dist.all_reduce(t, async_op=True)
        assert work.is_completed() and work.wait()
        assert dist.new_group([0]) is not dist.GroupMember.NON_GROUP_MEMBER
        with pytest.raises(dist.DistributedError, match="AVG needs a floating-point"):
            dist.all_reduce(ember.tensor([1, 2]), op=dist.ReduceOp.AVG)
        with pytest.raises(dist.DistributedError, match="no other rank"):
            dist.send(t, 0)
        with pytest.raises(dist.DistributedError, match="rank 1 is not in the group"):
            dist.broadcast(t, src=1)
    finally:
        dist.destroy_process_group()


def test_uninitialized_and_timeout_errors():
    assert not dist.is_initialized()
    with pytest.raises(dist.DistributedError, match="not initialized"):
        dist.all_reduce(ember.zeros(2))
    with pytest.raises(dist.DistributedError, match="must be positive"):
        dist.set_timeout(0)
    with pytest.raises(dist.DistributedError, match="unknown backend 'gloo'"):
        dist.init_process_group("gloo")
    assert np.isfinite(dist.get_timeout())
