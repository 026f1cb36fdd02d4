#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py): ember's CUDA backend against the CPU and against
# PyTorch on the same GPU, about six minutes, a table last. Run from the repository root
# on a machine with CuPy, PyTorch and NumPy; it installs nothing and needs no network.
#   bash bench/gpu_check.sh [--budget SECONDS] [--sections ops,matmul,workloads,gpt2]
set -euo pipefail
cd "$(dirname "$0")/.."
export PYTHONPATH=".${PYTHONPATH:+:$PYTHONPATH}"
PYTHON="${PYTHON:-$(command -v python3 || command -v python)}"
exec "$PYTHON" bench/gpu_check.py --device cuda "$@"
