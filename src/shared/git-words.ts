/**
 * Git's global options, its subcommand, and the subcommands that only read (`gitGlobals`, `isReadOnlyGit`).
 */
import { NO_WORDS } from "./bash-scan"

/** git subcommands that never write (besides `branch`, `diff`, `log` and `show`, checked with their options). */
const READ_ONLY_GIT = new Set([
  "status",
  "blame",
  "rev-parse",
  "ls-files",
  "describe",
  "shortlog",
  "grep",
  "cat-file",
  "ls-tree",
])

/** `git branch` options that list or filter; anything else (-d, -D, -m, -c, -u, --set-upstream-to, a name) changes. */
const GIT_BRANCH_LISTING =
  /^(-a|--all|-r|--remotes|-v+|--verbose|-l|--list|--show-current|--contains|--no-contains|--merged|--no-merged|--points-at|--sort(=.*)?|--format(=.*)?|--color(=.*)?|--no-color|--column(=.*)?|--no-column|-i|--ignore-case|--abbrev(=.*)?|--no-abbrev)$/

/**
 * git's global options, before the subcommand: where the subcommand stands, the words of the options (-C DIR,
 * --git-dir=, --work-tree= name directories: read, so a guard name there counts), and whether one sets a config
 * value (-c KEY=VALUE, --config-env), which may be a command git runs (core.fsmonitor on status, diff.external on
 * diff, core.pager).
 */
export function gitGlobals(args: string[]): { at: number; global: string[]; setsConfig: boolean } {
  const at = gitSubcommandAt(args)
  let setsConfig = false
  for (let k = 0; k < at; k++) if (args[k] === "-c" || args[k].startsWith("--config-env")) setsConfig = true
  const global = at === 0 ? NO_WORDS : args.slice(0, at).map((arg) => arg.replace(/^--(git-dir|work-tree)=/, ""))
  return { at, global, setsConfig }
}

/** Where git's subcommand stands: after its global options, `-C DIR` and `-c KEY=VALUE` taking the next word. */
export function gitSubcommandAt(args: readonly string[]): number {
  let at = 0
  while (at < args.length && args[at].startsWith("-")) at += GIT_VALUE_GLOBALS.has(args[at]) ? 2 : 1
  return at
}

/** git's global options that take the next word as their value (git(1)): `git --git-dir repo/.git reset`. */
export const GIT_VALUE_GLOBALS = new Set([
  "-C",
  "-c",
  "--git-dir",
  "--work-tree",
  "--namespace",
  "--config-env",
  "--super-prefix",
  "--attr-source",
])

export function isReadOnlyGit(args: string[], globals = gitGlobals(args)): boolean {
  const { at, setsConfig } = globals
  if (setsConfig) return false
  const sub = args[at]
  if (sub === undefined) return true
  if (sub === "diff" || sub === "log" || sub === "show") {
    // the commonest git calls of all: asked without slicing
    for (let k = at + 1; k < args.length; k++) if (args[k].startsWith("--output")) return false
    return true
  }
  const rest = args.slice(at + 1)
  if (sub === "branch") return isBranchListing(rest)
  if (sub === "remote")
    return rest.every((arg) => arg === "-v" || arg === "--verbose") || /^(show|get-url)$/.test(rest[0])
  if (sub === "stash") return /^(list|show)$/.test(rest[0] ?? "")
  if (sub === "tag") return rest.length === 0 || rest.includes("-l") || rest.includes("--list")
  if (sub === "config")
    return rest.some((arg) => arg === "--get" || arg === "--list" || arg === "-l" || arg === "--get-all")
  return READ_ONLY_GIT.has(sub)
}

/**
 * `git branch` lists when every word is a listing option, or a value of one (`--contains HEAD`); with `-l`/`--list`
 * the other words are patterns. A bare name creates a branch.
 */
function isBranchListing(args: string[]): boolean {
  const listing = args.includes("-l") || args.includes("--list")
  return args.every((arg, i) => {
    if (GIT_BRANCH_LISTING.test(arg)) return true
    if (arg.startsWith("-")) return false
    return listing || BRANCH_VALUE_OPTIONS.has(args[i - 1] ?? "")
  })
}
const BRANCH_VALUE_OPTIONS = new Set([
  "--contains",
  "--no-contains",
  "--merged",
  "--no-merged",
  "--points-at",
  "--sort",
  "--format",
])

/**
 * `git stash [push] -u|--include-untracked|-a|--all [-- PATHSPEC...]` takes untracked files out of the tree (the
 * guard's, when they are untracked): it writes its pathspecs, `.` when none. Undefined when it stashes tracked files
 * only, or is another stash subcommand (`list`, `show`, `pop`).
 */
export function gitStashUntracked(rest: string[]): string[] | undefined {
  const at = rest[0] === "push" || rest[0] === "save" ? 1 : 0
  if (at < rest.length && !rest[at].startsWith("-")) return undefined
  const untracked = (w: string) => w === "--include-untracked" || w === "--all" || /^-[a-zA-Z]*[ua]/.test(w)
  const dashes = rest.indexOf("--")
  const options = dashes === -1 ? rest.slice(at) : rest.slice(at, dashes)
  if (!options.some(untracked)) return undefined
  const paths = dashes === -1 ? [] : rest.slice(dashes + 1)
  return paths.length ? paths : ["."]
}

/**
 * Whether a word of `git clean`, `git rm` or `git mv` asks for a dry run: `-n` (alone or among other letters) or
 * `--dry-run` by any prefix git takes (`--dry-r`; it is the only long option of the three that starts with `d`).
 */
export function isGitDryRun(word: string): boolean {
  return /^-[a-zA-Z]*n/.test(word) || (word.length >= 3 && "--dry-run".startsWith(word))
}

/** `git clean` deletes untracked files under its paths, the current directory when none is given; -n only lists. */
export function gitCleanArgs(rest: string[]): string[] | undefined {
  if (rest.some(isGitDryRun)) return undefined
  const args = rest.filter((w, i) => !w.startsWith("-") && rest[i - 1] !== "-e" && rest[i - 1] !== "--exclude")
  return args.length ? args : ["."]
}
