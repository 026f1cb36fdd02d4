"""The MPI backend end to end: a job of 2 and 4 ranks runs the basic collectives."""
import pytest

from .harness import check, needs_mpi, run_mpi

SCRIPT = """
import ember
import ember.distributed as dist
dist.init_process_group("mpi", timeout=30)
r, n = dist.get_rank(), dist.get_world_size()
t = ember.ones(3) * (r + 1)
dist.all_reduce(t)
print("rank", r, "of", n, "sum", t.tolist())
"""


@needs_mpi
@pytest.mark.parametrize("n", [2, 4])
def test_all_reduce_on_every_rank(n):
    out = check(run_mpi(SCRIPT, n))
    total = float(n * (n + 1) // 2)
    for r in range(n):
        assert f"rank {r} of {n} sum {[total] * 3}" in out


def test_without_mpiexec_the_world_is_one_process():
    import ember
    import ember.distributed as dist
    dist.init_process_group("mpi")
    try:
        assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
        t = ember.arange(3.0)
        dist.all_reduce(t)
        assert t.tolist() == [0.0, 1.0, 2.0]
    finally:
        dist.destroy_process_group()
