#!/usr/bin/env bash
# Installs blockrnn into temporary prefixes, static and shared, and checks each install the way
# its users meet it:
#   - the separate consumer project tests/consumer through find_package(blockrnn CONFIG) (C++
#     and C), and the C-only project tests/consumer_c_only (project(... LANGUAGES C));
#   - pkg-config: blockrnn.pc for C (tests/consumer/consumer.c and the example of docs/c_api.md),
#     blockrnn-cxx.pc for C++ (every ```cpp block of README.md, compiled and run as written);
#     blockrnn.pc carries no -std flag, blockrnn-cxx.pc carries -std=c++20;
#   - blockrnn/blockrnn.h gives BLOCKRNN_VERSION_STRING (the README examples and consumer.cc use
#     it through the umbrella header only);
#   - blockrnn/cuda.h is installed exactly when a CUDA library (libblockrnn_cuda) is;
#   - where the build tree built them: the CLI in bin/ (`blockrnn --version`), and the jar and
#     the JNI library, with a Java program run against the installed jar through
#     java.library.path, BLOCKRNN_JNI and -Dblockrnn.jni, and the error message when the native
#     library is not found.
# Also configures tests/consumer with blockrnn as a subproject (add_subdirectory) to check that
# it then adds no tests, CLI or GTest requirement, leaves the build type alone and passes no
# -fopenmp on.
# Usage: scripts/test_install.sh [STATIC_BUILD_DIR]
#   STATIC_BUILD_DIR: an already built static-library build tree to install from (test.sh passes
#   build/dev, which has the CLI and, with a JDK, the Java binding); without it, a library-only
#   static build is made. The shared library is always built here, with the Java binding when a
#   JDK is found (its JNI library then links libblockrnn.so) but no tests or CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS="${BLOCKRNN_JOBS:-2}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

lib_build() {  # lib_build DIR SHARED(ON|OFF) JAVA(ON|OFF)
  cmake -S . -B "$1" -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS="$2" -DBLOCKRNN_BUILD_TESTS=OFF \
    -DBLOCKRNN_BUILD_CLI=OFF -DBLOCKRNN_BUILD_JAVA="$3" >/dev/null
  cmake --build "$1" -j "$JOBS"
}

fail() {
  echo "test_install: $*" >&2
  exit 1
}

# extract_blocks FILE LANG DIR EXT: writes each ```LANG block of FILE to DIR/LANG_<n>.EXT.
extract_blocks() {
  mkdir -p "$3"
  awk -v fence="\`\`\`$2" -v prefix="$3/$2_" -v ext="$4" '
    !inside && $0 == fence { n++; out = prefix n "." ext; inside = 1; next }
    inside && $0 == "```" { inside = 0; close(out); next }
    inside { print > out }' "$1"
}

# pkg_config PREFIX KIND ARGS...: pkg-config on PREFIX's .pc files, with --static for KIND static.
pkg_config() {
  local prefix=$1 kind=$2
  shift 2
  local static_flag=()
  [[ $kind == static ]] && static_flag=(--static)
  PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config "${static_flag[@]}" "$@"
}

