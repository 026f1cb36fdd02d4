"""Pipeline parallelism under mpiexec: the loss and every stage's gradients equal the
unsplit model's on the whole batch (float64), for an MLP and the reference GPT, with the
GPipe and 1F1B schedules; one launch per world size, each rank prints ``passed``."""
import pytest

from .harness import check, needs_mpi, run_mpi

SCRIPT = """
import numpy as np
import ember
import ember.distributed as dist
from ember import nn
from ember.nn import functional as F
from ember.distributed import GPT, Pipeline, gpt_stages

dist.init_process_group("mpi", timeout=60)
R, N = dist.get_rank(), dist.get_world_size()
F64 = ember.float64


def close(name, got, want, tol=1e-10):
    got, want = np.asarray(got), np.asarray(want)
    assert got.shape == want.shape, f"{name}: shape {got.shape} != {want.shape}"
    err = np.max(np.abs(got - want), initial=0.0)
    assert err <= tol * max(1.0, np.max(np.abs(want), initial=0.0)), \\
        f"rank {R}: {name}: max error {err:.3g}"


def check_pipeline(tag, build, loss_fn, x, y, chunks, balance=None):
    '''Both schedules against the unsplit model built by ``build`` (same seed).'''
    ref = build()
    ref_loss = loss_fn(ref(x), y)
    ref_loss.backward()
    ref_grads = {n: p.grad.numpy() for n, p in ref.named_parameters()}
    grads = {}
    for schedule in ("gpipe", "1f1b"):
        pipe = Pipeline(build(), chunks=chunks, loss_fn=loss_fn, schedule=schedule,
                        balance=balance)
        loss = pipe.step(x if pipe.is_first else None, y if pipe.is_last else None)
        close(f"{tag} {schedule} loss", loss, float(ref_loss))
        held = chunks if schedule == "gpipe" else min(chunks, N - R)
        assert pipe.peak_activations == held, (schedule, pipe.peak_activations, held)
        start = pipe.layers[0]
        names = []
        for name, p in pipe.module.named_parameters():
            index, rest = name.split(".", 1)
            full = f"{start + int(index)}.{rest}"
            close(f"{tag} {schedule} grad {full}", p.grad.numpy(), ref_grads[full])
            grads[schedule, full] = p.grad.numpy()
            names.append(full)
        # every parameter of the model sits on exactly one stage
        every = [n for part in dist.nn.functional.all_gather(
                 ember.tensor([len(names)])) for n in part.tolist()]
        assert sum(every) == len(ref_grads), (every, len(ref_grads))
    for (schedule, full), g in grads.items():
        if schedule == "1f1b":
            close(f"{tag} 1f1b == gpipe {full}", g, grads["gpipe", full], 1e-12)
    print(f"rank {R} passed {tag}", flush=True)


def mlp():
    ember.manual_seed(0)
    return nn.Sequential(nn.Linear(6, 16, dtype=F64), nn.Tanh(), nn.Linear(16, 16, dtype=F64),
                         nn.Tanh(), nn.Linear(16, 4, dtype=F64))


rng = np.random.default_rng(0)
x = ember.tensor(rng.standard_normal((8, 6)))
y = ember.tensor(rng.standard_normal((8, 4)))
check_pipeline(f"mlp on {N} chunks 4", mlp, F.mse_loss, x, y, chunks=4)
check_pipeline(f"mlp on {N} chunks 1", mlp, F.mse_loss, x, y, chunks=1)
if N == 2:
    check_pipeline("mlp balance 4+1 chunks 8", mlp, F.mse_loss, x, y, chunks=8,
                   balance=[4, 1])


def gpt():
    ember.manual_seed(0)
    return gpt_stages(GPT(dtype=F64))


def lm_loss(out, target):
    return F.cross_entropy(out.reshape(-1, out.shape[-1]), target.reshape(-1))


tokens = ember.tensor(rng.integers(0, 256, (4, 16)))
targets = ember.tensor(rng.integers(0, 256, (4, 16)))
check_pipeline(f"gpt on {N} chunks 4", gpt, lm_loss, tokens, targets, chunks=4)
check_pipeline(f"gpt on {N} chunks 2", gpt, lm_loss, tokens, targets, chunks=2)
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_pipeline_equals_unsplit_model(n):
    out = check(run_mpi(SCRIPT, n, timeout=120))
    names = [f"mlp on {n} chunks 4", f"mlp on {n} chunks 1", f"gpt on {n} chunks 4",
             f"gpt on {n} chunks 2"] + (["mlp balance 4+1 chunks 8"] if n == 2 else [])
    for r in range(n):
        for name in names:
            assert f"rank {r} passed {name}\n" in out, f"rank {r} did not pass {name}"


def test_stage_split_and_argument_errors():
    import ember
    import ember.distributed as dist
    from ember.distributed import Pipeline, split_stages
    assert split_stages(5, 2) == [(0, 3), (3, 5)]
    assert split_stages(4, 4) == [(0, 1), (1, 2), (2, 3), (3, 4)]
    assert split_stages(5, 2, balance=[1, 4]) == [(0, 1), (1, 5)]
    with pytest.raises(dist.DistributedError, match="cannot fill 3 stages"):
        split_stages(2, 3)
    with pytest.raises(dist.DistributedError, match="balance"):
        split_stages(5, 2, balance=[2, 2])
    dist.init_process_group("mpi")
    try:
        layers = ember.nn.Sequential(ember.nn.Linear(2, 2))
        loss = ember.nn.functional.mse_loss
        with pytest.raises(dist.DistributedError, match="unknown schedule 'zigzag'"):
            Pipeline(layers, loss_fn=loss, schedule="zigzag")
        with pytest.raises(dist.DistributedError, match="loss_fn"):
            Pipeline(layers)
        pipe = Pipeline(layers, chunks=3, loss_fn=loss)
        with pytest.raises(dist.DistributedError, match="at least 3 rows"):
            pipe.step(ember.ones(2, 2), ember.ones(2, 2))
        # one stage: the pipeline is the model, the loss the mean over micro-batches
        # (weighted by their sizes when the batch does not divide: 7 rows are 3 + 2 + 2)
        for rows in (6, 7):
            x, y = ember.randn(rows, 2), ember.randn(rows, 2)
            got = pipe.step(x, y)
            assert abs(got - float(loss(layers(x), y))) < 1e-6, rows
    finally:
        dist.destroy_process_group()
