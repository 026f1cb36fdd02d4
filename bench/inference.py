"""Inference speed: ember eager, ember.jit, ONNX Runtime on ember's exported file, and
PyTorch, on the mlp, cnn and gpt reference models at batch 1 and batch 64; then the
Digits CNN in float32 and static int8 (ember and ONNX Runtime on the QDQ file), with
sizes on disk.

    python bench/inference.py                 # ~2-3 minutes on 2 shared cores
    python bench/inference.py --rounds 5      # more alternating rounds (default 3)
    python bench/inference.py --native-blas   # unset OPENBLAS_CORETYPE/OPENBLAS_L2_SIZE
                                              # for every framework's process

The parent process builds each model once with ember (bench/training.py, seed 0), saves
its weights and the inputs as .npz files, exports the ONNX files (dynamic batch axis),
and trains, quantizes and exports the Digits CNN. Each framework then runs in its own
process, in alternating rounds (ember, ember.jit, ONNX Runtime, PyTorch, ember, ...):
PyTorch builds the same architecture from bench/training.py and loads the same weights.
Every call runs without gradients in eval mode (``ember.jit(model)`` under
``ember.no_grad()``); a cell is the median over rounds of each process's median time
per call. PyTorch and ONNX Runtime use 2 threads (as bench/run.py). Each process also
returns its batch-64 outputs, and the parent prints the largest difference from ember
eager, so a fast wrong answer shows.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WORKLOADS = ("mlp", "cnn", "gpt")
BATCHES = (1, 64)
FRAMEWORKS = ("ember", "ember_jit", "ort", "torch")
LABEL = {"ember": "ember", "ember_jit": "ember.jit", "ort": "ONNX RT", "torch": "PyTorch"}
DIGITS = ("digits_float", "digits_int8")  # run by the ember and ort workers
# a wide Linear (1024 -> 1024), float32 and dynamic int8: where integer products pay
LINEAR = ("linear_f32", "linear_int8")
TARGET_S = 0.2  # time spent measuring one cell in one process


# Timing ---------------------------------------------------------------------------------
def time_call(fn, target: float = TARGET_S) -> float:
    """Median seconds per call: calls grouped in blocks of at least ~1 ms, blocks
    repeated for about ``target`` seconds (at least 5)."""
    for _ in range(3):
        fn()
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    per_block = max(1, int(1e-3 / once))
    blocks = max(5, int(target / (once * per_block)))
    times = []
    for _ in range(blocks):
        start = time.perf_counter()
        for _ in range(per_block):
            fn()
        times.append((time.perf_counter() - start) / per_block)
    return statistics.median(times)


# Workers --------------------------------------------------------------------------------
def _ember_model(ember, workload, state):
    sys.path.insert(0, HERE)
    from training import build
    ember.manual_seed(0)
    model = build(ember, workload)[0]
    model.load_state_dict({k: ember.from_numpy(v) for k, v in state.items()})
    return model.eval()


def _digits_models(ember, work):
    from ember import quant
    sys.path.insert(0, ROOT)
    from tests.quant.test_static import _cnn
    float_model = _cnn()
    float_model.load_state_dict(ember.load(os.path.join(work, "digits_float.safetensors")))
    import warnings
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "no data was observed": the state is loaded next
        int8_model = quant.convert(quant.prepare(_cnn()))
    int8_model.load_state_dict(ember.load(os.path.join(work, "digits_int8.safetensors")))
    return {"digits_float": float_model.eval(), "digits_int8": int8_model}


def worker(framework: str, work: str) -> dict:
    """Times every cell of ``framework``; returns ``{cell: seconds}`` and writes its
    batch-64 outputs to ``work/out_<framework>.npz``."""
    import numpy as np
    inputs = dict(np.load(os.path.join(work, "inputs.npz")))
    cells, outputs = {}, {}
    runners = {}  # (workload) -> fn(numpy input) -> numpy output
    if framework in ("ember", "ember_jit"):
        sys.path.insert(0, ROOT)
        import ember
        for wl in WORKLOADS:
            state = dict(np.load(os.path.join(work, f"{wl}.npz")))
            model = _ember_model(ember, wl, state)
            fn = ember.jit(model) if framework == "ember_jit" else model
            runners[wl] = (lambda f: lambda x: f(ember.from_numpy(x)))(fn)
        if framework == "ember":
            models = _digits_models(ember, work)
            ember.manual_seed(0)
            models["linear_f32"] = ember.nn.Linear(1024, 1024)
            models["linear_int8"] = ember.quant.DynamicQuantizedLinear.from_float(
                models["linear_f32"])
            for name, model in models.items():
                runners[name] = (lambda f: lambda x: f(ember.from_numpy(x)))(model)
        grad_off = ember.no_grad
        to_numpy = lambda y: y.numpy()  # noqa: E731
    elif framework == "ort":
        import onnxruntime as ort
        options = ort.SessionOptions()
        options.intra_op_num_threads = 2
        for wl in WORKLOADS + DIGITS:
            session = ort.InferenceSession(os.path.join(work, f"{wl}.onnx"), options,
                                           providers=["CPUExecutionProvider"])
            runners[wl] = (lambda s: lambda x: s.run(None, {"input": x})[0])(session)
        import contextlib
        grad_off, to_numpy = contextlib.nullcontext, (lambda y: y)
    else:
        import torch
        torch.set_num_threads(2)
        sys.path.insert(0, HERE)
        from training import build
        for wl in WORKLOADS:
            torch.manual_seed(0)
            model = build(torch, wl)[0]
            state = dict(np.load(os.path.join(work, f"{wl}.npz")))
            model.load_state_dict({k: torch.from_numpy(v) for k, v in state.items()})
            model.eval()
            runners[wl] = (lambda m: lambda x: m(torch.from_numpy(x)))(model)
        grad_off, to_numpy = torch.no_grad, (lambda y: y.numpy())
    with grad_off():
        for name, run in runners.items():
            for batch in BATCHES:
                x = inputs[f"{name}_{batch}"]
                cells[f"{name}/{batch}"] = time_call(lambda: run(x))
            outputs[name] = to_numpy(run(inputs[f"{name}_64"]))
    np.savez(os.path.join(work, f"out_{framework}.npz"), **outputs)
    return cells


# Setup (parent) -------------------------------------------------------------------------
def setup(work: str) -> dict:
    """Weights, inputs and ONNX files in ``work``; returns the Digits sizes and
    accuracies."""
    import numpy as np
    sys.path.insert(0, ROOT)
    sys.path.insert(0, HERE)
    import ember
    from ember import quant
    from tests.quant.test_static import trained_digits_cnn
    from training import build
    rng = np.random.default_rng(0)
    inputs = {}
    for wl in WORKLOADS:
        ember.manual_seed(0)
        model = build(ember, wl)[0].eval()
        np.savez(os.path.join(work, f"{wl}.npz"),
                 **{k: v.numpy() for k, v in model.state_dict().items()})
        for batch in BATCHES:
            if wl == "gpt":
                inputs[f"{wl}_{batch}"] = rng.integers(0, 256, (batch, 64))
            else:
                shape = (batch, 784) if wl == "mlp" else (batch, 1, 28, 28)
                inputs[f"{wl}_{batch}"] = rng.standard_normal(shape, dtype=np.float32)
        ember.onnx.export(model, ember.from_numpy(inputs[f"{wl}_64"][:2]),
                          os.path.join(work, f"{wl}.onnx"), input_names=["input"],
                          output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})

    # the Digits CNN of tests/quant: 4 epochs of Adam, static int8 with 8 calibration batches
    model, train, test = trained_digits_cnn()
    prepared = quant.prepare(model)
    quant.calibrate(prepared, train, num_batches=8)
    qmodel = quant.convert(prepared)
    images = np.concatenate([x.numpy() for x, _ in test])
    for batch in BATCHES:
        inputs[f"digits_float_{batch}"] = inputs[f"digits_int8_{batch}"] = images[:batch]
        inputs[f"linear_f32_{batch}"] = inputs[f"linear_int8_{batch}"] = \
            rng.standard_normal((batch, 1024), dtype=np.float32)
    files = {}
    for name, m in (("digits_float", model), ("digits_int8", qmodel)):
        weights = os.path.join(work, f"{name}.safetensors")
        ember.save(m.state_dict(), weights)
        onnx_path = os.path.join(work, f"{name}.onnx")
        ember.onnx.export(m, ember.from_numpy(images[:2]), onnx_path,
                          input_names=["input"], output_names=["output"],
                          dynamic_axes={"input": {0: "batch"}, "output": {0: "batch"}})
        files[name] = {"safetensors": os.path.getsize(weights),
                       "onnx": os.path.getsize(onnx_path),
                       "accuracy": quant.evaluate_accuracy(m, test)}
    np.savez(os.path.join(work, "inputs.npz"), **inputs)
    return files


# Report ---------------------------------------------------------------------------------
def run_worker(framework: str, work: str, env: dict) -> dict:
    proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", framework,
                           "--work", work], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        sys.stderr.write(proc.stderr)
        raise SystemExit(f"bench/inference.py: the {framework} worker failed")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def max_difference(work: str) -> dict:
    """Largest |output - ember eager output| at batch 64, per framework and model."""
    import numpy as np
    ref = dict(np.load(os.path.join(work, "out_ember.npz")))
    diffs = {}
    for fw in FRAMEWORKS[1:]:
        out = dict(np.load(os.path.join(work, f"out_{fw}.npz")))
        for name, y in out.items():
            diffs[(fw, name)] = float(np.abs(y.astype(np.float64) - ref[name]).max())
    return diffs


def ms(seconds) -> str:
    return "-" if seconds is None else f"{seconds * 1e3:.3f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--native-blas", action="store_true")
    parser.add_argument("--worker")
    parser.add_argument("--work")
    args = parser.parse_args()
    if args.worker:
        print(json.dumps(worker(args.worker, args.work)))
        return

    env = dict(os.environ)
    if args.native_blas:
        for key in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE"):
            env.pop(key, None)
    load_start = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as work:
        files = setup(work)
        samples: dict = {}
        for _ in range(args.rounds):
            for fw in FRAMEWORKS:
                for cell, t in run_worker(fw, work, env).items():
                    samples.setdefault((fw, cell), []).append(t)
        diffs = max_difference(work)
    med = {k: statistics.median(v) for k, v in samples.items()}
    elapsed = time.perf_counter() - started

    print(f"\nInference, ms per call (median of {args.rounds} alternating rounds, one "
          "process per framework per round)")
    head = f"{'model':<5} {'batch':>5} " + " ".join(f"{LABEL[f]:>10}" for f in FRAMEWORKS)
    print(head + f" {'jit/ORT':>8} {'jit/torch':>9} {'max |diff|':>10}")
    for wl in WORKLOADS:
        for batch in BATCHES:
            t = {fw: med.get((fw, f"{wl}/{batch}")) for fw in FRAMEWORKS}
            worst = max(diffs[(fw, wl)] for fw in FRAMEWORKS[1:])
            print(f"{wl:<5} {batch:>5} " + " ".join(f"{ms(t[f]):>10}" for f in FRAMEWORKS) +
                  f" {t['ember_jit'] / t['ort']:>7.2f}x {t['ember_jit'] / t['torch']:>8.2f}x"
                  f" {worst:>10.1e}")

    print("\nDigits CNN (8x8 inputs), float32 vs static int8, ms per call")
    print(f"{'batch':>5} {'ember f32':>10} {'ember int8':>10} {'int8/f32':>8} "
          f"{'ORT f32':>10} {'ORT int8':>10} {'int8/f32':>8}")
    for batch in BATCHES:
        e = [med[("ember", f"{n}/{batch}")] for n in DIGITS]
        o = [med[("ort", f"{n}/{batch}")] for n in DIGITS]
        print(f"{batch:>5} {ms(e[0]):>10} {ms(e[1]):>10} {e[1] / e[0]:>7.2f}x "
              f"{ms(o[0]):>10} {ms(o[1]):>10} {o[1] / o[0]:>7.2f}x")
    f32, i8 = files["digits_float"], files["digits_int8"]
    print(f"size: safetensors {f32['safetensors']:,} B -> {i8['safetensors']:,} B "
          f"({f32['safetensors'] / i8['safetensors']:.2f}x smaller); ONNX "
          f"{f32['onnx']:,} B -> {i8['onnx']:,} B ({f32['onnx'] / i8['onnx']:.2f}x); "
          f"accuracy {f32['accuracy']:.2f} % -> {i8['accuracy']:.2f} %; ORT int8 vs "
          f"ember int8 max |diff| {diffs[('ort', 'digits_int8')]:.1e}")
    for batch in BATCHES:
        f32, i8 = (med[("ember", f"{n}/{batch}")] for n in LINEAR)
        print(f"Linear 1024x1024, batch {batch}: float32 {ms(f32)} ms, dynamic int8 "
              f"{ms(i8)} ms ({i8 / f32:.2f}x)")
    load_end = os.getloadavg()
    print(f"load average {load_start[0]:.2f} at start, {load_end[0]:.2f} at end; "
          f"{elapsed:.0f} s; OPENBLAS_CORETYPE "
          f"{'unset' if args.native_blas else os.environ.get('OPENBLAS_CORETYPE', 'unset')}")


if __name__ == "__main__":
    main()
