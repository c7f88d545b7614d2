#!/usr/bin/env bash
# The version matrix (docs/testing.md: `npm run test:hosts -- VERSION... | all`): runs the end-to-end suite (test/e2e-*.test.ts)
# against other opencode releases than the pinned one, and prints one line per version.
#
# Why: opencode releases every few days and updates itself; the supported range in opencode-versions.json may only
# grow by versions this suite passed on. CI runs the suite on the pinned version only (time).
#
# How: each release is installed once with npm into a cache outside the repository,
# ${OPENCODE_GUARDS_HOSTS_CACHE:-${XDG_CACHE_HOME:-~/.cache}/opencode-guards/hosts}/VERSION, then the suite runs with
# OPENCODE_GUARDS_OPENCODE_BIN pointing at it (test/e2e/harness.ts). `all` means every release of the pinned
# version's major version up to the pinned one that the registry serves, newest first (with --until-fail: back to the
# first that fails). --until-fail stops after the first version whose suite fails; a version npm cannot install
# (the registry lacks its platform binary) is reported and skipped. The full bun output of each version is kept in CACHE/logs/VERSION.log.
# --install-only VERSION installs (or finds) that release in the cache and prints its opencode path, nothing else
# (test/install.test.ts runs --check on an older release that way).
# Needs the npm registry for versions not yet in the cache.
set -uo pipefail
cd "$(dirname "$0")/.."

usage() {
  echo "usage: npm run test:hosts -- [--until-fail] VERSION... | all" >&2
  echo "       bash test/hosts.sh --install-only VERSION" >&2
  exit 2
}

until_fail=0
install_only=0
versions=()
for arg in "$@"; do
  case $arg in
    --until-fail) until_fail=1 ;;
    --install-only) install_only=1 ;;
    -h | --help) usage ;;
    all | [0-9]*.[0-9]*.[0-9]*) versions+=("$arg") ;;
    *) echo "test:hosts: '$arg' is not a version (X.Y.Z) or 'all'" >&2; usage ;;
  esac
