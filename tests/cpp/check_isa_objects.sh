#!/usr/bin/env bash
# Guards the per-ISA compilation (src/gemm/kernels_*.cc, src/cpu/pointwise_*.cc): an object
# file compiled with AVX-512 or AVX2 flags must define no weak *code* symbol (nm type W), since
# the linker could pick that copy of an inline/template function for callers on any CPU and
# run AVX-512 instructions on a CPU without them. Weak data (type V: typeinfo emitted by
# sanitizers) is harmless. Usage: check_isa_objects.sh OBJECT... (CTest passes every object of
# the library; the non-ISA ones are skipped).
set -euo pipefail
checked=0
for obj in "$@"; do
  case "$obj" in
    *_avx512.cc.o | *_avx2.cc.o | *_baseline.cc.o) ;;
    *) continue ;;
  esac
  checked=$((checked + 1))
  weak=$(nm -C --defined-only "$obj" | awk '$2 == "W" || $2 == "w"' || true)
  if [[ -n "$weak" ]]; then
    echo "FAIL: $obj defines weak code symbols (an ISA-specific copy could be linked anywhere):"
    echo "$weak"
    exit 1
  fi
done
if ((checked == 0)); then
  echo "FAIL: no per-ISA object files were given"
  exit 1
fi
echo "ok: $checked per-ISA object files define no weak code symbols"
