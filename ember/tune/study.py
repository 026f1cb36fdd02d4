"""``optimize``: run an Optuna study over a Python objective or over a config file's
``tune:`` section, with samplers and pruners named as data."""
from __future__ import annotations

import os
from typing import Any, Callable, Iterable, Mapping

from ._optuna import require_optuna
from .errors import TuneError
from .pruning import PruningCallback
from .space import SearchSpace

__all__ = ["optimize", "make_sampler", "make_pruner", "ConfigObjective"]

_SAMPLERS = {"tpe": "TPESampler", "random": "RandomSampler", "cmaes": "CmaEsSampler",
             "qmc": "QMCSampler", "gp": "GPSampler"}
_PRUNERS = {"median": "MedianPruner", "percentile": "PercentilePruner",
            "successive_halving": "SuccessiveHalvingPruner", "hyperband": "HyperbandPruner",
            "threshold": "ThresholdPruner", "none": "NopPruner"}


def _named(spec: Any, table: Mapping[str, str], path: str) -> tuple[str, dict[str, Any]]:
    if isinstance(spec, str):
        spec = {"name": spec}
    if not isinstance(spec, Mapping) or "name" not in spec:
        raise TuneError(f"{path}: expected a name ({', '.join(repr(n) for n in table)}), a "
                        f"mapping with name: and options, or an Optuna object; got {spec!r}")
    name = spec["name"]
    if name not in table:
        raise TuneError(f"{path}.name: expected one of {', '.join(repr(n) for n in table)}, "
                        f"got {name!r}")
    return name, {k: v for k, v in spec.items() if k != "name"}


def make_sampler(spec: Any = None, seed: int | None = None, path: str = "sampler"):
    """An Optuna sampler from ``spec``: None (TPE), a name (``"tpe"``, ``"random"``,
    ``"cmaes"``, ``"qmc"``, ``"gp"``), a mapping ``{"name": ..., option: value}``
    (options checked against the sampler's signature), or a sampler object (returned
    as is). ``seed`` seeds it unless the options give one."""
    optuna = require_optuna()
    if isinstance(spec, optuna.samplers.BaseSampler):
        return spec
    from ..config.options import check_options
    name, options = _named("tpe" if spec is None else spec, _SAMPLERS, path)
    cls = getattr(optuna.samplers, _SAMPLERS[name])
    options = check_options(path, options, cls)
    if seed is not None and "seed" not in options:
        options["seed"] = seed
    return cls(**options)


def make_pruner(spec: Any = None, path: str = "pruner"):
    """An Optuna pruner from ``spec``: None (Optuna's default, a ``MedianPruner``), a
    name (``"median"``, ``"percentile"``, ``"successive_halving"``, ``"hyperband"``,
    ``"threshold"``, ``"none"``), a mapping ``{"name": ..., option: value}``, or a
    pruner object."""
    optuna = require_optuna()
    if spec is None or isinstance(spec, optuna.pruners.BasePruner):
        return spec
    from ..config.options import check_options
    name, options = _named(spec, _PRUNERS, path)
    cls = getattr(optuna.pruners, _PRUNERS[name])
    return cls(**check_options(path, options, cls))


class ConfigObjective:
    """The objective of a config-driven search: each trial applies the values the
    sampler picks for ``tune.space`` (dotted key paths) to the config, trains it with
    a :class:`PruningCallback` on ``metric`` and returns the final value of ``metric``
    (``val_*`` from a last evaluation of the validation split).

    The trial's user attribute ``"final"`` holds every final metric. With
    ``trainer.checkpoint_dir`` set, trial N writes into ``<checkpoint_dir>/trial-N``.
    """

    def __init__(self, config: Mapping[str, Any], metric: str) -> None:
        self.config = {**config, "tune": None}
        self.metric = metric
        self.space = SearchSpace(config["tune"]["space"], path="tune.space")

    def __call__(self, trial) -> float:
        from ..config import load_config, train
        params = self.space.suggest(trial)
        checkpoint_dir = self.config["trainer"]["checkpoint_dir"]
        if checkpoint_dir is not None:
            params = {**params, "trainer.checkpoint_dir":
                      os.path.join(checkpoint_dir, f"trial-{trial.number}")}
        config = load_config(self.config, params)
        _, final = train(config, callbacks=[PruningCallback(trial, self.metric)],
                         progress_bar=False)
        trial.set_user_attr("final", final)
        if self.metric not in final:
            raise TuneError(f"tune.metric: {self.metric!r} is not among the final metrics "
                            f"{sorted(final)}")
        return final[self.metric]


