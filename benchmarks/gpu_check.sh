#!/usr/bin/env bash
# The GPU checks in one run, for a machine with an NVIDIA GPU and CuPy (and PyTorch for the
# oracle tests and the benchmark's twin): the "cuda" cases of the test suite, then
# benchmarks/train_step.py --device cuda. Logs go to $OUT (default /tmp/minigrad-gpu-check).
#
#     bash benchmarks/gpu_check.sh
#
# On a machine that cannot install packages, bring the missing pure-Python ones along in
# .gpu_deps (git-ignored), which this script puts on the path. The H200 image lent to this
# project (2026-11) has CuPy, PyTorch, pytest, hypothesis, SciPy and safetensors, but not the
# Python graphviz package that minigrad.viz imports:
#
#     pip install --target .gpu_deps graphviz    # here, then carry .gpu_deps along
set -u
OUT=${OUT:-/tmp/minigrad-gpu-check}
mkdir -p "$OUT"
cd "$(dirname "$0")/.."
deps=$PWD/.gpu_deps
[ -d "$deps" ] || deps=
export PYTHONPATH=$PWD${deps:+:$deps}${PYTHONPATH:+:$PYTHONPATH} PYTHONUNBUFFERED=1
nvidia-smi -L
python3 -c "import cupy, numpy, minigrad as mg; print('cupy', cupy.__version__, 'numpy', numpy.__version__, 'cuda available', mg.cuda.is_available())"
workers=$(( $(nproc) > 8 ? 8 : $(nproc) ))
# a module that cannot be imported there (a missing package) costs its own tests, not the run
timeout "${TEST_TIMEOUT:-300}" python3 -m pytest tests -k cuda -n "$workers" -rf --tb=short \
    -p no:cacheprovider --continue-on-collection-errors 2>&1 | tee "$OUT/tests_cuda.log" \
    | tail -n 80
timeout "${BENCH_TIMEOUT:-240}" python3 benchmarks/train_step.py --device cuda 2>&1 \
    | tee "$OUT/train_step_cuda.log"
