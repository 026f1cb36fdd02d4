"""ember.tune: search spaces, optimize on Optuna, the PruningCallback inside a Trainer,
config-driven searches and ``ember tune``."""
from __future__ import annotations

import os
import re
import sys

import pytest

import ember
import ember.nn.functional as F
from ember.config import ConfigError, validate_config
from ember.tune import (MissingDependencyError, PruningCallback, SearchSpace, TuneError,
                        optimize)

optuna = pytest.importorskip("optuna")
optuna.logging.set_verbosity(optuna.logging.WARNING)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
TUNE_YAML = os.path.join(ROOT, "examples", "digits_tune.yaml")


# Search spaces ---------------------------------------------------------------------------

def test_search_space_parses_and_suggests():
    space = SearchSpace({"lr": {"type": "float", "low": 1e-4, "high": 1e-1, "log": True},
                         "hidden": {"type": "int", "low": 16, "high": 128, "step": 16},
                         "act": ["relu", "gelu"]})
    assert space.to_dict()["act"] == {"type": "categorical", "choices": ["relu", "gelu"]}
    trial = optuna.create_study(sampler=optuna.samplers.RandomSampler(seed=0)).ask()
    params = space.suggest(trial)
    assert 1e-4 <= params["lr"] <= 1e-1 and params["hidden"] % 16 == 0
    assert params["act"] in ("relu", "gelu")
    assert trial.params == params
    assert isinstance(trial.distributions["lr"], optuna.distributions.FloatDistribution)
    assert trial.distributions["lr"].log is True


@pytest.mark.parametrize("spec, message", [
    ({"lr": {"type": "float", "low": 0.1, "high": 0.01}},
     "space['lr'].high: expected a value >= low (0.1), got 0.01"),
    ({"lr": {"type": "float", "low": 0.0, "high": 1.0, "log": True}},
     "space['lr'].low: a log-scale range needs low > 0, got 0.0"),
    ({"n": {"type": "int", "low": 1.5, "high": 4}}, "space['n'].low: expected an int, got 1.5"),
    ({"n": {"type": "integer", "low": 1, "high": 4}},
     "space['n'].type: expected one of 'float', 'int', 'categorical', got 'integer'"),
    ({"n": {"type": "int", "low": 1}}, "space['n'].high: missing required key"),
    ({"a": {"type": "categorical", "choices": []}}, "space['a'].choices: expected a non-empty"),
    ({"a": {"type": "float", "low": 0, "high": 1, "lo": 3}}, "space['a'].lo: unknown key"),
])
def test_search_space_errors_name_the_entry(spec, message):
    with pytest.raises(TuneError) as info:
        SearchSpace(spec)
    assert str(info.value).startswith(message)


# optimize on a Python objective ----------------------------------------------------------

def quadratic(trial):
    x = trial.suggest_float("x", -10.0, 10.0)
    kind = trial.suggest_categorical("kind", ["flat", "shifted"])
    return (x - 2.0) ** 2 + (0.0 if kind == "shifted" else 5.0)


def test_optimize_finds_the_minimum_reproducibly():
    study = optimize(quadratic, n_trials=40, direction="minimize", seed=0)
    assert len(study.trials) == 40
    assert abs(study.best_params["x"] - 2.0) < 0.5
    assert study.best_params["kind"] == "shifted"
    assert study.best_value < 0.25
    again = optimize(quadratic, n_trials=40, direction="minimize", seed=0)
    assert again.best_params == study.best_params


def test_optimize_maximize_with_random_sampler_and_space():
    space = SearchSpace({"x": {"type": "int", "low": 0, "high": 20}})
    study = optimize(lambda t: -abs(space.suggest(t)["x"] - 7), n_trials=30,
                     direction="maximize", sampler="random", seed=1)
    assert study.best_params == {"x": 7} and study.best_value == 0


def test_optimize_argument_errors():
    with pytest.raises(TuneError, match="direction must be 'minimize' or 'maximize'"):
        optimize(quadratic, n_trials=1, direction="down")
    with pytest.raises(TuneError, match="give n_trials= or timeout="):
        optimize(quadratic)
    with pytest.raises(TuneError, match=r"sampler.name: expected one of 'tpe'"):
        optimize(quadratic, n_trials=1, sampler="bayes")
    with pytest.raises(ConfigError, match="pruner.n_startup_trial: unknown key; did you mean "
                                          "'n_startup_trials'"):
        optimize(quadratic, n_trials=1, pruner={"name": "median", "n_startup_trial": 1})