def optimize(objective_or_config: Callable | str | os.PathLike | Mapping[str, Any],
             n_trials: int | None = None, direction: str | None = None, *,
             sampler: Any = None, pruner: Any = None, storage: str | None = None,
             seed: int | None = None, timeout: float | None = None,
             study_name: str | None = None, load_if_exists: bool = False,
             metric: str | None = None, overrides: Iterable[str] | Mapping[str, Any] = (),
             callbacks: Iterable[Callable] | None = None,
             catch: Iterable[type[Exception]] = ()):
    """Search hyperparameters with Optuna; returns the ``optuna.Study``
    (``study.best_params``, ``study.best_value``, ``study.best_trial``,
    ``study.trials``).

    Args:
        objective_or_config: ``objective(trial) -> float`` (use ``trial.suggest_*``
            or :class:`SearchSpace`), or a config (a path or a mapping) with a
            ``tune:`` section, whose settings are the defaults of the arguments below.
        n_trials: trials to run (with neither this nor ``timeout``: an error).
        direction: ``"minimize"`` or ``"maximize"`` the objective.
        sampler: see :func:`make_sampler` (default TPE).
        pruner: see :func:`make_pruner` (default Optuna's ``MedianPruner``).
        storage: an Optuna storage URL (``"sqlite:///study.db"``) to keep the study;
            None keeps it in memory.
        seed: the sampler's seed (a config's default: ``tune.seed``, else
            ``trainer.seed``).
        timeout: stop starting trials after this many seconds.
        study_name: the study's name in ``storage``.
        load_if_exists: continue the study of that name in ``storage``.
        metric: for a config: the final metric to optimise (default ``tune.metric``).
        overrides: for a config: ``"key.path=value"`` overrides applied first.
        callbacks: Optuna callbacks ``fn(study, frozen_trial)`` after each trial.
        catch: exceptions that fail a trial without stopping the study (a config
            search always adds ``NonFiniteLossError``: a diverging trial fails alone).

    >>> def objective(trial):
    ...     x = trial.suggest_float("x", -10, 10)
    ...     return (x - 2) ** 2
    >>> study = ember.tune.optimize(objective, n_trials=30, direction="minimize", seed=0)
    >>> study.best_params
    {'x': 2.03...}
    >>> study = ember.tune.optimize("examples/digits_tune.yaml")
    """
    optuna = require_optuna()
    catch = tuple(catch)
    if callable(objective_or_config):
        objective, tune, default_seed = objective_or_config, {}, None
    elif isinstance(objective_or_config, (str, os.PathLike, Mapping)):
        from ..config import load_config
        from ..train import NonFiniteLossError
        config = load_config(objective_or_config, overrides)
        tune = config["tune"]
        if tune is None:
            raise TuneError("optimize: the config has no tune: section (n_trials, "
                            "direction, metric, space, ...); see docs/cli.md")
        objective = ConfigObjective(config, metric or tune["metric"])
        default_seed = tune["seed"] if tune["seed"] is not None else config["trainer"]["seed"]
        catch += (NonFiniteLossError,)
    else:
        raise TuneError(f"optimize: expected an objective function or a config (a path or "
                        f"a mapping), got {type(objective_or_config).__name__}")
    n_trials = n_trials if n_trials is not None else tune.get("n_trials")
    timeout = timeout if timeout is not None else tune.get("timeout")
    if n_trials is None and timeout is None:
        raise TuneError("optimize: give n_trials= or timeout= (otherwise the search never "
                        "ends)")
    if n_trials is not None and (isinstance(n_trials, bool) or not isinstance(n_trials, int)
                                 or n_trials < 1):
        raise TuneError(f"optimize: n_trials must be a positive int, got {n_trials!r}")
    direction = direction or tune.get("direction") or "minimize"
    if direction not in ("minimize", "maximize"):
        raise TuneError(f"optimize: direction must be 'minimize' or 'maximize', got "
                        f"{direction!r}")
    seed = seed if seed is not None else default_seed
    where = "tune." if tune else ""
    study = optuna.create_study(
        storage=storage if storage is not None else tune.get("storage"),
        sampler=make_sampler(sampler if sampler is not None else tune.get("sampler"), seed,
                             path=f"{where}sampler"),
        pruner=make_pruner(pruner if pruner is not None else tune.get("pruner"),
                           path=f"{where}pruner"),
        study_name=study_name if study_name is not None else tune.get("study_name"),
        direction=direction, load_if_exists=load_if_exists)
    study.optimize(objective, n_trials=n_trials, timeout=timeout, catch=catch,
                   callbacks=list(callbacks) if callbacks else None)
    return study
