#!/usr/bin/env bash
# The one test command (README: `npm test`): installs the pinned dev toolchain when it is missing or stale,
# type-checks the plugins against the real opencode plugin types (then the tests, the bench and the doctor), runs
# every test under Bun (opencode's runtime), and ends with the plain line `N passed, N failed`.
set -uo pipefail
cd "$(dirname "$0")/.."

# Install when node_modules is absent or older than the lock file (a fresh clone has none). The lock lists every
# platform binary of opencode-ai, so `npm ci` works as well; `npm install` keeps an up-to-date tree as it is.
if [ ! -f node_modules/.package-lock.json ] || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  echo "installing the dev toolchain (npm install)..."
  npm install --no-audit --no-fund --loglevel=error || { echo "npm install failed"; echo "0 passed, 1 failed"; exit 1; }
fi

# Two programs: the plugins alone with no host types (they declare the few Bun globals they use), then the tests,
# the bench and the doctor with Bun's and Node's types.
echo "type-checking (tsc --strict: plugins, then tests, bench and doctor)..."
if ! node_modules/.bin/tsc -p tsconfig.json || ! node_modules/.bin/tsc -p tsconfig.test.json; then
  echo "type check failed"
  echo "0 passed, 1 failed"
  exit 1
fi

log=$(mktemp)
trap 'rm -f "$log"' EXIT
node_modules/.bin/bun test --timeout 120000 "$@" 2>&1 | tee "$log"
status=${PIPESTATUS[0]}

passed=$(grep -Eo '^ *[0-9]+ pass$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
failed=$(grep -Eo '^ *[0-9]+ fail$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
if [ "$status" -ne 0 ] && [ "$failed" -eq 0 ]; then failed=1; fi
# A skipped suite says so near the end, where a person reads (test/e2e-tui.test.ts prints why).
grep -h '^TUI tests skipped' "$log" | sort -u
echo "${passed} passed, ${failed} failed"
exit "$status"
