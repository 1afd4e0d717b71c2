#!/usr/bin/env bash
# The main job: builds blockrnn (installing what is missing), trains the character-level
# language model on the embedded corpus with `blockrnn train` (about a minute on 2 cores; a
# progress line redrawn on a terminal, plain lines otherwise), then prints text sampled from the
# checkpoint with `blockrnn sample`. Outputs go to out/: metrics.csv, loss.svg,
# checkpoint.safetensors (BLOCKRNN_OUT=DIR to change). Extra arguments go to `blockrnn train`
# (e.g. --cell gru, --steps 2000).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-python
cmake --preset dev >/dev/null
cmake --build --preset dev -j "${BLOCKRNN_JOBS:-2}" --target blockrnn_cli
out="${BLOCKRNN_OUT:-out}"
build/dev/tools/blockrnn train --out "$out" "$@"
echo
echo "== blockrnn sample --checkpoint $out/checkpoint.safetensors --length 600"
build/dev/tools/blockrnn sample --checkpoint "$out/checkpoint.safetensors" --length 600
