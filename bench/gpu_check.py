"""The GPU check: ember's CUDA backend against the CPU and against PyTorch on the same
GPU, in a few minutes, ending with a short table.

    bash bench/gpu_check.sh                 # on a machine with CuPy, PyTorch and a GPU
    python bench/gpu_check.py --device fakegpu --quick    # the same code, tiny, no GPU

Sections (each in a child process with its share of the time budget, so that one
failure or a slow compile does not lose the others):

- ops: every op of the op tables on the device against the CPU (values, dtypes,
  devices, gradients); the failures are listed;
- matmul: 8192³ products in bfloat16, float32 and float32 with TF32, TFLOP/s;
- workloads: the mlp, cnn and gpt training steps of DESIGN.md, ember eager and
  ember.jit against PyTorch eager and torch.compile, median ms/step;
- gpt2: a GPT-2-small step (12 layers, width 768, 12 heads, context 1024, batch 8,
  bfloat16 autocast, AdamW) the same four ways, with peak GPU memory.

Ratios in the table are ember/torch: time and memory want low, TFLOP/s high. The
targets (issue 8) are beside them. Needs nothing beyond CuPy, PyTorch and NumPy (and
this source tree on PYTHONPATH); pytest is not needed.
"""
from __future__ import annotations

import argparse
import json
import os
import queue
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
SECTIONS = ("ops", "matmul", "workloads", "gpt2")
WEIGHTS = {"ops": 0.22, "matmul": 0.08, "workloads": 0.32, "gpt2": 0.38}


def _child(args) -> None:
    sys.path.insert(0, HERE)
    import gpu_sections
    gpu_sections.run(args.child, args.device, args.quick, args.seconds)


def _header(device: str) -> str:
    code = ("import ember, sys, gpu_sections\n"
            "gpu_sections.stand_in(sys.argv[1])\n"
            "d = ember.backends.placement(sys.argv[1])\n"
            "b = d.backend\n"
            "parts = [f'ember {ember.__version__} on {d}']\n"
            "if d.type == 'cuda':\n"
            "    parts += [ember.cuda.get_device_name(d.index), f'CuPy {b.cupy.__version__}',\n"
            "              f'bfloat16: {ember.cuda.is_bf16_supported()}']\n"
            "try:\n"
            "    import torch; parts.append(f'torch {torch.__version__}')\n"
            "except ImportError:\n"
            "    parts.append('no PyTorch')\n"
            "print(', '.join(parts))\n")
    done = subprocess.run([sys.executable, "-c", code, device], capture_output=True,
                          text=True, cwd=ROOT, env=_env(), timeout=120)
    if done.returncode:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        return "device unusable: " + last.removeprefix("ember.errors.EmberError: ")
    return done.stdout.strip()


def _env() -> dict:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "PYTHONPATH": os.pathsep.join([ROOT, HERE] + ([path] if path else []))}


def _run_section(name: str, args, seconds: float) -> list[dict]:
    """Run one section in a child process for at most ``seconds``, echoing its output;
    its RESULT records (those printed before a timeout or crash too)."""
    cmd = [sys.executable, "-u", os.path.abspath(__file__), "--child", name, "--device",
           args.device, "--seconds", f"{max(seconds - 8, 5):.0f}"] + \
        (["--quick"] if args.quick else [])
    print(f"\n[{name}] (up to {seconds:.0f} s)", flush=True)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            cwd=ROOT, env=_env(), bufsize=1)
    lines: queue.Queue = queue.Queue()

    def pump():
        for line in proc.stdout:
            lines.put(line)
        lines.put(None)
    threading.Thread(target=pump, daemon=True).start()
    deadline = time.monotonic() + seconds
    records, tail = [], []
    while True:
        try:
            line = lines.get(timeout=max(deadline - time.monotonic(), 0.05))
        except queue.Empty:
            proc.kill()
            print(f"    stopped: the section ran past its {seconds:.0f} s", flush=True)
            records.append({"row": f"({name} section)", "side": "ember",
                            "error": f"stopped after {seconds:.0f} s"})
            break
        if line is None:
            break
        if line.startswith("RESULT "):
            records.append(json.loads(line[7:]))
        else:
            tail = (tail + [line.rstrip()])[-30:]
            print("  " + line.rstrip(), flush=True)
    code = proc.wait()
    if code not in (0, -9):
        records.append({"row": f"({name} section)", "side": "ember",
                        "error": f"the child exited with {code}: {tail[-1] if tail else ''}"})
    return records


def _cell(item: dict | None) -> str:
    if item is None:
        return "-"
    if item.get("error"):
        return "error" if not item["error"].startswith("skipped") else "skipped"
    value = item.get("value")
    return "n/a" if value is None else str(value)


def _ratio(ember_item, torch_item) -> str:
    try:
        return f"{float(ember_item['value']) / float(torch_item['value']):.2f}"
    except (TypeError, ValueError, KeyError, ZeroDivisionError):
        return "-"


def _verdict(ratio: str, target: str | None) -> str:
    if not target or ratio == "-":
        return ""
    limit = float(target[2:])
    ok = float(ratio) >= limit if target.startswith(">=") else float(ratio) <= limit
    return f"{target} {'ok' if ok else 'MISSED'}"


def table(records: list[dict]) -> str:
    """The summary: one line per figure, ember and torch side by side."""
    rows: dict[str, dict] = {}
    for item in records:
        rows.setdefault(item["row"], {})[item["side"]] = item
    width = max([len(r) for r in rows] + [30])
    lines = [f"{'check':{width}}  {'unit':10} {'ember':>10} {'torch':>10} {'ratio':>6}  target",
             "-" * (width + 52)]
    for row, sides in rows.items():
        e, t = sides.get("ember"), sides.get("torch")
        unit = (e or t or {}).get("unit", "")
        ratio = _ratio(e, t) if e and t else "-"
        target = (e or {}).get("target")
        lines.append(f"{row:{width}}  {unit:10} {_cell(e):>10} {_cell(t):>10} {ratio:>6}  "
                     f"{_verdict(ratio, target)}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", default="cuda", help="ember device (default: cuda)")
    parser.add_argument("--quick", action="store_true",
                        help="tiny sizes, few steps: checks that the script works")
    parser.add_argument("--budget", type=float, default=360.0,
                        help="seconds for all sections together (default: 360)")
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument("--child", choices=SECTIONS, help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=60.0, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args)
        return 0
    start = time.monotonic()
    header = _header(args.device)
    print("ember GPU check: " + header, flush=True)
    if header.startswith("device unusable"):
        return 2
    wanted = [s for s in args.sections.split(",") if s]
    unknown = set(wanted) - set(SECTIONS)
    if unknown:
        parser.error(f"unknown sections {sorted(unknown)}; expected {', '.join(SECTIONS)}")
    records = []
    for i, name in enumerate(wanted):
        left = args.budget - (time.monotonic() - start)
        share = WEIGHTS[name] / sum(WEIGHTS[s] for s in wanted[i:])
        records += _run_section(name, args, max(left * share, 20.0))
    print(f"\n== summary ({time.monotonic() - start:.0f} s; ratios are ember/torch) ==")
    print(table(records), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
