#!/usr/bin/env bash
# install.sh: installs, updates, removes and checks this repository's two opencode plugins, loop-guard.ts and
# semantic-anchors.ts (with opencode-semantic-anchors.schema.json, the JSON Schema of the semantic-anchors config).
#
# Why it is careful: opencode's plugin directory is shared with the user's own plugins and with other installers.
# This script therefore owns exactly the files it wrote, recorded with their sha256 in a manifest beside them
# (plugins/opencode-guards.sha256, in `sha256sum --check` format). It never overwrites or removes a file it does
# not own, or one the user edited since, unless --force, which first moves that file to a timestamped backup. It
# decides every action before it writes anything, so a refusal leaves the directory exactly as it was.
#
# The opencode versions come from opencode-versions.json beside this script (the one source, also read by the doctor
# and the tests): "oldest" to "pinned" is the tested range. A version in it installs silently; a newer one of the same
# major version (or one of the range the matrix could not install, "notInstallable") installs with a warning (not yet
# tested; --check proves it on the machine); OpenCode 2 ("v2follows": the release whose plugin API the v2 entry
# follows) installs with a note (single files in plugins/ are what it discovers; --check there asks `opencode plugin
# list`); an older one, another major version (a new plugin API) or none at all is refused (exit 4) unless --force.
# How to tune: widen the range only to versions the version matrix (npm run test:hosts) passed on.
#
# The version of the plugins is "version" in package.json beside this script, the one source (CHANGELOG.md says what
# changed in each): an install prints it, and --check says whether the installed files are this checkout's.
#
# --check first reads the person's contract files with the installed semantic-anchors.ts (doctor/contracts.mjs, on
# the Bun inside opencode, else bun), then runs the doctor, doctor/check.mjs, in Node; this script keeps install,
# uninstall and the ownership manifest, and gives the doctor the version verdict and the installed files.
#
# Options and exit codes: ./install.sh --help. Bash and coreutils only; node and opencode are used when present.
#
# shellcheck disable=SC2015,SC2317 # `a && b || fail` is meant (fail exits); functions run via act and trap
set -euo pipefail

MANIFEST_NAME="opencode-guards.sha256"
LOOP_GUARD_FILES="loop-guard.ts"
SEMANTIC_ANCHORS_FILES="semantic-anchors.ts opencode-semantic-anchors.schema.json"
EXAMPLE_CONFIG_NAME="opencode-semantic-anchors.yaml"

EXIT_OK=0
EXIT_ERROR=1
EXIT_USAGE=2
EXIT_REFUSED=3
EXIT_VERSION=4
EXIT_CHECK_FAILED=5
EXIT_CONTRACT_ERRORS=6

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
versions_file=$here/opencode-versions.json
doctor=$here/doctor/check.mjs
contracts_check=$here/doctor/contracts.mjs

# This checkout's version, "opencode-guards X.Y.Z", read from package.json (the one version source); says so when
# package.json is missing or has no version (a copy of the plugin files alone), which never stops an install.
product_label() {
  local v
  v=$(sed -n 's/^ *"version": *"\([^"]*\)".*/\1/p' "$here/package.json" 2>/dev/null | head -n1 || true)
  if [ -n "$v" ]; then printf 'opencode-guards %s' "$v"; else printf 'opencode-guards (version unknown: no package.json in %s)' "$here"; fi
}

# The tested range, from opencode-versions.json: sets OLDEST_OPENCODE, NEWEST_OPENCODE (the newest tested: "newest",
# else "pinned"), PINNED_OPENCODE (the release npm installs: the dev toolchain's), and
# UNTESTED_OPENCODE: the releases inside the range the matrix could not install (matrix.notInstallable), which are
# treated as not yet tested. A missing or unreadable file is an error of this checkout, not of the user's opencode.
# V2_FOLLOWS and V2_COMMIT: the OpenCode 2 release and source commit the plugins' v2 entry follows (tested in a
# stand-in host built from that source, not in a released v2 host).
OLDEST_OPENCODE="" NEWEST_OPENCODE="" PINNED_OPENCODE="" UNTESTED_OPENCODE="" V2_FOLLOWS="" V2_COMMIT=""
version_key() { sed -n "s/^ *\"$1\": *\"\([0-9][0-9.]*\)\".*/\1/p" "$versions_file" 2>/dev/null | head -n1; }
load_versions() {
  [ -z "$PINNED_OPENCODE" ] || return 0
  if [ -f "$versions_file" ]; then
    OLDEST_OPENCODE=$(version_key oldest || true)
    PINNED_OPENCODE=$(version_key pinned || true)
    NEWEST_OPENCODE=$(version_key newest || true)
    NEWEST_OPENCODE=${NEWEST_OPENCODE:-$PINNED_OPENCODE}
    UNTESTED_OPENCODE=$(sed -n 's/^ *"notInstallable": *\[\(.*\)\].*/\1/p' "$versions_file" | tr -d '" ' | tr ',' ' ' || true)
    V2_FOLLOWS=$(version_key v2follows || true)
    V2_COMMIT=$(sed -n 's/^ *"v2commit": *"\([0-9a-f]*\)".*/\1/p' "$versions_file" | head -n1 || true)
  fi
  if ! printf '%s\n%s\n' "$OLDEST_OPENCODE" "$PINNED_OPENCODE" | grep -Eqx '[0-9]+\.[0-9]+\.[0-9]+'; then
    fail "$EXIT_ERROR" "$versions_file is missing or has no \"oldest\" and \"pinned\" version: run install.sh from a complete checkout"
  fi
}
tested_range() { # "OLDEST to PINNED", or one version when they are equal
  if [ "$OLDEST_OPENCODE" = "$NEWEST_OPENCODE" ]; then
    printf '%s' "$NEWEST_OPENCODE"
  else
    printf '%s to %s' "$OLDEST_OPENCODE" "$NEWEST_OPENCODE"
  fi
}

