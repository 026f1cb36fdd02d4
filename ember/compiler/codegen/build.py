"""Compiling generated C with the system compiler, and the on-disk kernel cache.

The compiler is ``$CC`` (which may carry its own flags, ``CC="clang -g"``), else the
first of ``cc``, ``gcc``, ``clang`` on the PATH. A kernel's file name is the SHA-256 of
its source, the flags, the compiler (path, size and date of the binary) and the CPU
(``-march=native`` code only runs where it was built), so any change makes a new file
and a second process finds the old one without compiling. Files live in
``$EMBER_CACHE_DIR/kernels`` (default ``~/.cache/ember/kernels``): ``<hash>.c``, kept for
reading, and ``<hash>.so``, written under a temporary name and renamed into place, so
no process ever loads a half-written library. ``EMBER_JIT_LOG=1`` logs each compile
and cache hit; :data:`STATS` counts them.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
import warnings

import numpy as np

from ...errors import EmberError

# -O3 and -march=native vectorise the inner loops; no -ffast-math and no FMA
# contraction, so float math rounds as NumPy's does; signed overflow wraps as in NumPy.
# -fno-trapping-math changes no result: it lets GCC compute both arms of a select (a
# float product may raise a flag nobody reads). Without it, on CPUs without AVX-512's
# masks, GCC turns the selects of exp, log, log1p and tanh into branches and leaves
# every loop that calls them scalar (a GELU kernel ran 25x slower).
FLAGS = ("-O3", "-march=native", "-fPIC", "-shared", "-fno-math-errno", "-ffp-contract=off",
         "-fno-trapping-math", "-fwrapv")
OPENMP = "-fopenmp"
# Where the compiler takes it (x86): loops vectorised 256 bits wide. GCC tunes
# -march=native for Zen 1 on some AMD hosts and then prefers 128-bit vectors; on session
# 13's AVX2 EPYC the gpt's GELU kernel (exp-bound) ran 8-25 % faster at 256. Where GCC's
# tuning already prefers 256 (Intel with AVX2 or AVX-512) nothing changes.
VECTOR_WIDTH = "-mprefer-vector-width=256"

STATS = {"compiled": 0, "disk_hits": 0, "memory_hits": 0}

_loaded: dict[str, object] = {}   # cache key -> the loaded kernel function
_probed: dict[tuple, tuple] = {}  # compiler -> the optional flags it accepts
_compiler_cache: dict = {}


class KernelCompileError(EmberError):
    """The C compiler rejected a generated kernel; the message holds the compiler's
    output and the path of the kernel's source, kept for inspection."""


def _log(message: str) -> None:
    if os.environ.get("EMBER_JIT_LOG", "") not in ("", "0"):
        print(f"[ember.jit] {message}", file=sys.stderr)


# The compiler and the machine -----------------------------------------------------------
def find_compiler() -> list[str] | None:
    """The C compiler's command (a list: ``$CC`` may hold flags), or None."""
    cc = os.environ.get("CC", "")
    key = ("CC", cc, os.environ.get("PATH", ""))
    if key in _compiler_cache:
        return _compiler_cache[key]
    found = None
    if cc.strip():
        argv = shlex.split(cc)
        path = shutil.which(argv[0])
        if path is None:
            warnings.warn(f"ember.jit: CC={cc!r} is not an executable; fused kernels run "
                          "with NumPy", stacklevel=2)
        else:
            found = [path] + argv[1:]
    else:
        for name in ("cc", "gcc", "clang"):
            path = shutil.which(name)
            if path is not None:
                found = [path]
                break
    _compiler_cache[key] = found
    return found


def _compiler_identity(argv) -> str:
    real = os.path.realpath(argv[0])
    try:
        st = os.stat(real)
        stamp = f"{st.st_size}:{st.st_mtime_ns}"
    except OSError:
        stamp = "?"
    return f"{real}:{stamp}:{' '.join(argv[1:])}"


