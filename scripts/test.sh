#!/usr/bin/env bash
# Runs every test of blockrnn from a fresh clone: installs what is missing (scripts/setup.sh),
# then
#   1. the C++ suite (GoogleTest via CTest), on the fast path and with the reference forced;
#   2. the same suite under AddressSanitizer + UndefinedBehaviorSanitizer;
#   3. the Python package (pip install .) and the pytest suite against tensorflow-cpu.
# Usage: scripts/test.sh [--quick]   (--quick skips the sanitizer build)
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${BLOCKRNN_JOBS:-2}"

scripts/setup.sh

echo "== C++ suite (release)"
cmake --preset dev >/dev/null
cmake --build --preset dev -j "$JOBS"
ctest --preset dev -j "$JOBS"

if [[ "${1:-}" != "--quick" ]]; then
  echo "== C++ suite under ASan + UBSan"
  cmake --preset asan-ubsan >/dev/null
  cmake --build --preset asan-ubsan -j "$JOBS"
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --preset asan-ubsan -j "$JOBS"
fi

echo "== Python suite"
.venv/bin/python -m pip install -q --no-build-isolation .
.venv/bin/python -m pytest -q tests/python