usage() {
  local range="(unknown: opencode-versions.json is missing)"
  [ ! -f "$versions_file" ] || { load_versions && range=$(tested_range); }
  cat <<EOF
Usage: ./install.sh [options]

Installs loop-guard.ts, semantic-anchors.ts and opencode-semantic-anchors.schema.json (those present in this
checkout) into CONFIG/plugins/, where CONFIG is --dir, else \$OPENCODE_CONFIG_DIR, else
\${XDG_CONFIG_HOME:-~/.config}/opencode. It changes no opencode config. Restart opencode afterwards.
Re-running updates the files it installed and is otherwise a no-op.

Options:
  --only NAME       act on one plugin: loop-guard, or semantic-anchors (with its schema)
  --dir DIR         the opencode config directory to use (plugins go to DIR/plugins)
  --dry-run         print every action, write nothing
  --force           replace a same-name file this script does not own, or one you edited since it was installed,
                    after moving it to NAME.backup-YYYYmmdd-HHMMSS (opencode does not load that name); with
                    --uninstall, remove an edited file the same way; install despite a refused opencode version
  --uninstall       remove the files this script installed; a file you edited is kept, with a warning
  --example-config  also write a commented example CONFIG/$EXAMPLE_CONFIG_NAME if there is none
                    (never overwrites)
  --check           check your semantic-anchors contract files (the global one, or the one
                    \$OPENCODE_SEMANTIC_ANCHORS_CONFIG names, and the project's .opencode/$EXAMPLE_CONFIG_NAME)
                    with the installed plugin's own validator, then the doctor: prove that the installed plugins
                    load and block in your opencode, inside a throw-away sandbox (temporary HOME and XDG dirs,
                    copies of the installed files, a scripted model on 127.0.0.1); your config and sessions are not
                    touched. The contract check needs opencode (its own Bun) or bun; the doctor opencode and node.
  --project DIR     with --check: the project whose contract file is checked (default: the current directory)
  --contracts-only  with --check: check the contract files only, no doctor (for a project's CI)
  --opencode PATH   the opencode executable for the version check and --check (default: opencode on PATH)
  -h, --help        this text

Tested opencode versions (the end-to-end suite passed on each): $range
When opencode is on PATH (or given with --opencode), a tested version installs silently, a newer one of the same
major version installs with a warning (not yet tested: --check proves it on this machine), OpenCode 2 installs
with a note (its plugin API at $V2_FOLLOWS, tested in a stand-in host), and an older one, another major version or
no version at all is refused unless --force.

Exit codes:
  0  done, or nothing to do
  1  error: nothing to install, or a file could not be read or written
  2  usage error: unknown option or bad value
  3  refused: a file in the way is not ours or was edited (nothing was written; see the message), or
     --uninstall kept a file you edited
  4  refused: opencode reports a version older than the tested range, another major version, or none
     (nothing was written)
  5  --check: at least one check failed (or the contract files could not be checked)
  6  --check: a contract file has an error (printed as opencode's log has it: file, key path, fix);
     the other checks passed. Warnings are printed but do not fail.
EOF
}

# ---------------------------------------------------------------------------------------------------------------
# Small helpers: messages, hashing, dry-run aware actions.

say() { printf '%s\n' "$*"; }
warn() { printf 'warning: %s\n' "$*" >&2; }
fail() { # fail CODE MESSAGE...
  local code=$1
  shift
  printf 'install.sh: %s\n' "$*" >&2
  exit "$code"
}

# The sha256 of a file's content (read through stdin so that odd path characters never reach the output).
hash_of() {
  if command -v sha256sum >/dev/null 2>&1; then
    sha256sum <"$1" | cut -d' ' -f1
  else # macOS has shasum instead of coreutils' sha256sum
    shasum -a 256 <"$1" | cut -d' ' -f1
  fi
}

# Runs a state-changing command, or in --dry-run only prints what it would do.
act() { # act DESCRIPTION COMMAND...
  local description=$1
  shift
  if [ "$dry_run" = 1 ]; then
    say "would $description"
    return 0
  fi
  "$@" || fail "$EXIT_ERROR" "could not $description; check the permissions of $plugins_dir and try again"
  say "$description"
}

# Copies through a temporary file in the same directory, then renames: opencode never reads a half-written plugin,
# and a symlink at the target is replaced rather than written through.
copy_file() { # copy_file SRC DEST
  local tmp="$2.tmp-install.$$"
  cp "$1" "$tmp" && chmod 0644 "$tmp" && mv -f "$tmp" "$2" || {
    rm -f "$tmp"
    return 1
  }
}

backup_name() { # a free NAME.backup-YYYYmmdd-HHMMSS[-N]; never ends in .ts or .js, so opencode ignores it
  local base
  base="$1.backup-$(date +%Y%m%d-%H%M%S)"
  local candidate=$base n=1
  while [ -e "$candidate" ] || [ -L "$candidate" ]; do
    candidate="$base-$n"
    n=$((n + 1))
  done
  printf '%s' "$candidate"
}

# ---------------------------------------------------------------------------------------------------------------
# The manifest: lines "<sha256>  <file name>", kept in a variable (no associative arrays: bash 3.2 works too).

manifest_text=""
manifest_as_loaded=""

manifest_load() {
  manifest_text=""
  manifest_as_loaded=""
  [ -f "$manifest" ] || return 0
  local line
  while IFS= read -r line || [ -n "$line" ]; do
    if printf '%s' "$line" | grep -Eq '^[0-9a-f]{64}  [A-Za-z0-9._-]+$'; then
      manifest_text="$manifest_text$line"$'\n'
    elif [ -n "$line" ]; then
      warn "$manifest: ignoring a malformed line: $line"
    fi
  done <"$manifest"
  manifest_as_loaded=$(manifest_sorted)
}

manifest_sorted() { printf '%s' "$manifest_text" | sort -k2; }

manifest_hash() { # the recorded hash of NAME, or empty
  # A here-string, not `printf | while ... break`: with pipefail, a printf still writing when the loop breaks dies of
  # SIGPIPE, and the uninstall exited 141 (1 run in 3 here).
  local line
  while IFS= read -r line; do
    if [ "${line#*  }" = "$1" ]; then
      printf '%s' "${line%%  *}"
      break
    fi
  done <<<"$manifest_text"
}

manifest_drop() {
  manifest_text=$(printf '%s' "$manifest_text" | grep -v -F -x -e "$(manifest_hash "$1")  $1" || true)
  [ -z "$manifest_text" ] || manifest_text="$manifest_text"$'\n'
}

manifest_set() { # manifest_set NAME HASH
  manifest_drop "$1"
  manifest_text="$manifest_text$2  $1"$'\n'
}

manifest_save() {
  if [ -f "$manifest" ] && [ "$(manifest_sorted)" = "$manifest_as_loaded" ]; then
    return 0 # nothing changed: leave the file (and its timestamp) alone
  fi
  if [ -z "$manifest_text" ]; then
    if [ -f "$manifest" ]; then
      act "remove $manifest (no file of ours is left)" rm -f "$manifest"
    fi
    return 0
  fi
  if [ "$dry_run" = 1 ]; then
    say "would record ownership in $manifest"
    return 0
  fi
  local tmp="$manifest.tmp-install.$$"
  manifest_sorted >"$tmp" && mv -f "$tmp" "$manifest" ||
    fail "$EXIT_ERROR" "could not write $manifest; check the permissions of $plugins_dir and try again"
  say "recorded ownership in $manifest"
}

# ---------------------------------------------------------------------------------------------------------------
# Arguments and paths.

only="" dir_arg="" dry_run=0 force=0 mode=install example_config=0 opencode_arg="" project_arg="" contracts_only=0

need_value() { # need_value OPTION VALUE
  [ -n "$2" ] || fail "$EXIT_USAGE" "$1 needs a value (see ./install.sh --help)"
}

while [ $# -gt 0 ]; do
  case $1 in
    --only) need_value "$1" "${2:-}"; only=$2; shift ;;
    --only=*) only=${1#*=}; need_value --only "$only" ;;
    --dir) need_value "$1" "${2:-}"; dir_arg=$2; shift ;;
    --dir=*) dir_arg=${1#*=}; need_value --dir "$dir_arg" ;;
    --opencode) need_value "$1" "${2:-}"; opencode_arg=$2; shift ;;
    --opencode=*) opencode_arg=${1#*=}; need_value --opencode "$opencode_arg" ;;
    --project) need_value "$1" "${2:-}"; project_arg=$2; shift ;;
    --project=*) project_arg=${1#*=}; need_value --project "$project_arg" ;;
    --contracts-only) contracts_only=1 ;;
    --dry-run) dry_run=1 ;;
    --force) force=1 ;;
    --uninstall) mode=uninstall ;;
    --check) mode=check ;;
    --example-config) example_config=1 ;;
    -h | --help) usage; exit "$EXIT_OK" ;;
    *) fail "$EXIT_USAGE" "unknown option '$1' (see ./install.sh --help)" ;;
  esac
  shift
