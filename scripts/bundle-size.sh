#!/usr/bin/env bash
# The browser bundle as `make run` serves it (the release build, wasm-opt applied): its files'
# sizes raw and gzipped (level 6, as the server compresses on the fly), as a markdown section
# for docs/benchmarks.md. Builds it first (several minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo leptos build --release >&2
hashes="$CARGO_TARGET_DIR/release/hash.txt"
kb() { awk -v b="$1" 'BEGIN { printf "%.0f kB", b / 1000 }'; }
printf '\n## Browser bundle (release build)\n\n'
printf 'Measured: %s. The aim is at most 600 kB gzipped for the wasm.\n\n' "$(date -u '+%Y-%m-%d %H:%M UTC')"
printf '| file | raw | gzip |\n|---|---|---|\n'
for kind in wasm js css; do
  hash=$(sed -n "s/^$kind: *//p" "$hashes")
  file="target/site/pkg/vectorflow.$hash.$kind"
  printf '| `%s` | %s | %s |\n' "vectorflow.$kind" "$(kb "$(stat -c %s "$file")")" "$(kb "$(gzip -6 -c "$file" | wc -c)")"
done
