"""``bench/gpu_check.py`` works apart from CuPy: its --quick mode on the ``fakegpu``
stand-in runs every section in its child process and ends with the table."""
from __future__ import annotations

import os
import re
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_gpu_check_quick_on_the_stand_in_device():
    done = subprocess.run([sys.executable, "bench/gpu_check.py", "--device", "fakegpu",
                           "--quick"], capture_output=True, text=True, cwd=ROOT, timeout=240)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    out = done.stdout
    summary = out[out.index("== summary"):]
    assert "ember GPU check: ember" in out and "on fakegpu" in out
    ops = re.search(r"op table on fakegpu vs cpu\s+ops passed\s+(\d+)/(\d+)", summary)
    assert ops and ops.group(1) == ops.group(2) and int(ops.group(2)) > 20, summary
    for row in ("matmul bf16 64^3", "matmul fp32 64^3", "mlp eager ms/step",
                "gpt2-small (tiny) bfloat16 eager ms/step"):
        line = next(line for line in summary.splitlines() if line.startswith(row))
        ember_cell = line[len(row):].split()[1]
        assert re.fullmatch(r"[0-9.e+-]+", ember_cell), line  # a number, not an error
    assert "gpt2-small (tiny) bfloat16 eager peak memory" in summary
