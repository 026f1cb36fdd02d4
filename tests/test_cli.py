"""ember.config and the ``ember`` command line: config checking, YAML/TOML, overrides,
builders, ``ember train`` in process and as ``python -m ember``."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import numpy as np
import pytest

import ember
from ember.cli import main
from ember.config import ConfigError, apply_overrides, load_config, train, validate_config
from ember.config.loading import parse_scalar

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MLP_YAML = os.path.join(ROOT, "examples", "digits_mlp.yaml")


def base(**sections):
    raw = {"model": {"name": "mlp", "sizes": [64, 32, 10]}, "data": {"name": "digits"},
           "optimizer": {"name": "adam", "lr": 0.01},
           "trainer": {"max_epochs": 2, "metrics": ["accuracy"], "progress_bar": False}}
    raw.update(sections)
    return raw


def final_metrics(text: str) -> dict[str, float]:
    return {m.group(1): float(m.group(2))
            for m in re.finditer(r"^\s+(\w+)\s+([-+0-9.e]+)$", text, re.M)}


# Checking --------------------------------------------------------------------------------

def error_of(raw) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        validate_config(raw)
    return info.value


def test_unknown_key_names_path_and_close_match():
    err = error_of(base(trainer={"max_epoch": 3}))
    assert err.path == "trainer.max_epoch"
    assert str(err).startswith("trainer.max_epoch: unknown key; did you mean 'max_epochs'")
    err = error_of(base(optimizer={"name": "adam", "lrr": 0.1}))
    assert err.path == "optimizer.lrr" and "did you mean 'lr'" in str(err)
    err = error_of({**base(), "trainr": {}})
    assert err.path == "trainr" and "did you mean 'trainer'" in str(err)


def test_wrong_type_names_path_expected_and_got():
    err = error_of(base(trainer={"max_epochs": "ten"}))
    assert str(err) == "trainer.max_epochs: expected a positive int, got 'ten'"
    err = error_of(base(model={"name": "mlp", "sizes": [64, "wide", 10]}))
    assert str(err) == "model.sizes[1]: expected a positive int, got 'wide'"
    err = error_of(base(optimizer={"name": "adam", "betas": 0.9}))
    assert err.path == "optimizer.betas" and "tuple[float, float]" in str(err)
    err = error_of(base(trainer={"compile": "yes"}))
    assert str(err) == "trainer.compile: expected a bool (true or false), got 'yes'"


def test_missing_required_key():
    err = error_of(base(model={"name": "mlp"}))
    assert err.path == "model.sizes"
    assert "missing required key (expected a list of at least 2 positive ints)" in str(err)
    raw = base()
    del raw["optimizer"]
    assert error_of(raw).path == "optimizer"
    err = error_of(base(scheduler={"name": "StepLR"}))
    assert err.path == "scheduler.step_size" and "missing required key" in str(err)


def test_bad_values():
    err = error_of(base(data={"name": "digits", "val_split": 1.5}))
    assert str(err) == "data.val_split: expected a number in (0.0, 1.0), got 1.5"
    err = error_of(base(optimizer={"name": "adma"}))
    assert err.path == "optimizer.name" and "did you mean" in str(err) and "'adam'" in str(err)
    err = error_of(base(trainer={"metrics": ["acuracy"]}))
    assert err.path == "trainer.metrics[0]" and "did you mean 'accuracy'" in str(err)
    err = error_of(base(model={"name": "mlp", "sizes": [64, 10], "activation": "rleu"}))
    assert err.path == "model.activation" and "did you mean 'relu'" in str(err)
    err = error_of(base(trainer={"loggers": ["csv"]}))
    assert err.path == "trainer.log_dir"


def test_defaults_filled_and_idempotent():
    cfg = validate_config(base(scheduler={"name": "cosine_annealing_lr", "T_max": 5}))
    assert cfg["data"]["batch_size"] == 64 and cfg["data"]["shuffle"] is True
    assert cfg["trainer"]["seed"] == 0 and cfg["trainer"]["eval_every_n_epochs"] == 1
    assert cfg["scheduler"] == {"name": "CosineAnnealingLR", "interval": "epoch",
                                "monitor": "val_loss", "T_max": 5}
    assert cfg["model"]["activation"] == "relu" and cfg["tune"] is None
    assert validate_config(cfg) == cfg


def test_cli_reports_bad_config_with_status_2(capsys):
    assert main(["train", MLP_YAML, "-o", "trainer.max_epochs=ten"]) == 2
    err = capsys.readouterr().err
    assert "trainer.max_epochs: expected a positive int, got 'ten'" in err
    assert main(["check", os.path.join(ROOT, "examples", "missing.yaml")]) == 2
    assert "cannot read the config file" in capsys.readouterr().err


# Files and overrides ---------------------------------------------------------------------

YAML_TEXT = """
model: {name: mlp, sizes: [64, 48, 10], activation: gelu}
data: {name: digits, batch_size: 32, val_split: 0.25}
optimizer: {name: AdamW, lr: 2e-3, betas: [0.8, 0.99]}
scheduler: {name: StepLR, step_size: 2, gamma: 0.5}
trainer:
  max_epochs: 3
  metrics: [accuracy, f1]
  early_stopping: {monitor: val_loss, patience: 2}
