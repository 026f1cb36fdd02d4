"""``ember.nn``: modules, layers, initialisation and the functional API."""
from . import functional  # noqa: F401
from . import init  # noqa: F401
from . import utils  # noqa: F401
from .containers import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .layers import *  # noqa: F401,F403
from .module import Module
from .parameter import Parameter
