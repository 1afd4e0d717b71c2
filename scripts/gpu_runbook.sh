#!/usr/bin/env bash
# The GPU runbook of the CUDA backend (docs/cuda.md, "On a GPU"). A GPU machine is rarely at hand,
# for a short time, bare (no GoogleTest, nothing to install), so nothing is built there: the
# device tests are built on the CPU machine and carried.
#
#   scripts/gpu_runbook.sh build    # on the CPU machine (nvcc, cuBLAS, GoogleTest): builds the
#                                   # device tests and the timing tool into build/gpu-runbook/bin
#                                   # (BLOCKRNN_CUDA_ARCH, default "90;90a": H100/H200)
#   scripts/gpu_runbook.sh verify   # on the GPU machine, carrying build/gpu-runbook/bin: every
#                                   # device test (all ops in float64/float32/float16 against the
#                                   # CPU reference, determinism, TF32, validation)
#
# verify writes nvidia-smi.txt, ldd.txt, verify.log and verify.xml (GoogleTest's report) to $OUT
# (default build/gpu-runbook/out), ends with a one-line table, and FAILS when a test fails, when
# no test ran, and when any test was skipped (a skipped device test is never a pass). It first
# checks with ldd that the CUDA libraries the binary needs (libcudart.so.13, libcublas.so.13,
# libcublasLt.so.13) resolve, looking in the toolkit's and in pip's nvidia-* wheels' directories
# too; when they do not, it says which are missing and stops (exit 2) instead of spending device
# time on a build that cannot work there. Every step runs under `timeout`.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=build/gpu-runbook
BIN="$BUILD/bin"
OUT="${OUT:-$BUILD/out}"

stage_build() {
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBLOCKRNN_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES="${BLOCKRNN_CUDA_ARCH:-90;90a}" -DBLOCKRNN_CUDA_EMU=OFF \
    -DBLOCKRNN_BUILD_JAVA=OFF -DBLOCKRNN_BUILD_CLI=OFF -DBLOCKRNN_INSTALL=OFF >/dev/null
  cmake --build "$BUILD" -j "${BLOCKRNN_JOBS:-2}" --target blockrnn_cuda_tests blockrnn_cuda_timing
  mkdir -p "$BIN"
  cp "$BUILD/tests/cuda/blockrnn_cuda_tests" "$BUILD/tests/cuda/blockrnn_cuda_timing" "$BIN/"
  du -sh "$BIN"
  echo "carry: $BIN"
}

# Directories that may hold the CUDA 13 runtime libraries on a machine without the toolkit.
library_dirs() {
  ls -d /usr/local/cuda*/lib64 /usr/local/cuda*/targets/*/lib 2>/dev/null || true
  local py
  for py in python3 python; do
    command -v "$py" >/dev/null || continue
    "$py" - <<'PY' 2>/dev/null || true
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
for root in roots:
    for d in sorted(glob.glob(os.path.join(root, "nvidia", "**", "lib"), recursive=True)):
        print(d)
PY
    break
  done
}

stage_verify() {
  mkdir -p "$OUT"
  local bin="$BIN/blockrnn_cuda_tests"
  timeout 30 nvidia-smi >"$OUT/nvidia-smi.txt" 2>&1 || echo "nvidia-smi failed" >>"$OUT/nvidia-smi.txt"
  head -20 "$OUT/nvidia-smi.txt"
  if [[ ! -x "$bin" ]]; then
    echo "no prebuilt $bin: run 'scripts/gpu_runbook.sh build' on the CPU machine and carry $BIN"
    exit 2
  fi
  if ldd "$bin" | grep -q "not found"; then
    local d
    for d in $(library_dirs); do
      LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
    export LD_LIBRARY_PATH
  fi
  ldd "$bin" >"$OUT/ldd.txt" 2>&1 || true
  if grep -q "not found" "$OUT/ldd.txt"; then
    echo "missing libraries (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}):"
    grep "not found" "$OUT/ldd.txt"
    exit 2
  fi
  set +e
  timeout 540 "$bin" --gtest_filter='-CudaValidation.NoDeviceIsAClearError' \
    --gtest_output="xml:$OUT/verify.xml" >"$OUT/verify.log" 2>&1
  local rc=$?
  set -e
  tail -30 "$OUT/verify.log"
  local tests=0 failed=0 skipped=0
  if [[ -f "$OUT/verify.xml" ]]; then
    tests=$(grep -c '<testcase ' "$OUT/verify.xml" || true)
    failed=$(grep -c '<failure' "$OUT/verify.xml" || true)
    skipped=$(grep -c 'result="skipped"' "$OUT/verify.xml" || true)
  fi
  printf '%-8s %-6s %-6s %-8s %s\n' stage tests failed skipped exit | tee "$OUT/summary.txt"
  printf '%-8s %-6s %-6s %-8s %s\n' verify "$tests" "$failed" "$skipped" "$rc" | tee -a "$OUT/summary.txt"
  if [[ $rc -ne 0 || $tests -eq 0 || $failed -ne 0 || $skipped -ne 0 ]]; then
    echo "verify FAILED (a skip counts as a failure: is the GPU visible?)"
    exit 1
  fi
  echo "verify passed"
}

case "${1:-}" in
  build) stage_build ;;
  verify) stage_verify ;;
  *)
    echo "usage: $0 build|verify" >&2
    exit 64
    ;;
esac