def test_missing_optuna_is_a_clear_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'ember\[tune\]'") as info:
        optimize(quadratic, n_trials=1)
    assert isinstance(info.value, ImportError)


# PruningCallback -------------------------------------------------------------------------

class FakeTrial:
    """Prunes when the reported value is above ``limit``."""

    number = 0

    def __init__(self, limit: float):
        self.limit, self.reports, self.last = limit, [], None

    def report(self, value, step):
        self.reports.append((step, value))
        self.last = value

    def should_prune(self):
        return self.last > self.limit


class FakeTrainer:
    def __init__(self, **logged):
        self.logged = logged


def test_pruning_callback_reports_each_validation_and_raises_when_told():
    trial = FakeTrial(limit=1.0)
    cb = PruningCallback(trial, monitor="val_loss")
    cb.on_validation_end(FakeTrainer(val_loss=0.8))
    cb.on_validation_end(FakeTrainer(val_loss=0.6))
    assert trial.reports == [(0, 0.8), (1, 0.6)] and cb.pruned_at is None
    with pytest.raises(optuna.TrialPruned, match="pruned at validation 2: val_loss = 3"):
        cb.on_validation_end(FakeTrainer(val_loss=3.0))
    assert cb.pruned_at == 2
    nan_trial = FakeTrial(limit=1.0)
    with pytest.raises(optuna.TrialPruned):  # NaN is reported as the worst value
        PruningCallback(nan_trial).on_validation_end(FakeTrainer(val_loss=float("nan")))
    assert nan_trial.reports == [(0, float("inf"))]
    with pytest.raises(TuneError, match=r"monitor='val_acc' was not logged; logged names "
                                        r"are \['val_loss'\]"):
        PruningCallback(trial, "val_acc").on_validation_end(FakeTrainer(val_loss=1.0))
    with pytest.raises(TuneError, match="trial must be an optuna.Trial"):
        PruningCallback(object())


def digits_objective(trial):
    """Three epochs of a small MLP on Digits at the lr of the trial."""
    lr = trial.suggest_float("lr", 1e-7, 1.0, log=True)
    ember.manual_seed(0)
    gen = ember.Generator().manual_seed(0)
    train = ember.data.DataLoader(ember.data.datasets.Digits(), batch_size=64, shuffle=True,
                                  generator=gen)
    val = ember.data.DataLoader(ember.data.datasets.Digits(train=False), batch_size=359)
    model = ember.nn.Sequential(ember.nn.Flatten(), ember.nn.Linear(64, 32), ember.nn.ReLU(),
                                ember.nn.Linear(32, 10))
    pruning = PruningCallback(trial, monitor="val_accuracy")
    trainer = ember.train.Trainer(
        model, ember.optim.Adam(model.parameters(), lr=lr), F.cross_entropy,
        train_loader=train, val_loader=val, max_epochs=3, progress_bar=False,
        metrics={"accuracy": ember.train.metrics.Accuracy()}, callbacks=[pruning])
    trainer.fit()
    return trainer.logged["val_accuracy"]


def test_pruning_callback_prunes_a_bad_trial_in_a_real_study():
    study = optuna.create_study(direction="maximize",
                                pruner=optuna.pruners.MedianPruner(n_startup_trials=1,
                                                                   n_warmup_steps=0))
    study.enqueue_trial({"lr": 1e-2})  # learns: the median to beat
    study.enqueue_trial({"lr": 1e-7})  # stays at chance: pruned at the first validation
    study.enqueue_trial({"lr": 2e-2})  # keeps up with the first: completes
    study.optimize(digits_objective, n_trials=3)
    good, bad, other = study.trials
    assert good.state.name == "COMPLETE" and good.value > 0.85
    assert sorted(good.intermediate_values) == [0, 1, 2]
    assert bad.state.name == "PRUNED" and list(bad.intermediate_values) == [0]
    assert bad.intermediate_values[0] < 0.3
    assert other.state.name == "COMPLETE"


# Searches from a config ------------------------------------------------------------------

