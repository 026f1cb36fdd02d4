"""Which ops autocast changes, and to what: PyTorch's CPU autocast lists, in ember's names.

A name is either a registry op (``ember.ops.registry.OPS``; :func:`apply` consults the
table for every op) or a public function that checks its arguments' dtypes, or is
composed of several ops, before it reaches :func:`apply` (``linear``, ``mm``,
``mse_loss``, ...); those call :func:`ember.ops.registry.autocast_inputs` first.

Every op not named here runs in the dtypes of its inputs, with the usual promotion,
as in PyTorch (elementwise ops, reductions, softmax, the norms on CPU).
"""
from __future__ import annotations

LOWER_PRECISION = "lower_precision"  # cast float16/bfloat16/float32 inputs to autocast's dtype
FLOAT32 = "float32"                  # cast float16/bfloat16 inputs to float32
PROMOTE = "promote"                  # cast floating inputs to the widest of them

# PyTorch: conv1d/2d/3d, conv_transpose1d/2d/3d, _convolution, bmm, mm, baddbmm, addmm,
# addbmm, linear, matmul, prelu, scaled_dot_product_attention; einsum, which PyTorch
# runs through bmm, too. mv, dot and addmv are not on the list (they keep their inputs'
# dtypes): they run ember's matmul primitive with autocast set aside.
_LOWER_PRECISION_OPS = (
    "linear", "matmul", "mm", "bmm", "addmm", "baddbmm", "einsum",
    "convolution", "conv_transpose", "prelu", "scaled_dot_product_attention",
)

# PyTorch's CPU float32 list, for the ops ember has: the losses, prod. (Its norms,
# softmax, log_softmax, sum and mean are not on the CPU list: they keep their input dtype.)
_FLOAT32_OPS = (
    "cross_entropy_loss", "nll_loss", "binary_cross_entropy",
    "binary_cross_entropy_with_logits", "mse_loss", "l1_loss", "smooth_l1", "huber", "prod",
    "kl_div", "poisson_nll_loss", "hinge_embedding_loss", "soft_margin_loss",
    "margin_ranking_loss", "triplet_margin_loss", "cosine_embedding_loss", "ctc_loss",
    "grid_sample",
    "fft", "stft", "istft",  # (every ember.fft transform goes by "fft")
)

_PROMOTE_OPS = ("cat", "stack", "index_copy")

POLICY: dict[str, str] = {}
POLICY.update(dict.fromkeys(_LOWER_PRECISION_OPS, LOWER_PRECISION))
POLICY.update(dict.fromkeys(_FLOAT32_OPS, FLOAT32))
POLICY.update(dict.fromkeys(_PROMOTE_OPS, PROMOTE))


def policy_of(name: str) -> str | None:
    """The autocast rule for op or function ``name``: ``"lower_precision"``,
    ``"float32"``, ``"promote"``, or None (runs in its inputs' dtypes).

    >>> ember.amp.policy_of("linear")
    'lower_precision'
    """
    return POLICY.get(name)
