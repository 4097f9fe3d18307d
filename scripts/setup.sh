#!/usr/bin/env bash
# Installs every prerequisite of building, running and testing VectorFlow on a fresh
# Debian machine with only the package registries reachable. Idempotent: each step
# checks first, so a second run takes seconds.
set -euo pipefail
cd "$(dirname "$0")/.."

log() { printf '\n==> %s\n' "$*"; }

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

apt_pkgs=()
command -v chromium >/dev/null 2>&1 || apt_pkgs+=(chromium)
command -v prometheus >/dev/null 2>&1 || apt_pkgs+=(prometheus)
command -v pg_ctlcluster >/dev/null 2>&1 || apt_pkgs+=(postgresql)
if [ ${#apt_pkgs[@]} -gt 0 ]; then
  log "apt: ${apt_pkgs[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${apt_pkgs[@]}"
fi
# Debian starts a packaged prometheus as a service on :9090; tests start their own.
if command -v systemctl >/dev/null 2>&1; then $SUDO systemctl disable --now prometheus >/dev/null 2>&1 || true; fi

if ! rustup target list --installed | grep -q wasm32-unknown-unknown; then
  log "rustup target wasm32-unknown-unknown"
  rustup target add wasm32-unknown-unknown
fi

if ! wasm-bindgen --version 2>/dev/null | grep -q '0.2.130'; then
  log "wasm-bindgen-cli 0.2.130 (about 2 min)"
  cargo install wasm-bindgen-cli --version 0.2.130 --force
fi

if ! cargo leptos --version 2>/dev/null | grep -q '0.3.10'; then
  log "cargo-leptos 0.3.10 (about 14 min, once)"
  cargo install --locked cargo-leptos --version 0.3.10 --force
fi

# wasm-opt for release builds (make run): npm's binaryen, never Debian's (../shared/BUILD.md).
tools="${VF_TOOLS_DIR:-$HOME/.cache/vectorflow/tools}"
if ! "$tools/node_modules/.bin/wasm-opt" --version 2>/dev/null | grep -q 'version 132'; then
  log "wasm-opt (npm binaryen 132.0.0) for release builds"
  mkdir -p "$tools"
  npm install --prefix "$tools" --no-audit --no-fund --no-save binaryen@132.0.0
fi

# Again whenever package-lock.json changed since the last install (a copy is kept beside).
if [ ! -x end2end/node_modules/.bin/playwright ] \
  || ! cmp -s end2end/package-lock.json end2end/node_modules/.vf-installed-lock.json; then
  log "npm packages for end2end/ (Playwright; the browser is Debian's chromium)"
  (cd end2end && npm ci --no-audit --no-fund && cp package-lock.json node_modules/.vf-installed-lock.json)
fi
bash scripts/opamp-client.sh >/dev/null
log "setup done"
