# Sourced by the scripts: where builds go. The cargo target dir lives outside the clone so
# CI runs on fresh clones reuse earlier builds.
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$HOME/.cache/vectorflow/target}"
export PATH="$HOME/.cargo/bin:$PATH"
mkdir -p "$CARGO_TARGET_DIR"
