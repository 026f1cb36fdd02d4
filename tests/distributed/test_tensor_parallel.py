"""Autograd-aware collectives, tensor parallelism and data × tensor parallelism under
mpiexec, against their definitions: each rank recomputes every rank's data from seeds and
compares with the same computation done by hand (NumPy) or with the unsplit model.

One launch per world size runs every check; each rank prints ``passed <check>`` lines."""
import pytest

from .harness import check, needs_mpi, run_mpi

COMMON = """
import numpy as np
import ember
import ember.distributed as dist
import ember.distributed.nn.functional as dF
from ember.distributed import GPT, parallelize_gpt, parallel_slices, average_gradients

dist.init_process_group("mpi", timeout=60)
R, N = dist.get_rank(), dist.get_world_size()
F64 = ember.float64


def data(seed, *shape):
    return np.random.default_rng(seed).standard_normal(shape)


def leaf(a):
    return ember.tensor(a, dtype=F64, requires_grad=True)


def close(name, got, want, tol=1e-10):
    got = got.detach().numpy() if hasattr(got, "detach") else np.asarray(got)
    want = want.detach().numpy() if hasattr(want, "detach") else np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    err = np.max(np.abs(got - want), initial=0.0)
    assert err <= tol * max(1.0, np.max(np.abs(want), initial=0.0)), \\
        f"rank {R}: {name}: max error {err:.3g}"


def passed(name):
    print(f"rank {R} passed {name}", flush=True)
"""

COLLECTIVES = """
xs = [data(i, 3, 4) for i in range(N)]            # rank i's input
ws = [data(100 + i, 3, 4) for i in range(N)]      # rank i's loss weights

for op, want_y, want_g in [
        ("sum", sum(xs), sum(ws)),
        ("avg", sum(xs) / N, sum(ws) / N),
        ("max", np.max(xs, 0), (xs[R] == np.max(xs, 0)) * sum(ws)),
        ("min", np.min(xs, 0), (xs[R] == np.min(xs, 0)) * sum(ws)),
        ("product", np.prod(xs, 0),
         sum(ws) * np.prod([xs[i] for i in range(N) if i != R], 0))]:
    x = leaf(xs[R])
    y = dF.all_reduce(x, op)
    (y * ember.tensor(ws[R])).sum().backward()
    close(f"all_reduce {op} value", y, want_y)
    close(f"all_reduce {op} grad", x.grad, want_g)
    assert np.array_equal(x.detach().numpy(), xs[R]), "all_reduce modified its input"
    passed(f"all_reduce {op}")

# double backward through both collectives: L = sum_r sum(all_reduce(x)^3 * w_r)
us = [data(200 + i, 3, 4) for i in range(N)]
x = leaf(xs[R])
y = dF.all_reduce(x)
(g,) = ember.autograd.grad((y ** 3 * ember.tensor(ws[R])).sum(), x, create_graph=True)
close("all_reduce first grad", g, 3 * sum(xs) ** 2 * sum(ws))
(g * ember.tensor(us[R])).sum().backward()
close("all_reduce second grad", x.grad, 6 * sum(xs) * sum(ws) * sum(us))
passed("all_reduce double backward")

wg = {(r, j): data(1000 + r * N + j, 3, 4) for r in range(N) for j in range(N)}
x = leaf(xs[R])
outs = dF.all_gather(x)
assert isinstance(outs, tuple) and len(outs) == N
sum((o * ember.tensor(wg[R, j])).sum() for j, o in enumerate(outs)).backward()
for j in range(N):
    close("all_gather value", outs[j], xs[j])
close("all_gather grad", x.grad, sum(wg[i, R] for i in range(N)))
passed("all_gather")

W = [data(300 + i, 3, 4 * N) for i in range(N)]
x = leaf(xs[R])
y = dF.all_gather_tensor(x, dim=1)
(y * ember.tensor(W[R])).sum().backward()
close("all_gather_tensor value", y, np.concatenate(xs, 1))
close("all_gather_tensor grad", x.grad, sum(w[:, 4 * R:4 * R + 4] for w in W))
passed("all_gather_tensor")

for op, scale in (("sum", 1.0), ("avg", 1.0 / N)):
    parts = [leaf(wg[R, j]) for j in range(N)]   # rank R's list
    y = dF.reduce_scatter(parts, op)
    (y * ember.tensor(ws[R])).sum().backward()
    close(f"reduce_scatter {op} value", y, scale * sum(wg[i, R] for i in range(N)))
    for j in range(N):
        close(f"reduce_scatter {op} grad", parts[j].grad, scale * ws[j])
    passed(f"reduce_scatter {op}")

X = [data(400 + i, 2 * N, 3) for i in range(N)]
V = [data(500 + i, 2, 3) for i in range(N)]
x = leaf(X[R])
y = dF.reduce_scatter_tensor(x)
(y * ember.tensor(V[R])).sum().backward()
close("reduce_scatter_tensor value", y, sum(X)[2 * R:2 * R + 2])
close("reduce_scatter_tensor grad", x.grad, np.concatenate(V, 0))
passed("reduce_scatter_tensor")

src = N - 1
x = leaf(xs[R])
y = dF.broadcast(x, src)
(y * ember.tensor(ws[R])).sum().backward()
close("broadcast value", y, xs[src])
close("broadcast grad", x.grad, sum(ws) if R == src else np.zeros((3, 4)))
passed("broadcast")

x = leaf(xs[R])
y = dF.reduce(x, 0)
(y * ember.tensor(ws[R])).sum().backward()
close("reduce value", y, sum(xs) if R == 0 else np.zeros((3, 4)))
close("reduce grad", x.grad, ws[0])
passed("reduce")

ins = [leaf(wg[R, j]) for j in range(N)]
outs = dF.all_to_all(ins)
sum((o * ember.tensor(wg[j, R] * 2 + 1)).sum() for j, o in enumerate(outs)).backward()
for i in range(N):
    close("all_to_all value", outs[i], wg[i, R])
for j in range(N):
    close("all_to_all grad", ins[j].grad, wg[R, j] * 2 + 1)
passed("all_to_all")

# Megatron helpers on replicated tensors = the unsplit product and its gradients.
xa, A, WA = data(600, 5, 4), data(601, 4, 2 * N), data(602, 5, 2 * N)
x, a = leaf(xa), leaf(A[:, 2 * R:2 * R + 2])
y = dF.gather_from_group(dF.copy_to_group(x) @ a)
(y * ember.tensor(WA)).sum().backward()
close("column split value", y, xa @ A)
close("column split grad x", x.grad, WA @ A.T)
close("column split grad a", a.grad, (xa.T @ WA)[:, 2 * R:2 * R + 2])
xb, B, WB = data(603, 5, 2 * N), data(604, 2 * N, 3), data(605, 5, 3)
x, b = leaf(xb), leaf(B[2 * R:2 * R + 2])
y = dF.reduce_from_group(dF.scatter_to_group(x) @ b)
(y * ember.tensor(WB)).sum().backward()
close("row split value", y, xb @ B)
close("row split grad x", x.grad, WB @ B.T)
close("row split grad b", b.grad, (xb.T @ WB)[2 * R:2 * R + 2])
passed("megatron helpers")

try:
    dF.scatter_to_group(ember.ones(3, 2 * N + 1))
    raise AssertionError("scatter_to_group accepted an indivisible last dimension")
except dist.DistributedError as e:
    assert "does not split into" in str(e), str(e)
passed("megatron errors")
"""

