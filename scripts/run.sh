#!/usr/bin/env bash
# The main job: builds blockrnn (installing what is missing) and runs the command-line
# demo — the GRU block cell forward and backward on an embedded example, with a
# finite-difference gradient check. Extra arguments go to `blockrnn demo`.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh --no-python
cmake --preset dev >/dev/null
cmake --build --preset dev -j "${BLOCKRNN_JOBS:-2}" --target blockrnn_cli
exec build/dev/tools/blockrnn demo "$@"
