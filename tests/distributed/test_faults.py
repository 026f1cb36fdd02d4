"""A rank that fails never hangs the job: a rank raising, a rank SIGKILLed mid
all-reduce, a rank sleeping forever — each time the job exits non-zero within the
collective timeout plus a few seconds, names the rank (and the collective), and leaves
no process behind. Debug mode names ranks that call a collective with other shapes."""
import re
import time

import pytest

from .harness import leftover_processes, needs_mpi, run_mpi

TIMEOUT = 4  # the collective timeout the jobs run with (seconds)
PRELUDE = """
import os, signal, sys, time
import ember
import ember.distributed as dist
dist.init_process_group("mpi")
R, N = dist.get_rank(), dist.get_world_size()
t = ember.ones(4)
dist.all_reduce(t)           # collective #1: everybody is up
"""


def run_fault(body: str, n: int = 3, env: dict | None = None):
    start = time.monotonic()
    result = run_mpi(PRELUDE + body, n, timeout=TIMEOUT + 40,
                     env={"EMBER_DIST_TIMEOUT": str(TIMEOUT), **(env or {})})
    elapsed = time.monotonic() - start
    output = result.stdout + result.stderr
    assert "[harness] killed" not in output, output
    assert result.returncode != 0, output
    assert elapsed < TIMEOUT + 10, (elapsed, output)
    assert leftover_processes(result) == [], output
    return output


@needs_mpi
def test_a_rank_raising_aborts_the_job_with_its_traceback():
    out = run_fault("""
if R == 1:
    raise ValueError("rank one broke on purpose")
dist.all_reduce(t)
print("never reached", R)
""")
    assert "rank 1 failed; aborting the job" in out
    assert "ValueError: rank one broke on purpose" in out
    assert "never reached" not in out


@needs_mpi
def test_a_rank_killed_mid_all_reduce_is_named():
    # Rank 2 kills rank 1 from outside while rank 1 waits in all_reduce #3 (rank 1 may
    # have sent its part already, so the survivors can finish #3 and stop in #4 or #5).
    out = run_fault("""
pids = [ember.zeros(1, dtype=ember.int64) for _ in range(N)]
dist.all_gather(pids, ember.tensor([os.getpid()]))     # collective #2
if R == 2:
    time.sleep(0.5)
    os.kill(int(pids[1].item()), signal.SIGKILL)
for _ in range(3):
    dist.all_reduce(t)                                 # collectives #3, #4, #5
print("never reached", R)
""")
    assert "never reached" not in out
    assert "rank 1" in out, out                 # the launcher names the dead rank
    assert re.search(r"waited [\d.]+ s in all_reduce #[345] of ranks \[0, 1, 2\]", out), out


@needs_mpi
def test_a_stuck_rank_is_named_after_the_timeout():
    start = time.monotonic()
    out = run_fault("""
if R == 1:
    time.sleep(10_000)
dist.all_reduce(t)                                     # collective #2
print("never reached", R)
""")
    assert time.monotonic() - start > TIMEOUT, out
    assert f"all_reduce #2 of ranks [0, 1, 2] timed out after {TIMEOUT} s" in out, out
    assert "rank 1 did not answer a status probe" in out, out
    assert "is waiting in it too" in out, out   # the healthy ranks answered


@needs_mpi
def test_debug_mode_names_the_ranks_that_differ():
    out = run_fault("""
if R == 0:
    dist.all_reduce(ember.ones(4))
elif R == 1:
    dist.all_reduce(ember.ones(5))
else:
    dist.broadcast(ember.ones(4), src=0)
print("never reached", R)
""", env={"EMBER_DIST_DEBUG": "1"})
    assert "debug check before collective #2 of ranks [0, 1, 2]" in out, out
    assert "rank 0 called all_reduce(shape=(4,), dtype=float32, op=sum)" in out, out
    assert "rank 1 called all_reduce(shape=(5,), dtype=float32, op=sum)" in out, out
    assert "rank 2 called broadcast(shape=(4,), dtype=float32, src=0)" in out, out
    assert "never reached" not in out


@needs_mpi
def test_debug_mode_passes_matching_calls_and_costs_no_collective_number():
    from .harness import check
    out = check(run_mpi(PRELUDE + """
assert dist.is_debug()
x = ember.ones(3) * (R + 1)
dist.all_reduce(x)
assert x.tolist() == [float(N * (N + 1) // 2)] * 3
print("group seq", dist.group_world().seq, flush=True)
""", 2, env={"EMBER_DIST_DEBUG": "1", "EMBER_DIST_TIMEOUT": str(TIMEOUT)}))
    assert out.count("group seq 2") == 2, out


@pytest.mark.parametrize("flag", ["1", "0"])
def test_debug_flag_from_the_environment(flag, monkeypatch):
    import importlib

    import ember.distributed.debug as debug
    monkeypatch.setenv("EMBER_DIST_DEBUG", flag)
    try:
        assert importlib.reload(debug).is_debug() is (flag == "1")
    finally:
        monkeypatch.delenv("EMBER_DIST_DEBUG")
        importlib.reload(debug)
