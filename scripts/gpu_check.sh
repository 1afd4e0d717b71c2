#!/usr/bin/env bash
# The checks of the CUDA backend that need a GPU (docs/cuda.md). Run on a machine with an NVIDIA
# GPU, the CUDA toolkit >= 12.0 (nvcc, cuBLAS) and the project's build dependencies (CMake >=
# 3.22, g++ >= 12, GoogleTest, OpenMP; scripts/setup.sh installs them on Debian):
#   scripts/gpu_check.sh                             # H100/H200 (sm_90 + sm_90a, the default)
#   BLOCKRNN_CUDA_ARCH=80 scripts/gpu_check.sh       # another GPU, e.g. A100; "native" needs
#                                                    # CMake >= 3.24
# Steps: build only the CUDA targets, run every CUDA test (all ops against the CPU reference in
# float64, float32 and float16, validation, determinism; it fails when no test ran and when any
# device test was skipped), then a small timing (µs per step of BlockLSTM fwd and fwd+bwd,
# BlockGRU and BlockGRUResetAfter fwd, fp32 exact / TF32 / fp16) at T=100 B=16 I=H=512 and
# T=1000 B=64 I=H=1024. The CPU suite is not run here (it does not depend on the GPU, and CI runs
# it, also the device tests on the host emulation). Logs go to $OUT when it is set (else
# build/gpu/logs). Its output is what to report; nothing else is a GPU result.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH="${BLOCKRNN_CUDA_ARCH:-90;90a}"
JOBS="${BLOCKRNN_JOBS:-$(nproc)}"
BUILD=build/gpu
LOGS="${OUT:-$BUILD/logs}"
mkdir -p "$LOGS"

nvidia-smi 2>&1 | tee "$LOGS/nvidia-smi.txt"
nvcc --version | tail -1 | tee "$LOGS/nvcc.txt"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBLOCKRNN_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DBLOCKRNN_CUDA_EMU=OFF -DBLOCKRNN_BUILD_JAVA=OFF \
  -DBLOCKRNN_BUILD_CLI=OFF 2>&1 | tee "$LOGS/configure.log"
cmake --build "$BUILD" -j "$JOBS" --target blockrnn_cuda_tests blockrnn_cuda_timing 2>&1 |
  tee "$LOGS/build.log"

echo "== CUDA tests"
# --no-tests=error: zero matching tests (e.g. a build without the CUDA backend) is a failure,
# not a pass.
ctest --test-dir "$BUILD" -R '^cuda\.' --no-tests=error --output-on-failure -j 1 |
  tee "$LOGS/ctest.log"
# On a GPU machine no device test may be skipped (only cuda.CudaValidation.NoDeviceIsAClearError,
# which checks the no-device error, skips itself there).
if grep -E 'cuda\.CudaOps\..*(Skipped|Not Run)' "$LOGS/ctest.log"; then
  echo "device tests were skipped: is the GPU visible to this process?"
  exit 1
fi

echo "== timing"
"$BUILD/tests/cuda/blockrnn_cuda_timing" 100 16 512 | tee "$LOGS/timing_T100_B16_H512.txt"
"$BUILD/tests/cuda/blockrnn_cuda_timing" 1000 64 1024 | tee "$LOGS/timing_T1000_B64_H1024.txt"
