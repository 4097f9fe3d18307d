#!/usr/bin/env bash
# Runs VectorFlow on SQLite with a demo environment and six simulated agents, at
# http://127.0.0.1:3000. Ctrl-C stops everything. Data stays in .vf-demo/.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh
bash scripts/setup.sh
# The release build: an optimised server and a small wasm bundle (wasm-opt), as it would be
# served off localhost, with brotli and gzip twins of the bundle written once. The first
# build takes several minutes.
cargo leptos build --release
bash scripts/precompress.sh
cargo build --release -p vf-agent

mkdir -p .vf-demo
export DATABASE_URL="${DATABASE_URL:-sqlite://$PWD/.vf-demo/vectorflow.db}"
export LEPTOS_SITE_ADDR="${LEPTOS_SITE_ADDR:-127.0.0.1:3000}"
export LEPTOS_SITE_ROOT="$PWD/target/site" LEPTOS_SITE_PKG_DIR=pkg LEPTOS_OUTPUT_NAME=vectorflow
export VF_BOOTSTRAP_ENVIRONMENT="${VF_BOOTSTRAP_ENVIRONMENT:-demo}"
export VF_BOOTSTRAP_ENROLLMENT_TOKEN="${VF_BOOTSTRAP_ENROLLMENT_TOKEN:-demo-enrollment-token-0001}"
# The demo's sign-in (README) and the API token this script seeds the demo pipeline with.
export VF_ADMIN_EMAIL="${VF_ADMIN_EMAIL:-admin@demo.local}"
export VF_ADMIN_PASSWORD="${VF_ADMIN_PASSWORD:-vectorflow-demo}"
export VF_BOOTSTRAP_API_TOKEN="${VF_BOOTSTRAP_API_TOKEN:-vfa_demo-api-token-000000000000}"
url="http://$LEPTOS_SITE_ADDR"

pids=()
cleanup() { for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true; }
trap cleanup EXIT INT TERM

"$CARGO_TARGET_DIR/release/server" &
pids+=($!)
for _ in $(seq 1 100); do curl -fs "$url/readyz" >/dev/null 2>&1 && break; sleep 0.2; done

# A demo pipeline for the simulated fleet, once (the calls are the JSON API of docs/api.md).
api() {
  curl -fs -X POST "$url/api/$1" -H 'content-type: application/json' \
    -H "authorization: Bearer $VF_BOOTSTRAP_API_TOKEN" -d "$2"
}
env_id=$(api environment.list '{}' | sed -n 's/.*"id":"\([^"]*\)","name":"'"$VF_BOOTSTRAP_ENVIRONMENT"'".*/\1/p')
if [ -n "$env_id" ] && ! api pipeline.list "{\"environment_id\":\"$env_id\"}" | grep -q '"name":"demo-logs"'; then
  pipeline_id=$(api pipeline.create "{\"environment_id\":\"$env_id\",\"name\":\"demo-logs\",\"node_selector\":{\"tier\":\"edge\"}}" \
    | sed -n 's/^{"id":"\([^"]*\)".*/\1/p')
  api pipeline.deploy "{\"pipeline_id\":\"$pipeline_id\",\"config_yaml\":\"sources:\\n  logs:\\n    type: demo_logs\\n    format: json\\nsinks:\\n  out:\\n    type: blackhole\\n    inputs: [logs]\\n\",\"changelog\":\"demo\"}" >/dev/null \
    && echo "Created the demo pipeline demo-logs (v1)."
fi

"$CARGO_TARGET_DIR/release/vf-agent" --server "$url" --token "$VF_BOOTSTRAP_ENROLLMENT_TOKEN" \
  --data-dir .vf-demo/agents --simulate 6 --hostname-template 'demo-{i}' \
  --label 'rollout-wave={i%2}' --label 'zone=z{i%3}' --label tier=edge --sim-error-rate 0.001 &
pids+=($!)

printf '\nVectorFlow is running at %s (environment "%s", 6 simulated agents).\n' \
  "$url" "$VF_BOOTSTRAP_ENVIRONMENT"
printf 'Sign in as %s with password %s. Ctrl-C stops it.\n\n' "$VF_ADMIN_EMAIL" "$VF_ADMIN_PASSWORD"
wait "${pids[0]}"
