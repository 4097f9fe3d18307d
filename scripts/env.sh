# Sourced by the scripts: where builds go. The cargo target dir lives outside the clone so
# CI runs on fresh clones reuse earlier builds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/vectorflow/target}"
# Build tools the scripts install (wasm-opt from npm's binaryen) come first: cargo-leptos takes
# wasm-opt from PATH, and Debian's binaryen builds a bundle that does not hydrate.
export VF_TOOLS_DIR="${VF_TOOLS_DIR:-$HOME/.cache/vectorflow/tools}"
export PATH="$VF_TOOLS_DIR/node_modules/.bin:$HOME/.cargo/bin:$PATH"
mkdir -p "$CARGO_TARGET_DIR"
