"""A graph's fused kernels compile a few to a file (a unit): each kernel's cache entry
links to its unit's library, a new process finds every kernel without compiling, and a
kernel that fails to compile is named on its own while the others still build."""
import ctypes
import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from ember.compiler.codegen import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")


def _kernel(value: int) -> tuple:
    """A kernel writing ``value`` to its argument, with the shared helpers in its source
    (as generated kernels have them) so that a unit must include them once."""
    from ember.compiler.codegen import lanes, scalar
    return (f"fused_store_{value}",
            "#include <math.h>\n#include <stdint.h>\n" + scalar.PRELUDE + lanes.SOURCE +
            f"void ember_kernel(int64_t *out) {{ out[0] = {value} + "
            f"(int64_t)ember_expf(0.0f); }}\n")


def _call(function, dtype=np.int64) -> int:
    out = np.zeros(1, dtype)
    function.argtypes = [ctypes.c_void_p]
    function(out.ctypes.data)
    return int(out[0])


def test_units_take_every_core_and_at_most_unit_kernels_each(monkeypatch):
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    jobs = [(f"k{i}", f"n{i}", "x" * (10 + i)) for i in range(19)]
    units = build._units(jobs)
    assert sorted(j for unit in units for j in unit) == sorted(jobs)
    assert len(units) == 3 and all(len(unit) <= build.UNIT_KERNELS for unit in units)
    assert len(build._units(jobs[:3])) == 2
    assert build._units(jobs[:1]) == [[jobs[0]]]


def test_merged_kernels_each_load_from_their_own_cache_entry(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    sources = [_kernel(v) for v in (11, 22, 33, 44, 55)]
    before = build.STATS["compiled"]
    functions = build.load_kernels(sources, merge=True)
    assert build.STATS["compiled"] - before == 5
    assert [_call(f) for f in functions] == [12, 23, 34, 45, 56]
    directory = tmp_path / "kernels"
    keys = [build.cache_key(src, build.find_compiler()) for _, src in sources]
    links = [directory / f"{key}.so" for key in keys]
    assert all(path.is_symlink() for path in links)
    assert len({os.path.realpath(path) for path in links}) == 2  # two units, two cores
    for key, (_, src) in zip(keys, sources):  # each kernel's source stays readable
        assert (directory / f"{key}.c").read_text() == src
    script = textwrap.dedent(f"""
        import ctypes, json, numpy as np
        from ember.compiler.codegen import build
        sources = {sources!r}
        out = []
        for f in build.load_kernels(sources, compile=False):
            a = np.zeros(1, np.int64); f.argtypes = [ctypes.c_void_p]; f(a.ctypes.data)
            out.append(int(a[0]))
        print(json.dumps([out, build.STATS]))
    """)
    env = {**os.environ, "EMBER_CACHE_DIR": str(tmp_path), "PYTHONPATH": ROOT}
    proc = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                          text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    values, stats = json.loads(proc.stdout.strip().splitlines()[-1])
    assert values == [12, 23, 34, 45, 56] and stats["disk_hits"] == 5


def test_a_kernel_that_fails_in_a_unit_is_named_and_the_others_build(monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(os, "cpu_count", lambda: 1)  # (one unit holds all four)
    good = [_kernel(v) for v in (1, 2, 3)]
    broken = ("fused_broken", "void ember_kernel(int64_t *out) { out[0] = undeclared; }\n")
    with pytest.raises(build.KernelCompileError) as info:
        build.load_kernels(good + [broken], merge=True)
    text = str(info.value)
    assert "fused_broken" in text and "undeclared" in text
    assert "fused_store" not in text  # (the error is the broken kernel's own)
    c_file = text.split("kernel source: ")[1].split()[0]
    assert open(c_file).read() == broken[1]
    found = build.load_kernels(good, compile=False)
    assert [_call(f) for f in found] == [2, 3, 4]


def test_alongside_sources_build_in_the_batch_and_their_failures_are_not_raised(
        monkeypatch, tmp_path):
    monkeypatch.setenv("EMBER_CACHE_DIR", str(tmp_path))
    extra_good = ("library_store", "#include <stdint.h>\n"
                  "void ember_kernel(int64_t *out) { out[0] = 7; }\n")
    extra_bad = ("library_broken", "void ember_kernel(void) { nope; }\n")
    (function,) = build.load_kernels([_kernel(5)], merge=True,
                                     alongside=[extra_good, extra_bad])
    assert _call(function) == 6
    (library,) = build.load_kernels([extra_good], compile=False)
    assert _call(library) == 7