"""

TOML_TEXT = """
[model]
name = "mlp"
sizes = [64, 48, 10]
activation = "gelu"

[data]
name = "digits"
batch_size = 32
val_split = 0.25

[optimizer]
name = "AdamW"
lr = 2e-3
betas = [0.8, 0.99]

[scheduler]
name = "StepLR"
step_size = 2
gamma = 0.5

[trainer]
max_epochs = 3
metrics = ["accuracy", "f1"]
early_stopping = { monitor = "val_loss", patience = 2 }
"""


def test_yaml_and_toml_parse_to_the_same_config(tmp_path):
    pytest.importorskip("yaml")
    (tmp_path / "c.yaml").write_text(YAML_TEXT)
    (tmp_path / "c.toml").write_text(TOML_TEXT)
    from_yaml = load_config(tmp_path / "c.yaml")
    from_toml = load_config(tmp_path / "c.toml")
    assert from_yaml == from_toml
    assert from_yaml["optimizer"] == {"name": "adamw", "lr": 0.002, "betas": (0.8, 0.99)}
    assert from_yaml["trainer"]["early_stopping"] == {"monitor": "val_loss", "mode": "min",
                                                      "patience": 2, "min_delta": 0.0}


def test_yaml_reads_exponent_numbers_as_floats(tmp_path):
    pytest.importorskip("yaml")
    (tmp_path / "c.yaml").write_text("optimizer: {lr: 1e-3, eps: 5E-8, name: adam}\n"
                                     "model: {name: mlp, sizes: [64, 10]}\n"
                                     "data: {name: digits}\n")
    cfg = load_config(tmp_path / "c.yaml")
    assert cfg["optimizer"]["lr"] == 1e-3 and cfg["optimizer"]["eps"] == 5e-8


def test_missing_pyyaml_is_a_clear_error(tmp_path, monkeypatch):
    (tmp_path / "c.yaml").write_text(YAML_TEXT)
    (tmp_path / "c.toml").write_text(TOML_TEXT)
    monkeypatch.setitem(sys.modules, "yaml", None)
    with pytest.raises(ConfigError, match=r"needs PyYAML: pip install 'ember\[yaml\]'"):
        load_config(tmp_path / "c.yaml")
    assert load_config(tmp_path / "c.toml")["model"]["sizes"] == [64, 48, 10]


def test_parse_errors_name_the_file(tmp_path):
    (tmp_path / "bad.toml").write_text("[model\nname = 'mlp'\n")
    with pytest.raises(ConfigError, match="bad.toml: not valid TOML"):
        load_config(tmp_path / "bad.toml")
    (tmp_path / "c.ini").write_text("")
    with pytest.raises(ConfigError, match="must end in .yaml, .yml, .toml or .json"):
        load_config(tmp_path / "c.ini")


def test_override_values_and_paths():
    assert [parse_scalar(t) for t in ("3", "1e-3", ".5", "true", "None", "[1, 2]", "gelu")] \
        == [3, 1e-3, 0.5, True, None, [1, 2], "gelu"]
    raw = base()
    out = apply_overrides(raw, ["model.sizes.1=128", "optimizer.lr=1e-4",
                                "scheduler.name=StepLR", "scheduler.step_size=3",
                                "trainer.max_epochs=1"])
    assert raw["model"]["sizes"] == [64, 32, 10]  # the original is untouched
    cfg = validate_config(out)
    assert cfg["model"]["sizes"] == [64, 128, 10] and cfg["optimizer"]["lr"] == 1e-4
    assert cfg["scheduler"]["step_size"] == 3 and cfg["trainer"]["max_epochs"] == 1
    with pytest.raises(ConfigError, match=r"model.sizes.7: model.sizes is a list of 3"):
        apply_overrides(raw, ["model.sizes.7=1"])
    with pytest.raises(ConfigError, match="expected KEY.PATH=VALUE"):
        apply_overrides(raw, ["trainer.max_epochs"])


def test_overrides_change_the_run():
    cfg = load_config(base(), ["trainer.max_epochs=1", "model.sizes.1=20",
                               "data.batch_size=128"])
    run, final = train(cfg)
    assert run.model[1].weight.shape == (20, 64)
    assert run.trainer.epoch == 1 and run.trainer.global_step == 12  # ceil(1438 / 128)
    assert len(run.trainer.history["val_loss"]) == 1
    assert set(final) == {"train_loss", "train_accuracy", "val_loss", "val_accuracy"}


# Builders -------------------------------------------------------------------------------

def test_cnn_and_gpt_builders():
    from ember.config import build_model
    net = build_model(validate_config(base(model={"name": "cnn"}))["model"])
    assert net[7].weight.shape == (128, 1600)  # the DESIGN.md cnn on 28x28 inputs
    assert net(ember.randn(2, 1, 28, 28)).shape == (2, 10)
    small = build_model(validate_config(base(model={"name": "cnn", "image_size": 8,
                                                     "padding": 1}))["model"])
    assert small(ember.randn(2, 1, 8, 8)).shape == (2, 10)
    gpt = build_model(validate_config(base(model={"name": "gpt", "d_model": 32,
                                                  "context": 16}))["model"])
    assert gpt(ember.randint(0, 256, (2, 16))).shape == (2, 16, 256)
    with pytest.raises(ConfigError, match="model.n_heads: d_model 30 is not divisible"):
        build_model(validate_config(base(model={"name": "gpt", "d_model": 30}))["model"])


def make_linear(n_in: int, n_out: int):
    return ember.nn.Sequential(ember.nn.Flatten(), ember.nn.Linear(n_in, n_out))


def make_blobs(n: int):
    rng = np.random.default_rng(0)
    y = rng.integers(0, 3, n)
    x = rng.normal(size=(n, 4)).astype(np.float32) + 3 * np.eye(3, 4, dtype=np.float32)[y]
    ds = ember.data.TensorDataset(ember.from_numpy(x), ember.from_numpy(y))
    return ember.data.random_split(ds, [n - 60, 60], generator=ember.Generator().manual_seed(0))


def test_imported_model_and_data_builders():
    cfg = load_config({"model": {"import": "tests.test_cli:make_linear",
                                 "options": {"n_in": 4, "n_out": 3}},
                       "data": {"import": "tests.test_cli:make_blobs", "options": {"n": 300},
                                "batch_size": 30},
                       "optimizer": {"name": "sgd", "lr": 0.1},
                       "trainer": {"max_epochs": 5, "metrics": ["accuracy"],
                                   "progress_bar": False}})
    run, final = train(cfg)
    assert len(run.train_loader.dataset) == 240 and len(run.val_loader.dataset) == 60
    assert final["val_accuracy"] > 0.9
    bad = {**cfg, "model": {"import": "tests.test_cli:no_such_builder", "options": {}}}
    with pytest.raises(ConfigError, match="model.import: module 'tests.test_cli' has no "
                                          "attribute 'no_such_builder'"):
        train(validate_config(bad))


def test_text_data_for_gpt(tmp_path):
    (tmp_path / "t.txt").write_bytes(b"ember glows " * 200)
    cfg = load_config({"model": {"name": "gpt", "context": 16, "d_model": 32, "n_heads": 2,
                                 "n_layers": 1},
                       "data": {"name": "text", "path": str(tmp_path / "t.txt"),
                                "context": 16, "batch_size": 16},
                       "optimizer": {"name": "adamw", "lr": 1e-2},
                       "trainer": {"max_steps": 20, "loss": "token_cross_entropy",
                                   "progress_bar": False}})
    run, final = train(cfg)
    x, y = run.train_loader.dataset[0]
    assert bytes(x.numpy().astype(np.uint8)) == b"ember glows embe"
    assert bytes(y.numpy().astype(np.uint8)) == b"mber glows ember"
    x, _ = run.train_loader.dataset[1]  # windows start every `context` bytes
    assert bytes(x.numpy().astype(np.uint8)) == b"r glows ember gl"
    assert final["val_loss"] < 1.0  # a repeating text is learned well below log(256)=5.5


# ember train ----------------------------------------------------------------------------

def test_ember_train_example_in_process(capsys):
    assert main(["train", MLP_YAML]) == 0
    final = final_metrics(capsys.readouterr().out)
    assert final["val_accuracy"] > 0.95
    assert final["train_loss"] < 0.3


def test_main_job_config_trains_the_cnn(tmp_path, capsys):
    # the README's main job (make demo): examples/digits_cnn.yaml
    cnn_yaml = os.path.join(ROOT, "examples", "digits_cnn.yaml")
    assert main(["train", cnn_yaml, "--no-progress", "-o",
                 f"trainer.checkpoint_dir={tmp_path / 'runs'}"]) == 0
    final = final_metrics(capsys.readouterr().out)
    assert final["val_accuracy"] > 0.9
    assert os.listdir(tmp_path / "runs")  # its checkpoints


def test_python_dash_m_ember_train_subprocess():
    env = {**os.environ, "PYTHONPATH": ROOT + os.pathsep + os.environ.get("PYTHONPATH", "")}
    proc = subprocess.run([sys.executable, "-m", "ember", "train", MLP_YAML,
                           "--override", "trainer.max_epochs=4"],
                          capture_output=True, text=True, env=env, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert final_metrics(proc.stdout)["val_accuracy"] > 0.9


def test_train_resume_latest_matches_straight_run(tmp_path, capsys):
    ckpt = str(tmp_path / "ckpt")
    common = ["-o", "trainer.max_epochs=4", f"trainer.checkpoint_dir={ckpt}",
              "trainer.checkpoint.every_n_epochs=1"]
    assert main(["train", MLP_YAML] + common) == 0
    straight = final_metrics(capsys.readouterr().out)
    assert main(["train", MLP_YAML] + common[:2] + ["trainer.max_epochs=2"]
                + common[2:]) == 0
    capsys.readouterr()
    assert main(["train", MLP_YAML, "--resume", "latest"] + common) == 0
    resumed = final_metrics(capsys.readouterr().out)
    assert resumed["val_loss"] == straight["val_loss"]
    assert main(["train", MLP_YAML, "--resume", "latest"]) == 2
    assert "trainer.checkpoint_dir" in capsys.readouterr().err


def test_ember_check_prints_the_normalised_config(capsys):
    assert main(["check", MLP_YAML, "-o", "data.batch_size=32"]) == 0
    cfg = json.loads(capsys.readouterr().out)
    assert cfg["data"]["batch_size"] == 32 and cfg["optimizer"]["name"] == "adam"
    assert cfg["trainer"]["max_epochs"] == 10


# Review findings: hostile configs get ConfigError (status 2) or an ember error (status 1),
# never a raw Python exception.

def make_with_hidden(hidden: int = 8):
    return ember.nn.Sequential(ember.nn.Linear(64, hidden), ember.nn.ReLU(),
                               ember.nn.Linear(hidden, 10))


@pytest.mark.parametrize("text, ext", [
    ('{"model": ' + "[" * 100000 + "]" * 100000 + "}", ".json"),
    ("model: " + "[" * 5000 + "]" * 5000 + "\n", ".yaml"),
    ('{"model": {"name": "mlp", "x": ' + "[" * 600 + "]" * 600 + "}}", ".json"),
])
def test_deeply_nested_config_is_a_config_error(tmp_path, capsys, text, ext):
    path = tmp_path / f"deep{ext}"
    path.write_text(text)
    assert main(["check", str(path)]) == 2
    assert "error in" in capsys.readouterr().err


def test_option_item_types_are_checked():
    err = error_of(base(optimizer={"name": "adam", "betas": [0.9, "x"]}))
    assert err.path == "optimizer.betas" and "tuple[float, float]" in str(err)
    err = error_of(base(scheduler={"name": "MultiStepLR", "milestones": ["a"]}))
    assert err.path == "scheduler.milestones"
    assert validate_config(base(optimizer={"name": "adam", "betas": [0.9, 0.99]}))[
        "optimizer"]["betas"] == (0.9, 0.99)


def test_nan_is_not_a_number_in_range():
    err = error_of(base(trainer={"grad_clip_norm": float("nan")}))
    assert err.path == "trainer.grad_clip_norm"


def test_imported_builder_options_are_checked_against_its_signature():
    cfg = load_config(base(model={"import": "tests.test_cli:make_with_hidden",
                                  "options": {"hiddn": 4}}))
    with pytest.raises(ConfigError, match="model.options: .*unexpected keyword argument "
                                          "'hiddn'"):
        train(cfg)


def test_unusable_folders_and_files_exit_1_with_a_message(tmp_path, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    config = tmp_path / "c.json"
    for trainer in ({"loggers": ["csv"], "log_dir": str(blocker / "logs")},
                    {"resume_from": str(tmp_path / "missing.safetensors")}):
        raw = base()
        raw["trainer"] = {**raw["trainer"], "max_steps": 1, **trainer}
        config.write_text(json.dumps(raw))
        assert main(["train", str(config)]) == 1
        err = capsys.readouterr().err
        assert err.startswith("ember train: error:") and "Traceback" not in err
