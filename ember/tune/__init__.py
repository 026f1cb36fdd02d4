"""``ember.tune``: hyperparameter search on Optuna — :func:`optimize` over a Python
objective or a config file's ``tune:`` section, :class:`SearchSpace` to describe the
ranges as data, and :class:`PruningCallback` to stop bad trials early from inside a
Trainer. Needs the ``ember[tune]`` extra (Optuna); importing this package does not.

>>> def objective(trial):
...     lr = trial.suggest_float("lr", 1e-4, 1e-1, log=True)
...     model = ...; opt = ember.optim.Adam(model.parameters(), lr=lr)
...     trainer = ember.train.Trainer(model, opt, F.cross_entropy, train_loader=train,
...                                   val_loader=val, max_epochs=5,
...                                   callbacks=[ember.tune.PruningCallback(trial)])
...     trainer.fit()
...     return trainer.logged["val_loss"]
>>> study = ember.tune.optimize(objective, n_trials=20, direction="minimize", seed=0)
>>> study.best_params
"""
from .errors import MissingDependencyError, TuneError
from .pruning import PruningCallback
from .space import CategoricalParam, FloatParam, IntParam, SearchSpace, suggest
from .study import ConfigObjective, make_pruner, make_sampler, optimize

__all__ = ["optimize", "make_sampler", "make_pruner", "ConfigObjective", "SearchSpace",
           "FloatParam", "IntParam", "CategoricalParam", "suggest", "PruningCallback",
           "TuneError", "MissingDependencyError"]