def base_config(**tune):
    return {"model": {"name": "mlp", "sizes": [64, 32, 10]}, "data": {"name": "digits"},
            "optimizer": {"name": "adam", "lr": 0.01},
            "trainer": {"max_epochs": 1, "metrics": ["accuracy"], "progress_bar": False},
            "tune": {"space": {"optimizer.lr": {"type": "float", "low": 1e-3, "high": 0.1}},
                     **tune}}


def test_tune_section_is_checked_with_key_paths():
    cfg = validate_config(base_config())
    assert cfg["tune"]["n_trials"] == 10 and cfg["tune"]["sampler"] == {"name": "tpe"}
    assert cfg["tune"]["space"]["optimizer.lr"]["log"] is False
    with pytest.raises(ConfigError) as info:
        validate_config(base_config(space={"optimizer.lrr": {"type": "float", "low": 1e-3,
                                                             "high": 0.1}}))
    assert info.value.path == 'tune.space["optimizer.lrr"]'
    assert "optimizer.lrr: unknown key; did you mean 'lr'" in str(info.value)
    with pytest.raises(ConfigError, match=r"tune.space\['model.sizes.1'\].low: expected an "
                                          "int, got 0.5"):
        validate_config(base_config(space={"model.sizes.1": {"type": "int", "low": 0.5,
                                                             "high": 4}}))
    with pytest.raises(ConfigError, match=r'tune.space\["model.sizes.1"\]: searching '
                                          r"model.sizes.1 = 0 gives a bad config: "
                                          r"model.sizes\[1\]: expected a positive int"):
        validate_config(base_config(space={"model.sizes.1": {"type": "int", "low": 0,
                                                             "high": 4}}))
    with pytest.raises(ConfigError, match="tune.direction: expected one of 'minimize', "
                                          "'maximize', got 'max'"):
        validate_config(base_config(direction="max"))
    with pytest.raises(ConfigError, match="tune.pruner.name: expected one of"):
        validate_config(base_config(pruner="mediann"))


def test_optimize_a_config_file():
    study = optimize(TUNE_YAML, overrides=["tune.n_trials=4", "trainer.max_epochs=2"])
    assert len(study.trials) == 4 and study.direction.name == "MAXIMIZE"
    assert set(study.best_params) == {"optimizer.lr", "model.sizes.1", "model.activation"}
    assert study.best_value > 0.9
    final = study.best_trial.user_attrs["final"]
    assert final["val_accuracy"] == study.best_value and "val_loss" in final
    again = optimize(TUNE_YAML, overrides=["tune.n_trials=4", "trainer.max_epochs=2"])
    assert [t.params for t in again.trials] == [t.params for t in study.trials]
    assert again.best_value == study.best_value


def test_config_search_prunes_and_survives_a_diverging_trial():
    config = base_config(n_trials=3, direction="minimize", metric="val_loss",
                         sampler="random",
                         pruner={"name": "threshold", "upper": 2.0})
    config["trainer"]["max_epochs"] = 2
    config["tune"]["space"] = {"optimizer.lr": {"type": "categorical",
                                                "choices": [1e-2, 1e-6, 1e30]}}
    with pytest.warns(optuna.exceptions.ExperimentalWarning):
        sampler = optuna.samplers.BruteForceSampler(seed=0)
    result = optimize(config, sampler=sampler)
    states = {t.params["optimizer.lr"]: t.state.name for t in result.trials}
    # lr 1e30 makes the loss NaN: that trial fails alone, the study goes on
    assert states == {1e-2: "COMPLETE", 1e-6: "PRUNED", 1e30: "FAIL"}
    assert result.best_params == {"optimizer.lr": 1e-2}


def test_ember_tune_command(capsys):
    from ember.cli import main
    assert main(["tune", TUNE_YAML, "--n-trials", "3", "-o", "trainer.max_epochs=2"]) == 0
    out = capsys.readouterr().out
    assert len(re.findall(r"^trial \d+: ", out, re.M)) == 3
    best = re.search(r"^best trial (\d+): val_accuracy = ([0-9.]+)$", out, re.M)
    assert best and float(best.group(2)) > 0.9
    assert re.search(r"^  optimizer.lr = ", out, re.M)
    assert main(["tune", os.path.join(ROOT, "examples", "digits_mlp.yaml")]) == 2
    assert "tune: missing required key" in capsys.readouterr().err