TENSOR_PARALLEL = """
def full_and_parallel(group, n_heads=4, seed=0):
    ember.manual_seed(seed)
    model = GPT(dtype=F64, n_heads=n_heads)
    return model, parallelize_gpt(model, group)


def compare_gpt(tag, model, tp, tokens, targets, tol=1e-10, dp=None):
    '''Loss, logits and every gradient of the tensor-parallel model against the unsplit
    one (the unsplit model sees the whole batch; ``dp`` = (rank, size) of the data-
    parallel group whose share this rank's tp model sees).'''
    F = ember.nn.functional
    model.zero_grad()
    tp.zero_grad()
    full = model(tokens)
    loss = F.cross_entropy(full.reshape(-1, full.shape[-1]), targets.reshape(-1))
    loss.backward()
    mine_x, mine_y = tokens, targets
    if dp is not None:
        share = tokens.shape[0] // dp[1]
        mine_x = tokens[dp[0] * share:(dp[0] + 1) * share]
        mine_y = targets[dp[0] * share:(dp[0] + 1) * share]
    out = tp(mine_x)
    tp_loss = F.cross_entropy(out.reshape(-1, out.shape[-1]), mine_y.reshape(-1))
    tp_loss.backward()
    if dp is None:
        close(f"{tag} logits", out, full)
        close(f"{tag} loss", tp_loss, loss)
    else:
        average_gradients(tp, dp[2])
    slices = parallel_slices(tp)
    full_params = dict(model.named_parameters())
    names = [n for n, _ in tp.named_parameters()]
    assert sorted(names) == sorted(full_params), (names, list(full_params))
    for name, p in tp.named_parameters():
        want = full_params[name].grad
        if slices[name] is not None:
            dim, index = slices[name]
            want = want.index_select(dim, ember.tensor(index))
            close(f"{tag} weight {name}", p,
                  full_params[name].detach().index_select(dim, ember.tensor(index)))
        close(f"{tag} grad {name}", p.grad, want, tol)
    passed(f"{tag} ({len(names)} parameters)")


rng = np.random.default_rng(7)
tokens = ember.tensor(rng.integers(0, 256, (4, 16)))
targets = ember.tensor(rng.integers(0, 256, (4, 16)))
world = dist.new_group(list(range(N)))
model, tp = full_and_parallel(world)
compare_gpt(f"tp gpt on {N}", model, tp, tokens, targets)
assert tp.blocks[0].qkv.weight.shape == (3 * 128 // N, 128)
assert tp.tok.weight.shape == (256 // N, 128)

# Layers built fresh: with the same seed they equal the unsplit layers.
from ember.distributed import ColumnParallelLinear, RowParallelLinear, VocabParallelEmbedding
x = leaf(data(700, 3, 8))
ember.manual_seed(3); lin = ember.nn.Linear(8, 4 * N, dtype=F64)
ember.manual_seed(3); col = ColumnParallelLinear(8, 4 * N, dtype=F64)
close("column gather_output", col(x), lin(x))
ember.manual_seed(4); lin = ember.nn.Linear(4 * N, 5, dtype=F64)
ember.manual_seed(4); row = RowParallelLinear(4 * N, 5, dtype=F64)
x2 = leaf(data(701, 3, 4 * N))
close("row from replicated input", row(x2), lin(x2))
ember.manual_seed(5); emb = ember.nn.Embedding(8 * N, 3, dtype=F64)
ember.manual_seed(5); vemb = VocabParallelEmbedding(8 * N, 3, dtype=F64)
ids = ember.tensor(rng.integers(0, 8 * N, (2, 5)))
close("vocab parallel embedding", vemb(ids), emb(ids))
passed("fresh parallel layers")

for bad, what in ((lambda: GPT(dtype=F64, n_heads=N - 1) if N > 2 else None, "n_heads"),
                  (lambda: ColumnParallelLinear(4, 4 * N + 1, dtype=F64), "out_features")):
    try:
        made = bad()
        if made is None:
            continue
        parallelize_gpt(made, world)
        raise AssertionError(f"an indivisible {what} was accepted")
    except dist.DistributedError as e:
        assert what in str(e) and "not divisible" in str(e), str(e)
passed("tensor parallel errors")
"""