done

case $only in
  "") selected_files="$LOOP_GUARD_FILES $SEMANTIC_ANCHORS_FILES" ;;
  loop-guard) selected_files=$LOOP_GUARD_FILES ;;
  semantic-anchors) selected_files=$SEMANTIC_ANCHORS_FILES ;;
  *) fail "$EXIT_USAGE" "--only takes loop-guard or semantic-anchors, not '$only'" ;;
esac
if [ "$mode" != install ] && [ "$example_config" = 1 ]; then
  fail "$EXIT_USAGE" "--example-config goes with an install, not with --uninstall or --check"
fi
if [ "$mode" = check ] && [ "$dry_run" = 1 ]; then
  fail "$EXIT_USAGE" "--check writes nothing outside its own temporary sandbox: drop --dry-run"
fi
if [ "$mode" != check ] && { [ -n "$project_arg" ] || [ "$contracts_only" = 1 ]; }; then
  fail "$EXIT_USAGE" "--project and --contracts-only go with --check"
fi
if [ "$contracts_only" = 1 ] && [ "$only" = loop-guard ]; then
  fail "$EXIT_USAGE" "--contracts-only checks semantic-anchors' contract files: drop --only loop-guard"
fi
project_dir=${project_arg:-$PWD}
if [ "$mode" = check ]; then
  [ -d "$project_dir" ] || fail "$EXIT_USAGE" "--project $project_dir is not a directory"
  project_dir=$(cd "$project_dir" && pwd)
fi

if [ -n "$dir_arg" ]; then
  config_dir=$dir_arg
elif [ -n "${OPENCODE_CONFIG_DIR:-}" ]; then
  config_dir=$OPENCODE_CONFIG_DIR
elif [ -n "${XDG_CONFIG_HOME:-}" ]; then
  config_dir=$XDG_CONFIG_HOME/opencode
elif [ -n "${HOME:-}" ]; then
  config_dir=$HOME/.config/opencode
else
  fail "$EXIT_USAGE" "neither HOME nor XDG_CONFIG_HOME is set: pass the opencode config directory with --dir DIR"