check_java() {  # check_java PREFIX KIND VERSION
  local prefix=$1 kind=$2 version=$3
  echo "-- Java against the installed jar ($kind)"
  local jar="$prefix/share/java/blockrnn.jar" jni="$prefix/lib/libblockrnn_jni.so"
  test -f "$jar" || fail "the build has the Java binding but $jar is not installed"
  test -f "$prefix/share/java/blockrnn-$version.jar" || fail "blockrnn-$version.jar is not installed"
  test -f "$jni" || fail "the build has the Java binding but $jni is not installed"
  local dir="$work/java-$kind"
  mkdir -p "$dir"
  cat >"$dir/InstallCheck.java" <<'EOF'
import org.blockrnn.FloatTensor;
import org.blockrnn.Layer;
import org.blockrnn.RawOps;
import org.blockrnn.Tensor;
import org.blockrnn.op.nn.GRUBlockCell;

/** Runs GRUBlockCell and a BlockGRU layer handle from the installed jar: zero weights give
 * h = h_prev / 2. */
public class InstallCheck {
  public static void main(String[] args) {
    if (!RawOps.version().equals(args[0])) {
      throw new AssertionError("library " + RawOps.version() + ", expected " + args[0]);
    }
    FloatTensor x = FloatTensor.zeros(1, 2);
    FloatTensor hPrev = FloatTensor.of(new float[] {1f, -1f}, 1, 2);
    GRUBlockCell<FloatTensor> cell = GRUBlockCell.create(x, hPrev, FloatTensor.zeros(4, 4),
        FloatTensor.zeros(4, 2), FloatTensor.zeros(4), FloatTensor.zeros(2));
    if (cell.h().getFloat(0, 0) != 0.5f || cell.h().getFloat(0, 1) != -0.5f) {
      throw new AssertionError("h = " + java.util.Arrays.toString(cell.h().data()));
    }
    try (Layer gru = new Layer(new Layer.Options(Layer.Kind.GRU, 2, 2))) {
      gru.setWeights(FloatTensor.zeros(4, 4), FloatTensor.zeros(4, 2), FloatTensor.zeros(4),
          FloatTensor.zeros(2));
      Tensor[] acts = gru.forward(FloatTensor.zeros(1, 1, 2), null, hPrev, null, null);
      if (!java.util.Arrays.equals(((FloatTensor) acts[3]).data(), new float[] {0.5f, -0.5f})) {
        throw new AssertionError("Layer: h = " + acts[3]);
      }
    }
    System.out.println("InstallCheck: blockrnn " + RawOps.version() + " ok");
  }
}
EOF
  javac -cp "$jar" -d "$dir" "$dir/InstallCheck.java"
  local cp="$jar:$dir" empty="$work/empty-dir"
  mkdir -p "$empty"
  java -Djava.library.path="$prefix/lib" -cp "$cp" InstallCheck "$version"
  BLOCKRNN_JNI="$jni" java -Djava.library.path="$empty" -cp "$cp" InstallCheck "$version"
  java -Dblockrnn.jni="$jni" -Djava.library.path="$empty" -cp "$cp" InstallCheck "$version"
  # Not found: the error names where it looked and every setting that chooses the library.
  local log="$dir/missing.log"
  if env -u BLOCKRNN_JNI java -Djava.library.path="$empty" -cp "$cp" InstallCheck "$version" \
      >"$log" 2>&1; then
    fail "InstallCheck ran without a native library"
  fi
  for want in "UnsatisfiedLinkError" "java.library.path ($empty)" "-Dblockrnn.jni=" \
      "BLOCKRNN_JNI=" "-Djava.library.path"; do
    grep -qF -- "$want" "$log" || { cat "$log"; fail "the missing-library error lacks '$want'"; }
  done
  if BLOCKRNN_JNI="$empty/libblockrnn_jni.so" java -cp "$cp" InstallCheck "$version" \
      >"$log" 2>&1; then
    fail "InstallCheck ran with BLOCKRNN_JNI naming a missing file"
  fi
  grep -qF "environment variable BLOCKRNN_JNI ($empty/libblockrnn_jni.so)" "$log" \
    || { cat "$log"; fail "the error does not name BLOCKRNN_JNI's path"; }
  echo "Java ($kind): installed jar ok; missing library: $(grep -o 'blockrnn: cannot load[^:]*' "$log" | head -1)"
}

snippets="$work/snippets"
extract_blocks README.md cpp "$snippets" cc
extract_blocks docs/c_api.md c "$snippets" c
ls "$snippets"/cpp_*.cc >/dev/null 2>&1 || fail "README.md has no \`\`\`cpp block"
test -f "$snippets/c_1.c" || fail "docs/c_api.md has no \`\`\`c block"

