#!/usr/bin/env bash
# Starts the local PostgreSQL 15 cluster and prepares the `vf` role the tests use.
# Prints the admin URL tests create their own uniquely named databases through, as its only
# line on stdout; everything else (progress, errors) goes to stderr.
set -euo pipefail
trap 'echo "scripts/postgres.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "PostgreSQL is not installed: run scripts/setup.sh" >&2; exit 1
fi
clusters="$(pg_lsclusters -h)"
if ! grep -E '^15 +main ' <<<"$clusters" >/dev/null; then
  pg_createcluster 15 main >&2
fi
if ! awk '$1==15 && $2=="main" {print $4}' <<<"$(pg_lsclusters -h)" | grep online >/dev/null; then
  pg_ctlcluster 15 main start >&2 || true   # "already running" after a race is fine; readiness decides
fi
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }
ready=""
for _ in $(seq 1 120); do
  if as_postgres psql -qAtc 'SELECT 1' >/dev/null 2>&1; then ready=1; break; fi
  sleep 0.5
done
if [ -z "$ready" ]; then
  echo "scripts/postgres.sh: PostgreSQL 15 did not accept connections within 60 s" >&2
  pg_lsclusters >&2 || true
  tail -n 20 /var/log/postgresql/postgresql-15-main.log >&2 || true
  exit 1
fi
as_postgres psql -qAt -v ON_ERROR_STOP=1 >/dev/null <<'SQL'
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'vf') THEN
    CREATE ROLE vf LOGIN PASSWORD 'vf' CREATEDB;
  END IF;
END $$;
SQL
echo "postgres://vf:vf@127.0.0.1:5432/postgres"
