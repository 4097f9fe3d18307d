#!/usr/bin/env bash
# Starts the local PostgreSQL 15 cluster and prepares the `vf` role the tests use.
# Prints the admin URL tests create their own uniquely named databases through.
set -euo pipefail
if ! command -v pg_ctlcluster >/dev/null 2>&1; then
  echo "PostgreSQL is not installed: run scripts/setup.sh" >&2; exit 1
fi
if ! pg_lsclusters -h | grep -q '^15 *main'; then
  pg_createcluster 15 main >/dev/null
fi
if ! pg_lsclusters -h | awk '$1==15 && $2=="main" {print $4}' | grep -q online; then
  pg_ctlcluster 15 main start
fi
as_postgres() { if [ "$(id -u)" = 0 ]; then runuser -u postgres -- "$@"; else sudo -u postgres "$@"; fi; }
for _ in $(seq 1 30); do
  as_postgres psql -qAtc 'SELECT 1' >/dev/null 2>&1 && break
  sleep 0.5
done
as_postgres psql -qAt -v ON_ERROR_STOP=1 <<'SQL' >/dev/null
DO $$ BEGIN
  IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'vf') THEN
    CREATE ROLE vf LOGIN PASSWORD 'vf' CREATEDB;
  END IF;
END $$;
SQL
echo "postgres://vf:vf@127.0.0.1:5432/postgres"
