"""Running a test script under mpiexec from pytest: ``run_mpi(code, n)`` writes ``code``
to a file, runs it on ``n`` ranks (oversubscribed: this machine has 2 cores) with ember
importable, and returns the finished process. Tests skip where MPI is not installed."""
from __future__ import annotations

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=None)
def mpiexec() -> list | None:
    """The mpiexec command with the flags it needs here, or None without MPI."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return None
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    exe = beside if os.path.exists(beside) else shutil.which("mpiexec")
    if exe is None:
        return None
    version = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout
    flags = []
    if "Open MPI" in version or "prte" in version.lower() or "OpenRTE" in version:
        flags = ["--oversubscribe", "--allow-run-as-root"]
    return [exe] + flags


needs_mpi = pytest.mark.skipif(mpiexec() is None, reason="mpi4py/mpiexec not installed")


def run_mpi(code: str, n: int, timeout: float = 120, env: dict | None = None,
            args=()) -> subprocess.CompletedProcess:
    """Run ``code`` (a Python script) on ``n`` ranks; the result has stdout, stderr and
    returncode. ``timeout`` kills the whole job (pytest never hangs)."""
    command = mpiexec()
    if command is None:
        pytest.skip("mpi4py/mpiexec not installed")
    with tempfile.NamedTemporaryFile("w", suffix=".py", delete=False) as f:
        f.write(textwrap.dedent(code))
        path = f.name
    full_env = dict(os.environ)
    full_env["PYTHONPATH"] = ROOT + os.pathsep + full_env.get("PYTHONPATH", "")
    full_env.setdefault("OMP_NUM_THREADS", "1")
    full_env.setdefault("OPENBLAS_NUM_THREADS", "1")
    full_env.setdefault("EMBER_EAGER_KERNELS", "0")
    full_env.update(env or {})
    proc = subprocess.Popen(command + ["-n", str(n), sys.executable, path, *args],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=full_env, cwd=ROOT, start_new_session=True)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)  # mpiexec and every rank
        out, err = proc.communicate()
        err += f"\n[harness] killed after {timeout} s"
    finally:
        os.unlink(path)
    return subprocess.CompletedProcess(proc.args, proc.returncode, out, err)


def check(result: subprocess.CompletedProcess) -> str:
    """Fail with the job's output when it did not exit 0; return its stdout."""
    assert result.returncode == 0, (f"exit {result.returncode}\n--- stdout\n{result.stdout}"
                                    f"\n--- stderr\n{result.stderr}")
    return result.stdout


def script_of(result: subprocess.CompletedProcess) -> str:
    """The path of the script ``run_mpi`` ran (unique to that run)."""
    return next(a for a in result.args if str(a).endswith(".py"))


def leftover_processes(result: subprocess.CompletedProcess, grace: float = 2.0) -> list:
    """``ps`` lines of processes still running ``result``'s script after ``grace``
    seconds (a finished job must leave none)."""
    import time
    script = script_of(result)
    deadline = time.monotonic() + grace
    while True:
        table = subprocess.run(["ps", "-eww", "-o", "pid,args"], capture_output=True,
                               text=True).stdout
        alive = [line.strip() for line in table.splitlines() if script in line]
        if not alive or time.monotonic() > deadline:
            return alive
        time.sleep(0.1)
