#!/usr/bin/env bash
# Writes a brotli (.br, quality 11) and a gzip (.gz, level 9) twin beside each wasm, js and
# css file of the release bundle (target/site/pkg). The server sends the twin the browser
# accepts (server/src/startup.rs, bundle_files): the highest levels, which compressing on
# every request could not afford. Node's zlib does both; no other tool is needed.
set -euo pipefail
cd "$(dirname "$0")/.."
node - "${1:-target/site/pkg}" <<'JS'
const fs = require('fs');
const path = require('path');
const zlib = require('zlib');
const dir = process.argv[2];
for (const name of fs.readdirSync(dir)) {
  if (!/\.(wasm|js|css)$/.test(name)) continue;
  const file = path.join(dir, name);
  const data = fs.readFileSync(file);
  fs.writeFileSync(file + '.br', zlib.brotliCompressSync(data, {
    params: {
      [zlib.constants.BROTLI_PARAM_QUALITY]: 11,
      [zlib.constants.BROTLI_PARAM_SIZE_HINT]: data.length,
    },
  }));
  fs.writeFileSync(file + '.gz', zlib.gzipSync(data, { level: 9 }));
}
JS