fi
case $config_dir in /*) ;; *) config_dir=$PWD/$config_dir ;; esac
config_dir=${config_dir%/}
plugins_dir=$config_dir/plugins
manifest=$plugins_dir/$MANIFEST_NAME

# ---------------------------------------------------------------------------------------------------------------
# opencode: where it is and which version it reports.

opencode_bin=""
opencode_version=""

# Sets opencode_bin: --opencode PATH, else opencode on PATH, else empty.
locate_opencode() {
  if [ -n "$opencode_arg" ]; then
    [ -x "$opencode_arg" ] && [ ! -d "$opencode_arg" ] ||
      fail "$EXIT_USAGE" "--opencode $opencode_arg is not an executable file"
    opencode_bin=$opencode_arg
    case $opencode_bin in /*) ;; *) opencode_bin=$PWD/$opencode_bin ;; esac
  else
    opencode_bin=$(command -v opencode 2>/dev/null || true)
  fi
}

# Sets opencode_version from `opencode --version` (empty when it fails or prints none).
ask_opencode_version() {
  local out
  if command -v timeout >/dev/null 2>&1; then
    out=$(timeout 60 "$opencode_bin" --version 2>/dev/null) || out=""
  else
    out=$("$opencode_bin" --version 2>/dev/null) || out=""
  fi
  opencode_version=$(printf '%s' "$out" | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?' | head -n1 || true)
}

# version_compare A B (both X.Y.Z): prints -1, 0 or 1.
version_compare() {
  local a b i
  IFS=. read -r -a a <<<"$1"
  IFS=. read -r -a b <<<"$2"
  for i in 0 1 2; do
    if [ "$((10#${a[i]}))" -lt "$((10#${b[i]}))" ]; then printf -- -1; return; fi
    if [ "$((10#${a[i]}))" -gt "$((10#${b[i]}))" ]; then printf 1; return; fi
  done
  printf 0
}

# The verdict on an opencode version, one word: tested (in the tested range), untested (newer than the newest tested
# with the same major version, a pre-release/build of a version from the oldest tested on, or a release of the range
# the suite could not be run on), older (below the range), v2 (OpenCode 2, whose API the v2 entry follows), major
# (another major version: a new plugin API), none (no version). The one place of this decision.
version_verdict() {
  load_versions
  local v=$1 core
  core=$(printf '%s' "$v" | grep -Eo '^[0-9]+\.[0-9]+\.[0-9]+' || true)
  if [ -z "$core" ]; then echo none; return; fi
  if [ "${core%%.*}" != "${NEWEST_OPENCODE%%.*}" ]; then
    if [ -n "$V2_FOLLOWS" ] && [ "${core%%.*}" = "${V2_FOLLOWS%%.*}" ]; then echo v2; return; fi
    if [ "$(version_compare "$core" "$NEWEST_OPENCODE")" = 1 ]; then echo major; else echo older; fi
    return
  fi
  if [ "$(version_compare "$core" "$OLDEST_OPENCODE")" = -1 ]; then echo older; return; fi
  if [ "$core" != "$v" ] || [ "$(version_compare "$core" "$NEWEST_OPENCODE")" = 1 ]; then echo untested; return; fi
  case " $UNTESTED_OPENCODE " in *" $v "*) echo untested; return ;; esac
  echo tested
}

# Why a verdict is what it is, in words (for messages and --check).
verdict_reason() { # verdict_reason VERDICT VERSION
  case $1 in
    tested) printf 'in the tested range %s' "$(tested_range)" ;;
    untested)
      if [ "$(version_compare "$(printf '%s' "$2" | grep -Eo '^[0-9]+\.[0-9]+\.[0-9]+')" "$NEWEST_OPENCODE")" = 1 ]; then
        printf 'newer than %s, the newest tested version: not yet tested' "$NEWEST_OPENCODE"
      elif [ "$(printf '%s' "$2" | grep -Eo '^[0-9]+\.[0-9]+\.[0-9]+')" != "$2" ]; then
        printf 'a pre-release or build, not a tested release (tested: %s): not yet tested' "$(tested_range)"
      else
        printf 'inside the tested range %s, but a release the suite could not be run on: not yet tested' "$(tested_range)"
      fi
      ;;
    older) printf 'older than %s, the oldest tested version (tested: %s)' "$OLDEST_OPENCODE" "$(tested_range)" ;;
    v2) printf 'OpenCode 2: the plugins follow its plugin API at %s (anomalyco/opencode %s), tested in a stand-in host built from that source, not yet in a released OpenCode 2' "$V2_FOLLOWS" "$(printf '%s' "$V2_COMMIT" | cut -c1-7)" ;;
    major) printf 'another major version than the tested %s (a new plugin API these plugins were not written for)' "$(tested_range)" ;;
  esac
}

# The version gate of an install: silent in the tested range, a warning for an untested newer version, exit 4 for
# the rest unless --force.
version_gate() {
  load_versions
  locate_opencode
  if [ -z "$opencode_bin" ]; then
    say "opencode is not on PATH: installing anyway. These plugins are tested with opencode $(tested_range);"
    say "  once opencode is installed, run ./install.sh --check (or pass --opencode PATH)."
    return 0
  fi
  ask_opencode_version
  local verdict what
  verdict=$(version_verdict "$opencode_version")
  case $verdict in
    tested)
      say "opencode $opencode_version ($opencode_bin): supported, $(verdict_reason tested)"
      return 0
      ;;
    untested)
      warn "opencode $opencode_version ($opencode_bin) is $(verdict_reason untested "$opencode_version"). Installing anyway; run ./install.sh --check to prove on this machine that the plugins load and block in it."
      return 0
      ;;
    v2)
      warn "opencode $opencode_version ($opencode_bin) is $(verdict_reason v2). Installing; restart OpenCode (opencode service restart), then run ./install.sh --check to see that it lists both plugins as loaded."
      return 0
      ;;
    none) what="did not report a version (\`$opencode_bin --version\` failed or printed none)" ;;
    *) what="reports version $opencode_version, $(verdict_reason "$verdict" "$opencode_version")" ;;
  esac
  if [ "$force" = 1 ]; then
    warn "opencode at $opencode_bin $what; installing anyway (--force). Run ./install.sh --check to see whether the plugins work there."
    return 0
  fi
  fail "$EXIT_VERSION" "opencode at $opencode_bin $what.
  Nothing was written. Either install a tested opencode (npm i -g opencode-ai@$PINNED_OPENCODE),
  or re-run with --force to install anyway and then run ./install.sh --check."
}

# ---------------------------------------------------------------------------------------------------------------
# Install: plan every file first, refuse before writing anything, then act.

example_config_text() {
  if [ -f "$plugins_dir/opencode-semantic-anchors.schema.json" ] ||
    { [ -f "$here/opencode-semantic-anchors.schema.json" ] && [ "$only" != loop-guard ]; }; then
    say "# yaml-language-server: \$schema=./plugins/opencode-semantic-anchors.schema.json"
  fi
  cat <<'EOF'
# opencode-semantic-anchors.yaml: your global contracts for the semantic-anchors opencode plugin.
# Written by `./install.sh --example-config`. Everything below `version: 1` is commented out, so this file changes
# nothing until you uncomment a part. A project's .opencode/opencode-semantic-anchors.yaml is read after this file
# and adds contracts or overrides them by id (except locked ones). Mistakes are reported in opencode's log with the
# file, the key path and the fix; they never stop your session. The full reference is docs/contracts.md in the
# opencode-guards checkout (its section "Command rules" explains the ready rules below).
version: 1

# settings:
#   maxOverrides: 3              # human bypasses (/anchor bypass <reason>) per root session
#   confirmPattern: null         # regex; when set, only user messages matching it confirm
#   protection: block            # the default protection (protect-remote-history, -local-work, -files, -disks): block | warn | off
#
# roles:
#   default: software-developer
#   agents: { build: software-developer, plan: software-architect }   # opencode agent name -> role
#
# presets:                       # role -> contract ids; replaces that role's built-in preset
#   software-developer: [step-confirmation, source-anchor, intent-anchor]
#
# contracts:                     # ready command rules: uncomment the ones you want (each is checked by its examples)
#   - id: no-force-push          # required, unique, [a-z0-9-]
#     description: Never rewrite shared history.
#     mode: block                # block | warn | info
#     message: Ask the user before any force-push.
#     roles: ["*"]               # absent = every role
#     trigger:
#       type: tool               # tool | message | state
#       # commands as you type them; any one matches, however the call spells, chains or wraps it
#       runs: ["git push {--force,--force-with-lease,--mirror} !--dry-run", "git push +* !--dry-run"]
#     examples:                  # what it must do, checked at every load and by ./install.sh --check
#       fires:
#         - { tool: bash, args: { command: "git push --force origin main" } }
#         - { tool: bash, args: { command: "cd app && git push -f" } }
#         - { tool: bash, args: { command: "git -C . push origin +main" } }
#         - { tool: bash, args: { command: "sudo -u ci env GIT_TRACE=1 git push --force-with-lease" } }
#         - { tool: bash, args: { command: "bash -c 'git push -f'" } }
#       passes:
#         - { tool: bash, args: { command: "git push origin main" } }
#         - { tool: bash, args: { command: "git push --force --dry-run" } }
#         - { tool: bash, args: { command: "echo 'never git push --force here'" } }
#         - { tool: bash, args: { command: "git commit -m 'no git push -f'" } }
#
#   - id: no-hard-reset
#     description: Never throw away uncommitted work.
#     mode: block
#     message: Ask the user before discarding changes; git stash keeps them.
#     trigger: { type: tool, runs: ["git reset --hard"] }
#     examples:
#       fires: [{ tool: bash, args: { command: "git reset --hard HEAD~1" } }]
#       passes: [{ tool: bash, args: { command: "git reset --soft HEAD~1" } }]
#
#   - id: no-git-clean
#     description: Never delete untracked files with git clean.
#     mode: block
#     message: List them with git clean -n and ask the user.
#     trigger: { type: tool, runs: ["git clean {--force,--interactive} !--dry-run"] }   # -f, -fd, -xdf, -i ...; -n only lists
#     examples:
#       fires: [{ tool: bash, args: { command: "git clean -fdx" } }]
#       passes: [{ tool: bash, args: { command: "git clean -n" } }, { tool: bash, args: { command: "git clean -fdn" } }]
#
#   - id: no-rm-outside-project
#     description: Never delete a directory tree outside the project.
#     mode: block
#     message: Delete only inside the project or a temporary directory; ask the user for anything else.
#     trigger:
#       type: tool
#       # a path glob is matched against the resolved path; !glob leaves such operands out
#       runs: ["rm -r /** !$PROJECT !$PROJECT/** !/tmp/** !$TMPDIR !$TMPDIR/**"]
#     examples:
#       fires: [{ tool: bash, args: { command: "rm -rf /" } }, { tool: bash, args: { command: "cd /etc && rm -rf nginx" } }]
#       passes: [{ tool: bash, args: { command: "rm -rf dist node_modules" } }, { tool: bash, args: { command: "rm -rf /tmp/build" } }]
#
#   - id: no-skip-hooks
#     description: Never skip the git hooks.
#     mode: block
#     message: Fix what the hook reports instead.
#     trigger: { type: tool, runs: ["git {commit,push,merge} --no-verify"] }
#     examples:
#       fires: [{ tool: bash, args: { command: "git commit -nm 'wip'" } }]
#       passes: [{ tool: bash, args: { command: "git commit -m 'skip --no-verify'" } }]
#
#   - id: no-publish
#     description: Publishing a package is the user's decision.
#     mode: block
#     message: Ask the user to publish.
#     trigger: { type: tool, runs: ["{npm,pnpm,yarn,bun} publish !--dry-run", "yarn npm publish !--dry-run"] }
#     examples:
#       fires: [{ tool: bash, args: { command: "npm publish --access public" } }]
#       passes: [{ tool: bash, args: { command: "npm publish --dry-run" } }, { tool: bash, args: { command: "npm run publish-docs" } }]
#
#   - id: no-kubectl-delete      # a tool of your own: its subcommand is found after its options (kubectl -n prod delete)
#     description: Never delete cluster resources.
#     mode: block
#     message: Ask the user; kubectl delete --dry-run=client shows what would go.
#     trigger: { type: tool, runs: ["kubectl delete !--dry-run !--help", "kubectl delete --dry-run=none !--help"] }
#     examples:
#       fires: [{ tool: bash, args: { command: "kubectl -n prod delete pod web-1" } }]
#       passes: [{ tool: bash, args: { command: "kubectl get pods" } }, { tool: bash, args: { command: "kubectl delete pod web-1 --dry-run=client" } }]
#
#   - id: no-terraform-destroy
#     description: Never destroy infrastructure.
#     mode: block
#     message: Ask the user; terraform plan -destroy shows what would go.
#     trigger: { type: tool, runs: ["terraform destroy !-help", "terraform apply -destroy !-help"] }
#     examples:
#       fires: [{ tool: bash, args: { command: "terraform -chdir=infra destroy -auto-approve" } }, { tool: bash, args: { command: "terraform apply -destroy" } }]
#       passes: [{ tool: bash, args: { command: "terraform plan -destroy" } }, { tool: bash, args: { command: "terraform apply tfplan" } }, { tool: bash, args: { command: "terraform destroy -help" } }]
#
#   - id: no-docker-prune
#     description: Never delete Docker data in bulk.
#     mode: block
#     message: Ask the user; docker system df shows what is there.
#     trigger:
#       type: tool
#       runs: ["docker system prune !--help", "docker volume {rm,prune} !--help", "docker compose down {-v,--volumes}", "docker-compose down {-v,--volumes}"]
#     examples:
#       fires: [{ tool: bash, args: { command: "docker system prune -af" } }, { tool: bash, args: { command: "docker volume rm pgdata" } }, { tool: bash, args: { command: "docker compose down -v" } }]
#       passes: [{ tool: bash, args: { command: "docker system df" } }, { tool: bash, args: { command: "docker compose down" } }, { tool: bash, args: { command: "docker volume ls" } }]
#
#   - id: no-database-drop     # SQL is text to the shell: a regex on the command, with psql/mysql/sqlite3 named
#     description: Never drop a database, schema or table.
#     mode: block
#     message: Ask the user, and take a backup first (pg_dump, mysqldump, sqlite3 .backup).
#     trigger:
#       type: tool
#       tools: [bash]
#       args:
#         command: { regex: '\b(psql|mysql|mariadb|sqlite3)\b[\s\S]*\bdrop\s+(database|schema|table)\b', flags: i }
#     examples:
#       fires: [{ tool: bash, args: { command: "psql -c 'DROP TABLE users'" } }, { tool: bash, args: { command: "mysql -e 'drop database shop'" } }, { tool: bash, args: { command: "sqlite3 app.db <<'SQL'\nDROP TABLE logs;\nSQL" } }]
#       passes: [{ tool: bash, args: { command: "psql -c 'SELECT 1'" } }, { tool: bash, args: { command: "grep -ri 'drop table' migrations/" } }, { tool: bash, args: { command: "psql --help" } }]
#
#   - id: no-pipe-to-shell
#     description: Never run a script straight from the network.
#     mode: block
#     message: Download it to a file, show it to the user, then run it.
#     trigger:
#       type: tool
#       tools: [bash]
#       args:
#         command: { regex: '\b(curl|wget)\b[^|;&]*\|\s*(sudo(\s+-\S+)?(\s+-\S+)?\s+)?((ba|z|da|k)?sh|python[0-9.]*|perl|ruby|node)(\s+-[a-zA-Z]*s[^;&|)]*|(\s+-[a-zA-Z]*)?(\s+-[a-zA-Z]*)?)\s*($|[;&|)])' }
#     examples:
#       fires: [{ tool: bash, args: { command: "curl -fsSL https://example.com/install.sh | sh" } }, { tool: bash, args: { command: "wget -qO- https://example.com/x | sudo bash" } }, { tool: bash, args: { command: "curl -s https://x.example/i.sh | sh -s -- --yes" } }]
#       passes: [{ tool: bash, args: { command: "curl -s https://api.example.com/v1 | jq ." } }, { tool: bash, args: { command: "curl -s http://localhost:8081/x | python3 -m json.tool" } }, { tool: bash, args: { command: "curl -fsSLo install.sh https://example.com/install.sh" } }]
#
#   - id: no-chmod-outside-project
#     description: Never change the permissions or owner of a tree outside the project.
#     mode: block
#     message: Change only files of the project; ask the user for anything else.
#     trigger: { type: tool, runs: ["{chmod,chown,chgrp} {-R,--recursive} /** !$PROJECT !$PROJECT/** !/tmp/** !$TMPDIR !$TMPDIR/**"] }
#     examples:
#       fires: [{ tool: bash, args: { command: "chmod -R 777 /etc" } }, { tool: bash, args: { command: "sudo chown -R me:me /var/www" } }]
#       passes: [{ tool: bash, args: { command: "chmod -R u+w build" } }, { tool: bash, args: { command: "chmod 600 ~/.ssh/config" } }, { tool: bash, args: { command: "chown -R me /tmp/x" } }]
EOF
}

write_example_config() {
  local target=$config_dir/$EXAMPLE_CONFIG_NAME
  if [ -e "$target" ] || [ -L "$target" ]; then
    say "kept your $target (--example-config never overwrites)"
    return 0
  fi
  if [ "$dry_run" = 1 ]; then
    say "would write an example $target (everything but 'version: 1' commented out)"
  else
    mkdir -p "$config_dir" && example_config_text >"$target" ||
      fail "$EXIT_ERROR" "could not write $target; check the permissions of $config_dir"
    say "wrote an example $target (everything but 'version: 1' commented out; edit it to add contracts)"
  fi
  local default_dir=${XDG_CONFIG_HOME:-${HOME:-}/.config}/opencode
  if [ "$config_dir" != "$default_dir" ]; then
    say "  note: semantic-anchors reads its global file from $default_dir/$EXAMPLE_CONFIG_NAME;"
    say "  to use this one, set OPENCODE_SEMANTIC_ANCHORS_CONFIG=$target"
  fi
}

run_install() {
  version_gate
  say "install.sh: $(product_label) from $here"
  manifest_load

  # The plan: one "action name src_hash" line per file, decided before anything is written.
  local plan="" refusals="" skipped="" name src target src_hash cur_hash owned_hash
  for name in $selected_files; do
    src=$here/$name
    target=$plugins_dir/$name
    if [ ! -f "$src" ]; then
      skipped="$skipped $name"
      continue
    fi
    src_hash=$(hash_of "$src") || fail "$EXIT_ERROR" "could not read $src"
    owned_hash=$(manifest_hash "$name")
    if [ ! -e "$target" ] && [ ! -L "$target" ]; then
      plan="${plan}new $name $src_hash"$'\n'
      continue
    fi
    if [ -d "$target" ] || { [ -L "$target" ] && [ ! -e "$target" ]; }; then
      cur_hash="" # a directory or a dangling link: in the way, never ours
    else
      cur_hash=$(hash_of "$target") || fail "$EXIT_ERROR" "could not read $target; check its permissions"
    fi
    if [ "$cur_hash" = "$src_hash" ] && [ ! -L "$target" ]; then
      if [ "$owned_hash" = "$src_hash" ]; then
        plan="${plan}same $name $src_hash"$'\n'
      else # identical content we did not record (e.g. an earlier manual copy): nothing is lost by owning it
        plan="${plan}adopt $name $src_hash"$'\n'
      fi
    elif [ -n "$owned_hash" ] && [ "$cur_hash" = "$owned_hash" ] && [ ! -L "$target" ]; then
      plan="${plan}update $name $src_hash"$'\n'
    elif [ "$force" = 1 ]; then
      plan="${plan}replace $name $src_hash"$'\n'
    elif [ -n "$owned_hash" ]; then
      refusals="$refusals  $target was installed by install.sh but you changed it since; it was not overwritten."$'\n'
    else
      refusals="$refusals  $target exists and was not installed by install.sh; it was not overwritten."$'\n'
    fi
  done

  if [ -z "$plan" ] && [ -z "$refusals" ]; then
    fail "$EXIT_ERROR" "nothing to install: none of$selected_files is in $here. Run install.sh from a complete checkout."
  fi
  if [ -n "$refusals" ]; then
    printf 'install.sh: refused, nothing was written:\n%s' "$refusals" >&2
    printf '  Next: look at the file(s) and keep what you need; then re-run with --force to replace them (each is\n' >&2
    printf '  first moved to NAME.backup-<timestamp>), or remove them yourself and re-run ./install.sh.\n' >&2
    exit "$EXIT_REFUSED"
  fi

  [ -d "$plugins_dir" ] || act "create $plugins_dir" mkdir -p "$plugins_dir"
  local action changed=0 backup
  while read -r action name src_hash; do
    [ -n "$action" ] || continue
    src=$here/$name
    target=$plugins_dir/$name
    case $action in
      new) act "install $target" copy_file "$src" "$target"; changed=1 ;;
      update) act "update $target" copy_file "$src" "$target"; changed=1 ;;
      replace)
        backup=$(backup_name "$target")
        act "move the existing $target to $backup (--force)" mv "$target" "$backup"
        act "install $target" copy_file "$src" "$target"
        changed=1
        ;;
      adopt) say "up to date: $target (identical content, now recorded as installed by install.sh)" ;;
      same) say "up to date: $target" ;;
    esac
    manifest_set "$name" "$src_hash"
  done <<<"$plan"
  manifest_save

  local s
  for s in $skipped; do
    say "skipped $s: not in this checkout ($here)"
  done
  for s in $selected_files; do # opencode also loads plugin/ (singular): a second copy there would run twice
    if [ -e "$config_dir/plugin/$s" ] && [ "${s%.ts}" != "$s" ]; then
      warn "$config_dir/plugin/$s also exists and opencode loads it too: remove it, or this plugin runs twice"
    fi
  done
  [ "$example_config" = 1 ] && write_example_config
  if [ "$dry_run" = 1 ]; then
    say "dry run: nothing was written"
  elif [ "$changed" = 1 ]; then
    say "done. Restart opencode to load the plugins; ./install.sh --check proves they load and block."
  else
    say "done: already up to date."
  fi
}

# ---------------------------------------------------------------------------------------------------------------
# Uninstall: remove what the manifest says is ours and unchanged; keep what the user edited.

run_uninstall() {
  manifest_load
  local name target owned_hash cur_hash kept=0 removed=0 backup
  for name in $selected_files; do
    target=$plugins_dir/$name
    owned_hash=$(manifest_hash "$name")
    if [ -z "$owned_hash" ]; then
      if [ -e "$target" ] || [ -L "$target" ]; then
        say "left alone: $target (not installed by install.sh; remove it yourself if you want it gone)"
      fi
      continue
    fi
    if [ ! -e "$target" ] && [ ! -L "$target" ]; then
      say "already gone: $target"
      manifest_drop "$name"
      continue
    fi
    cur_hash=""
    [ -f "$target" ] && [ ! -L "$target" ] && cur_hash=$(hash_of "$target")
    if [ "$cur_hash" = "$owned_hash" ]; then
      act "remove $target" rm -f "$target"
      removed=1
      manifest_drop "$name"
    elif [ "$force" = 1 ]; then
      backup=$(backup_name "$target")
      act "move $target, which you edited, to $backup (--force)" mv "$target" "$backup"
      removed=1
      manifest_drop "$name"
    else
      warn "kept $target: you changed it since install.sh installed it. Save what you need, then remove it yourself or re-run with --uninstall --force (it is moved to NAME.backup-<timestamp>)."
      kept=1
    fi
  done
  manifest_save
  if [ -e "$config_dir/$EXAMPLE_CONFIG_NAME" ] && [ "$only" != loop-guard ]; then
    say "kept your contracts file $config_dir/$EXAMPLE_CONFIG_NAME (it is yours; delete it if you no longer want it)"
  fi
  if [ "$dry_run" = 1 ]; then
    say "dry run: nothing was written"
  elif [ "$removed" = 1 ]; then
    say "done. Restart opencode so that it unloads the plugins."
  elif [ "$kept" = 1 ]; then
    say "done: removed nothing; the file(s) above were kept."
  else
    say "done: nothing of ours to remove."
  fi
  [ "$kept" = 0 ] || exit "$EXIT_REFUSED"
}

# ---------------------------------------------------------------------------------------------------------------
# --check (doctor): the parts that are the installer's (which opencode, the version verdict, the installed files
# against the manifest), then doctor/check.mjs runs that opencode in a throw-away sandbox with copies of the
# installed plugins and a scripted model, and proves that they load and really block.

checks_ok=0
checks_failed=0
check_ok() { # check_ok WHAT [DETAIL]
  checks_ok=$((checks_ok + 1))
  say "$1: ok${2:+ ($2)}"
}
check_failed() { # check_failed WHAT REASON
  checks_failed=$((checks_failed + 1))
  say "$1: failed: $2"
}
stop_check() {
  say "$checks_ok ok, $checks_failed failed"
  exit "$EXIT_CHECK_FAILED"
}

# --check, part 1: the person's contract files, read and validated by the semantic-anchors.ts opencode loads (the
# installed one; this checkout's when none is installed) on Bun, the plugin's runtime: the one inside opencode
# (BUN_BE_BUN=1 makes opencode's binary run a script), else bun on PATH. doctor/contracts.mjs prints the files, every
# problem and a last line `contract files: N errors, M warnings` (or `contract files: not checked: <why>`); a runner
# that is not Bun prints no such line, and the next one is tried. Sets contract_errors=1 when a file has an error; a
# check that cannot run is a failed check. BUN_RUNTIME_TRANSPILER_CACHE_PATH=0: Bun caches nothing in HOME.
contract_errors=0
check_contracts() {
  local plugin=$plugins_dir/semantic-anchors.ts from="installed in $plugins_dir"
  if [ ! -f "$plugin" ]; then
    plugin=$here/semantic-anchors.ts
    from="of this checkout (none is installed in $plugins_dir)"
  fi
  local header="install.sh --check: contract files for $project_dir, read by semantic-anchors.ts $from"
  if [ ! -f "$plugin" ] || [ ! -f "$contracts_check" ]; then
    say "$header"
    check_failed "contract files" "semantic-anchors.ts or $contracts_check is missing; run --check from a complete checkout"
    return 0
  fi
  local runner out rc tried="" on
  for runner in opencode bun; do
    rc=0
    case $runner in
      opencode)
        [ -n "$opencode_bin" ] || continue
        on="the Bun inside $opencode_bin"
        out=$(cd "$project_dir" && BUN_BE_BUN=1 BUN_RUNTIME_TRANSPILER_CACHE_PATH=0 "$opencode_bin" \
          "$contracts_check" --plugin "$plugin" --project "$project_dir" </dev/null 2>&1) || rc=$?
        ;;
      bun)
        command -v bun >/dev/null 2>&1 || continue
        on=$(command -v bun)
        out=$(cd "$project_dir" && BUN_RUNTIME_TRANSPILER_CACHE_PATH=0 bun "$contracts_check" --plugin "$plugin" \
          --project "$project_dir" </dev/null 2>&1) || rc=$?
        ;;
    esac
    if printf '%s\n' "$out" | tail -n 1 | grep -q '^contract files: '; then
      say "$header, on $on"
      say "$out"
      case $rc in
        0) ;;
        "$EXIT_CONTRACT_ERRORS") contract_errors=1 ;;
        *) check_failed "contract files" "not checked (the line above says why)" ;;
      esac
      return 0
    fi
    tried="$tried; $runner: $(printf '%s\n' "$out" | grep -v '^ *$' | tail -n 1)"
  done
  say "$header"
  if [ -z "$tried" ]; then
    check_failed "contract files" "they are read on Bun, and neither opencode nor bun was found; install opencode (npm i -g opencode-ai@$PINNED_OPENCODE) or pass --opencode PATH"
  else
    check_failed "contract files" "the check did not run (${tried#; })"
  fi
}

# Which version the installed files are: this checkout's when each of them is byte for byte its file (the version is
# only known for this checkout: package.json is not installed). Information, not a check: an older install still works.
installed_version() { # installed_version "NAME..."
  local name differs=""
  [ -n "${1# }" ] || return 0
  for name in $1; do
    if [ ! -f "$here/$name" ] || [ "$(hash_of "$plugins_dir/$name")" != "$(hash_of "$here/$name")" ]; then
      differs="$differs $name"
    fi
  done
  if [ -z "$differs" ]; then
    say "installed version: $(product_label) (the installed files are this checkout's)"
  else
    say "installed version: not this checkout's $(product_label) (these files differ from it: ${differs# }); ./install.sh installs this version"
  fi
}

# --check on OpenCode 2: whether the host lists each installed plugin as loaded (`opencode plugin list`, run with a
# throw-away config dir holding copies of the installed files, so the person's config and service are not touched).
# A line naming the plugin and "failed" or "error" is a failed check; no line at all proves nothing, and says so. What
# cannot be proven here (a block in a real session: the doctor's scripted model speaks to v1 hosts) is said plainly.
check_v2_listing() { # check_v2_listing "FILE..."
  local sandbox out="" rc=0 name id line
  sandbox=$(mktemp -d "${TMPDIR:-/tmp}/opencode-guards-v2.XXXXXX")
  mkdir -p "$sandbox/config/opencode/plugins" "$sandbox/home"
  for name in $1; do cp "$plugins_dir/$name" "$sandbox/config/opencode/plugins/$name"; done
  local run=(env HOME="$sandbox/home" XDG_CONFIG_HOME="$sandbox/config" OPENCODE_CONFIG_DIR="$sandbox/config/opencode")
  ! command -v timeout >/dev/null 2>&1 || run+=(timeout 60)
  out=$(cd "$sandbox" && "${run[@]}" "$opencode_bin" plugin list </dev/null 2>&1) || rc=$?
  rm -rf "$sandbox"
  for name in $1; do
    id=${name%.ts}
    line=$(printf '%s\n' "$out" | grep -F -- "$id" | head -n1 | sed 's/^ *//' || true)
    if [ -z "$line" ]; then
      say "OpenCode 2 loads $name: not proven (\`opencode plugin list\` exited $rc and did not name it: $(printf '%s\n' "$out" | grep -v '^ *$' | tail -n1))"
    elif printf '%s' "$line" | grep -Eqi 'fail|error'; then
      check_failed "OpenCode 2 loads $name" "opencode plugin list says: $line"
    else
      check_ok "OpenCode 2 loads $name" "opencode plugin list: $line"
    fi
  done
  say "not proven on OpenCode 2: that the plugins block in a real session (the doctor's scripted session drives opencode 1.x"
  say "  only); their v2 entry passed the end-to-end scenarios in a stand-in host built from OpenCode $V2_FOLLOWS's source."
}

