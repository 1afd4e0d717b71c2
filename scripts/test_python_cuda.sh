#!/usr/bin/env bash
# The Python package on CUDA device arrays (docs/cuda.md, "Python"), without a GPU:
#   emu   the extension on the backend's host emulation (BLOCKRNN_PYTHON_CUDA=EMU): every test of
#         tests/python/test_cuda_arrays.py runs, end to end against the CPU path, and
#         scripts/gpu_python_check.py --no-torch;
#   cuda  the extension with the real backend (BLOCKRNN_PYTHON_CUDA=ON, nvcc): it compiles and
#         links, and without a GPU every op refuses device arrays with "no CUDA device" after
#         validating them. Left out (with a message) where no nvcc is found.
# Each is installed into build/python-cuda-<mode>/site (pip --target, no dependencies: the
# interpreter's numpy and torch are used). Usage: scripts/test_python_cuda.sh [emu|cuda|all]
# (default all); BLOCKRNN_PYTHON (default .venv/bin/python) the interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
PY="${BLOCKRNN_PYTHON:-.venv/bin/python}"
TESTS=(tests/python/test_cuda_arrays.py tests/python/test_device_arrays.py)

# install emu|cuda: BLOCKRNN_PYTHON_CUDA=EMU|ON into build/python-cuda-<mode>/site.
install() {
  local mode="$1" dir="build/python-cuda-$1" define=EMU
  [[ "$mode" == cuda ]] && define=ON
  rm -rf "$dir/site"
  "$PY" -m pip install -q --no-build-isolation --no-deps --target "$dir/site" . \
    -C cmake.define.BLOCKRNN_PYTHON_CUDA="$define" -C build-dir="$dir/build"
}

# pytest on the extension in $1; fails unless `backend` is the one under test.
run_tests() {
  local site="$1" backend="$2"
  PYTHONPATH="$site" BLOCKRNN_EXPECT_CUDA_BACKEND="$backend" "$PY" -m pytest -q -rs "${TESTS[@]}"
}

mode="${1:-all}"
if [[ "$mode" == emu || "$mode" == all ]]; then
  echo "== Python on device arrays: the extension on the host emulation"
  install emu
  run_tests build/python-cuda-emu/site emulation
  PYTHONPATH=build/python-cuda-emu/site "$PY" scripts/gpu_python_check.py --no-torch
fi
if [[ "$mode" == cuda || "$mode" == all ]]; then
  if command -v nvcc >/dev/null || [[ -n "${CUDACXX:-}" ]]; then
    echo "== Python on device arrays: the extension with the CUDA backend (nvcc)"
    install cuda
    run_tests build/python-cuda-cuda/site cuda
  else
    echo "== Python on device arrays, CUDA build: no nvcc found, left out"
  fi
fi
