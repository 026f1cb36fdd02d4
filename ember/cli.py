"""The ``ember`` command line.

    ember train CONFIG.yaml|.toml [--override KEY.PATH=VALUE ...] [--resume latest|PATH]
    ember tune CONFIG [--override ...] [--n-trials N] [--timeout S] [--storage URL]
    ember check CONFIG [--override ...]
    ember launch -n N [--hosts H1,H2 | --hostfile F] [--timeout S] [--debug] SCRIPT [ARGS]
    ember serve MODEL_DIR [--host 127.0.0.1] [--port 8000] [--max-batch-size N]
                [--max-wait-ms M] [--max-concurrency C] [--max-body-bytes B]
    ember kernels

``train`` builds the model, data, optimizer, scheduler and Trainer a config file
describes (see docs/cli.md), fits it and prints the final metrics; ``tune`` runs the
search of the config's ``tune:`` section and prints the best trial; ``check`` validates
the config and prints it with every default filled in. A bad config exits with status 2
and a message naming the key path. ``launch`` runs a script on N ranks through mpiexec
(see :mod:`ember.distributed.launch`) and exits with its status. ``serve`` serves a
model directory (``ember.save_pretrained``) over HTTP until stopped (see docs/serve.md).
``kernels`` compiles ember's hand-written C kernels into the kernel cache, all at once
(the set-up commands run it after installing; without it each compiles at its first use:
see :mod:`ember.backends.cpu_kernels`).
"""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from . import __version__
from .config import ConfigError, load_config, train
from .errors import EmberError