run_check() {
  load_versions
  locate_opencode
  if [ "$only" != loop-guard ]; then
    check_contracts
    if [ "$contracts_only" = 1 ]; then
      [ "$checks_failed" = 0 ] || exit "$EXIT_CHECK_FAILED"
      [ "$contract_errors" = 0 ] || exit "$EXIT_CONTRACT_ERRORS"
      exit "$EXIT_OK"
    fi
  fi
  say "install.sh --check: doctor for the plugins in $plugins_dir"

  # 1. The doctor itself: Node and doctor/check.mjs.
  if ! command -v node >/dev/null 2>&1; then
    check_failed "node" "not on PATH; the doctor is a Node program (install Node 20 or later)"
    stop_check
  fi
  if [ ! -f "$doctor" ]; then
    check_failed "doctor" "$doctor is missing; run --check from a complete checkout"
    stop_check
  fi

  # 2. opencode and its version (asked inside a sandbox: even --version creates opencode's data dirs).
  local verdict=""
  if [ -z "$opencode_bin" ]; then
    check_failed "opencode" "not found on PATH; install opencode $(tested_range) (npm i -g opencode-ai@$PINNED_OPENCODE), or pass --opencode PATH"
  else
    opencode_version=$(node "$doctor" version "$opencode_bin" 2>/dev/null || true)
    if [ -z "$opencode_version" ]; then
      check_failed "opencode" "$opencode_bin did not report a version in the sandbox (temporary HOME, only PATH kept); run '$opencode_bin --version' to see why; if it is a shim (volta, asdf), pass the real binary with --opencode PATH"
    else
      check_ok "opencode" "$opencode_bin, version $opencode_version"
      verdict=$(version_verdict "$opencode_version")
      case $verdict in
        tested) check_ok "opencode version" "$opencode_version: $(verdict_reason tested)" ;;
        untested) check_ok "opencode version" "$opencode_version: $(verdict_reason untested "$opencode_version"); the checks below are the proof on this machine" ;;
        v2) check_ok "opencode version" "$opencode_version: $(verdict_reason v2)" ;;
        *) check_failed "opencode version" "$opencode_version: $(verdict_reason "$verdict" "$opencode_version"); install.sh refuses it without --force" ;;
      esac
    fi
  fi

  # 3. The installed files, against the manifest.
  manifest_load
  local name installed="" plugins="" owned_hash
  for name in $selected_files; do
    [ -f "$plugins_dir/$name" ] || continue
    installed="$installed $name"
    case $name in *.ts) plugins="$plugins $name" ;; esac
    owned_hash=$(manifest_hash "$name")
    if [ -z "$owned_hash" ]; then
      check_ok "installed $name" "present, but not installed by install.sh"
    elif [ "$(hash_of "$plugins_dir/$name")" = "$owned_hash" ]; then
      check_ok "installed $name" "matches the manifest"
    else
      check_ok "installed $name" "edited since install.sh installed it; checking your edited copy"
    fi
  done
  for name in $selected_files; do
    if [ -z "$(manifest_hash "$name")" ] || [ -f "$plugins_dir/$name" ]; then continue; fi
    check_failed "installed $name" "recorded in $manifest but missing; re-run ./install.sh"
  done
  installed_version "$installed"
  if [ -z "$plugins" ]; then
    check_failed "plugins installed" "no plugin file in $plugins_dir; run ./install.sh${only:+ --only $only} first"
  fi
  if [ -z "$plugins" ] || [ -z "$opencode_version" ]; then
    stop_check
  fi

  # 4. OpenCode 2: what its own command can show (check_v2_listing); the doctor's scripted session drives v1 hosts.
  if [ "$verdict" = v2 ]; then
    check_v2_listing "$plugins"
    say "$checks_ok ok, $checks_failed failed"
    [ "$checks_failed" = 0 ] || exit "$EXIT_CHECK_FAILED"
    [ "$contract_errors" = 0 ] || exit "$EXIT_CONTRACT_ERRORS"
    return 0
  fi

  # 4. Discovery, blocking and loading, in the sandbox (doctor/check.mjs prints those checks and the summary).
  local untested=()
  [ "$verdict" != untested ] || untested=(--untested)
  local rc=0
  node "$doctor" run --opencode "$opencode_bin" --version "$opencode_version" --plugins-dir "$plugins_dir" \
    --files "${installed# }" --counted "$checks_ok,$checks_failed" ${untested[@]+"${untested[@]}"} || rc=$?
  [ "$rc" = 0 ] || exit "$EXIT_CHECK_FAILED"
  if [ "$contract_errors" = 1 ]; then
    say "but a contract file has an error (listed at the top): that contract or file is skipped when opencode starts."
    exit "$EXIT_CONTRACT_ERRORS"
  fi
}

case $mode in
  install) run_install ;;
  uninstall) run_uninstall ;;
  check) run_check ;;
esac
exit "$EXIT_OK"
