#!/usr/bin/env bash
# Installs the real OpAMP client from PyPI (opentelemetry-opamp-client, a pre-release) into
# the virtualenv the OpAMP integration test runs its harness with
# (server/tests/opamp_harness.py). Idempotent: a venv that already has the pinned version
# is left alone, so a second run takes well under a second. Prints the venv's python on
# its last line (the test reads it).
set -euo pipefail

VENV="${VF_OPAMP_VENV:-$HOME/.cache/vectorflow/opamp-venv}"
VERSION="${VF_OPAMP_CLIENT_VERSION:-0.5b0}"
PY="$VENV/bin/python"

installed() {
  "$PY" - "$VERSION" <<'PYEOF' >/dev/null 2>&1
import sys
from importlib.metadata import version
import opentelemetry._opamp.client  # noqa: F401
sys.exit(0 if version("opentelemetry-opamp-client") == sys.argv[1] else 1)
PYEOF
}

if [ -x "$PY" ] && installed; then
  echo "$PY"
  exit 0
fi

echo "==> opentelemetry-opamp-client $VERSION into $VENV" >&2
# Debian's python3 needs python3-venv (ensurepip) to create a virtualenv.
if ! python3 -c 'import ensurepip, venv' >/dev/null 2>&1; then
  SUDO=""
  if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi
  $SUDO apt-get update -qq >&2
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends python3-venv >&2
fi
mkdir -p "$(dirname "$VENV")"
# A stale venv (another version, a broken install) is replaced; nothing else is removed.
if [ -f "$VENV/pyvenv.cfg" ]; then rm -rf "$VENV"; fi
python3 -m venv "$VENV" >&2
# An exact pin admits the pre-release (what --pre would pick today) while its
# dependencies stay on stable releases.
"$PY" -m pip install --quiet --disable-pip-version-check "opentelemetry-opamp-client==$VERSION" >&2
installed || { echo "opentelemetry-opamp-client $VERSION did not install" >&2; exit 1; }
echo "$PY"
