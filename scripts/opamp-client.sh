#!/usr/bin/env bash
# Installs the real OpAMP client from PyPI (opentelemetry-opamp-client, a pre-release) into
# a virtualenv the OpAMP integration test runs its harness with. Idempotent: a venv that
# already imports the client is left alone. Prints the venv's python on its last line.
set -euo pipefail

VENV="${VF_OPAMP_VENV:-$HOME/.cache/vectorflow/opamp-venv}"
PY="$VENV/bin/python"

if [ -x "$PY" ] && "$PY" -c 'import opentelemetry._opamp.client' >/dev/null 2>&1; then
  echo "$PY"
  exit 0
fi

mkdir -p "$(dirname "$VENV")"
python3 -m venv "$VENV" >&2
"$PY" -m pip install --quiet --disable-pip-version-check --upgrade pip >&2
"$PY" -m pip install --quiet --disable-pip-version-check --pre 'opentelemetry-opamp-client' >&2
"$PY" -c 'import opentelemetry._opamp.client' >&2
echo "$PY"
