#!/usr/bin/env bash
# make bench (not part of CI): a release build of server/benches/fleet, run once on this
# machine with PostgreSQL started for the PostgreSQL rows; writes docs/benchmarks.md, then
# appends the browser bundle's size (scripts/bundle-size.sh).
#
#   make bench
#   BENCH_NODES=10000 BENCH_BIG_NODES=100000 BENCH_SECS=5 make bench
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
if [ -z "${VF_TEST_POSTGRES_URL:-}" ]; then
  VF_TEST_POSTGRES_URL="$(bash scripts/postgres.sh | tail -n 1)"
  export VF_TEST_POSTGRES_URL
fi
cargo bench -p server --bench fleet
# The browser bundle's size, appended to what the bench wrote.
bash scripts/bundle-size.sh >> docs/benchmarks.md
