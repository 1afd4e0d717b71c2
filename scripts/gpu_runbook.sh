#!/usr/bin/env bash
# The GPU runbook of the CUDA backend (docs/cuda.md, "On a GPU"). A GPU machine is rarely at hand,
# for a short time, bare (no GoogleTest, nothing to install), so nothing is built there: the
# binaries are built on the CPU machine and carried.
#
#   scripts/gpu_runbook.sh build       # on the CPU machine (nvcc, cuBLAS, GoogleTest): builds the
#                                      # device tests, the timing tool and, when their targets
#                                      # exist, the persistent kernels' tests and timing into
#                                      # build/gpu-runbook/bin, with what a relink needs
#                                      # (BLOCKRNN_CUDA_ARCH, default "90;90a": H100/H200)
#                                      # Also the Python extension with the CUDA backend
#                                      # (BLOCKRNN_PYTHON_CUDA=ON) into bin/python when
#                                      # BLOCKRNN_RUNBOOK_PYTHON has nanobind and scikit-build-core
#                                      # (its Python version must be the GPU machine's)
#   scripts/gpu_runbook.sh verify      # on the GPU machine, carrying build/gpu-runbook/bin: every
#                                      # device test (all ops in float64/float32/float16 against
#                                      # the CPU reference, determinism, TF32, validation), then
#                                      # the Python package on torch CUDA tensors, DeviceArrays
#                                      # and blockrnn.torch's modules (scripts/gpu_python_check.py)
#   scripts/gpu_runbook.sh bench       # blockrnn's per-step path against cuDNN (torch.nn.LSTM /
#                                      # GRU) at B 16/64/256, H 512/1024, T 100/1000, fp32 exact,
#                                      # TF32, fp16 (bf16: cuDNN only)
#   scripts/gpu_runbook.sh persistent  # the persistent kernels' tests, then their timing
#
# Each GPU stage fits one 10-minute call. Every step runs under `timeout`. Files in $OUT (default
# build/gpu-runbook/out), at most 9 when all three stages run in one call: env.txt (nvidia-smi,
# ldd, versions), summary.txt (one line per stage, then bench's table), verify.log, verify.xml,
# python.log, bench.log, bench.csv, persistent.log, persistent.xml.
#
# A stage FAILS (exit 1) when a test fails, when no test ran and when any test was skipped (a
# skipped device test is never a pass), and bench when a timing step fails or no row was
# measured. Before running anything it checks with ldd that the CUDA libraries the binaries need
# resolve, looking in the toolkit's and pip's nvidia-* wheels' directories too; when they do not
# and the machine has a C++ compiler, it relinks the carried objects against the libraries it
# finds there (build/gpu-runbook/relinked); when that fails too it names what is missing and stops
# (exit 2). A missing binary is exit 2 as well.
#
# Dry run on a machine without a GPU: BLOCKRNN_RUNBOOK_DRY_RUN=1 runs the same stages against the
# host emulation (docs/cuda.md, "Host emulation"): `build` builds the emulated binaries into
# build/gpu-runbook-emu/bin under the real names, bench uses tiny shapes and torch on the CPU
# (skipped when torch is missing), and `verify` passes through the emulation. Its timings mean
# nothing; it shows that the commands, the checks and the CSV work. BLOCKRNN_RUNBOOK_BIN overrides
# the binaries' folder; BLOCKRNN_RUNBOOK_FILTER the verify stage's GoogleTest filter;
# BLOCKRNN_RUNBOOK_PRINT=1 prints each timed command instead of running it.
set -euo pipefail
cd "$(dirname "$0")/.."
DRY="${BLOCKRNN_RUNBOOK_DRY_RUN:-0}"
if [[ "$DRY" == 1 ]]; then
  BUILD=build/gpu-runbook-emu
else
  BUILD=build/gpu-runbook
fi
BIN="${BLOCKRNN_RUNBOOK_BIN:-$BUILD/bin}"
OUT="${OUT:-$BUILD/out}"
PYTHON="${BLOCKRNN_RUNBOOK_PYTHON:-python3}"

