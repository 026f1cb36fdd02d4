"""The pointwise activations ember.jit writes in elementwise ops
(``ember.ops.activation_decompositions``): decomposed into generated C loops, with the
values and gradients of eager mode at special points (infinities, NaN, the kinks of
the piecewise ones) and on random inputs."""
import numpy as np
import pytest

import ember
import ember.nn.functional as F
from ember.compiler.codegen import build
from ember.compiler.fused import FusedKernel

pytestmark = pytest.mark.skipif(build.find_compiler() is None, reason="no C compiler")

CASES = [  # (name, function, primitive)
    ("silu", F.silu, "silu"),
    ("mish", F.mish, "mish"),
    ("softplus", lambda x: F.softplus(x, beta=2.0, threshold=5.0), "softplus"),
    ("elu", lambda x: F.elu(x, alpha=0.7), "elu"),
    ("selu", F.selu, "elu"),
    ("celu", lambda x: F.celu(x, alpha=1.5), "elu"),
    ("leaky_relu", lambda x: F.leaky_relu(x, 0.2), "leaky_relu"),
    ("hardtanh", lambda x: F.hardtanh(x, -2.0, 2.5), "hardtanh"),
    ("relu6", F.relu6, "hardtanh"),
    ("hardsigmoid", F.hardsigmoid, "hardsigmoid"),
    ("hardswish", F.hardswish, "hardswish"),
]
SPECIAL = [-np.inf, -30.0, -5.0, -3.0, -2.9, -2.0, -1.0, -1e-30, -0.0, 0.0, 1e-30, 1.0,
           2.0, 2.5, 2.9, 3.0, 5.0, 6.0, 25.0, np.inf, np.nan]


def _inputs(dtype):
    rng = np.random.default_rng(0)
    values = np.concatenate([SPECIAL, rng.standard_normal(200) * 4]).astype(dtype)
    return ember.from_numpy(values.reshape(1, -1).repeat(3, 0))


@pytest.mark.parametrize("dtype,rtol,atol", [(np.float32, 2e-6, 1e-7),
                                             (np.float64, 1e-13, 1e-300)])
@pytest.mark.parametrize("name,fn,primitive", CASES, ids=[c[0] for c in CASES])
def test_decomposed_activation_equals_eager(name, fn, primitive, dtype, rtol, atol):
    x = _inputs(dtype)

    def value_and_grad(x):
        y = fn(x) * 1.5 + 0.25  # (a chain the activation fuses into)
        (g,) = ember.autograd.grad(y.sum(), [x])
        return y, g

    leaf = x.detach().requires_grad_()
    eager = value_and_grad(leaf)
    compiled = ember.jit(value_and_grad)
    actual = compiled(x.detach().requires_grad_())
    names = {ins.op.name for ins in compiled.graph().instrs}
    assert primitive not in names and primitive + "_backward" not in names, names
    assert any(isinstance(ins.op, FusedKernel) for ins in compiled.graph().instrs)
    for a, e in zip(actual, eager):
        a, e = a.detach().numpy(), e.detach().numpy()
        np.testing.assert_array_equal(np.isnan(a), np.isnan(e))
        np.testing.assert_allclose(a, e, rtol=rtol, atol=atol)