def _cpu_identity() -> str:
    """What -march=native depends on: the CPU model and its feature flags."""
    parts = [platform.machine(), platform.processor()]
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith(("model name", "flags", "Features")):
                    parts.append(line.strip())
                    if len(parts) >= 4:
                        break
    except OSError:
        pass
    return "|".join(parts)


def max_threads() -> int:
    """How many threads a large fused kernel may use: ``EMBER_NUM_THREADS``, else the
    CPUs this process may run on."""
    chosen = os.environ.get("EMBER_NUM_THREADS", "").strip()
    if chosen:
        try:
            return max(1, int(chosen))
        except ValueError:
            raise EmberError(f"EMBER_NUM_THREADS={chosen!r} is not a number") from None
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def array_data_offset() -> int | None:
    """Where a NumPy array object keeps its data pointer (right after the object
    header, as ``PyArrayObject_fields`` declares it), verified on live arrays; None
    when this interpreter lays arrays out otherwise."""
    if "offset" not in _compiler_cache:
        offset = object.__basicsize__
        ok = sys.implementation.name == "cpython"
        if ok:
            for a in (np.zeros(3), np.zeros((2, 2), np.float32)[1:], np.ones(())):
                if ctypes.c_void_p.from_address(id(a) + offset).value != a.ctypes.data:
                    ok = False
        _compiler_cache["offset"] = offset if ok else None
    return _compiler_cache["offset"]


def cache_dir() -> str:
    """The directory holding compiled kernels (created when missing)."""
    root = os.environ.get("EMBER_CACHE_DIR") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"),
        "ember")
    path = os.path.join(root, "kernels")
    try:
        os.makedirs(path, exist_ok=True)
        if os.access(path, os.W_OK):
            return path
    except OSError:
        pass
    fallback = os.path.join(tempfile.gettempdir(), f"ember-kernels-{os.getuid()}")
    os.makedirs(fallback, exist_ok=True)
    _log(f"kernel cache {path} is not writable; using {fallback}")
    return fallback


def cache_key(source: str, compiler) -> str:
    flags = " ".join(FLAGS + (VECTOR_WIDTH, OPENMP))
    text = "\0".join([source, flags, _compiler_identity(compiler), _cpu_identity()])
    return hashlib.sha256(text.encode()).hexdigest()


# Building and loading -------------------------------------------------------------------
def load_kernels(sources, compile: bool = True) -> list:
    """The compiled ``ember_kernel`` function of each ``(name, source)``: from this
    process's memory, from the disk cache, or compiled now (misses in parallel; with
    ``compile=False`` a miss gives None)."""
    compiler = find_compiler()
    if compiler is None:
        raise EmberError("ember.jit: no C compiler found (set CC, or EMBER_JIT_BACKEND=numpy)")
    directory = cache_dir()
    keys = [cache_key(src, compiler) for _, src in sources]
    result: list = [None] * len(sources)
    missing = {}
    for n, ((name, src), key) in enumerate(zip(sources, keys)):
        if key in _loaded:
            STATS["memory_hits"] += 1
            result[n] = _loaded[key]
            continue
        so_path = os.path.join(directory, key + ".so")
        function = _load(so_path) if os.path.exists(so_path) else None
        if function is not None:
            STATS["disk_hits"] += 1
            _log(f"kernel cache hit: {name} ({so_path})")
            _loaded[key] = result[n] = function
        else:
            missing.setdefault(key, []).append(n)
    if missing and compile:
        jobs = [(key, sources[ns[0]][0], sources[ns[0]][1]) for key, ns in missing.items()]
        _compile_all(jobs, compiler, directory)
        for key, ns in missing.items():
            function = _load(os.path.join(directory, key + ".so"))
            if function is None:
                raise EmberError(f"ember.jit: cannot load the compiled kernel "
                                 f"{os.path.join(directory, key + '.so')}")
            _loaded[key] = function
            for n in ns:
                result[n] = function
    return result


def load_c_function(name: str, source: str):
    """A hand-written C function ``void ember_kernel(int64_t *params)`` (a BLAS driver, an
    int8 GEMM, col2im) through the kernel cache, ready to call with a params array's
    address; None where there is no C compiler or it fails to build."""
    try:
        if find_compiler() is None:
            return None
        function = load_kernels([(name, source)])[0]
    except Exception:  # a compiler that fails: the caller's NumPy route
        return None
    function.argtypes = [ctypes.c_void_p]
    return function