# The binaries a stage may carry, by name (the emulated build's targets are copied under these).
TESTS=blockrnn_cuda_tests
TIMING=blockrnn_cuda_timing
PERSISTENT_TESTS=blockrnn_persistent_tests
PERSISTENT_TIMING=blockrnn_persistent_timing

# ---- build (CPU machine) ----------------------------------------------------------------------

# Copies what relinking `target` on another machine needs into $BIN/relink/<target>/: its objects
# and static archives, and link.sh, the link line with this machine's shared libraries replaced by
# -l names (found on the GPU machine through -L of the directories library_dirs finds there).
write_relink() {
  local target="$1" dir="$2" link="$2/CMakeFiles/$1.dir/link.txt"
  local dest args=() tok base
  [[ -f "$link" ]] || return 0
  dest="$(realpath -m "$BIN/relink/$target")"
  rm -rf "$dest"
  mkdir -p "$dest"
  # shellcheck disable=SC2207
  local toks=($(cat "$link"))
  local k
  for ((k = 1; k < ${#toks[@]}; ++k)); do
    tok="${toks[$k]}"
    case "$tok" in
      -o)
        k=$((k + 1))
        args+=(-o "\"\$out\"")
        ;;
      -L* | -Wl,-rpath,*) ;;
      *.o | *.a)
        base="$(basename "$tok")"
        if [[ "$tok" == *.o ]]; then base="obj_$base"; fi
        (cd "$dir" && cp "$tok" "$dest/$base")
        args+=("$base")
        ;;
      *.so | *.so.*)
        # By its soname (-l:libcublas.so.13): pip's nvidia-* wheels have no unversioned name.
        base="$(objdump -p "$tok" 2>/dev/null | awk '/SONAME/ {print $2}')"
        args+=("-l:${base:-$(basename "$tok")}")
        ;;
      *) args+=("$tok") ;;
    esac
  done
  {
    echo '#!/usr/bin/env bash'
    echo "# Relinks $target against the CUDA libraries of this machine (scripts/gpu_runbook.sh)."
    echo '# usage: link.sh OUTPUT LIBDIR... (written by the build stage; run by the GPU stages)'
    echo 'set -euo pipefail'
    echo 'out="$(realpath -m "$1")"; shift'
    echo 'cd "$(dirname "$0")"'
    echo 'libs=(); for d in "$@"; do libs+=(-L"$d" -Wl,-rpath,"$d"); done'
    echo "\${CXX:-c++} ${args[*]} \"\${libs[@]}\""
  } >"$dest/link.sh"
  chmod +x "$dest/link.sh"
}

stage_build() {
  local targets=() names=() dir
  if [[ "$DRY" == 1 ]]; then
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBLOCKRNN_CUDA=OFF -DBLOCKRNN_CUDA_EMU=ON \
      -DBLOCKRNN_BUILD_JAVA=OFF -DBLOCKRNN_BUILD_CLI=OFF -DBLOCKRNN_INSTALL=OFF >/dev/null
    targets=(blockrnn_cuda_emu_tests blockrnn_cuda_emu_timing)
    names=("$TESTS" "$TIMING")
  else
    cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DBLOCKRNN_CUDA=ON \
      -DCMAKE_CUDA_ARCHITECTURES="${BLOCKRNN_CUDA_ARCH:-90;90a}" -DBLOCKRNN_CUDA_EMU=OFF \
      -DBLOCKRNN_BUILD_JAVA=OFF -DBLOCKRNN_BUILD_CLI=OFF -DBLOCKRNN_INSTALL=OFF >/dev/null
    targets=("$TESTS" "$TIMING")
    names=("$TESTS" "$TIMING")
  fi
  # The persistent kernels' binaries, when the tree has them.
  local help
  help="$(cmake --build "$BUILD" --target help)"
  local extra
  for extra in "$PERSISTENT_TESTS" "$PERSISTENT_TIMING"; do
    if grep -Eq "^(\.\.\. )?$extra(:|\$)" <<<"$help"; then
      targets+=("$extra")
      names+=("$extra")
    else
      echo "no target $extra in this tree: not built (the persistent stage will say so)"
    fi
  done
  cmake --build "$BUILD" -j "${BLOCKRNN_JOBS:-2}" --target "${targets[@]}"
  rm -rf "$BIN"
  mkdir -p "$BIN"
  local k file
  for k in "${!targets[@]}"; do
    file="$(find "$BUILD" -type f -name "${targets[$k]}" -perm -u+x | head -1)"
    cp "$file" "$BIN/${names[$k]}"
    dir="$(dirname "$file")"
    write_relink "${targets[$k]}" "$dir"
    if [[ "${targets[$k]}" != "${names[$k]}" && -d "$BIN/relink/${targets[$k]}" ]]; then
      mv "$BIN/relink/${targets[$k]}" "$BIN/relink/${names[$k]}"
    fi
  done
  build_python
  du -sh "$BIN"
  echo "carry: $BIN"
}

