#!/usr/bin/env bash
# Installs blockrnn into temporary prefixes, static and shared, and builds and runs the separate
# consumer project tests/consumer against each: through find_package(blockrnn CONFIG) (C++ and
# C), and through pkg-config (C). Also configures tests/consumer with blockrnn as a subproject
# (add_subdirectory) to check that it then adds no tests, CLI or GTest requirement, leaves the
# build type alone and passes no -fopenmp on.
# Usage: scripts/test_install.sh [STATIC_BUILD_DIR]
#   STATIC_BUILD_DIR: an already built static-library build tree to install from (test.sh passes
#   build/dev); without it, a library-only static build is made. The shared library is always
#   built here (library only: no tests, CLI or Java).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${BLOCKRNN_JOBS:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

lib_build() {  # lib_build DIR SHARED(ON|OFF)
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS="$2" -DBLOCKRNN_BUILD_TESTS=OFF \
    -DBLOCKRNN_BUILD_CLI=OFF -DBLOCKRNN_BUILD_JAVA=OFF >/dev/null
  cmake --build "$1" -j "$JOBS"
}

for kind in static shared; do
  echo "-- install ($kind) + find_package consumer"
  prefix="$work/prefix-$kind"
  if [[ $kind == static && -n "${1:-}" ]]; then
    build="$1"
  else
    build="$work/build-$kind"
    lib_build "$build" "$([[ $kind == shared ]] && echo ON || echo OFF)"
  fi
  cmake --install "$build" --prefix "$prefix" >/dev/null
  test -f "$prefix/lib/cmake/blockrnn/blockrnnConfig.cmake"
  test -f "$prefix/include/blockrnn/c_api.h" && test -f "$prefix/include/blockrnn/version.h"
  if [[ $kind == shared ]]; then
    test -e "$prefix/lib/libblockrnn.so"
    # Only the public API is exported: no internal namespace (core::, cpu::, gemm::, ref::).
    if nm -DC --defined-only "$prefix/lib/libblockrnn.so" | grep -E 'blockrnn::(core|cpu|gemm|ref)::'; then
      echo "libblockrnn.so exports internal symbols (above)"
      exit 1
    fi
  else
    test -f "$prefix/lib/libblockrnn.a"
  fi
  consumer="$work/consumer-$kind"
  cmake -S tests/consumer -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build "$consumer" -j "$JOBS" >/dev/null
  "$consumer/consumer_cxx"
  "$consumer/consumer_c"

  echo "-- pkg-config consumer ($kind)"
  if command -v pkg-config >/dev/null; then
    static_flag=()
    [[ $kind == static ]] && static_flag=(--static)
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -pedantic tests/consumer/consumer.c -o "$work/pc-$kind" \
      $(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config "${static_flag[@]}" --cflags --libs blockrnn) \
      -lm -Wl,-rpath,"$prefix/lib"
    "$work/pc-$kind" >/dev/null && echo "pkg-config ($kind): ok"
  else
    echo "pkg-config not installed: skipped"
  fi
done

echo "-- blockrnn as a subproject (configure only)"
cmake -S tests/consumer -B "$work/subproject" -DBLOCKRNN_SOURCE_DIR="$PWD" | grep "subproject: ok"
