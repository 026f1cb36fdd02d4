"""``ember.nn.utils``: gradient clipping, flattening parameters into one vector,
parametrizations (weight and spectral norm, orthogonal), BatchNorm fusion, functional calls."""
from .clip_grad import (clip_grad_norm_, clip_grad_value_, clip_grads_with_norm_,  # noqa: F401
                        get_total_norm)
from .convert_parameters import parameters_to_vector, vector_to_parameters  # noqa: F401
from . import rnn  # noqa: F401
from . import parametrizations, parametrize, stateless  # noqa: F401
from . import prune  # noqa: F401  (torch.nn.utils.prune's API and masks)
from .fusion import (fuse_conv_bn_eval, fuse_conv_bn_weights, fuse_linear_bn_eval,  # noqa: F401
                     fuse_linear_bn_weights)
from .init import skip_init  # noqa: F401
from .spectral_norm import remove_spectral_norm, spectral_norm  # noqa: F401
from .weight_norm import remove_weight_norm, weight_norm  # noqa: F401