done
[ ${#versions[@]} -gt 0 ] || usage

# `timeout` puts its command in a process group of its own, out of reach of Ctrl-C: run it in the background and
# pass INT and TERM on (timeout then stops its whole group, opencode processes included).
child=""
trap '[ -z "$child" ] || kill -TERM "$child" 2>/dev/null; exit 130' INT TERM
bounded() { # bounded SECONDS COMMAND...: the command's exit status
  timeout "$@" &
  child=$!
  wait "$child"
  local status=$?
  child=""
  return "$status"
}

cache=${OPENCODE_GUARDS_HOSTS_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/opencode-guards/hosts}
mkdir -p "$cache/logs" || { echo "test:hosts: cannot create $cache" >&2; exit 1; }
pinned=$(node -p 'require("./opencode-versions.json").pinned')

# Every release of the pinned major version, up to the pinned one, newest first.
all_versions() {
  timeout 120 npm view opencode-ai versions --json 2>/dev/null | node -e '
    const [pinned] = process.argv.slice(1)
    const line = pinned.split(".")[0] + "."
    const num = (v) => v.split(".").map(Number)
    const newer = (a, b) => { const [x, y] = [num(a), num(b)]; return x[0] - y[0] || x[1] - y[1] || x[2] - y[2] }
    const all = JSON.parse(require("fs").readFileSync(0, "utf8"))
    const list = all.filter((v) => /^\d+\.\d+\.\d+$/.test(v) && v.startsWith(line) && newer(v, pinned) <= 0)
    console.log(list.sort(newer).reverse().join("\n"))
  ' "$pinned"
}

expanded=()
for v in "${versions[@]}"; do
  if [ "$v" = all ]; then
    list=$(all_versions) || { echo "test:hosts: could not list opencode-ai versions from the npm registry" >&2; exit 1; }
    while IFS= read -r x; do [ -n "$x" ] && expanded+=("$x"); done <<<"$list"
  else
    expanded+=("$v")
  fi
done

# Installs opencode-ai@VERSION into the cache (once); sets host_bin to the binary's path. It installs into a temporary
# directory and renames it, so a run in parallel (another checkout's npm test) never sees half an install. A release
# whose opencode-ai wrapper the registry lacks but whose Linux x64 binary package it serves (opencode-linux-x64@VERSION)
# is installed from that package: the binary is the same one the wrapper would run.
host_bin=""
install_host() {
  local v=$1 dir=$cache/$1
  local bin=$dir/node_modules/.bin/opencode platform_bin=$dir/node_modules/opencode-linux-x64/bin/opencode
  host_bin=""
  if [ ! -x "$bin" ] && [ ! -x "$platform_bin" ]; then
    local tmp=$cache/.installing-$v-$$
    rm -rf "$tmp"
    mkdir -p "$tmp" && echo '{"private":true}' >"$tmp/package.json" || return 1
    if ! bounded 900 npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "opencode-ai@$v" \
      >"$cache/logs/$v.install.log" 2>&1 &&
      ! bounded 900 npm install --prefix "$tmp" --no-audit --no-fund --loglevel=error "opencode-linux-x64@$v" \
        >>"$cache/logs/$v.install.log" 2>&1; then
      rm -rf "$tmp"
      return 1
    fi
    { [ -x "$bin" ] || [ -x "$platform_bin" ]; } || { rm -rf "$dir" && mv "$tmp" "$dir"; } || return 1
    rm -rf "$tmp"
    # npm can succeed without the platform package that holds the binary (the registry lacks it).
    [ -x "$bin" ] || [ -x "$platform_bin" ] ||
      { echo "npm installed opencode-ai@$v but no opencode binary" >>"$cache/logs/$v.install.log" && return 1; }
  fi
  if [ -x "$bin" ]; then host_bin=$bin; else host_bin=$platform_bin; fi
}

if [ "$install_only" = 1 ]; then
  [ ${#expanded[@]} = 1 ] || usage
  install_host "${expanded[0]}" || {
    echo "test:hosts: npm install opencode-ai@${expanded[0]} failed; see $cache/logs/${expanded[0]}.install.log" >&2
    exit 1
  }
  printf '%s\n' "$host_bin"
  exit 0
fi

failed_any=0
for v in "${expanded[@]}"; do
  log=$cache/logs/$v.log
  if ! install_host "$v"; then
    printf '%s  not installed: npm install opencode-ai@%s failed (%s)\n' "$v" "$v" "$cache/logs/$v.install.log"
    failed_any=1
    continue
  fi
  bin=$host_bin
  reported=$(timeout 60 "$bin" --version 2>/dev/null | head -n1)
  if [ "$reported" != "$v" ]; then
    printf '%s  not installed: %s --version printed "%s"\n' "$v" "$bin" "$reported"
    failed_any=1
    continue
  fi
  start=$(date +%s)
  OPENCODE_GUARDS_OPENCODE_BIN=$bin bounded 1800 node_modules/.bin/bun test --timeout 180000 test/e2e-*.test.ts \
    >"$log" 2>&1
  status=$?
  seconds=$(($(date +%s) - start))
  pass=$(grep -Eo '^ *[0-9]+ pass$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
  fail=$(grep -Eo '^ *[0-9]+ fail$' "$log" | tail -1 | grep -Eo '[0-9]+' || echo 0)
  if [ "$status" = 0 ] && [ "$fail" = 0 ] && [ "$pass" != 0 ]; then
    printf '%s  passed  %s tests, %ss\n' "$v" "$pass" "$seconds"
  else
    failed_any=1
    names=$(grep -E '^\(fail\) ' "$log" | sed -E 's/^\(fail\) //; s/ \[[0-9.]+m?s\]$//' | paste -sd '|' - | sed 's/|/; /g')
    [ "$status" != 124 ] || names="timed out after 1800 s${names:+; $names}"
    printf '%s  failed  %s passed, %s failed, %ss: %s (%s)\n' "$v" "$pass" "$fail" "$seconds" "${names:-exit $status}" "$log"
    [ "$until_fail" = 0 ] || break
  fi
done
exit "$failed_any"
