#!/usr/bin/env bash
# The GPU checks in one run, for a machine with an NVIDIA GPU and CuPy (and PyTorch for the
# oracle tests and the benchmark's twin): the "cuda" cases of the test suite, then
# benchmarks/train_step.py --device cuda. Logs go to $OUT (default /tmp/minigrad-gpu-check).
#
#     bash benchmarks/gpu_check.sh
set -u
OUT=${OUT:-/tmp/minigrad-gpu-check}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
export PYTHONPATH=$PWD${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -c "import cupy, numpy, minigrad as mg; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'cuda available', mg.cuda.is_available())"
workers=$(( $(nproc) > 8 ? 8 : $(nproc) ))
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest tests -k cuda -n "$workers" -rf --tb=short \
    -p no:cacheprovider 2>&1 | tee "$OUT/tests_cuda.log" | tail -n 80
timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/train_step.py --device cuda 2>&1 \
    | tee "$OUT/train_step_cuda.log"
