"""``ember launch``: the mpiexec command line it builds, a 2-rank job run through it,
its exit status, and Ctrl-C reaching every rank."""
import os
import signal
import subprocess
import sys
import time

import pytest

from ember.distributed import DistributedError
from ember.distributed.launch import build_command, find_mpiexec

from .harness import ROOT, needs_mpi


def command(n, **kw):
    kw.setdefault("mpiexec", "/x/mpiexec")
    kw.setdefault("flavor", "openmpi")
    kw.setdefault("cores", 2)
    kw.setdefault("as_root", False)
    return build_command(n, "train.py", ["--lr", "0.1"], **kw)


def test_open_mpi_command_line():
    assert command(2) == ["/x/mpiexec", "-n", "2", sys.executable, "train.py", "--lr", "0.1"]
    assert command(4)[:2] == ["/x/mpiexec", "--oversubscribe"]       # 4 ranks, 2 cores
    assert "--allow-run-as-root" in command(2, as_root=True)
    cmd = command(4, hosts="a:2,b:2", timeout=7.5, debug=True)
    assert "--oversubscribe" not in cmd                                # the hosts' slots
    assert cmd[1:9] == ["--host", "a:2,b:2", "-x", "EMBER_DIST_TIMEOUT=7.5",
                        "-x", "EMBER_DIST_DEBUG=1", "-n", "4"]
    assert command(2, hostfile="hosts.txt")[1:3] == ["--hostfile", "hosts.txt"]


def test_mpich_command_line():
    cmd = command(4, flavor="mpich", hosts="a,b", timeout=30, as_root=True)
    assert cmd[:7] == ["/x/mpiexec", "-hosts", "a,b", "-genv", "EMBER_DIST_TIMEOUT", "30",
                       "-n"]
    assert "--oversubscribe" not in cmd and "--allow-run-as-root" not in cmd
    assert command(2, flavor="mpich", hostfile="h")[1:3] == ["-f", "h"]


@pytest.mark.parametrize("kw, message", [
    ({"nprocs": 0}, "-n must be a positive number of ranks, got 0"),
    ({"hosts": "a", "hostfile": "f"}, "--hosts or --hostfile, not both"),
    ({"timeout": -1}, "--timeout must be positive"),
])
def test_bad_arguments(kw, message):
    n = kw.pop("nprocs", 2)
    with pytest.raises(DistributedError, match=message):
        command(n, **kw)


def test_finds_mpiexec_beside_the_interpreter_first(tmp_path, monkeypatch):
    beside = tmp_path / "venv" / "bin"
    beside.mkdir(parents=True)
    on_path = tmp_path / "path"
    on_path.mkdir()
    for folder in (beside, on_path):
        (folder / "mpiexec").write_text("#!/bin/sh\n")
        (folder / "mpiexec").chmod(0o755)
    monkeypatch.setenv("PATH", str(on_path))
    monkeypatch.setattr(sys, "executable", str(beside / "python"))
    assert find_mpiexec() == str(beside / "mpiexec")
    (beside / "mpiexec").unlink()
    assert find_mpiexec() == str(on_path / "mpiexec")
    monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))
    with pytest.raises(DistributedError, match="no mpiexec beside"):
        find_mpiexec()


def launch(tmp_path, code, *argv, how=("-m", "ember", "launch"), popen=False):
    script = tmp_path / "job_script_for_launch.py"
    script.write_text(code)
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""),
               OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    args = [sys.executable, *how, *argv, str(script), "--flag", "x y"]
    if popen:
        return subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True, env=env, cwd=ROOT, start_new_session=True)
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=ROOT, timeout=60)


JOB = """
import os, sys
import ember
import ember.distributed as dist
dist.init_process_group("mpi")
t = ember.ones(2) * (dist.get_rank() + 1)
dist.all_reduce(t)
print(f"rank {dist.get_rank()}/{dist.get_world_size()} sum {t.tolist()} "
      f"timeout {dist.get_timeout():g} debug {dist.is_debug()} argv {sys.argv[1:]}",
      flush=True)
"""


@needs_mpi
def test_a_two_rank_job_through_ember_launch(tmp_path):
    result = launch(tmp_path, JOB, "-n", "2", "--timeout", "20", "--debug")
    assert result.returncode == 0, result.stderr
    printed = [line for line in result.stderr.splitlines() if line.startswith("ember launch: ")]
    assert len(printed) == 1, result.stderr
    assert "mpiexec" in printed[0] and " -n 2 " in printed[0]
    assert "EMBER_DIST_TIMEOUT=20" in printed[0] and "job_script_for_launch.py --flag 'x y'" \
        in printed[0]
    for r in range(2):
        assert (f"rank {r}/2 sum [3.0, 3.0] timeout 20 debug True argv ['--flag', 'x y']"
                in result.stdout), result.stdout


@needs_mpi
def test_the_exit_status_is_forwarded(tmp_path):
    result = launch(tmp_path, "import sys\nsys.exit(3)\n", "-n", "2",
                    how=("-m", "ember.distributed.launch"))
    assert result.returncode == 3, (result.stdout, result.stderr)
    assert "ember launch: " in result.stderr


@needs_mpi
def test_ctrl_c_ends_every_rank(tmp_path):
    code = "import time\nprint('started', flush=True)\ntime.sleep(300)\n"
    proc = launch(tmp_path, code, "-n", "2", popen=True)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and _running(tmp_path) < 2:
            time.sleep(0.1)
        assert _running(tmp_path) == 2
        os.kill(proc.pid, signal.SIGINT)
        proc.wait(timeout=20)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
        for pid, _ in _processes(tmp_path) if proc.returncode is None else ():
            os.kill(pid, signal.SIGKILL)
    assert proc.returncode != 0
    deadline = time.monotonic() + 5
    while _running(tmp_path) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert _running(tmp_path) == 0


def _processes(tmp_path) -> list:
    """(pid, args) of the processes running this test's job script (mpiexec and ranks)."""
    table = subprocess.run(["ps", "-eww", "-o", "pid=,args="], capture_output=True,
                           text=True).stdout
    script = str(tmp_path / "job_script_for_launch.py")
    rows = [line.strip().split(None, 1) for line in table.splitlines()]
    return [(int(r[0]), r[1]) for r in rows if len(r) == 2 and script in r[1]]


def _running(tmp_path) -> int:
    """Ranks (this interpreter running the script) alive now."""
    script = str(tmp_path / "job_script_for_launch.py")
    return sum(1 for _, args in _processes(tmp_path)
               if args.split()[:2] == [sys.executable, script])
