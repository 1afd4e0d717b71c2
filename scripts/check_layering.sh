#!/usr/bin/env bash
# Keeps the arrows between the source directories pointing one way (docs/design.md, "Layers"):
#
#   - src/core (tensors, errors, the context, validation helpers) includes nothing from the
#     directories above it: src/ops, src/layer, src/cpu, src/gemm, src/ref, src/kernel,
#     src/capi, src/cuda;
#   - src/kernel (the interface both engines implement) names no type of the fast engine
#     (no `cpu::` outside comments);
#   - tools/, bench/, python/ and java/ are clients of the public API (include/blockrnn/): they
#     include no header under src/, put no src/ directory on their include path and link
#     blockrnn::blockrnn, never the project-internal blockrnn_internal.
#
# Prints every offending line as FILE:LINE: TEXT and exits 1 when there is one; exits 0 when
# there is none. Run from anywhere: `scripts/check_layering.sh` (ctest runs it as
# check_layering).
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
cd "$root"

internal='core|ops|layer|cpu|gemm|ref|kernel|capi|cuda'
above_core='ops|layer|cpu|gemm|ref|kernel|capi|cuda'
status=0

# report RULE < HITS: prints the FILE:LINE: TEXT lines of HITS under RULE; any line is a failure.
report() {
  local rule="$1" hits
  hits="$(cat)"
  if [[ -n "$hits" ]]; then
    echo "check_layering: $rule"
    printf '%s\n' "$hits" | sed 's/^/  /'
    status=1
  fi
}

sources() {  # the C/C++ sources and headers under the given directories
  find "$@" -type f \( -name '*.h' -o -name '*.hpp' -o -name '*.inc' -o -name '*.c' \
    -o -name '*.cc' -o -name '*.cpp' -o -name '*.cu' -o -name '*.cuh' \) -print0 2>/dev/null
}

# src/core: #include "<dir above core>/…".
report "src/core must include nothing from src/{${above_core//|/,}}" < <(
  sources src/core |
    xargs -0 -r grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"($above_core)/" || true)

# src/kernel: code (each line up to a // comment) that names cpu::.
report "src/kernel must name no type of src/cpu (cpu::)" < <(
  sources src/kernel | xargs -0 -r awk '{ code = $0; sub(/\/\/.*/, "", code) }
    code ~ /cpu::/ { print FILENAME ":" FNR ": " $0 }')

clients=(tools bench python java)
report "tools/, bench/, python/ and java/ must include no header under src/ (use include/blockrnn/)" < <(
  sources "${clients[@]}" |
    xargs -0 -r grep -nE "^[[:space:]]*#[[:space:]]*include[[:space:]]*\"((\.\./)*src/|($internal)/)" ||
    true)

report "tools/, bench/, python/ and java/ must not put src/ on their include path nor link blockrnn_internal (link blockrnn::blockrnn)" < <(
  find "${clients[@]}" \( -name CMakeLists.txt -o -name '*.cmake' \) -print0 2>/dev/null |
    xargs -0 -r grep -nE '(PROJECT|CMAKE)_SOURCE_DIR\}?/src\b|\.\./\.\./src\b|blockrnn_internal' || true)

if [[ $status -eq 0 ]]; then
  echo "check_layering: ok"
fi
exit $status
