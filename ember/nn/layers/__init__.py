"""The layers of ``ember.nn``, one family a file."""
from .activation import *  # noqa: F401,F403
from .flatten import *  # noqa: F401,F403
from .linear import *  # noqa: F401,F403
from .loss import *  # noqa: F401,F403
from .rnn import *  # noqa: F401,F403
