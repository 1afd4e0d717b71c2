#!/usr/bin/env bash
# CTest runbook.dry_run: scripts/gpu_runbook.sh run on the host emulation (its dry run), so that the
# GPU runbook's commands, checks and CSV are tested on every CI run without a GPU.
#
#   runbook_test.sh EMU_TESTS EMU_TIMING
#
# EMU_TESTS / EMU_TIMING: blockrnn_cuda_emu_tests and blockrnn_cuda_emu_timing, linked under the
# runbook's names into a temporary BIN. Checks: the scripts parse (bash -n, python -m py_compile);
# a skipped device test FAILS verify (exit 1) although every test that ran passed; a passing
# filter passes; a missing binary and a missing persistent test binary stop with exit 2 and a
# message naming them; bench writes a CSV of the documented columns with every blockrnn row;
# BLOCKRNN_RUNBOOK_PRINT=1 prints the commands and runs none.
set -uo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
runbook="$root/scripts/gpu_runbook.sh"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/bin"
ln -s "$(realpath "$1")" "$work/bin/blockrnn_cuda_tests"
ln -s "$(realpath "$2")" "$work/bin/blockrnn_cuda_timing"
export BLOCKRNN_RUNBOOK_DRY_RUN=1 BLOCKRNN_RUNBOOK_BIN="$work/bin"
unset BLOCKRNN_RUNBOOK_FILTER BLOCKRNN_RUNBOOK_PRINT BLOCKRNN_CUDA_EMU_DEVICES
failures=0

fail() {
  echo "FAIL: $*"
  failures=$((failures + 1))
}

# expect CODE PATTERN NAME -- command...: the exit code and a line of the output.
expect() {
  local code="$1" pattern="$2" name="$3"
  shift 4
  local out rc
  out="$("$@" 2>&1)"
  rc=$?
  if [[ $rc -ne $code ]]; then
    fail "$name: exit $rc, expected $code"
    echo "$out" | tail -20
  elif ! grep -Eq -- "$pattern" <<<"$out"; then
    fail "$name: no line matching '$pattern'"
    echo "$out" | tail -20
  else
    echo "ok: $name"
  fi
}

bash -n "$runbook" || fail "bash -n gpu_runbook.sh"
bash -n "$root/scripts/gpu_check.sh" || fail "bash -n gpu_check.sh"
for py in gpu_bench_torch.py gpu_bench_table.py; do
  python3 -c "import ast, sys; ast.parse(open(sys.argv[1]).read())" "$root/scripts/$py" ||
    fail "$py does not parse"
done

# A skipped device test fails the stage, even though every test that ran passed (gtest exit 0).
export OUT="$work/out1"
expect 1 "verify FAILED" "verify with no device fails on the skips" -- \
  env BLOCKRNN_CUDA_EMU_DEVICES=0 \
  BLOCKRNN_RUNBOOK_FILTER='CudaOps.*:CudaValidation.*-CudaValidation.NoDeviceIsAClearError' \
  "$runbook" verify
grep -Eq '^verify +[0-9]+ +0 +[1-9][0-9]* +0$' "$OUT/summary.txt" ||
  fail "summary.txt does not show skips with no failure and exit 0: $(cat "$OUT/summary.txt")"

export OUT="$work/out2"
expect 0 "verify passed" "verify passes when the device tests pass" -- \
  env BLOCKRNN_RUNBOOK_FILTER='CudaOps.GRUCellOps:CudaValidation.SameErrorsAsTheCpuApi' \
  "$runbook" verify

export OUT="$work/out3"
expect 2 "no prebuilt .*blockrnn_cuda_tests" "verify without the binary stops" -- \
  env BLOCKRNN_RUNBOOK_BIN="$work/empty" "$runbook" verify
expect 2 "no .*blockrnn_persistent_tests" "persistent without its tests stops" -- \
  "$runbook" persistent

export OUT="$work/out4"
expect 0 "bench done" "bench dry run" -- "$runbook" bench
csv="$OUT/bench.csv"
header="impl,cell,mode,T,B,H,I,pass,us_per_call,us_per_step,tflops,reps,device,status"
[[ "$(head -1 "$csv")" == "$header" ]] || fail "bench.csv header: $(head -1 "$csv")"
# 2 shapes x 3 cells x 3 modes x 2 passes, every row with the 14 columns and status ok.
# The same again with the per-step loops as CUDA Graphs (impl blockrnn_graph).
for impl in blockrnn blockrnn_graph; do
  rows=$(grep -c "^$impl," "$csv")
  [[ $rows -eq 36 ]] || fail "bench.csv has $rows $impl rows, expected 36"
done
bad=$(grep '^blockrnn' "$csv" | awk -F, 'NF != 14 || $14 != "ok"' | head -3)
[[ -z "$bad" ]] || fail "bench.csv rows with the wrong columns: $bad"
grep -q "blockrnn_us" "$OUT/summary.txt" || fail "no table in summary.txt"

export OUT="$work/out5"
expect 0 "\+ timeout [0-9]+ .*blockrnn_cuda_timing --csv .* --graphs 5 3 16" "print mode" -- \
  env BLOCKRNN_RUNBOOK_PRINT=1 "$runbook" bench
[[ ! -f "$OUT/bench.csv" ]] || fail "print mode ran the timing"

expect 64 "usage" "unknown stage" -- "$runbook" nonsense

if ((failures > 0)); then
  echo "$failures check(s) failed"
  exit 1
fi
echo "all runbook checks passed"