DP_TP = """
# 2 x 2 grid: tensor-parallel groups {0,1}, {2,3}; data-parallel groups {0,2}, {1,3}.
tp_groups = [dist.new_group([0, 1]), dist.new_group([2, 3])]
dp_groups = [dist.new_group([0, 2]), dist.new_group([1, 3])]
tp_group, dp_group = tp_groups[R // 2], dp_groups[R % 2]
model, tp = full_and_parallel(tp_group)
compare_gpt("dp x tp 2x2", model, tp, tokens, targets, dp=(R // 2, 2, dp_group))
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_collectives_and_tensor_parallel(n):
    script = COMMON + COLLECTIVES + TENSOR_PARALLEL + (DP_TP if n == 4 else "")
    out = check(run_mpi(script, n, timeout=120))
    checks = ["all_reduce sum", "all_reduce avg", "all_reduce max", "all_reduce min",
              "all_reduce product", "all_reduce double backward", "all_gather",
              "all_gather_tensor", "reduce_scatter sum", "reduce_scatter avg",
              "reduce_scatter_tensor", "broadcast", "reduce", "all_to_all",
              "megatron helpers", "megatron errors", f"tp gpt on {n} (30 parameters)",
              "fresh parallel layers", "tensor parallel errors"]
    if n == 4:
        checks.append("dp x tp 2x2 (30 parameters)")
    for r in range(n):
        for name in checks:
            assert f"rank {r} passed {name}\n" in out, f"rank {r} did not pass {name}"


def test_parallel_layers_in_a_world_of_one():
    """Without mpiexec the group is one rank: the parallel GPT is the unsplit model."""
    import numpy as np

    import ember
    import ember.distributed as dist
    dist.init_process_group("mpi")
    try:
        ember.manual_seed(0)
        model = dist.GPT(dtype=ember.float64)
        tp = dist.parallelize_gpt(model)
        tokens = ember.tensor(np.random.default_rng(0).integers(0, 256, (2, 8)))
        assert np.array_equal(tp(tokens).detach().numpy(), model(tokens).detach().numpy())
    finally:
        dist.destroy_process_group()
