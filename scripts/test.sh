#!/usr/bin/env bash
# Runs every test of blockrnn from a fresh clone: installs what is missing (scripts/setup.sh),
# then
#   1. the C++ suite (GoogleTest via CTest), on the fast path and with the reference forced, with
#      the C API's tests (C11) and the Java binding's (JUnit 5, -Xcheck:jni); then an install of
#      static and shared builds into temporary prefixes and, against each, separate consumer
#      projects (find_package from C++ and from a C-only project, pkg-config for C and C++ with
#      the README's C++ examples), a Java program on the installed jar and the installed CLI
#      (scripts/test_install.sh);
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer, and the libFuzzer
#      targets over every op family, model files and the RNN stack (60 s each);
#   3. the Python package (pip install .) and the pytest suite against tensorflow-cpu; then the
#      extension with the CUDA backend on its host emulation and, where nvcc is found, built with
#      nvcc (scripts/test_python_cuda.sh: device arrays, their refusals without a GPU).
# Steps 1 and 3 run on every CPU path this machine has: the best one (default), then forced
# avx2 and baseline (BLOCKRNN_ISA; docs/gemm.md).
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer build and the fuzzing)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${BLOCKRNN_JOBS:-2}"

scripts/setup.sh

echo "== C++ suite (release)"
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$JOBS"
ctest --preset dev -j "$JOBS"
# The CUDA backend (docs/cuda.md) is part of that build wherever nvcc is found, so it never rots;
# without a GPU its device tests are reported "Skipped" by ctest, never passed.
if grep -q '^BLOCKRNN_CUDA:BOOL=ON' build/dev/CMakeCache.txt; then
  echo "== CUDA backend: built (blockrnn_cuda, blockrnn_cuda_tests; GPU runs: scripts/gpu_check.sh)"
else
  echo "== CUDA backend: not built (no CUDA compiler found)"
fi

echo "== Install + find_package / pkg-config consumers (static and shared)"
scripts/test_install.sh build/dev

if [[ "${1:-}" != "--quick" ]]; then
  echo "== C++ suite under ASan + UBSan"
  cmake --preset asan-ubsan >/dev/null
  cmake --build --preset asan-ubsan -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --preset asan-ubsan -j "$JOBS"
fi

if [[ "${1:-}" != "--quick" ]]; then
  echo "== Fuzzing every op family (libFuzzer + ASan/UBSan, ${BLOCKRNN_FUZZ_SECONDS:-60} s each)"
  cmake --preset fuzz >/dev/null
  cmake --build --preset fuzz -j "$JOBS"
  corpus_dir="$(mktemp -d)"
  for family in GRUBlockCell LSTMBlockCell BlockLSTM BlockGRU; do
    echo "-- fuzz $family"
    log="$corpus_dir/$family.log"
    if ! BLOCKRNN_FUZZ_OPS="$family" BLOCKRNN_NUM_THREADS=1 build/fuzz/tests/fuzz/blockrnn_fuzz \
        -max_total_time="${BLOCKRNN_FUZZ_SECONDS:-60}" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$corpus_dir/" \
        "$corpus_dir" tests/fuzz/corpus >"$log" 2>&1; then
      tail -50 "$log"
      echo "fuzzing $family found a failure (reproduce with the crash-* file above)"
      exit 1
    fi
    grep -E "^stat::number_of_executed_units|^Done" "$log" || true
  done
  # Model files (Model::load_buffer and forward) and blockrnn::RNN (the layer objects' stack).
  for target in model rnn; do
    echo "-- fuzz $target"
    log="$corpus_dir/$target.log"
    mkdir -p "$corpus_dir/$target"
    if ! BLOCKRNN_NUM_THREADS=1 "build/fuzz/tests/fuzz/blockrnn_fuzz_$target" \
        -max_total_time="${BLOCKRNN_FUZZ_SECONDS:-60}" -timeout=10 -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$corpus_dir/" \
        "$corpus_dir/$target" "tests/fuzz/corpus_$target" >"$log" 2>&1; then
      tail -50 "$log"
      echo "fuzzing $target found a failure (reproduce with the crash-* file above)"
      exit 1
    fi
    grep -E "^stat::number_of_executed_units|^Done" "$log" || true
  done
  rm -rf "$corpus_dir"
fi

echo "== Python suite"
.venv/bin/python -m pip install -q --no-build-isolation .
.venv/bin/python -m pytest -q tests/python
# The extension with the CUDA backend: on its host emulation (end to end) and, where nvcc is found,
# built with nvcc (its refusals without a GPU). About 5 CPU-minutes for both (docs/cuda.md).
scripts/test_python_cuda.sh all
for path in avx2 baseline; do
  if .venv/bin/python -c "import blockrnn; blockrnn.set_isa('$path')" 2>/dev/null; then
    echo "== Python suite on the $path path"
    BLOCKRNN_ISA="$path" .venv/bin/python -m pytest -q tests/python
  else
    echo "== Python suite on the $path path: skipped (this CPU lacks it)"
  fi
done
