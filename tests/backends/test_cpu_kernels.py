"""The C kernels built ahead of time (``ember kernels``): every hand-written kernel a
process can build at first use is on the list, with eager mode's common generated
ones, and once built, a new process runs eager ops of every kind (at other sizes, in the
same layouts) without compiling anything."""
import json
import os
import subprocess
import sys

import pytest

import ember
from ember.backends import cpu_kernels
from ember.cli import main
from ember.compiler.codegen import build

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

needs_cc = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")

# eager ops that reach each kind of hand-written kernel, in a fresh process
_USES = """
import json, numpy as np, ember
from ember.compiler.codegen import build
import ember.nn.functional as F
ember.manual_seed(0)
for dtype in (ember.float32, ember.float64):
    a = ember.randn(96, 96, dtype=dtype, requires_grad=True)
    (a @ a).sum().backward()
    x = ember.randn(4, 3, 12, 12, dtype=dtype, requires_grad=True)
    w = ember.randn(8, 3, 3, 3, dtype=dtype, requires_grad=True)
    y = F.max_pool2d(F.conv2d(x, w, padding=1), 2)
    F.conv_transpose2d(y, w).sum().backward()
    h = ember.randn(6, 32, dtype=dtype, requires_grad=True)
    F.layer_norm(h, (32,)).pow(2).sum().backward()
    q = ember.randn(2, 2, 16, 8, dtype=dtype, requires_grad=True)
    F.scaled_dot_product_attention(q, q, q, is_causal=True).sum().backward()
    F.cross_entropy(h, ember.tensor([1, 2, 3, 4, 5, 6])).backward()
    e = ember.nn.Embedding(10, 4).to(dtype)
    e(ember.tensor([1, 1, 3])).sum().backward()
    # eager mode's generated kernels, at sizes ember kernels did not run (same layouts)
    g = ember.randn(7, 1000, dtype=dtype, requires_grad=True)
    (F.gelu(g) * F.silu(g) + F.softmax(g, -1) + F.log_softmax(g, -1)).sum().backward()
print(json.dumps(build.STATS))
"""


def test_sources_cover_every_hand_written_kernel():
    from ember.ops import c_loops
    names = [name for name, _ in cpu_kernels.sources()]
    assert len(names) == len(set(names))
    for loop in c_loops.ALL:
        assert f"{loop.name}_float" in names and f"{loop.name}_double" in names
    for required in ("gemm_float", "gemm_double", "blas_driver", "int8_gemm",
                     "int8_gemm_avx2", "conv2d_forward_float", "attention_double"):
        assert required in names


@needs_cc
def test_built_kernels_leave_nothing_to_compile_in_a_new_process():
    done = cpu_kernels.build()  # (the ambient cache: `make test` has built them already)
    assert done["kernels"] == len(cpu_kernels.sources()) + len(cpu_kernels.eager_sources())
    assert len(cpu_kernels.eager_sources()) >= 40  # (both dtypes' activations, softmaxes)
    again = cpu_kernels.build()
    assert again["compiled"] == 0
    env = {**os.environ, "EMBER_EAGER_KERNELS": "1"}
    env.pop("EMBER_JIT_BACKEND", None)
    run = subprocess.run([sys.executable, "-c", _USES], capture_output=True, text=True,
                         env=env, cwd=ROOT, timeout=300)
    assert run.returncode == 0, run.stderr
    stats = json.loads(run.stdout.strip().splitlines()[-1])
    assert stats["compiled"] == 0
    assert stats["disk_hits"] >= 20  # (it did use the kernels, from the cache)


@needs_cc
def test_cli_builds_into_the_cache(capsys):
    assert main(["kernels"]) == 0
    out = capsys.readouterr().out
    count = len(cpu_kernels.sources()) + len(cpu_kernels.eager_sources())
    assert f"{count} kernels in {build.cache_dir()}" in out
    assert "0 compiled now" in out


def test_cli_without_a_compiler_says_so(monkeypatch, capsys):
    monkeypatch.setattr(build, "find_compiler", lambda: None)
    assert main(["kernels"]) == 1
    err = capsys.readouterr().err
    assert "no C compiler found" in err and "NumPy" in err
    with pytest.raises(ember.EmberError, match="no C compiler"):
        cpu_kernels.build()
