#!/usr/bin/env bash
# `npm run bench [-- flags]`: installs the pinned dev toolchain when missing (as test/run.sh does), then runs the
# benchmarks under Bun, opencode's runtime. Flags: see bench/run.ts.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "installing the dev toolchain (npm install)..."
  npm install --no-audit --no-fund --loglevel=error
fi
exec node_modules/.bin/bun bench/run.ts "$@"