# The Python extension with the CUDA backend (EMU in the dry run) into $BIN/python, with the
# Python version it was built for ($BIN/python/BUILT_FOR): verify runs scripts/gpu_python_check.py
# on it. Left out, with a message, when $PYTHON cannot build it.
build_python() {
  local mode=ON
  [[ "$DRY" == 1 ]] && mode=EMU
  rm -rf "$BIN/python"
  if ! "$PYTHON" -c 'import nanobind, scikit_build_core' 2>/dev/null; then
    echo "$PYTHON has no nanobind / scikit-build-core: the Python extension is not built" \
      "(set BLOCKRNN_RUNBOOK_PYTHON, e.g. .venv/bin/python)"
    return 0
  fi
  "$PYTHON" -m pip install -q --no-build-isolation --no-deps --target "$BIN/python" . \
    -C cmake.define.BLOCKRNN_PYTHON_CUDA="$mode" \
    -C cmake.define.CMAKE_CUDA_ARCHITECTURES="${BLOCKRNN_CUDA_ARCH:-90;90a}" \
    -C build-dir="$BUILD/python"
  "$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])' >"$BIN/python/BUILT_FOR"
  echo "Python extension ($mode, Python $(cat "$BIN/python/BUILT_FOR")): $BIN/python"
}

# ---- GPU machine ------------------------------------------------------------------------------

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

# Writes the machine's description to $OUT/env.txt once per call (nvidia-smi, versions).
write_env() {
  mkdir -p "$OUT"
  [[ -f "$OUT/env.txt" ]] && return 0
  {
    echo "== date: $(date -u)"
    echo "== nvidia-smi"
    timeout 30 nvidia-smi 2>&1 || echo "nvidia-smi failed"
    echo "== nvcc"
    timeout 30 nvcc --version 2>&1 | tail -2 || echo "no nvcc"
    echo "== torch"
    timeout 60 "$PYTHON" -c 'import torch; print("torch", torch.__version__, "CUDA", torch.version.cuda, "cuDNN", torch.backends.cudnn.version())' 2>&1 | tail -1 || true
  } >"$OUT/env.txt" 2>&1
  head -20 "$OUT/env.txt"
}

