#!/usr/bin/env bash
# Starts the built server for the Playwright suite on a fresh SQLite database.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
data="$(mktemp -d /tmp/vf-e2e.XXXXXX)"
export DATABASE_URL="sqlite://$data/vectorflow.db"
export LEPTOS_SITE_ADDR="127.0.0.1:${VF_E2E_PORT:-3100}"
export LEPTOS_SITE_ROOT="$here/../target/site"
export LEPTOS_SITE_PKG_DIR=pkg
export LEPTOS_OUTPUT_NAME=vectorflow
export VF_BOOTSTRAP_ENVIRONMENT=e2e
export VF_BOOTSTRAP_ENROLLMENT_TOKEN=e2e-enrollment-token-000000
export VF_POLL_INTERVAL_MS=1000
# The first start creates this admin of every environment and an admin API token for the
# specs' HTTP calls (the values helpers.ts signs in and authenticates with).
export VF_ADMIN_EMAIL=admin@e2e.test
export VF_ADMIN_PASSWORD=e2e-admin-password
export VF_BOOTSTRAP_API_TOKEN=vfa_e2e-admin-api-token-0000000000
exec "${VF_BIN_DIR:-$here/../target/debug}/server"
