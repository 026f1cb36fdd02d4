"""PyTorch's ``torch.backends.cuda`` names that ember accepts for porting, installed into
``ember.backends.cuda`` (the CUDA backend module, ``cuda.py``) by :func:`install`.

What they change: nothing but what they report. ember's attention
(``F.scaled_dot_product_attention``) has one implementation, so the SDPA switches
(``enable_flash_sdp`` ...) are kept and read back only; the linear-algebra and BLAS
library preferences are kept only (CuPy picks its libraries); the reduced-precision
reduction flags of ``matmul`` are kept only (cuBLAS's defaults apply). The one setting
that acts is ``ember.backends.cuda.matmul.allow_tf32`` (``cuda.py``).

>>> ember.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
>>> ember.backends.cuda.enable_flash_sdp(False)
>>> ember.backends.cuda.flash_sdp_enabled()
False
"""
from __future__ import annotations

import contextlib
import importlib.util
import warnings

from ..errors import EmberError

__all__ = ["is_built", "enable_flash_sdp", "flash_sdp_enabled", "enable_mem_efficient_sdp",
           "mem_efficient_sdp_enabled", "enable_math_sdp", "math_sdp_enabled",
           "enable_cudnn_sdp", "cudnn_sdp_enabled", "allow_fp16_bf16_reduction_math_sdp",
           "fp16_bf16_reduction_math_sdp_allowed", "is_flash_attention_available",
           "sdp_kernel", "preferred_linalg_library", "preferred_blas_library"]

# matmul's flags besides allow_tf32, with PyTorch's defaults
MATMUL_FLAGS = {"allow_fp16_reduced_precision_reduction": True,
                "allow_bf16_reduced_precision_reduction": True,
                "allow_fp16_accumulation": False}

_sdp = {"flash": True, "mem_efficient": True, "math": True, "cudnn": True,
        "fp16_bf16_reduction_math": False}
_libraries = {"linalg": "default", "blas": "cublas"}
_LINALG = ("default", "cusolver", "magma")
_BLAS = ("cublas", "cublaslt", "hipblaslt", "ck", "default")


def is_built() -> bool:
    """Whether ember can use CUDA here: CuPy is installed (a GPU is asked about by
    ``ember.cuda.is_available()``). Does not import CuPy.

    >>> ember.backends.cuda.is_built()
    False
    """
    return importlib.util.find_spec("cupy") is not None


def enable_flash_sdp(enabled: bool) -> None:
    """Record whether SDPA may use the flash kernel (kept only: ember has one SDPA)."""
    _sdp["flash"] = bool(enabled)


def flash_sdp_enabled() -> bool:
    """The value :func:`enable_flash_sdp` last set (True at first)."""
    return _sdp["flash"]


def enable_mem_efficient_sdp(enabled: bool) -> None:
    """Record whether SDPA may use the memory-efficient kernel (kept only)."""
    _sdp["mem_efficient"] = bool(enabled)


def mem_efficient_sdp_enabled() -> bool:
    """The value :func:`enable_mem_efficient_sdp` last set (True at first)."""
    return _sdp["mem_efficient"]


def enable_math_sdp(enabled: bool) -> None:
    """Record whether SDPA may use the math implementation (kept only)."""
    _sdp["math"] = bool(enabled)


def math_sdp_enabled() -> bool:
    """The value :func:`enable_math_sdp` last set (True at first)."""
    return _sdp["math"]


def enable_cudnn_sdp(enabled: bool) -> None:
    """Record whether SDPA may use cuDNN's attention (kept only)."""
    _sdp["cudnn"] = bool(enabled)


def cudnn_sdp_enabled() -> bool:
    """The value :func:`enable_cudnn_sdp` last set (True at first)."""
    return _sdp["cudnn"]


def allow_fp16_bf16_reduction_math_sdp(enabled: bool) -> None:
    """Record whether the math SDPA may reduce in half precision (kept only)."""
    _sdp["fp16_bf16_reduction_math"] = bool(enabled)


def fp16_bf16_reduction_math_sdp_allowed() -> bool:
    """The value :func:`allow_fp16_bf16_reduction_math_sdp` last set (False at first)."""
    return _sdp["fp16_bf16_reduction_math"]


def is_flash_attention_available() -> bool:
    """False: ember has no FlashAttention kernel."""
    return False


@contextlib.contextmanager
def sdp_kernel(enable_flash: bool = True, enable_math: bool = True,
               enable_mem_efficient: bool = True, enable_cudnn: bool = True):
    """Deprecated in PyTorch (it warns, and so does ember): set the four SDPA switches
    inside the block and restore them after. Kept only; see the module's notes.

    >>> with ember.backends.cuda.sdp_kernel(enable_flash=False):
    ...     y = F.scaled_dot_product_attention(q, k, v)
    """
    warnings.warn("`ember.backends.cuda.sdp_kernel()` is deprecated. In the future, this "
                  "context manager will be removed. Please see "
                  "`torch.nn.attention.sdpa_kernel()` for the new context manager, with "
                  "updated signature.", FutureWarning, stacklevel=3)
    before = dict(_sdp)
    _sdp.update(flash=bool(enable_flash), math=bool(enable_math),
                mem_efficient=bool(enable_mem_efficient), cudnn=bool(enable_cudnn))
    try:
        yield
    finally:
        _sdp.clear()
        _sdp.update(before)


def _preferred(kind: str, choices: tuple, backend) -> str:
    if backend is not None:
        name = str(getattr(backend, "name", backend)).lower()
        if name not in choices:
            raise EmberError(f"Unknown input value. Choose from: {', '.join(choices)}.")
        _libraries[kind] = name
    return _libraries[kind]


def preferred_linalg_library(backend: str | None = None) -> str:
    """Record (and return) the library PyTorch would use for GPU linear algebra:
    ``"default"``, ``"cusolver"`` or ``"magma"``. Kept only (CuPy picks cuSOLVER)."""
    return _preferred("linalg", _LINALG, backend)


def preferred_blas_library(backend: str | None = None) -> str:
    """Record (and return) the BLAS library PyTorch would use on the GPU:
    ``"cublas"``, ``"cublaslt"``, ... Kept only (CuPy calls cuBLAS)."""
    return _preferred("blas", _BLAS, backend)


def install(module) -> None:
    """Add these names to ``module`` (``ember.backends.cuda``) and the reduced-precision
    flags to its ``matmul`` settings object."""
    for name in __all__:
        setattr(module, name, globals()[name])
    for name, default in MATMUL_FLAGS.items():
        if not hasattr(module.matmul, name):
            setattr(module.matmul, name, default)