# Resolves the binary `name` into $RESOLVED: $BIN/name when ldd finds all its libraries (with
# LD_LIBRARY_PATH extended by library_dirs if needed), else a relinked copy. Exit 2 when it is
# missing or cannot be made to load.
resolve_binary() {
  local name="$1" bin="$BIN/$1"
  if [[ ! -x "$bin" ]]; then
    echo "no prebuilt $bin: run 'scripts/gpu_runbook.sh build' on the CPU machine and carry $BIN"
    exit 2
  fi
  local dirs=() d
  mapfile -t dirs < <(library_dirs)
  if [[ "${BLOCKRNN_RUNBOOK_FORCE_RELINK:-0}" != 1 ]] && ldd "$bin" | grep -q "not found"; then
    for d in "${dirs[@]}"; do
      LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
    export LD_LIBRARY_PATH
  fi
  { echo "== ldd $bin (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-})"; ldd "$bin" 2>&1; } >>"$OUT/env.txt"
  if [[ "${BLOCKRNN_RUNBOOK_FORCE_RELINK:-0}" != 1 ]] && ! ldd "$bin" 2>&1 | grep -q "not found"; then
    RESOLVED="$bin"
    return 0
  fi
  local link="$BIN/relink/$name/link.sh" relinked="$BUILD/relinked/$name"
  if [[ -x "$link" ]] && command -v "${CXX:-c++}" >/dev/null; then
    echo "relinking $name against this machine's libraries (${dirs[*]:-none found})"
    mkdir -p "$BUILD/relinked"
    if timeout 180 "$link" "$relinked" "${dirs[@]}" >>"$OUT/env.txt" 2>&1 &&
      ! ldd "$relinked" 2>&1 | grep -q "not found"; then
      { echo "== relinked: ldd $relinked"; ldd "$relinked" 2>&1; } >>"$OUT/env.txt"
      RESOLVED="$relinked"
      return 0
    fi
    echo "relinking $name failed (env.txt has the linker's output)"
  fi
  echo "missing libraries for $bin (LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}):"
  ldd "$bin" 2>&1 | grep "not found" || true
  exit 2
}

# Runs a GoogleTest binary under `timeout` with a filter; writes <stage>.log and <stage>.xml and
# the stage's summary line; fails on a failure, on zero tests and on any skip.
run_gtest() {
  local stage="$1" bin="$2" filter="$3" limit="$4"
  set +e
  timeout "$limit" "$bin" --gtest_filter="$filter" --gtest_output="xml:$OUT/$stage.xml" \
    >"$OUT/$stage.log" 2>&1
  local rc=$?
  set -e
  tail -30 "$OUT/$stage.log"
  local tests=0 failed=0 skipped=0
  if [[ -f "$OUT/$stage.xml" ]]; then
    tests=$(grep -c '<testcase ' "$OUT/$stage.xml" || true)
    failed=$(grep -c '<failure' "$OUT/$stage.xml" || true)
    skipped=$(grep -c 'result="skipped"' "$OUT/$stage.xml" || true)
  fi
  [[ -f "$OUT/summary.txt" ]] ||
    printf '%-11s %-6s %-6s %-8s %s\n' stage tests failed skipped exit >"$OUT/summary.txt"
  printf '%-11s %-6s %-6s %-8s %s\n' "$stage" "$tests" "$failed" "$skipped" "$rc" |
    tee -a "$OUT/summary.txt"
  if [[ $rc -ne 0 || $tests -eq 0 || $failed -ne 0 || $skipped -ne 0 ]]; then
    [[ $rc -eq 124 ]] && echo "$stage: timed out after $limit s"
    echo "$stage FAILED (a skip counts as a failure: is the GPU visible?)"
    exit 1
  fi
  echo "$stage passed"
}

# The Python package on the device (scripts/gpu_python_check.py) with the extension in
# $BIN/python, the CUDA libraries found as for the binaries; python.log and a summary line.
# Returns non-zero when a check fails or cannot run (no extension, another Python version).
run_python_check() {
  local dir="$BIN/python" log="$OUT/python.log" rc=0 passed=0 failed=0 flags=()
  [[ "$DRY" == 1 ]] && flags=(--no-torch)
  : >"$log"
  if [[ ! -f "$dir/BUILT_FOR" ]]; then
    echo "no Python extension in $dir (the build stage needs a Python with nanobind)" | tee -a "$log"
    rc=2
  elif [[ "$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')" != "$(cat "$dir/BUILT_FOR")" ]]; then
    echo "the extension in $dir is for Python $(cat "$dir/BUILT_FOR"); $PYTHON is" \
      "$("$PYTHON" -V 2>&1): rebuild with that version (BLOCKRNN_RUNBOOK_PYTHON)" | tee -a "$log"
    rc=2
  else
    local so d
    so="$(ls "$dir"/blockrnn/_core*.so | head -1)"
    if ldd "$so" | grep -q "not found"; then
      while read -r d; do LD_LIBRARY_PATH="$d${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"; done \
        < <(library_dirs)
      export LD_LIBRARY_PATH
    fi
    { echo "== ldd $so"; ldd "$so" 2>&1; } >>"$OUT/env.txt"
    set +e
    timeout 150 env PYTHONPATH="$dir" "$PYTHON" scripts/gpu_python_check.py "${flags[@]}" \
      >>"$log" 2>&1
    rc=$?
    set -e
  fi
  passed=$(grep -c '^PASS ' "$log" || true)
  failed=$(grep -c '^FAIL ' "$log" || true)
  grep -E '^(PASS|FAIL) |passed, ' "$log" || tail -5 "$log"
  [[ -f "$OUT/summary.txt" ]] ||
    printf '%-11s %-6s %-6s %-8s %s\n' stage tests failed skipped exit >"$OUT/summary.txt"
  printf '%-11s %-6s %-6s %-8s %s\n' python "$((passed + failed))" "$failed" 0 "$rc" |
    tee -a "$OUT/summary.txt"
  return $rc
}

