#!/usr/bin/env bash
# Installs what blockrnn needs on a fresh Debian machine of this project's kind, idempotently:
#   - Debian packages (apt-get), only those missing (a JDK and JUnit 5 for the Java binding's
#     tests, pkg-config for the install test, nlohmann-json3-dev for the JSON headers of model
#     files (the library) and of `blockrnn train`'s checkpoints);
#   - the project venv .venv with the pinned Python packages of scripts/requirements.txt.
# Usage: scripts/setup.sh [--no-python]
set -euo pipefail
cd "$(dirname "$0")/.."

DEB_PACKAGES=(build-essential cmake git python3-venv libopenblas-dev libopenblas-openmp-dev libgtest-dev
              libbenchmark-dev libcli11-dev libdnnl-dev clang libclang-rt-14-dev libomp-dev
              pkg-config openjdk-17-jdk-headless junit5 nlohmann-json3-dev)

missing=()
for p in "${DEB_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  echo "setup: installing Debian packages: ${missing[*]}"
  SUDO=""
  [[ $(id -u) -ne 0 ]] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

if [[ "${1:-}" != "--no-python" ]]; then
  PY="${BLOCKRNN_PYTHON:-python3}"
  if [[ ! -x .venv/bin/python ]]; then
    echo "setup: creating .venv with $($PY --version)"
    "$PY" -m venv .venv
  fi
  if ! cmp -s scripts/requirements.txt .venv/.requirements-installed 2>/dev/null; then
    echo "setup: installing pinned Python packages into .venv"
    .venv/bin/python -m pip install -q --upgrade pip
    .venv/bin/python -m pip install -q -r scripts/requirements.txt
    cp scripts/requirements.txt .venv/.requirements-installed
  fi
fi
