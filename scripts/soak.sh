#!/usr/bin/env bash
# Soak (docs/soak.md): a release build of the server on a fresh database, a simulated fleet
# (vf-soak) polling it for DURATION seconds with a progressive release mid-run, then the
# figures and the server's memory. Not part of CI.
#
#   AGENTS=2000 DURATION=120 INTERVAL_MS=5000 bash scripts/soak.sh
#   DATABASE_URL=postgres://user:pass@127.0.0.1/soak bash scripts/soak.sh   # an empty database
#
# Extra vf-soak flags go after the script name (e.g. --json, --error-percent 2).
# SOAK_PROFILE=debug soaks the debug build instead (for checking the tool, not for figures).
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/env.sh

AGENTS="${AGENTS:-2000}"
DURATION="${DURATION:-120}"
INTERVAL_MS="${INTERVAL_MS:-5000}"
PROFILE="${SOAK_PROFILE:-release}"

if [ "$PROFILE" = release ]; then
  cargo build --release -p server --bin server -p vf-agent --bin vf-soak
else
  cargo build -p server --bin server -p vf-agent --bin vf-soak
fi
bin="$CARGO_TARGET_DIR/$PROFILE"

tmp=$(mktemp -d)
server_pid=""
cleanup() {
  if [ -n "$server_pid" ]; then kill "$server_pid" 2>/dev/null || true; wait "$server_pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

# A free loopback port: nothing answers on it.
port=""
for _ in $(seq 1 50); do
  candidate=$((20000 + RANDOM % 40000))
  if ! (exec 3<>"/dev/tcp/127.0.0.1/$candidate") 2>/dev/null; then port=$candidate; break; fi
done
[ -n "$port" ] || { echo "soak: no free loopback port found" >&2; exit 1; }
url="http://127.0.0.1:$port"

export DATABASE_URL="${DATABASE_URL:-sqlite://$tmp/soak.db}"
export LEPTOS_SITE_ADDR="127.0.0.1:$port"
export LEPTOS_SITE_ROOT="$tmp/site" LEPTOS_SITE_PKG_DIR=pkg LEPTOS_OUTPUT_NAME=vectorflow
export VF_BOOTSTRAP_ENVIRONMENT=soak
export VF_BOOTSTRAP_ENROLLMENT_TOKEN="soak-enrollment-token-$RANDOM$RANDOM"
export VF_BOOTSTRAP_API_TOKEN="vfa_soak-api-token-$RANDOM$RANDOM$RANDOM"
export VF_POLL_INTERVAL_MS="$INTERVAL_MS"
export VF_SCHEDULER_INTERVAL_MS="${VF_SCHEDULER_INTERVAL_MS:-1000}"
export NO_COLOR=1

"$bin/server" >"$tmp/server.log" 2>&1 &
server_pid=$!
for _ in $(seq 1 150); do
  curl -fs "$url/readyz" >/dev/null 2>&1 && break
  kill -0 "$server_pid" 2>/dev/null || break
  sleep 0.2
done
if ! curl -fs "$url/readyz" >/dev/null 2>&1; then
  echo "soak: the server did not become ready; its log:" >&2
  grep -v 'setup?token=' "$tmp/server.log" | tail -n 30 >&2
  exit 1
fi
db_kind=${DATABASE_URL%%:*}
echo "soak: $PROFILE server at $url on $db_kind (pid $server_pid); $AGENTS agents, ${DURATION} s, every ${INTERVAL_MS} ms" >&2

rss() { sed -n "s/^$1:[[:space:]]*//p" "/proc/$server_pid/status"; }
rss_before=$(rss VmRSS)

status=0
VF_SOAK_SERVER="$url" VF_SOAK_ENROLLMENT_TOKEN="$VF_BOOTSTRAP_ENROLLMENT_TOKEN" \
  VF_SOAK_API_TOKEN="$VF_BOOTSTRAP_API_TOKEN" \
  "$bin/vf-soak" --agents "$AGENTS" --duration-secs "$DURATION" --interval-ms "$INTERVAL_MS" "$@" \
  || status=$?

# The figures are stdout; with --json what follows goes to stderr so stdout stays one document.
out=1
for arg in "$@"; do if [ "$arg" = --json ]; then out=2; fi; done
if kill -0 "$server_pid" 2>/dev/null; then
  {
    echo
    echo "Server memory: RSS $(rss VmRSS) at the end (peak $(rss VmHWM), $rss_before before the fleet)."
    echo "Machine: $(nproc) cores, load average $(cut -d' ' -f1-3 /proc/loadavg) at the end."
  } >&"$out"
else
  echo "soak: the server exited during the soak; its log:" >&2
  grep -v 'setup?token=' "$tmp/server.log" | tail -n 30 >&2
  status=1
fi
# WARN/ERROR lines of the server, except the first-start setup link (it carries a token).
warnings() { grep -E '\b(WARN|ERROR)\b' "$tmp/server.log" | grep -v 'setup?token=' || true; }
count=$(warnings | wc -l)
if [ "$count" -gt 0 ]; then
  {
    echo "Server log: $count WARN/ERROR lines; the last ones:"
    warnings | tail -n 5
  } >&"$out"
fi
exit "$status"
