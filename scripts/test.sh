#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit and integration tests on SQLite and
# PostgreSQL, then the Playwright suite against the built app in headless Chromium.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
log="$(mktemp /tmp/vf-test.XXXXXX.log)"
step() { printf '\n==> %s\n' "$*"; }

bash scripts/setup.sh

step "cargo fmt --check"
cargo fmt --all -- --check

step "clippy (server side, warnings denied)"
cargo clippy -p vf-protocol -p vf-rules -p vf-rolling -p vf-agent -p vf-control -p server -p app -p edge-client -p vfctl --all-targets -- -D warnings
step "clippy (browser side, wasm32)"
cargo clippy -p frontend --target wasm32-unknown-unknown -- -D warnings

step "PostgreSQL"
VF_TEST_POSTGRES_URL="$(bash scripts/postgres.sh | tail -n 1)"
case "$VF_TEST_POSTGRES_URL" in
  postgres://*) echo "PostgreSQL ready for tests" ;;
  *) echo "scripts/postgres.sh did not print a postgres:// URL; stopping" >&2; exit 1 ;;
esac
export VF_TEST_POSTGRES_URL

step "cargo test (SQLite and PostgreSQL)"
cargo test -p vf-protocol -p vf-rules -p vf-rolling -p vf-agent -p vf-control -p server -p app -p edge-client -p vfctl 2>&1 | tee "$log"

step "build the app (cargo leptos build)"
cargo leptos build

step "Playwright (headless Chromium)"
(cd end2end && VF_BIN_DIR="$CARGO_TARGET_DIR/debug" npx playwright test 2>&1) | tee -a "$log"

# One closing line for the whole run.
passed=$(grep -oE 'test result: ok\. [0-9]+ passed' "$log" | awk '{s += $4} END {print s + 0}')
e2e=$(grep -oE '^ +[0-9]+ passed' "$log" | grep -oE '[0-9]+' | tail -1)
printf '\nall: %s passed, 0 failed\n' "$((passed + ${e2e:-0}))"
