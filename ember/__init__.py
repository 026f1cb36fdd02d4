"""ember: a deep-learning framework with PyTorch's names, on NumPy.

>>> import ember
>>> x = ember.randn(3, requires_grad=True)
>>> (x * x).sum().backward()
"""
import warnings as _warnings

from . import dtypes
from .dtypes import (DType, bfloat16, bool, double, float, float16, float32, float64, half,
                     int, int8, int16, int32, int64, long, short, uint8, promote_types,
                     get_default_dtype, set_default_dtype)
from .dtypes import can_cast, result_type
from .dtypes import cdouble, cfloat, complex64, complex128
from .backends import device
from .errors import EmberError, EmberIndexError, EmberTypeError, EmberValueError, ShapeError
from .tensor import Size, Tensor, is_floating_point, is_tensor, numel
from . import ops
from .ops.creation import *  # noqa: F401,F403
from .ops.random import *  # noqa: F401,F403
from .ops.elementwise import *  # noqa: F401,F403
from .ops.elementwise_composite import *  # noqa: F401,F403
from .ops.logical import *  # noqa: F401,F403
from .ops.reduce import *  # noqa: F401,F403
from .ops.scan import *  # noqa: F401,F403
from .ops.shape import *  # noqa: F401,F403
from .ops.index import index_put  # noqa: F401
from .ops.linalg import *  # noqa: F401,F403
from .ops.movement import *  # noqa: F401,F403
from .ops.selection import *  # noqa: F401,F403
from .ops.statistics import *  # noqa: F401,F403
from .ops.scan_extra import *  # noqa: F401,F403
from .ops.math_extra import *  # noqa: F401,F403
from .ops.complex_support import *  # noqa: F401,F403  (real, imag, view_as_real, polar, ...)
from .ops.stats_extra import *  # noqa: F401,F403
from .ops.linalg_more import matrix_exp  # noqa: F401
from .ops.special_fns import digamma, erfinv, i0, lgamma, mvlgamma, polygamma  # noqa: F401
from .ops.linalg_extra import TOP_LEVEL as _TOP_LEVEL_LINALG
from .ops.strided import *  # noqa: F401,F403
from .ops.view_scatter import *  # noqa: F401,F403
from .ops.index_more import *  # noqa: F401,F403
from .ops.igamma import *  # noqa: F401,F403
from .ops.linalg_solvers import cholesky_inverse, cholesky_solve  # noqa: F401
from .ops.methods_more import *  # noqa: F401,F403
globals().update(_TOP_LEVEL_LINALG)
from . import linalg, special  # noqa: E402,F401
from . import fft  # noqa: E402,F401  (torch.fft's transforms)
from . import random  # noqa: E402,F401  (torch.random's names; ember.ops.random holds the ops)
from . import autograd
from .autograd import (enable_grad, inference_mode, is_grad_enabled,
                       is_inference_mode_enabled, no_grad, set_grad_enabled)
from .autograd.anomaly_mode import (is_anomaly_check_nan_enabled,  # noqa: F401
                                    is_anomaly_enabled, set_anomaly_enabled)
from ._printing import get_printoptions, printoptions, set_printoptions
from .serialization import load, save
from .memory_format import (channels_last, channels_last_3d, contiguous_format,  # noqa: F401
                            memory_format, preserve_format)

dtype = DType

# NumPy warns on 1/0 and log(-1); PyTorch returns inf/nan silently, and so does ember.
_warnings.filterwarnings("ignore", category=RuntimeWarning, module=r"ember(\.|$)")

__version__ = "0.1.0"