__all__ = ["main", "build_parser"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``ember`` command."""
    parser = argparse.ArgumentParser(
        prog="ember", description="Train and tune ember models from config files.")
    parser.add_argument("--version", action="version", version=f"ember {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def add(name: str, help_text: str) -> argparse.ArgumentParser:
        sub = commands.add_parser(name, help=help_text, description=help_text)
        sub.add_argument("config", metavar="CONFIG",
                         help="a .yaml, .yml, .toml or .json config file")
        sub.add_argument("-o", "--override", action="extend", nargs="+", default=[],
                         metavar="KEY.PATH=VALUE",
                         help="set a config value, e.g. trainer.max_epochs=3 "
                              "optimizer.lr=1e-3 model.sizes=[64,32,10]")
        return sub

    train_cmd = add("train", "fit the model a config describes and print the final metrics")
    train_cmd.add_argument("--resume", metavar="latest|PATH",
                           help="resume from a checkpoint file, or the latest one in "
                                "trainer.checkpoint_dir")
    train_cmd.add_argument("--no-progress", action="store_true",
                           help="no progress bar (overrides trainer.progress_bar)")
    tune_cmd = add("tune", "run the hyperparameter search of the config's tune: section")
    tune_cmd.add_argument("--n-trials", type=int, help="overrides tune.n_trials")
    tune_cmd.add_argument("--timeout", type=float, help="overrides tune.timeout (seconds)")
    tune_cmd.add_argument("--storage", help="an Optuna storage URL, e.g. sqlite:///tune.db "
                                            "(overrides tune.storage)")
    tune_cmd.add_argument("--study-name", help="overrides tune.study_name")
    add("check", "validate the config and print it with its defaults filled in")
    # listed here; main() hands its arguments to ember.distributed.launch untouched
    commands.add_parser("launch", help="run a script on N ranks through mpiexec "
                                       "(ember launch -h for its options)")
    serve_cmd = commands.add_parser(
        "serve", help="serve a model directory over HTTP (docs/serve.md)",
        description="Serve a model directory written by ember.save_pretrained: POST "
                    "/v1/predict, /v1/generate (GPT), GET /healthz, /readyz, /metrics, "
                    "/openapi.json. Stops on Ctrl-C/SIGTERM after the requests in flight.")
    serve_cmd.add_argument("model_dir", metavar="MODEL_DIR", help="a model directory")
    serve_cmd.add_argument("--host", default="127.0.0.1",
                           help="address to bind (default 127.0.0.1, loopback only; "
                                "0.0.0.0 exposes the model to the network)")
    serve_cmd.add_argument("--port", type=int, default=8000, help="default 8000")
    serve_cmd.add_argument("--max-batch-size", type=int, default=32,
                           help="most examples in one forward (default 32; 1: no batching)")
    serve_cmd.add_argument("--max-wait-ms", type=float, default=5.0,
                           help="how long a request waits for others to batch with "
                                "(default 5)")
    serve_cmd.add_argument("--max-concurrency", type=int, default=256,
                           help="requests in flight before 503 (default 256)")
    serve_cmd.add_argument("--max-body-bytes", type=int, default=8 << 20,
                           help="larger request bodies get 413 (default 8 MiB)")
    serve_cmd.add_argument("--allow-import", action="store_true",
                           help="accept a model built by import: (runs that module's code)")
    serve_cmd.add_argument("--log-level", default="info",
                           choices=["critical", "error", "warning", "info", "debug"])
    commands.add_parser("kernels", help="compile ember's hand-written C kernels into the "
                                        "kernel cache (once, after installing)")
    return parser


def _kernels(args: argparse.Namespace) -> int:
    from .backends import cpu_kernels
    done = cpu_kernels.build()
    print(f"ember kernels: {done['kernels']} kernels in {done['directory']}: "
          f"{done['compiled']} compiled now, in {done['seconds']:.1f} s")
    return 0


def _serve(args: argparse.Namespace) -> int:
    from .serve import serve
    try:
        import starlette  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError:
        print("ember serve: error: needs starlette and uvicorn: pip install 'ember[serve]'",
              file=sys.stderr)
        return 1
    serve(args.model_dir, host=args.host, port=args.port, log_level=args.log_level,
          max_batch_size=args.max_batch_size, max_wait_ms=args.max_wait_ms,
          max_concurrency=args.max_concurrency, max_body_bytes=args.max_body_bytes,
          allow_import=args.allow_import)
    return 0


def _print_metrics(title: str, values: dict[str, float]) -> None:
    print(title)
    width = max((len(k) for k in values), default=0)
    for name, value in values.items():
        print(f"  {name:<{width}}  {value:.6g}")


def _train(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.override)
    progress = False if args.no_progress else None
    _, final = train(config, resume_from=args.resume, progress_bar=progress)
    _print_metrics("final metrics:", final)
    return 0


def _format_params(params: dict[str, Any]) -> str:
    return ", ".join(f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v!r}"
                     for k, v in params.items())


def _tune(args: argparse.Namespace) -> int:
    from .tune import optimize
    from .tune._optuna import require_optuna
    optuna = require_optuna()
    config = load_config(args.config, args.override)
    if config["tune"] is None:
        raise ConfigError("tune", "missing required key: `ember tune` needs a tune: section "
                                  "(n_trials, direction, metric, space, ...)")
    metric = config["tune"]["metric"]

    def report(study, trial) -> None:
        params = _format_params(trial.params)
        if trial.state.name == "COMPLETE":
            print(f"trial {trial.number}: {metric} = {trial.value:.6g}  ({params})",
                  flush=True)
        elif trial.state.name == "PRUNED":
            steps = sorted(trial.intermediate_values)
            where = (f" at validation {steps[-1]} ({metric} = "
                     f"{trial.intermediate_values[steps[-1]]:.6g})") if steps else ""
            print(f"trial {trial.number}: pruned{where}  ({params})", flush=True)
        else:
            print(f"trial {trial.number}: {trial.state.name.lower()}  ({params})",
                  flush=True)

    verbosity = optuna.logging.get_verbosity()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    try:
        study = optimize(config, n_trials=args.n_trials, timeout=args.timeout,
                         storage=args.storage, study_name=args.study_name,
                         callbacks=[report])
    finally:
        optuna.logging.set_verbosity(verbosity)
    complete = [t for t in study.trials if t.state.name == "COMPLETE"]
    pruned = sum(t.state.name == "PRUNED" for t in study.trials)
    failed = sum(t.state.name == "FAIL" for t in study.trials)
    print(f"{len(study.trials)} trials: {len(complete)} complete, {pruned} pruned, "
          f"{failed} failed")
    if not complete:
        print("no trial completed", file=sys.stderr)
        return 1
    best = study.best_trial
    print(f"best trial {best.number}: {metric} = {best.value:.6g}")
    for name, value in best.params.items():
        print(f"  {name} = {value!r}")
    return 0


def _check(args: argparse.Namespace) -> int:
    config = load_config(args.config, args.override)
    print(json.dumps(config, indent=2))
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ember`` command with ``argv`` (default: ``sys.argv[1:]``); returns the
    exit status: 0, 1 (training or search failed with an ember error, or a file or folder
    it cannot use), 2 (bad command line or config).

    >>> ember.cli.main(["train", "examples/digits_mlp.yaml", "-o", "trainer.max_epochs=2"])
    """
    argv = sys.argv[1:] if argv is None else list(argv)
    if argv[:1] == ["launch"]:
        from .distributed import launch
        return launch.main(argv[1:], prog="ember launch")
    parser = build_parser()
    args = parser.parse_args(argv)
    run = {"train": _train, "tune": _tune, "check": _check, "serve": _serve,
           "kernels": _kernels}[args.command]
    try:
        return run(args)
    except ConfigError as exc:
        print(f"ember {args.command}: error in {args.config}: {exc}", file=sys.stderr)
        return 2
    except (EmberError, OSError) as exc:  # (OSError: a folder or file it cannot use)
        print(f"ember {args.command}: error: {exc}", file=sys.stderr)
        return 1
