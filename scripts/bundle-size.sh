#!/usr/bin/env bash
# The browser bundle as `make run` serves it (the release build, wasm-opt applied): its files'
# sizes raw and as the server sends them: the gzip and brotli twins scripts/precompress.sh
# writes (gzip 9, brotli 11), as a markdown section for docs/benchmarks.md. Builds it first
# (several minutes the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
cargo leptos build --release >&2
bash scripts/precompress.sh
hashes="$CARGO_TARGET_DIR/release/hash.txt"
kb() { awk -v b="$1" 'BEGIN { printf "%.0f kB", b / 1000 }'; }
size() { kb "$(stat -c %s "$1")"; }
cat <<EOF

## Browser bundle (release build)

Measured: $(date -u '+%Y-%m-%d %H:%M UTC') (\`cargo leptos build --release\` with npm binaryen 132's wasm-opt
\`-Oz\`, as \`make run\` serves it; \`make bench\` remeasures it with \`scripts/bundle-size.sh\`). The
server sends the bundle as the brotli-11 or gzip-9 twin \`scripts/precompress.sh\` writes at build
time, whichever the browser accepts (Chromium takes brotli).

| file | raw | gzip | brotli |
|---|---|---|---|
EOF
for kind in wasm js css; do
  hash=$(sed -n "s/^$kind: *//p" "$hashes")
  file="target/site/pkg/vectorflow.$hash.$kind"
  printf '| `%s` | %s | %s | %s |\n' "vectorflow.$kind" "$(size "$file")" "$(size "$file.gz")" "$(size "$file.br")"
done
# How the bundle got to this size: measured once (2026-12-06), each step in the source.
cat <<'EOF'

The aim is at most 600 kB compressed for the wasm: met as sent to a browser that accepts brotli
(every current one does), not met for gzip. What got it there, each step measured on the same
source (wasm after wasm-opt):

| build | raw | gzip 9 | brotli 11 |
|---|---|---|---|
| before (typed views, Leptos' default resource codec) | 3356 kB | 1243 kB | 855 kB |
| + type-erased views in release (`always-erase-components`) | 2445 kB | 863 kB | 586 kB |
| + one JSON decoder per type (`components::Json` codec for resources) | 2280 kB | 819 kB | 570 kB |

`opt-level = "s"` instead of `"z"` made it larger (2688 kB raw, 928 kB gzip). Where the rest
goes, by crate (`python3 scripts/wasm-top.py` on cargo's wasm before wasm-bindgen, code bytes):
reactive_graph 29 %, tachys 19 %, core 11 %, serde_json 8 %, the app itself 5 %. The next
step would be splitting the pages into lazily loaded chunks (`cargo leptos build --split`).
EOF