def _load(path: str):
    # OpenMP threads that spin after a parallel loop take the cores from OpenBLAS's own
    # threads (the gpt step ran 1.5x slower): where OpenBLAS keeps its threads (ember's
    # BLAS driver is off), ask the OpenMP runtime, before it starts, to let idle threads
    # sleep, unless the user chose. With the driver, OpenMP is the only pool and its
    # short spin between parallel regions saves a wake-up each time.
    from ...backends import cpu_blas
    if not cpu_blas.wanted():
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        return ctypes.CDLL(path).ember_kernel
    except (OSError, AttributeError):
        return None


def _optional_flags(compiler) -> tuple:
    """The flags this compiler accepts among -march=native, VECTOR_WIDTH and -fopenmp
    (found once, by compiling an empty kernel with each, the three side by side: they
    are on the path of a cold first call)."""
    key = tuple(compiler)
    if key not in _probed:
        candidates = ("-march=native", VECTOR_WIDTH, OPENMP)
        with tempfile.TemporaryDirectory() as tmp:
            src = os.path.join(tmp, "probe.c")
            with open(src, "w") as f:
                f.write("int ember_probe(int n) {\n  int s = 0;\n#pragma omp parallel for "
                        "reduction(+:s)\n  for (int i = 0; i < n; i++) s += i;\n  return s;\n}\n")
            base = [f for f in FLAGS if f != "-march=native"]
            probes = [subprocess.Popen(compiler + base + [flag, "-o",
                                                          os.path.join(tmp, f"p{i}.so"), src],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                      for i, flag in enumerate(candidates)]
            accepted = [flag for flag, probe in zip(candidates, probes) if probe.wait() == 0]
        _probed[key] = tuple(accepted)
        _log(f"C compiler {' '.join(compiler)}: optional flags {accepted or 'none'}")
    return _probed[key]


def _compile_all(jobs, compiler, directory) -> None:
    """Compile each ``(key, name, source)``, as many at a time as there are CPUs, the
    next starting as soon as any finishes; raise the first failure (after the others
    have finished)."""
    from concurrent.futures import ThreadPoolExecutor
    flags = [f for f in FLAGS if f != "-march=native"] + list(_optional_flags(compiler))
    pending = sorted(jobs, key=lambda job: -len(job[2]))  # (the longest first, roughly)
    with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
        outcomes = list(pool.map(lambda job: _compile_one(job, compiler, flags, directory),
                                 pending))
    failures = [e for e in outcomes if e is not None]
    STATS["compiled"] += len(outcomes) - len(failures)
    if failures:
        raise failures[0]


def _compile_one(job, compiler, flags, directory):
    """Compile one kernel into the cache; the error (not raised) where the compiler fails."""
    key, name, source = job
    start = time.perf_counter()
    c_path = os.path.join(directory, key + ".c")
    _write_atomic(c_path, source)
    tmp = os.path.join(directory, f"{key}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp.so")
    cmd = compiler + flags + ["-o", tmp, c_path, "-lm"]
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    if proc.returncode != 0:
        _remove(tmp)
        output = proc.stdout.decode(errors="replace")
        return KernelCompileError(
            f"ember.jit: the C compiler failed on fused kernel {name} "
            f"(exit status {proc.returncode}).\n  command: {shlex.join(cmd)}\n"
            f"  kernel source: {c_path}\n  compiler output:\n{output.rstrip()}\n"
            "Set EMBER_JIT_BACKEND=numpy to run fused kernels without compiling.")
    os.replace(tmp, os.path.join(directory, key + ".so"))
    _log(f"compiled {name} in {time.perf_counter() - start:.2f} s "
         f"({os.path.join(directory, key + '.so')})")
    return None


def _write_atomic(path: str, text: str) -> None:
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    with open(tmp, "w") as f:
        f.write(text)
    os.replace(tmp, path)


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass
