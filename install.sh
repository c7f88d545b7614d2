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
# How to tune: SUPPORTED_OPENCODE lists the opencode versions that the end-to-end suite (test/e2e) proves, exact
# versions separated by spaces. Add one only after the suite passed against it (pin it in package.json, npm test).
#
# Options and exit codes: ./install.sh --help. Bash and coreutils only; node and opencode are used when present.
#
# shellcheck disable=SC2015,SC2317 # `a && b || fail` is meant (fail exits); functions run via act and trap
set -euo pipefail

SUPPORTED_OPENCODE="1.18.33"

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

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)

usage() {
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
                    --uninstall, remove an edited file the same way; install despite an unsupported opencode version
  --uninstall       remove the files this script installed; a file you edited is kept, with a warning
  --example-config  also write a commented example CONFIG/$EXAMPLE_CONFIG_NAME if there is none
                    (never overwrites)
  --check           doctor: prove that the installed plugins load and block in your opencode, inside a throw-away
                    sandbox (temporary HOME and XDG dirs, copies of the installed files, a scripted model on
                    127.0.0.1); your config and sessions are not touched. Needs opencode and node.
  --opencode PATH   the opencode executable for the version check and --check (default: opencode on PATH)
  -h, --help        this text

Supported opencode versions (proven by the end-to-end suite): $SUPPORTED_OPENCODE
When opencode is on PATH and reports another version, the install is refused unless --force.

Exit codes:
  0  done, or nothing to do
  1  error: nothing to install, or a file could not be read or written
  2  usage error: unknown option or bad value
  3  refused: a file in the way is not ours or was edited (nothing was written; see the message), or
     --uninstall kept a file you edited
  4  refused: opencode reports a version outside the supported range (nothing was written)
  5  --check: at least one check failed
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
  printf '%s' "$manifest_text" | while IFS= read -r line; do
    if [ "${line#*  }" = "$1" ]; then
      printf '%s' "${line%%  *}"
      break
    fi
  done
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

only="" dir_arg="" dry_run=0 force=0 mode=install example_config=0 opencode_arg=""

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

# Sets opencode_bin and opencode_version. With the argument "sandboxed", --version runs inside the --check sandbox.
find_opencode() {
  if [ -n "$opencode_arg" ]; then
    [ -x "$opencode_arg" ] && [ ! -d "$opencode_arg" ] ||
      fail "$EXIT_USAGE" "--opencode $opencode_arg is not an executable file"
    opencode_bin=$opencode_arg
    case $opencode_bin in /*) ;; *) opencode_bin=$PWD/$opencode_bin ;; esac
  else
    opencode_bin=$(command -v opencode 2>/dev/null || true)
  fi
  [ -n "$opencode_bin" ] || return 0
  local out
  if [ "${1:-}" = sandboxed ]; then
    out=$(cd "$sandbox/project" && sandboxed 60 "$opencode_bin" --version 2>/dev/null) || out=""
  elif command -v timeout >/dev/null 2>&1; then
    out=$(timeout 60 "$opencode_bin" --version 2>/dev/null) || out=""
  else
    out=$("$opencode_bin" --version 2>/dev/null) || out=""
  fi
  opencode_version=$(printf '%s' "$out" | grep -Eo '[0-9]+\.[0-9]+\.[0-9]+([-+][0-9A-Za-z.-]+)?' | head -n1 || true)
}

version_supported() {
  local v
  for v in $SUPPORTED_OPENCODE; do
    [ "$v" = "$1" ] && return 0
  done
  return 1
}

# The version gate of an install: exits 4 outside the supported versions unless --force.
version_gate() {
  find_opencode
  if [ -z "$opencode_bin" ]; then
    say "opencode is not on PATH: installing anyway. These plugins are proven with opencode $SUPPORTED_OPENCODE;"
    say "  once opencode is installed, run ./install.sh --check (or pass --opencode PATH)."
    return 0
  fi
  if [ -n "$opencode_version" ] && version_supported "$opencode_version"; then
    say "opencode $opencode_version ($opencode_bin): supported"
    return 0
  fi
  local what="reports version $opencode_version"
  [ -n "$opencode_version" ] || what="did not report a version (\`$opencode_bin --version\` failed or printed none)"
  if [ "$force" = 1 ]; then
    warn "opencode at $opencode_bin $what, not one of the supported versions ($SUPPORTED_OPENCODE); installing anyway (--force). Run ./install.sh --check to see whether the plugins work there."
    return 0
  fi
  fail "$EXIT_VERSION" "opencode at $opencode_bin $what; these plugins are proven with opencode $SUPPORTED_OPENCODE only.
  Nothing was written. Either install a supported opencode (npm i -g opencode-ai@${SUPPORTED_OPENCODE%% *}),
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
# file, the key path and the fix; they never stop your session. The full reference is in the project's README.
version: 1

# settings:
#   maxOverrides: 3              # human bypasses (/anchor bypass <reason>) per root session
#   confirmPattern: null         # regex; when set, only user messages matching it confirm
#
# roles:
#   default: software-developer
#   agents: { build: software-developer, plan: software-architect }   # opencode agent name -> role
#
# presets:                       # role -> contract ids; replaces that role's built-in preset
#   software-developer: [step-confirmation, source-anchor, intent-anchor]
#
# contracts:
#   - id: no-force-push          # required, unique, [a-z0-9-]
#     description: Never rewrite shared history.
#     mode: block                # block | warn | info
#     message: Ask the user before any force-push.
#     roles: ["*"]               # absent = every role
#     trigger:
#       type: tool               # tool | message | state
#       tools: [bash]
#       args:
#         command: { regex: '\bgit\s+push\b.*\s(--force|-f)\b' }
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
# --check (doctor): run the user's opencode in a throw-away sandbox with copies of the installed plugins and a
# scripted model, and prove that the plugins load and really block.

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

sandbox=""
keep_sandbox=0
llm_pid=""
cleanup_check() {
  if [ -n "$llm_pid" ]; then
    kill "$llm_pid" 2>/dev/null || true
    wait "$llm_pid" 2>/dev/null || true
  fi
  if [ -n "$sandbox" ] && [ "$keep_sandbox" = 0 ]; then
    rm -rf "$sandbox"
  fi
}

# Runs a command with nothing of the user's environment but PATH: every opencode path points into the sandbox.
# The command is stopped after SECONDS when coreutils' timeout is there, so the doctor never hangs.
sandboxed() { # sandboxed SECONDS COMMAND...
  local limit=()
  if command -v timeout >/dev/null 2>&1; then limit=(timeout "$1"); fi
  shift
  ${limit[@]+"${limit[@]}"} env -i PATH="$PATH" LANG="${LANG:-C.UTF-8}" \
    HOME="$sandbox/home" XDG_CONFIG_HOME="$sandbox/config" XDG_DATA_HOME="$sandbox/data" \
    XDG_STATE_HOME="$sandbox/state" XDG_CACHE_HOME="$sandbox/cache" TMPDIR="$sandbox/tmp" \
    OPENCODE_DISABLE_MODELS_FETCH=1 OPENCODE_DISABLE_AUTOUPDATE=1 OPENCODE_DISABLE_SHARE=1 \
    OPENCODE_DISABLE_LSP_DOWNLOAD=1 \
    npm_config_registry=http://127.0.0.1:9/ npm_config_fetch_retries=0 \
    FAKE_LLM_BASE_URL="${fake_llm_url:-http://127.0.0.1:9/v1}" \
    "$@"
}

# A config dir that already "has" @opencode-ai/plugin, so opencode does not run npm install in it.
seed_config_dir() {
  mkdir -p "$1/node_modules"
  printf '{"dependencies":{"@opencode-ai/plugin":"%s"}}\n' "$opencode_version" >"$1/package.json"
  printf '{"name":"sandbox","lockfileVersion":3,"requires":true,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"%s"}}}}\n' \
    "$opencode_version" >"$1/package-lock.json"
}

create_sandbox() {
  sandbox=$(mktemp -d "${TMPDIR:-/tmp}/opencode-guards-check.XXXXXX") &&
    mkdir -p "$sandbox"/{home,config/opencode/plugins,data,state,cache,tmp,project/.opencode} ||
    fail "$EXIT_ERROR" "could not create a sandbox under ${TMPDIR:-/tmp}; check free space and permissions"
}

fill_sandbox() { # fill_sandbox FILES...: the installed files to copy in
  local name
  for name in "$@"; do
    cp "$plugins_dir/$name" "$sandbox/config/opencode/plugins/$name" || return 1
  done
  seed_config_dir "$sandbox/config/opencode"
  seed_config_dir "$sandbox/project/.opencode"
  cat >"$sandbox/config/opencode/opencode.json" <<'EOF'
{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "model": "fake/fake-model",
  "small_model": "fake/fake-model",
  "provider": {
    "fake": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "install.sh --check scripted model",
      "options": { "baseURL": "{env:FAKE_LLM_BASE_URL}", "apiKey": "not-a-key" },
      "models": { "fake-model": { "name": "fake-model", "tool_call": true, "limit": { "context": 100000, "output": 4096 } } }
    }
  }
}
EOF
  # The contract probe: blocks one harmless command, so nothing happens even if the block fails.
  cat >"$sandbox/project/.opencode/opencode-semantic-anchors.yaml" <<'EOF'
version: 1
contracts:
  - id: doctor-probe
    description: install.sh --check proves that a contract blocks this harmless command.
    mode: block
    message: This block is expected; it is the doctor's probe.
    trigger:
      type: tool
      tools: [bash]
      args:
        command: { contains: "opencode-guards-doctor-probe" }
EOF
  printf 'The doctor reads this file four times; the fourth read must be blocked.\n' >"$sandbox/project/probe.txt"
  if command -v git >/dev/null 2>&1; then
    (cd "$sandbox/project" && git init -q . >/dev/null 2>&1) || true
  fi
}

# Reads opencode's JSON events and the model's request log; prints "ok|detail" or "failed|reason" per probe.
analyse_run() { # analyse_run RUN_JSONL REQUESTS_JSONL WANT_LOOP WANT_CONTRACT
  node - "$@" <<'EOF'
const fs = require("fs");
const [runFile, requestsFile, wantLoop, wantContract] = process.argv.slice(2);
const jsonLines = (file) => {
  let text = "";
  try { text = fs.readFileSync(file, "utf8"); } catch { return []; }
  return text.split("\n").flatMap((l) => { try { return [JSON.parse(l)]; } catch { return []; } });
};
const calls = jsonLines(runFile).filter((e) => e.type === "tool_use" && e.part?.type === "tool").map((e) => e.part);
const requests = jsonLines(requestsFile);
const textOf = (content) =>
  typeof content === "string" ? content
  : Array.isArray(content) ? content.map((p) => (typeof p === "string" ? p : p?.text ?? JSON.stringify(p))).join("\n")
  : JSON.stringify(content ?? "");
// The model saw a message when a later request carries it as a tool result.
const modelSaw = (error) => {
  const firstLine = String(error).split("\n")[0];
  return requests.some((r) => (r.messages ?? []).some((m) => m?.role === "tool" && textOf(m.content).includes(firstLine)));
};
const short = (s) => String(s).split("\n")[0].slice(0, 160);
const report = (name, ok, text) => console.log(`${name}|${ok ? "ok" : "failed"}|${text}`);

if (wantLoop === "1") {
  const reads = calls.filter((c) => c.tool === "read");
  const fourth = reads[3];
  if (reads.length < 4) report("loop", false, `only ${reads.length} read call(s) reached opencode; expected 4`);
  else if (reads.slice(0, 3).some((c) => c.state?.status !== "completed"))
    report("loop", false, `one of the first 3 identical reads did not run (${reads.slice(0, 3).map((c) => c.state?.status).join(", ")}): ${short(reads.find((c) => c.state?.status !== "completed")?.state?.error ?? "")}`);
  else if (fourth.state?.status !== "error") report("loop", false, `the 4th identical read ran (status ${fourth.state?.status}): loop-guard did not block it`);
  else if (!/loop-guard/.test(String(fourth.state.error))) report("loop", false, `the 4th read failed, but not by loop-guard: ${short(fourth.state.error)}`);
  else if (!modelSaw(fourth.state.error)) report("loop", false, "the 4th read was blocked, but the model's next request did not carry the message");
  else report("loop", true, `reads 1-3 ran, the 4th was blocked and the model read: "${short(fourth.state.error)}"`);
}
if (wantContract === "1") {
  const probe = calls.find((c) => c.tool === "bash");
  if (!probe) report("contract", false, "the probe's bash call never reached opencode");
  else if (probe.state?.status !== "error") report("contract", false, `the probe command ran (status ${probe.state?.status}): the contract did not block it`);
  else if (!/doctor-probe/.test(String(probe.state.error))) report("contract", false, `the probe failed, but not by the contract: ${short(probe.state.error)}`);
  else if (!modelSaw(probe.state.error)) report("contract", false, "the probe was blocked, but the model's next request did not carry the message");
  else report("contract", true, `the probe command was blocked and the model read: "${short(probe.state.error)}"`);
}
EOF
}

start_fake_llm() { # start_fake_llm SCRIPT LOG: sets fake_llm_url, or returns 1
  local out=$sandbox/fake-llm.out
  node "$here/test/e2e/fake-llm.mjs" "$1" "$2" >"$out" 2>"$sandbox/fake-llm.err" &
  llm_pid=$!
  for _ in $(seq 1 100); do
    fake_llm_url=$(sed -n 's/^FAKE_LLM_BASE_URL=//p' "$out" 2>/dev/null | head -n1)
    [ -n "$fake_llm_url" ] && return 0
    kill -0 "$llm_pid" 2>/dev/null || break
    sleep 0.1
  done
  return 1
}

run_check() {
  trap cleanup_check EXIT
  say "install.sh --check: doctor for the plugins in $plugins_dir"

  # 1. opencode and its version (asked inside the sandbox: even --version creates opencode's data dirs).
  create_sandbox
  find_opencode sandboxed
  if [ -z "$opencode_bin" ]; then
    check_failed "opencode" "not found on PATH; install opencode $SUPPORTED_OPENCODE, or pass --opencode PATH"
  elif [ -z "$opencode_version" ]; then
    check_failed "opencode" "$opencode_bin did not report a version in the sandbox (temporary HOME, only PATH kept); run '$opencode_bin --version' to see why; if it is a shim (volta, asdf), pass the real binary with --opencode PATH"
  else
    check_ok "opencode" "$opencode_bin, version $opencode_version"
    if version_supported "$opencode_version"; then
      check_ok "opencode version supported" "$SUPPORTED_OPENCODE"
    else
      check_failed "opencode version supported" "$opencode_version is not one of $SUPPORTED_OPENCODE, the versions the end-to-end suite proves"
    fi
  fi

  # 2. The installed files, against the manifest.
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
  if [ -z "$plugins" ]; then
    check_failed "plugins installed" "no plugin file in $plugins_dir; run ./install.sh${only:+ --only $only} first"
  fi
  if [ -z "$plugins" ] || [ -z "$opencode_version" ]; then
    say "$checks_ok ok, $checks_failed failed"
    exit "$EXIT_CHECK_FAILED"
  fi

  # 3. Discovery: opencode debug config in the sandbox lists the copies as file:// plugins.
  # shellcheck disable=SC2086 # word splitting of the file list is intended
  fill_sandbox $installed || fail "$EXIT_ERROR" "could not copy the installed files into the sandbox $sandbox"
  local debug_out=$sandbox/debug-config.json missing=""
  if (cd "$sandbox/project" && sandboxed 120 "$opencode_bin" debug config >"$debug_out" 2>"$sandbox/debug-config.err"); then
    for name in $plugins; do
      grep -q "\"file://[^\"]*/plugins/$name\"" "$debug_out" || missing="$missing $name"
    done
    if [ -z "$missing" ]; then
      check_ok "plugins discovered (opencode debug config)" "${plugins# }"
    else
      check_failed "plugins discovered (opencode debug config)" "not listed:$missing; see $debug_out"
    fi
  else
    check_failed "plugins discovered (opencode debug config)" "opencode debug config failed: $(tail -n 3 "$sandbox/debug-config.err" | tr '\n' ' ')"
  fi

  # 4. Blocking, in a real run against the scripted model.
  local want_loop=0 want_contract=0 ran=0
  case " $plugins " in *" loop-guard.ts "*) want_loop=1 ;; esac
  case " $plugins " in *" semantic-anchors.ts "*) want_contract=1 ;; esac
  if ! command -v node >/dev/null 2>&1; then
    check_failed "blocking run" "node is not on PATH; the scripted model is a Node script (install Node 20+)"
  elif [ ! -f "$here/test/e2e/fake-llm.mjs" ]; then
    check_failed "blocking run" "$here/test/e2e/fake-llm.mjs is missing; run --check from a complete checkout"
  else
    local script=$sandbox/script.json steps="" read_step
    read_step="{\"tool\":\"read\",\"args\":{\"filePath\":\"$sandbox/project/probe.txt\"}}"
    [ "$want_loop" = 0 ] || steps="$read_step,$read_step,$read_step,$read_step,"
    [ "$want_contract" = 0 ] ||
      steps="$steps{\"tool\":\"bash\",\"args\":{\"command\":\"echo opencode-guards-doctor-probe\",\"description\":\"doctor probe\"}},"
    printf '[%s{"text":"The doctor run is over."}]\n' "$steps" >"$script"
    if ! start_fake_llm "$script" "$sandbox/requests.jsonl"; then
      check_failed "blocking run" "the scripted model did not start: $(tr '\n' ' ' <"$sandbox/fake-llm.err" | cut -c1-300)"
    else
      local run_out=$sandbox/run.jsonl run_rc=0
      ran=1
      (cd "$sandbox/project" && sandboxed 180 "$opencode_bin" run --format json --model fake/fake-model \
        "install.sh doctor run" >"$run_out" 2>"$sandbox/run.err") || run_rc=$?
      if [ "$run_rc" != 0 ]; then
        check_failed "opencode run in the sandbox" "exit $run_rc: $(tail -n 3 "$sandbox/run.err" | tr '\n' ' ' | cut -c1-300)"
      fi
      local results line kind status detail
      results=$(analyse_run "$run_out" "$sandbox/requests.jsonl" "$want_loop" "$want_contract") || true
      while IFS= read -r line; do
        [ -n "$line" ] || continue
        kind=${line%%|*}
        line=${line#*|}
        status=${line%%|*}
        detail=${line#*|}
        case $kind in
          loop) kind="loop-guard blocks the 4th identical read" ;;
          contract) kind="semantic-anchors blocks a contract" ;;
        esac
        if [ "$status" = ok ]; then check_ok "$kind" "$detail"; else check_failed "$kind" "$detail"; fi
      done <<<"$results"
      if [ -z "$results" ]; then
        check_failed "blocking run" "could not read opencode's output; see $run_out"
      fi
    fi
  fi

  # 5. opencode's log of that run: a plugin whose server() threw is skipped with "failed to load plugin".
  local logs="" failures=""
  [ "$ran" = 0 ] || logs=$(cat "$sandbox"/data/opencode/log/*.log 2>/dev/null || true)
  for name in $plugins; do
    line=$(printf '%s\n' "$logs" | grep -F 'failed to load plugin' | grep -F "/plugins/$name" | head -n1 || true)
    [ -z "$line" ] || failures="$failures $name: $(printf '%s' "$line" | sed -n 's/.* error=//p' | cut -c1-200);"
  done
  if [ "$ran" = 0 ]; then
    : # no run, no evidence either way: the blocking check above has already failed
  elif [ -z "$logs" ]; then
    check_failed "plugins loaded (opencode's log)" "opencode wrote no log under $sandbox/data/opencode/log"
  elif [ -n "$failures" ]; then
    check_failed "plugins loaded (opencode's log)" "opencode logged 'failed to load plugin' for${failures%;}"
  else
    check_ok "plugins loaded (opencode's log)" "no 'failed to load plugin' for ${plugins# }"
  fi

  say "$checks_ok ok, $checks_failed failed"
  if [ "$checks_failed" != 0 ]; then
    keep_sandbox=1
    say "the sandbox is kept for a look: $sandbox (opencode's log: $sandbox/data/opencode/log/; delete it when done)"
    exit "$EXIT_CHECK_FAILED"
  fi
  say "the installed plugins load and block in this opencode. Restart opencode if it is running."
}

case $mode in
  install) run_install ;;
  uninstall) run_uninstall ;;
  check) run_check ;;
esac
exit "$EXIT_OK"
