"""``ember.nn.functional``: the functional forms of the layers, with PyTorch's names and
signatures. The fused primitives live in ``ember/ops`` (conv, pooling, activation, norm,
loss, attention, nn_misc); this module gathers them."""
from ..ops.activation import *  # noqa: F401,F403
from ..ops.attention import *  # noqa: F401,F403
from ..ops.conv import *  # noqa: F401,F403
from ..ops.grid_sample import *  # noqa: F401,F403
from ..ops.loss import *  # noqa: F401,F403
from ..ops.loss_ctc import *  # noqa: F401,F403
from ..ops.loss_extra import *  # noqa: F401,F403
from ..ops.loss_margin import *  # noqa: F401,F403
from ..ops.loss_multi_margin import *  # noqa: F401,F403
from ..ops.movement import pad  # noqa: F401
from ..ops.nn_misc import *  # noqa: F401,F403
from ..ops.toplevel_nn import native_channel_shuffle  # noqa: F401
from ..ops.norm import *  # noqa: F401,F403
from ..ops.interpolate import *  # noqa: F401,F403
from ..ops.pooling import *  # noqa: F401,F403
from ..ops.pooling_extra import *  # noqa: F401,F403