for kind in static shared; do
  echo "-- install ($kind) + find_package consumer"
  prefix="$work/prefix-$kind"
  if [[ $kind == static && -n "${1:-}" ]]; then
    build="$1"
  else
    build="$work/build-$kind"
    if [[ $kind == shared ]]; then
      lib_build "$build" ON ON
    else
      lib_build "$build" OFF OFF
    fi
  fi
  cmake --install "$build" --prefix "$prefix" >/dev/null
  test -f "$prefix/lib/cmake/blockrnn/blockrnnConfig.cmake"
  test -f "$prefix/include/blockrnn/c_api.h" && test -f "$prefix/include/blockrnn/version.h"
  test -f "$prefix/include/blockrnn/rnn_c_api.h" && test -f "$prefix/include/blockrnn/layer_c_api.h"
  version="$(sed -n 's/^#define BLOCKRNN_VERSION_STRING "\(.*\)"$/\1/p' "$prefix/include/blockrnn/version.h")"
  [[ -n $version ]] || fail "no BLOCKRNN_VERSION_STRING in the installed version.h"
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
  # cuda.h declares functions only libblockrnn_cuda defines: installed with it, or not at all.
  if compgen -G "$prefix/lib/libblockrnn_cuda*" >/dev/null; then
    test -f "$prefix/include/blockrnn/cuda.h" || fail "libblockrnn_cuda is installed without cuda.h"
  else
    test ! -e "$prefix/include/blockrnn/cuda.h" || fail "cuda.h is installed without a CUDA library"
  fi
  echo "cuda.h ($kind): installed only with a CUDA library: ok"

  consumer="$work/consumer-$kind"
  cmake -S tests/consumer -B "$consumer" -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_BUILD_TYPE=Debug >/dev/null
  cmake --build "$consumer" -j "$JOBS" >/dev/null
  "$consumer/consumer_cxx"
  "$consumer/consumer_c"

  echo "-- C-only find_package consumer ($kind)"
  c_only="$work/consumer-c-only-$kind"
  cmake -S tests/consumer_c_only -B "$c_only" -DCMAKE_PREFIX_PATH="$prefix" >/dev/null
  cmake --build "$c_only" -j "$JOBS" >/dev/null
  "$c_only/consumer_c_only" | tail -1

  echo "-- pkg-config consumers ($kind)"
  if command -v pkg-config >/dev/null; then
    if pkg_config "$prefix" "$kind" --cflags blockrnn | grep -q -- '-std='; then
      fail "blockrnn.pc gives C users a -std flag: $(pkg_config "$prefix" "$kind" --cflags blockrnn)"
    fi
    pkg_config "$prefix" "$kind" --cflags blockrnn-cxx | grep -q -- '-std=c++20' \
      || fail "blockrnn-cxx.pc lacks -std=c++20"
    rpath=(-Wl,-rpath,"$prefix/lib")
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -pedantic -Werror tests/consumer/consumer.c -o "$work/pc-$kind" \
      $(pkg_config "$prefix" "$kind" --cflags --libs blockrnn) -lm "${rpath[@]}"
    "$work/pc-$kind" >/dev/null
    # shellcheck disable=SC2046
    cc -std=c11 -Wall -Wextra -pedantic -Werror "$snippets/c_1.c" -o "$work/c-api-doc-$kind" \
      $(pkg_config "$prefix" "$kind" --cflags --libs blockrnn) -lm "${rpath[@]}"
    "$work/c-api-doc-$kind" | grep -q "matches TensorFlow"
    echo "pkg-config C ($kind): consumer.c, docs/c_api.md's example: ok"
    # -Wno-missing-field-initializers: GCC 12's -Wextra warns on designated initializers that
    # leave members to their defaults, which is how the option structs (RNNOptions, RNNInputs)
    # are meant to be filled.
    for snippet in "$snippets"/cpp_*.cc; do
      exe="$work/$(basename "$snippet" .cc)-$kind"
      # shellcheck disable=SC2046
      c++ -Wall -Wextra -Wno-missing-field-initializers -Werror "$snippet" -o "$exe" \
        $(pkg_config "$prefix" "$kind" --cflags --libs blockrnn-cxx) "${rpath[@]}" \
        || fail "README.md's C++ example $(basename "$snippet") does not compile (above)"
      "$exe" >/dev/null || fail "README.md's C++ example $(basename "$snippet") failed"
    done
    echo "pkg-config C++ ($kind): README.md's $(ls "$snippets"/cpp_*.cc | wc -l) C++ examples: ok"
  else
    echo "pkg-config not installed: skipped"
  fi

  if [[ -x "$build/tools/blockrnn" ]]; then
    echo "-- CLI ($kind)"
    test -x "$prefix/bin/blockrnn" || fail "the build has the CLI but bin/blockrnn is not installed"
    [[ "$("$prefix/bin/blockrnn" --version)" == *"$version"* ]] \
      || fail "bin/blockrnn --version does not print $version"
    echo "bin/blockrnn --version: $("$prefix/bin/blockrnn" --version)"
  fi
  if compgen -G "$build/java/blockrnn*.jar" >/dev/null; then
    check_java "$prefix" "$kind" "$version"
  fi
done

echo "-- blockrnn as a subproject (configure only)"
cmake -S tests/consumer -B "$work/subproject" -DBLOCKRNN_SOURCE_DIR="$PWD" | grep "subproject: ok"