from . import func  # noqa: E402  (ember.func uses the names above)
from .func import vmap  # noqa: E402,F401
from . import testing  # noqa: E402,F401
from . import data, nn, optim, utils  # noqa: E402
from . import distributions  # noqa: E402
from .compiler import jit  # noqa: E402
from . import train  # noqa: E402
from . import models  # noqa: E402
from . import peft, prune  # noqa: E402
from . import amp  # noqa: E402
from . import cuda  # noqa: E402
from . import cpu  # noqa: E402  (torch.cpu's names and cpu.amp)
from .compile_api import compile  # noqa: E402  (torch.compile's signature, on ember.jit)
from . import profiler  # noqa: E402  (torch.profiler's interface)
from . import quant  # noqa: E402
from . import onnx  # noqa: E402  (the onnx package itself is imported when an export runs)
from .pretrained import load_pretrained, save_pretrained  # noqa: E402
from .amp import autocast  # noqa: E402
from .compiler.eager import accelerate as _accelerate  # noqa: E402

# Eager fused primitives (softmax, layer norm, GELU, ...) run as compiled kernels on large
# inputs; EMBER_EAGER_KERNELS=0 keeps them on NumPy.
if __import__("os").environ.get("EMBER_EAGER_KERNELS", "1") != "0":
    _accelerate()

# The functional ops PyTorch also has at the top level (``torch.softmax``, ...).
_TOP_LEVEL_NN = ("softmax", "log_softmax", "layer_norm", "group_norm", "batch_norm",
                 "instance_norm", "dropout", "alpha_dropout", "feature_alpha_dropout",
                 "embedding", "embedding_bag", "cosine_similarity", "pairwise_distance",
                 "pdist", "pixel_shuffle", "pixel_unshuffle", "conv1d", "conv2d", "conv3d",
                 "conv_transpose1d", "conv_transpose2d", "conv_transpose3d", "max_pool1d",
                 "max_pool2d", "max_pool3d", "avg_pool1d", "adaptive_avg_pool1d",
                 "adaptive_max_pool1d", "bilinear", "celu", "selu", "prelu", "rrelu",
                 "hardshrink", "threshold", "kl_div", "binary_cross_entropy_with_logits",
                 "cosine_embedding_loss", "margin_ranking_loss", "hinge_embedding_loss",
                 "poisson_nll_loss", "triplet_margin_loss")
for _name in _TOP_LEVEL_NN:
    if hasattr(nn.functional, _name):
        globals()[_name] = getattr(nn.functional, _name)
del _name

# PyTorch's other top-level functions: windows, settings, in-place and *_copy forms, ...
# (``range`` shadows the builtin in this module from here on, as ``torch.range`` does)
from .ops.windows import *  # noqa: E402,F401,F403
from .ops.toplevel_creation import *  # noqa: E402,F401,F403
from .ops.toplevel_math import *  # noqa: E402,F401,F403
from .ops.toplevel_lu import *  # noqa: E402,F401,F403
from .ops.toplevel_extra import *  # noqa: E402,F401,F403
from .settings import *  # noqa: E402,F401,F403
from .type_info import finfo, iinfo  # noqa: E402,F401
from .tensor_queries import *  # noqa: E402,F401,F403
from .legacy_types import *  # noqa: E402,F401,F403  (FloatTensor, ..., set_default_tensor_type)
from .autocast_state import *  # noqa: E402,F401,F403  (is_autocast_enabled, ...)
from .ops.toplevel_nn import *  # noqa: E402,F401,F403  (channel_shuffle, ctc_loss, ...)
from .rnn_functional import *  # noqa: E402,F401,F403  (torch.lstm, torch.gru_cell, ...)
from .native_ops import *  # noqa: E402,F401,F403  (native_layer_norm, ...)
from .linalg_legacy import *  # noqa: E402,F401,F403  (triangular_solve, geqrf, ...)
from .conv_tbc import conv_tbc  # noqa: E402,F401
from .spectral import istft, stft  # noqa: E402,F401
from .ops.complex_support import mark_ops as _mark_complex_ops  # noqa: E402
_mark_complex_ops()  # (every op is registered by now)

# ``axis=`` and ``keepdims=`` wherever ``dim=`` and ``keepdim=`` are taken, as in PyTorch
# (kept last: it wraps the names defined above)
from .keyword_aliases import install as _install_keyword_aliases  # noqa: E402
_install_keyword_aliases(globals(), Tensor)
