#!/usr/bin/env bash
# The main job: builds blockrnn (installing what is missing), trains the character-level
# language model on the embedded corpus with `blockrnn train` (about a minute on 2 cores; a
# progress line redrawn on a terminal, plain lines otherwise), then prints text sampled from the
# checkpoint with `blockrnn sample`. Outputs go to out/: metrics.csv, checkpoint.safetensors and,
# when a Python with matplotlib is found (.venv, else python3), loss.svg drawn from the CSV by
# scripts/plot_loss.py (BLOCKRNN_OUT=DIR to change the directory). Extra arguments go to `blockrnn train`
# (e.g. --cell gru, --steps 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-python
cmake --preset dev >/dev/null
cmake --build --preset dev -j "${BLOCKRNN_JOBS:-2}" --target blockrnn_cli
out="${BLOCKRNN_OUT:-out}"
build/dev/tools/blockrnn train --out "$out" "$@"
plot_python=""
for p in .venv/bin/python python3; do
  if command -v "$p" >/dev/null && "$p" -c "import matplotlib" 2>/dev/null; then
    plot_python="$p"
    break
  fi
done
if [[ -n "$plot_python" ]]; then
  "$plot_python" scripts/plot_loss.py "$out/metrics.csv" --title "blockrnn train $*"
else
  echo "(no Python with matplotlib: the loss chart is 'python scripts/plot_loss.py $out/metrics.csv')"
fi
echo
echo "== blockrnn sample --checkpoint $out/checkpoint.safetensors --length 600"
build/dev/tools/blockrnn sample --checkpoint "$out/checkpoint.safetensors" --length 600
