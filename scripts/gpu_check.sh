#!/usr/bin/env bash
# The checks of the CUDA backend that need a GPU (issue 15; docs/cuda.md). Run on a machine with
# an NVIDIA GPU, the CUDA toolkit >= 12.0 (nvcc, cuBLAS) and the project's build dependencies
# (CMake >= 3.22, g++ >= 12, GoogleTest, OpenMP; scripts/setup.sh installs them on Debian):
#   scripts/gpu_check.sh                             # H100/H200 (sm_90, the default)
#   BLOCKRNN_CUDA_ARCH=80 scripts/gpu_check.sh       # another GPU, e.g. A100; "native" needs
#                                                    # CMake >= 3.24
# Steps: the build, every CUDA test (all ops against the CPU reference in float64, float32 and
# float16, validation, determinism; it fails if any device test was skipped), the CPU suite of
# the same build (unaffected by the CUDA backend), then a small timing (µs per step of BlockLSTM
# fwd and fwd+bwd, BlockGRU and BlockGRUResetAfter fwd, fp32 exact / TF32 / fp16) at
# T=100 B=16 I=H=512 and T=1000 B=64 I=H=1024. Its output is what to report; nothing else is a
# GPU result.
set -euo pipefail
cd "$(dirname "$0")/.."
ARCH="${BLOCKRNN_CUDA_ARCH:-90}"
JOBS="${BLOCKRNN_JOBS:-$(nproc)}"
BUILD=build/gpu

nvidia-smi
nvcc --version | tail -1
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBLOCKRNN_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$ARCH" -DBLOCKRNN_BUILD_JAVA=OFF
cmake --build "$BUILD" -j "$JOBS"

echo "== CUDA tests"
log="$(mktemp)"
ctest --test-dir "$BUILD" -R '^cuda\.' --output-on-failure -j 1 | tee "$log"
# On a GPU machine no device test may be skipped (only cuda.CudaValidation.NoDeviceIsAClearError,
# which checks the no-device error, skips itself there).
if grep -E 'cuda\.CudaOps\..*(Skipped|Not Run)' "$log"; then
  echo "device tests were skipped: is the GPU visible to this process?"
  exit 1
fi

echo "== CPU suite of the same build"
ctest --test-dir "$BUILD" -E '^cuda\.' -j "$JOBS"

echo "== timing"
"$BUILD/tests/cuda/blockrnn_cuda_timing" 100 16 512
"$BUILD/tests/cuda/blockrnn_cuda_timing" 1000 64 1024
