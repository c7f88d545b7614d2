/**
 * The types more than one layer of semantic-anchors shares, in one module before all of them: config problems, the
 * plugin's paths, the engine's environment, a command pattern, the default protection's checks and discards, the work
 * ledger and a step's reservation. A module imports from the modules before it only (the build checks it, types
 * too), so a type that a lower module and a higher one both use lives here.
 */
import type { RanCommand } from "../shared/bash-programs"
import type { RecentMap } from "../shared/recent-map"

export type Severity = "error" | "warning"

export type Problem = { severity: Severity; file: string; keyPath: string; text: string }

export type Raw = Record<string, unknown>

/** Where the plugin looks, resolved once from the plugin input and the environment. */
export type Paths = {
  directory: string
  worktree: string
  home: string
  tmpdir: string // $TMPDIR, else /tmp: where a command rule's `$TMPDIR` points
  dataDir: string // ${XDG_DATA_HOME:-$HOME/.local/share}/opencode: opencode's own credentials (protect-secrets)
  globalDir: string // ${XDG_CONFIG_HOME:-$HOME/.config}/opencode
  globalFile: string // the global file, or the one OPENCODE_SEMANTIC_ANCHORS_CONFIG names
  globalFromEnv: boolean
  projectFile: string
}

/** What a matcher needs besides the value: paths are matched relative to the project when they lie inside it. */
export type MatchContext = { directory: string; worktree: string }

/**
 * The guard's own files: config files, opencode config, plugin directories. `mentioned` holds when a text contains
 * any of `mentions` (one regex test instead of a search per name, on every bash call).
 */
export type GuardFiles = { exact: Set<string>; roots: string[]; mentions: string[]; mentioned: RegExp }

/** Resolves symbolic links of a path that exists (or of its parent); the identity where nothing is known. */
export type RealPath = (abs: string) => string

/** What the engine needs from outside: paths, the guard's files, and a realpath (the only file-system access). */
export type EngineEnv = { paths: Paths; guard: GuardFiles; match: MatchContext; realpath: RealPath }

/** One flag of a pattern: any of its spellings (`{-f,--force-with-lease}`); a spelling's names all present (`-rf`). */
export type FlagSpelling = { names: string[]; value?: string }

export type PatternFlag = { any: FlagSpelling[]; absent: boolean }

/** One operand of a pattern: any of its globs; `path`: matched as a resolved path; `excluded`: `!glob`. */
export type PatternOperand = { globs: string[]; path: boolean; excluded: boolean }

export type CommandPattern = {
  text: string // as written, for the explanations
  programs: string[]
  subcommands: string[][] // each position's alternatives
  flags: PatternFlag[]
  operands: PatternOperand[]
  named: RegExp[] // what code the reader cannot follow must name (program, subcommands, each flag), each a regex
  keys: string[] // `program subcommand` (or `program`) for each alternative: one must be among a call's (ranIndex)
}

/**
 * What a path operand's `$VAR`s and `~` stand for: the project, the home and the temporary directory; and
 * opencode's data directory, where its own credentials lie (protect-secrets).
 */
export type PathPlaces = { directory: string; project: string; home: string; tmpdir: string; dataDir: string }

/**
 * A check of one simple command for what a pattern cannot say: what it would destroy, in words (`deletes /etc,
 * outside the project`), or undefined. `programs`: the commands it looks at; `keys`: the runs screen's keys for
 * them (`git checkout`), the programs when absent.
 */
export type ProtectCheck = {
  programs: string[]
  keys?: string[]
  check(ran: RanCommand, places: PathPlaces, work: WorkView | undefined, line: LineLoops): string | undefined
}

/** What a built-in tool trigger checks besides its patterns. */
export type Protection = { checks: ProtectCheck[]; keys: string[] }

/**
 * What a git command would throw away of uncommitted work: changes to files named by pathspecs (`checkout -- f`,
 * `restore f`, `checkout f`, whose first word may be a branch), tracked changes in the whole tree (`reset --hard`,
 * `checkout -f`, `switch -f`), untracked (and, with -x, ignored) files (`clean -f`), or a stash entry (`stash drop`,
 * `stash clear`). `cwd`: where git runs (the line's `cd`s, git's `-C`), where pathspecs resolve.
 */
export type Discard =
  | { kind: "paths"; specs: string[]; cwd: string; text: string }
  | { kind: "tree"; cwd: string; text: string }
  | { kind: "clean"; specs: string[]; ignored: boolean; cwd: string; text: string }
  | { kind: "stash"; clear: boolean; entry: string; cwd: string; text: string }
  | FileDiscard