stage_verify() {
  write_env
  resolve_binary "$TESTS"
  local rc=0
  ( run_gtest verify "$RESOLVED" "${BLOCKRNN_RUNBOOK_FILTER:--CudaValidation.NoDeviceIsAClearError}" 400 ) || rc=$?
  if [[ "$DRY" == 1 && ! -d "$BIN/python" ]]; then
    echo "python: no extension in $BIN/python (dry run): left out"
  elif ! run_python_check; then
    echo "python FAILED (python.log)"
    [[ $rc -eq 0 ]] && rc=1
  else
    echo "python passed"
  fi
  exit $rc
}

# bench's shapes "T B H", in increasing work, so that a stage cut short by its time budget loses
# the largest ones. B ∈ {16, 64, 256}, H ∈ {512, 1024}, T ∈ {100, 1000}: 12 shapes.
bench_shapes() {
  if [[ "$DRY" == 1 ]]; then
    echo "3 2 8"
    echo "5 3 16"
    return
  fi
  local T B H
  for T in 100 1000; do
    for H in 512 1024; do
      for B in 16 64 256; do echo "$T $B $H"; done
    done
  done
}

# Runs "$@" under `timeout $1` (or prints it with BLOCKRNN_RUNBOOK_PRINT=1); appends to the log.
timed_step() {
  local limit="$1" log="$2"
  shift 2
  echo "+ timeout $limit $*" | tee -a "$log"
  [[ "${BLOCKRNN_RUNBOOK_PRINT:-0}" == 1 ]] && return 0
  set +e
  timeout "$limit" "$@" >>"$log" 2>&1
  local rc=$?
  set -e
  [[ $rc -eq 124 ]] && echo "  timed out after $limit s" | tee -a "$log"
  [[ $rc -ne 0 ]] && echo "  exit $rc" | tee -a "$log"
  return $rc
}

