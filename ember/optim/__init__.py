"""``ember.optim``: optimizers and learning-rate schedulers, with PyTorch's names,
arguments, update rules and state-dict format.

>>> opt = ember.optim.AdamW(model.parameters(), lr=3e-4)
>>> sched = ember.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=100)
"""
from . import lr_scheduler
from .adafactor import Adafactor
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam
from .adamax import Adamax
from .adamw import AdamW
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer, OptimizerError
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
# (a module of helpers: kept out of __all__, which ember.config reads as optimizer names)
from . import swa_utils

__all__ = ["Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "NAdam", "Optimizer",
           "OptimizerError", "RAdam", "RMSprop", "SGD", "lr_scheduler",
           "ASGD", "Adafactor", "LBFGS", "Rprop"]