/**
 * A file command that deletes or overwrites files (`rm`, `mv` onto a file, `truncate`, ...): `paths`, absolute, each
 * a file or a tree it loses (a glob as written: `*.txt`); `onto`, a copy or move whose loss depends on its
 * destination (a file: it is lost; a directory: the file of each source's name in it); `unknown`, why what it loses
 * cannot be told (a path held in a variable). `secrets`: the person's secret files among `paths`, lost even when git
 * ignores them.
 */
export type FileDiscard = {
  kind: "files"
  paths: string[]
  onto?: Onto
  unknown?: string
  secrets: string[]
  /** `paths` are find's selections: its globs match a leading dot, unlike the shell's. */
  found?: boolean
  /** find's `-iname`: its globs match in any case. */
  icase?: boolean
  /** It deletes a folder with all it holds (`rm -r`, find), not only the names it is given. */
  deep?: boolean
  /** The paths written with a trailing `/`: a link there is followed to its folder (`rm -rf alias/` empties it). */
  slashed?: string[]
  cwd: string
  text: string
}

/**
 * A copy or move onto `dest`: into it when it is a directory (`dir` true: `-t`; false: `-T`; undefined: as the disk
 * says), each source's name there lost, or onto it when it is a file. `spread`: the files a loop moves onto the one
 * name (`for f in *.txt; do mv "$f" out; done`): when `dest` is no directory, all but the last are lost; null when
 * the loop's files cannot be told.
 */
export type Onto = { dest: string; names: string[]; dir: boolean | undefined; spread?: string[] | null }

/**
 * What the work ledger found for one call's discards and file commands, before its decision (CallFacts): by simple
 * command (ranKey), what it would lose that is not the agent's own (null: nothing), or while git has not answered,
 * why it is protected. A simple command with no entry discards nothing.
 */
export type WorkView = Map<string, string | null>

/** One call's facts, computed once and carried with the call to every contract that judges it. */
export type CallFacts = { tool: string; args: unknown; changing?: boolean; work?: WorkView }

/**
 * The values a line gives its variables: a `for NAME in WORDS` loop's words, a plain `NAME=WORD` before the
 * command; `loop`: the line has a loop (a `for`, or a `while` whose files are not known), `other` one of another
 * kind.
 */
export type LineLoops = { vars: Map<string, string[]>; loop: boolean; other: boolean }

/** What `git status --porcelain=v2` said: changed tracked files, untracked (and ignored) files and directories. */
export type TreeState = { tracked: Set<string>; untracked: Set<string>; dirs: string[]; detached: boolean }

/**
 * A `git status` of the whole tree, asked in the background: its state, or why there is none; `at`: when git was
 * started (a file whose change time is older is as the snapshot saw it).
 */
export type Snapshot = { state?: TreeState; fault?: string; pending?: Promise<void>; at?: number }

/**
 * A file the agent changed: the snapshot taken before it first did, and its stamp after its last change; `other`:
 * someone changed it between two changes of the agent's (its stamp had moved when the agent changed it again), so
 * what it holds is not the agent's alone, until the agent puts it back as committed; `seen`: when its stamp was last
 * found as the agent left it (at the stamp, or by a check), by `performance.now()` (a clock that never steps back).
 */
export type OwnedFile = { before: Snapshot | undefined; stamp?: string; other?: boolean; seen?: number }

export type WorkLedger = {
  owned: RecentMap<OwnedFile> // absolute path -> what the agent did to it; beyond MAX_OWNED_FILES the oldest is forgotten
  baseline?: Snapshot // the first snapshot of the session: what was there before it changed anything
  snapshot?: Snapshot // the latest
  runs: Run[] // the agent's commands the reader cannot follow, oldest first, the latest MAX_RUNS
  stash: boolean[] // the stash entries the agent made in this session, oldest first: true when all its own work
  afterCall: RecentMap<AfterCall> // callID -> what to do once that call ran
  checks?: { last: number } // the background checks of the agent's files run; `last`: the session's last call (performance.now())
}

/** What a call's after hook does: stamp the files it wrote, record its stash entries, end its run. */
export type AfterCall = {
  stamp: string[] // the files it writes: the agent's as they are after it
  reverted: string[] // the agent's files a git discard of it puts back as committed
  stash: ("push-own" | "push-other" | "pop" | "clear")[]
  run?: Run
}

/**
 * A command of the agent's that the reader cannot follow (a script, `python3 -c`, `make`): when it ran, from `at`
 * (its before hook) to `end` (its after hook), the snapshot before it, and the agent's own files as it left them when
 * it began. No process is started for it: a file whose change time lies in a run was changed by it (CHANGE_SLACK_MS either
 * side), so it is the agent's, when it was clean in the snapshot before the run or the agent's own as it left it.
 */
export type Run = { at: number; end: number; base: Snapshot | undefined; own: Set<string> }

/** What one allowed call was counted for, to give back if it turns out not to have run. */
export type Reservation = { steps: readonly string[]; dirs: readonly string[] } // the plan's list and topDirs': not copied