# bench: budget BLOCKRNN_BENCH_BUDGET_S (default 480 s of the call's 600): blockrnn one process per
# shape (each ≤ 90 s; direct launches and the per-step loops as CUDA Graphs), then cuDNN one torch
# process for all shapes with what is left, at least 120 s (rows are written as they are measured,
# so a timeout loses only the last shapes). Each configuration is timed for about 200 ms after 2
# warm-up calls. Estimated on an H100 (not measured): about 3 minutes per side.
stage_bench() {
  write_env
  resolve_binary "$TIMING"
  local timing="$RESOLVED" log="$OUT/bench.log" csv="$OUT/bench.csv"
  local budget="${BLOCKRNN_BENCH_BUDGET_S:-480}" start=$SECONDS failures=0
  local target=200 torch_device=cuda
  if [[ "$DRY" == 1 ]]; then
    target=5
    torch_device=cpu
  fi
  rm -f "$csv"
  : >"$log"
  local shapes=() shape
  mapfile -t shapes < <(bench_shapes)
  echo "== blockrnn (${#shapes[@]} shapes)" | tee -a "$log"
  for shape in "${shapes[@]}"; do
    local left=$((budget - (SECONDS - start) - 120))  # keep 120 s for the cuDNN side
    if ((left < 10)); then
      echo "budget spent: blockrnn at T B H = $shape and larger not timed" | tee -a "$log"
      failures=$((failures + 1))
      break
    fi
    # shellcheck disable=SC2086
    timed_step $((left < 90 ? left : 90)) "$log" "$timing" --csv "$csv" --target-ms "$target" \
      --graphs $shape || failures=$((failures + 1))
  done
  echo "== cuDNN through torch" | tee -a "$log"
  if [[ "$DRY" == 1 ]] && ! "$PYTHON" -c 'import torch' 2>/dev/null; then
    echo "dry run: $PYTHON has no torch, the cuDNN side is left out" | tee -a "$log"
  else
    local left=$((budget - (SECONDS - start)))
    ((left < 30)) && left=30
    # shellcheck disable=SC2046
    timed_step "$left" "$log" "$PYTHON" scripts/gpu_bench_torch.py --csv "$csv" \
      --device "$torch_device" --target-ms "$target" $(printf '%s ' "${shapes[@]}") ||
      failures=$((failures + 1))
  fi
  [[ "${BLOCKRNN_RUNBOOK_PRINT:-0}" == 1 ]] && return 0
  local rows=0
  [[ -f "$csv" ]] && rows=$(($(wc -l <"$csv") - 1))
  [[ -f "$OUT/summary.txt" ]] ||
    printf '%-11s %-6s %-6s %-8s %s\n' stage tests failed skipped exit >"$OUT/summary.txt"
  printf '%-11s %-6s %-6s %-8s %s\n' bench "$rows" "$failures" 0 "-" | tee -a "$OUT/summary.txt"
  if ((rows > 0)); then
    "$PYTHON" scripts/gpu_bench_table.py "$csv" | tee -a "$OUT/summary.txt"
  fi
  if ((failures > 0 || rows <= 0)); then
    echo "bench FAILED: $failures step(s) failed or timed out, $rows rows (bench.log)"
    exit 1
  fi
  echo "bench done: $rows rows in $csv"
}

# persistent: the persistent kernels' tests (all of them), then their timing when the build has a
# timing entry ($PERSISTENT_TIMING, the timing tool's arguments), its rows appended to bench.csv.
stage_persistent() {
  write_env
  if [[ ! -x "$BIN/$PERSISTENT_TESTS" ]]; then
    echo "no $BIN/$PERSISTENT_TESTS: the persistent kernels' tests are not in this build (the" \
      "tree has no target $PERSISTENT_TESTS yet, or 'scripts/gpu_runbook.sh build' was not run)"
    exit 2
  fi
  resolve_binary "$PERSISTENT_TESTS"
  run_gtest persistent "$RESOLVED" "*" 300
  if [[ ! -x "$BIN/$PERSISTENT_TIMING" ]]; then
    echo "no timing entry ($BIN/$PERSISTENT_TIMING): correctness only"
    return 0
  fi
  resolve_binary "$PERSISTENT_TIMING"
  local timing="$RESOLVED" failures=0 shape shapes=()
  mapfile -t shapes < <(bench_shapes)
  for shape in "${shapes[@]}"; do
    # shellcheck disable=SC2086
    timed_step 60 "$OUT/persistent.log" "$timing" --csv "$OUT/bench.csv" --target-ms 300 $shape ||
      failures=$((failures + 1))
  done
  if ((failures > 0)); then
    echo "persistent timing FAILED: $failures shape(s) (persistent.log)"
    exit 1
  fi
  "$PYTHON" scripts/gpu_bench_table.py "$OUT/bench.csv" | tee -a "$OUT/summary.txt"
}

case "${1:-}" in
  build) stage_build ;;
  verify) stage_verify ;;
  bench) stage_bench ;;
  persistent) stage_persistent ;;
  *)
    echo "usage: $0 build|verify|bench|persistent" >&2
    exit 64
    ;;
esac
