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
# Generated kernels compile a few to a file (a "unit"): each compiler run costs about
# 80 ms of fixed work (start-up, the optimiser's set-up, linking) whatever the kernel,
# and a graph's fused kernels are small. A unit holds at most this many; a graph gets at
# least one unit per core.
UNIT_KERNELS = 8


def load_kernels(sources, compile: bool = True, merge: bool = False, alongside=()) -> list:
    """The compiled ``ember_kernel`` function of each ``(name, source)``: from this
    process's memory, from the disk cache, or compiled now (misses in parallel; with
    ``compile=False`` a miss gives None). ``merge``: the sources are generated kernels,
    which may share compiled files (units). ``alongside``: more ``(name, source)`` to
    compile in the same batch, each alone, for their own callers to load later; one of
    them that fails is not raised here."""
    compiler = find_compiler()
    if compiler is None:
        raise EmberError("ember.jit: no C compiler found (set CC, or EMBER_JIT_BACKEND=numpy)")
    directory = cache_dir()
    result, missing = _lookup(sources, compiler, directory)
    if not compile or not (missing or alongside):
        return result
    _, extra = _lookup(alongside, compiler, directory, count=False)
    jobs = [(key, sources[ns[0]][0], sources[ns[0]][1]) for key, ns in missing.items()]
    units = _units(jobs) if merge else [[job] for job in jobs]
    optional = [[(key, alongside[ns[0]][0], alongside[ns[0]][1])]
                for key, ns in extra.items() if key not in missing]
    _compile_all(units, compiler, directory, optional)
    for key, ns in missing.items():
        path = os.path.join(directory, key + ".so")
        function = _load(path, key)
        if function is None:
            raise EmberError(f"ember.jit: cannot load the compiled kernel {path}")
        _loaded[key] = function
        for n in ns:
            result[n] = function
    return result


def _lookup(sources, compiler, directory, count: bool = True):
    """(the function of each source found in memory or on disk, else None; {key: the
    positions of the sources with that key, for those not found})."""
    result: list = [None] * len(sources)
    missing: dict = {}
    for n, (name, src) in enumerate(sources):
        key = cache_key(src, compiler)
        if key in _loaded:
            STATS["memory_hits"] += count
            result[n] = _loaded[key]
            continue
        so_path = os.path.join(directory, key + ".so")
        function = _load(so_path, key) if os.path.exists(so_path) else None
        if function is not None:
            STATS["disk_hits"] += count
            _log(f"kernel cache hit: {name} ({so_path})")
            _loaded[key] = result[n] = function
        else:
            missing.setdefault(key, []).append(n)
    return result, missing


def _units(jobs) -> list:
    """``jobs`` (``(key, name, source)``) in units to compile together: at least one per
    core, at most UNIT_KERNELS kernels each, balanced by source length."""
    count = max(min(os.cpu_count() or 1, len(jobs)), -(-len(jobs) // UNIT_KERNELS))
    units: list = [[] for _ in range(count)]
    sizes = [0] * count
    for job in sorted(jobs, key=lambda job: -_weight(job[2])):
        n = min((n for n in range(count) if len(units[n]) < UNIT_KERNELS),
                key=sizes.__getitem__)
        units[n].append(job)
        sizes[n] += _weight(job[2])
    return [unit for unit in units if unit]


def _weight(source: str) -> int:
    """Roughly how long ``source`` takes to compile: its length, less the shared helpers
    (a unit compiles them once, and only those its kernels call)."""
    from . import lanes, scalar
    return len(source) - sum(len(shared) for shared in (scalar.PRELUDE, lanes.SOURCE)
                             if shared in source)


def _symbol(key: str) -> str:
    """A kernel's function in a unit (alone in its file it is ``ember_kernel``)."""
    return "ember_kernel_" + key[:16]


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


def _load(path: str, key: str = ""):
    # OpenMP threads that spin after a parallel loop take the cores from OpenBLAS's own
    # threads (the gpt step ran 1.5x slower): where OpenBLAS keeps its threads (ember's
    # BLAS driver is off), ask the OpenMP runtime, before it starts, to let idle threads
    # sleep, unless the user chose. With the driver, OpenMP is the only pool and its
    # short spin between parallel regions saves a wake-up each time.
    from ...backends import cpu_blas
    if not cpu_blas.wanted():
        os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
    try:
        library = ctypes.CDLL(path)
    except OSError:
        return None
    for symbol in (_symbol(key), "ember_kernel"):
        try:
            return getattr(library, symbol)
        except AttributeError:
            pass
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


def _compile_all(units, compiler, directory, optional=()) -> None:
    """Compile each unit (a list of ``(key, name, source)``), as many at a time as there
    are CPUs, the next starting as soon as any finishes; raise the first failure (after
    the others have finished), naming the kernel: the kernels of a unit that fails are
    compiled again one by one. ``optional``: more units, whose failures are not raised."""
    from concurrent.futures import ThreadPoolExecutor
    flags = [f for f in FLAGS if f != "-march=native"] + list(_optional_flags(compiler))
    every = sorted(optional, key=lambda unit: -len(unit[0][2])) + \
        sorted(units, key=lambda unit: -sum(_weight(j[2]) for j in unit))

    def compile_units(todo):
        with ThreadPoolExecutor(max_workers=max(1, os.cpu_count() or 1)) as pool:
            return list(pool.map(lambda unit: _compile_unit(unit, compiler, flags,
                                                            directory), todo))
    outcomes = compile_units(every)
    STATS["compiled"] += sum(len(u) for u, e in zip(every, outcomes) if e is None)
    failed = [(unit, e) for unit, e in zip(every[len(optional):], outcomes[len(optional):])
              if e is not None]
    errors = [e for unit, e in failed if len(unit) == 1]
    retried = [[job] for unit, _ in failed if len(unit) > 1 for job in unit]
    again = compile_units(retried) if retried else []
    STATS["compiled"] += sum(e is None for e in again)
    errors += [e for e in again if e is not None]
    if errors:
        raise errors[0]


def _compile_unit(unit, compiler, flags, directory):
    """Compile one unit into the cache: a kernel alone as ``<key>.so``; several as one
    library, which each kernel's ``<key>.so`` links to. The error (not raised) where the
    compiler fails."""
    if len(unit) == 1:
        return _compile_one(unit[0], compiler, flags, directory)
    for key, _, source in unit:  # (each kernel's source stays readable by its own name)
        _write_atomic(os.path.join(directory, key + ".c"), source)
    source = "".join(f"#define ember_kernel {_symbol(key)}\n{text}\n#undef ember_kernel\n"
                     f"#undef ARRAY_DATA\n" for key, _, text in unit)
    key = cache_key(source, compiler)
    name = f"{len(unit)} kernels ({', '.join(job[1] for job in unit)})"
    error = _compile_one((key, name, source), compiler, flags, directory)
    if error is None:
        for member, _, _ in unit:
            _link(key + ".so", os.path.join(directory, member + ".so"))
    return error


def _compile_one(job, compiler, flags, directory):
    """Compile one source into the cache; the error (not raised) where the compiler fails."""
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


def _link(target: str, path: str) -> None:
    """Make ``path`` name the library ``target`` (a file name in the same directory),
    atomically: a symbolic link, else a copy."""
    tmp = f"{path}.{os.getpid()}.{uuid.uuid4().hex[:8]}.tmp"
    try:
        os.symlink(target, tmp)
    except OSError:
        shutil.copyfile(os.path.join(os.path.dirname(path), target), tmp)
    os.replace(tmp, path)


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
