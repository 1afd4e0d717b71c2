#!/usr/bin/env bash
# Extracts the training corpus (tools/train/data/corpus.txt) from the King James
# Version text shipped in the Debian package bible-kjv-text (public domain).
#
# Requirements: Debian/Ubuntu with `apt-get install bible-kjv-text` (this pulls in
# the `bible` reader from package bible-kjv, which decompresses the text).
#
# Output: the books of Genesis and Exodus (Gen 1:1 - Exo 40:38), one verse per
# line, with the "Ge1:1 " style reference prefix removed. Plain ASCII, '\n' line
# endings, no trailing spaces.
set -euo pipefail

out="${1:-$(cd "$(dirname "$0")" && pwd)/corpus.txt}"

if ! command -v bible >/dev/null 2>&1; then
  echo "error: 'bible' not found; run: apt-get install -y bible-kjv-text" >&2
  exit 1
fi

# -f turns pretty-printing off: one verse per line, prefixed by its reference.
# stdin is /dev/null so the interactive reader exits after printing.
LC_ALL=C bible -f 'Gen1:1-Exo40:38' </dev/null |
  LC_ALL=C sed -E -e 's/^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ //' -e 's/[[:space:]]+$//' >"${out}.tmp"

# Sanity checks: the expected number of verses (1533 + 1213), no leftover
# references, printable ASCII only.
lines=$(wc -l <"${out}.tmp")
if [ "${lines}" -ne 2746 ]; then
  echo "error: expected 2746 verses, got ${lines}" >&2
  exit 1
fi
if LC_ALL=C grep -qE '^[1-3]?[A-Za-z]+[0-9]+:[0-9]+ ' "${out}.tmp"; then
  echo "error: verse references left in output" >&2
  exit 1
fi
if LC_ALL=C grep -q '[^ -~]' "${out}.tmp"; then
  echo "error: non-printable or non-ASCII characters in output" >&2
  exit 1
fi
mv "${out}.tmp" "${out}"
echo "wrote ${out}: ${lines} lines, $(wc -c <"${out}") bytes"
