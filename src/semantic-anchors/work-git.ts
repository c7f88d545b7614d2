/**
 * The work ledger's I/O: git asked with a bound (askGit), file stamps, the snapshot at a user message, and a discard
 * judged on its own call; every fault protects and is logged once.
 */
import { process, clearTimeout, performance, setTimeout } from "./constants"
import {
  newLedger,
  type LostKinds,
  ranKey,
  lateText,
  GIT_LATE,
  WORK_GIT_MS,
  WORK_MAX_OUTPUT,
  parseStatus,
  type Whose,
  whoseChange,
  lossText,
  type FileNow,
  MAX_OWN_STAMPED,
  CHECK_EVERY_MS,
  CHECK_FRESH_MS,
  CHECK_FOR_MS,
  MAX_RUNS,
  runAt,
  endRunAt,
  changedIn,
  CHANGE_SLACK_MS,
  statusEntries,
} from "./work-ledger"
import {
  discardOf,
  fileDiscardOf,
  lineLoops,
  FILE_DISCARD_PROGRAMS,
  GLOB,
  globBelow,
  isVariable,
  WHOLE_TREE,
} from "./protection"
import type {
  FileDiscard,
  Snapshot,
  Discard,
  WorkLedger,
  AfterCall,
  OwnedFile,
  Run,
  TreeState,
  WorkView,
} from "./types"
import { oneLine, relativeInside, resolvePath, isInside, globToRegExp } from "./names"
import { Anchors, type HookInput, realpathOf } from "./runtime"
import type { SessionState } from "./sessions"
import { PROTECTION_IDS } from "./model"
import { type CommandReading, type RanCommand, ranArgs, readCommand } from "../shared/bash-programs"
import { gitSubcommandAt } from "../shared/git-words"
import { isMapping } from "./problems"
import { ranIndex, pathPlaces, resolveOperand } from "./command-patterns"
import { EDIT_TOOLS } from "../shared/tools"
import { editTargets } from "./integrity"
// @ts-ignore -- node:child_process is built into Bun too: git is asked, with a bound, what a discard would lose.
import { execFile } from "node:child_process"
// @ts-ignore -- no Node types in this zero-dependency project; node:fs is built into Bun, which runs the plugin.
import { lstatSync, readdirSync, statSync } from "node:fs"
type GitAnswer = { out: string } | { fault: string }
/** How every question about the tree starts: a submodule's changes listed whatever the person's config says. */
const STATUS = ["status", "--porcelain=v2", "-z", "--ignore-submodules=none"]
const NOT_A_REPOSITORY = "the project is not a git repository"
const NOT_A_REPOSITORY_FILES =
  "the project is not a git repository, so there is no record of whose files are whose: file commands (rm, mv, cp, truncate) run, and only the other protections apply to them"

/**
 * One question to git in the repository, never longer than WORK_GIT_MS (its own timer too, in case the kill is not
 * enough), never throwing: its output, or why there is none, in words for the log.
 */
function askGit(cwd: string, args: string[]): Promise<GitAnswer> {
  return new Promise<GitAnswer>((resolve) => {
    let done = false
    const finish = (answer: GitAnswer) => {
      if (!done) resolve(answer)
      done = true
      clearTimeout(timer)
    }
    const timer = setTimeout(() => finish({ fault: GIT_LATE }), WORK_GIT_MS + 250)
    try {
      const env = { ...process.env, GIT_OPTIONAL_LOCKS: "0", LC_ALL: "C", GIT_TERMINAL_PROMPT: "0" }
      // `-C DIR`, not the process's cwd: a directory that is gone is then git's own error, not a failed spawn
      execFile(
        "git",
        ["-C", cwd, ...args],
        { env, timeout: WORK_GIT_MS, killSignal: "SIGKILL", maxBuffer: WORK_MAX_OUTPUT, encoding: "utf8" },
        (error: any, stdout: string, stderr: string) =>
          finish(error ? { fault: gitFault(error, stderr) } : { out: stdout }),
      )
    } catch (error) {
      finish({ fault: `git could not be started (${oneLine(String(error), 120)})` })
    }
  })
}

function gitFault(error: any, stderr: string): string {
  if (error?.code === "ENOENT") return "git is not installed"
  if (error?.killed || error?.signal) return GIT_LATE
  if (/maxBuffer/i.test(String(error?.message))) return "the tree is too large to judge"
  if (/not a git repository/i.test(stderr)) return NOT_A_REPOSITORY
  return `git failed (${oneLine(String(stderr || error?.message || error), 120)})`
}

const loggedWorkFaults = new WeakMap<Anchors, Set<string>>()

/** Says once per process and kind of fault that discards are protected because of it. */
export function workFault(anchors: Anchors, fault: string): void {
  logOnce(
    anchors,
    `cannot tell whose uncommitted work a discard would throw away: ${fault}; such discards are protected (blocked)`,
  )
}

/** A warning in the log, once per process. */
function logOnce(anchors: Anchors, message: string): void {
  let logged = loggedWorkFaults.get(anchors)
  if (!logged) loggedWorkFaults.set(anchors, (logged = new Set()))
  if (logged.has(message) || logged.size > 32) return
  logged.add(message)
  anchors.log("warn", message)
}

/** The repository's root: the opencode worktree, when opencode found one (it says `/` when there is none). */
function workRoot(anchors: Anchors): string | undefined {
  return anchors.paths.worktree !== "/" ? anchors.paths.worktree : undefined
}

/** A file's stamp (its size and modification time, or `gone`) and change time; read only for a file a discard names, or
 * one the agent changed. */
function lookFile(abs: string): FileNow {
  return fileNow(statOf(abs, lstatSync))
}

function fileNow(stat: { size: number; mtimeMs: number; ctimeMs: number } | undefined): FileNow {
  // the run is dated by the change time: an unpacked or `cp -p` file keeps an old mtime, never an old ctime
  return stat ? { stamp: `${stat.size}:${stat.mtimeMs}`, changed: stat.ctimeMs } : { stamp: "gone" }
}

/** A path's stat, or undefined when nothing is there (a name too long, a file where a directory would be, a loop
 * of links: nothing can be there either); no exception for the common case (a throw costs more than the stat). */
function statOf(
  abs: string,
  stat: typeof lstatSync,
): { size: number; mtimeMs: number; ctimeMs: number; isDirectory(): boolean } | undefined {
  try {
    return stat(abs, { throwIfNoEntry: false })
  } catch {
    return undefined
  }
}

function stampOf(abs: string): string {
  return lookFile(abs).stamp
}

/** Whether the default protection of uncommitted work applies to this session's role (else no git is asked). */
function guardsWork(anchors: Anchors, state: SessionState): boolean {
  return anchors.inForce(state, PROTECTION_IDS[1])
}

/**
 * At a user message: a snapshot of the tree in the background (nothing waits on it here), the session's baseline
 * when it is its first. One at a time per session.
 */
export function snapshotTree(anchors: Anchors, state: SessionState): void {
  const root = workRoot(anchors)
  if (!guardsWork(anchors, state)) return
  const ledger = (state.work ??= newLedger())
  endRunAt(ledger.runs[ledger.runs.length - 1], Date.now()) // a run never ended by its hooks ends by the person's turn
  keepChecking(ledger)
  if (ledger.snapshot?.pending) return
  if (!root) {
    ledger.snapshot = { fault: NOT_A_REPOSITORY }
    ledger.baseline ??= ledger.snapshot
    workFault(anchors, NOT_A_REPOSITORY) // said at the first message, not only at a discard: the log has it early
    return
  }
  ledger.snapshot = treeSnapshot(root)
  ledger.baseline ??= ledger.snapshot
}

/** git's answer on what a discard would throw away: the changed files (relative to the root), or a fault. */
async function discardedFiles(root: string, discard: Discard): Promise<{ files: string[] } | { fault: string }> {
  if (!isInside(discard.cwd, root)) return { fault: "it runs in a directory outside the project's repository" }
  const specs: string[] = []
  if (discard.kind === "paths" || discard.kind === "clean")
    for (const spec of discard.specs) {
      if (spec === WHOLE_TREE) {
        specs.push(".") // git runs at the root
        continue
      }
      if (spec.startsWith(":")) return { fault: "a pathspec with git's magic" }
      const rel = relativeInside(root, resolvePath(discard.cwd, spec))
      if (rel === undefined) return { fault: "a path outside the project's repository" }
      specs.push(rel)
    }
  if (discard.kind === "clean" && specs.length === 0) specs.push(relativeInside(root, discard.cwd) ?? ".")
  const args = [...STATUS, "--branch"]
  args.push(discard.kind === "clean" ? "--untracked-files=all" : "--untracked-files=no")
  if (discard.kind === "clean" && discard.ignored) args.push("--ignored=matching")
  if (specs.length) args.push("--", ...specs)
  const answer = await askGit(root, args)
  if ("fault" in answer) return answer
  const state = parseStatus(answer.out)
  if (typeof state === "string") return { fault: state }
  if (state.detached) return { fault: "HEAD is detached" }
  if (discard.kind !== "clean") return { files: [...state.tracked] }
  if (state.dirs.length) return { fault: "an untracked directory git did not list file by file" }
  return { files: [...state.untracked] }
}

/**
 * Whether a path inside the root lies in a repository of its own (a submodule, a clone): a folder above it, below the
 * root, holds a `.git` (`self`: the path's own folder counts too, for where git runs). The project's git lists such a
 * repository, never what changed in it, so its answer there would be "nothing". Looked at only when git is about to
 * be asked, on the discard's own call: an `lstat` per folder.
 */
function inNestedRepository(root: string, abs: string, self = false): boolean {
  let dir = self ? abs : abs.slice(0, abs.lastIndexOf("/"))
  for (; dir.length > root.length && dir.startsWith(`${root}/`); dir = dir.slice(0, dir.lastIndexOf("/")))
    if (statOf(`${dir}/.git`, lstatSync)) return true
  return false
}
/**
 * Whether a git discard works in a repository of its own inside the project: it runs in one (`git -C vendor/lib
 * reset --hard`), or names a path there. A name that is no path (`git -C vendor/lib checkout dev`) is a branch or
 * commit, and a switch loses nothing.
 */
function inNestedDiscard(root: string, discard: Discard): boolean {
  if (discard.kind === "stash" || discard.kind === "files") return false
  const specs = discard.kind === "tree" ? [] : discard.specs.filter((spec) => !spec.startsWith(":"))
  const named = specs
    .map((spec) => resolvePath(discard.cwd, spec))
    .filter((abs) => globBelow(abs, root) || fileKind(abs) !== "none")
  if (discard.kind === "paths" && named.length === 0) return false
  return inNestedRepository(root, discard.cwd, true) || named.some((abs) => inNestedRepository(root, abs))
}

/** A pathspec of judgeFiles (`:(literal)a/b`, `:(glob)a/*`) in a repository of its own: a glob by its folder. */
function specInNestedRepository(root: string, spec: string): boolean {
  const abs = `${root}/${spec.replace(/^:\([a-z]*\)/, "")}`
  return globBelow(abs, root)
    ? inNestedRepository(root, globBase(abs, root.length), true)
    : inNestedRepository(root, abs)
}
const IN_SUBMODULE = "a path inside a submodule or another repository, whose changes the project's git does not list"

/** The verdict on one discard: null when all it would lose is the agent's own, else what (for the block). */
async function judgeDiscard(
  anchors: Anchors,
  ledger: WorkLedger,
  discard: Discard,
  pushed: boolean[] = [],
  listed: string[] = [],
): Promise<string | null> {
  const root = workRoot(anchors)
  const protect = (fault: string) => {
    workFault(anchors, fault)
    return `${discard.text} would throw away uncommitted changes, and the plugin cannot tell whose (${fault}): they are protected`
  }
  if (discard.kind === "files") return judgeFiles(anchors, ledger, discard, root)
  if (!root) return protect(NOT_A_REPOSITORY)
  if (discard.kind === "stash") return judgeStash(root, [...ledger.stash, ...pushed], pushed.length, discard, protect)
  await settledSnapshots(ledger)
  const counts: Record<Whose, number> = { own: 0, before: 0, other: 0, unknown: 0 }
  let asked = discard
  if (inNestedDiscard(root, discard)) return protect(IN_SUBMODULE) // before the disk answers: it does not see inside
  if (discard.kind === "paths" || (discard.kind === "clean" && discard.specs.length)) {
    const specs = specsToAsk(ledger, root, discard, counts, listed)
    if (specs.length === 0) return lossText(discard, counts) // the disk answered for every path: no git
    asked = { ...discard, specs }
  }
  const answer = await discardedFiles(root, asked)
  if ("fault" in answer) return protect(answer.fault)
  for (const rel of answer.files) counts[whoseChange(ledger, rel, `${root}/${rel}`, lookFile)]++
  listed.push(...answer.files.map((rel) => `${root}/${rel}`))
  if (counts.unknown && ledger.baseline?.fault) workFault(anchors, ledger.baseline.fault)
  return lossText(discard, counts)
}

/**
 * The pathspecs of a discard of paths (`git checkout f`, `git restore f`, `git rm -f f`, `git clean -f p`) that git
 * must be asked about. The disk answers for the others: the agent's own file (counted as its own, and `listed`, to be
 * stamped as committed after the revert), and a path as the latest snapshot saw it with nothing uncommitted
 * (asSnapshotSaw: `git checkout main`, a branch, no such file; a clean committed file). A glob, git's magic, a
 * variable, a folder, an existing path of `git clean`, a path outside the repository, or a tree whose HEAD is
 * detached or whose latest snapshot failed: git is asked.
 */
function specsToAsk(
  ledger: WorkLedger,
  root: string,
  discard: Discard & { kind: "paths" | "clean" },
  counts: Record<Whose, number>,
  listed: string[],
): string[] {
  if (!sawTree(ledger)) return discard.specs
  return discard.specs.filter((spec) => {
    if (spec.startsWith(":") || GLOB.test(spec) || isVariable(spec)) return true
    const abs = resolvePath(discard.cwd, spec)
    const rel = relativeInside(root, abs)
    const stat = rel === undefined ? undefined : statOf(abs, lstatSync)
    if (rel === undefined || stat?.isDirectory() || (stat && discard.kind === "clean")) return true
    if (stat && whoseChange(ledger, rel, abs, lookFile) === "own") {
      counts.own++
      listed.push(abs)
      return false
    }
    return !asSnapshotSaw(ledger, root, rel)
  })
}

/**
 * Whether a path inside the root is as the latest snapshot saw it, with nothing uncommitted: the snapshot (settled,
 * HEAD not detached) does not list it, and nothing changed since it began, by the change times: the path itself when
 * it is there (an edit, a file moved onto it), each folder above it inside the root (a folder moved keeps its files'
 * change times), and when it is not there, the nearest folder that is (a file deleted since changes its folder). A
 * path not listed and unchanged is clean, or ignored by git (not listed either); a path not there and not listed
 * holds nothing to lose.
 */
function asSnapshotSaw(ledger: WorkLedger, root: string, rel: string): boolean {
  const saw = sawTree(ledger)
  if (!saw || changedIn(saw.state, rel)) return false
  let there = false
  for (let path = `${root}/${rel}`; path.length > root.length; path = path.slice(0, path.lastIndexOf("/"))) {
    const stat = statOf(path, lstatSync)
    if (!stat) continue
    there = true
    if (!before(stat.ctimeMs, saw.at)) return false
  }
  if (there) return true
  const top = statOf(root, lstatSync)
  return top !== undefined && before(top.ctimeMs, saw.at)
}

/**
 * The latest snapshot when the disk may answer by it: settled, with the time git began, and HEAD not detached
 * (a detached HEAD makes "committed" a question for git). Undefined: git is asked.
 */
function sawTree(ledger: WorkLedger): { state: TreeState; at: number } | undefined {
  const { state, at } = ledger.snapshot ?? {}
  return state && !state.detached && at !== undefined ? { state, at } : undefined
}

/**
 * Whether deleting a folder inside the root loses nothing but the agent's own files, read on the disk in place of
 * git (up to MAX_FOLDER_WALK entries): each file in it is the agent's own (counted in `counts`), or as the latest
 * snapshot saw it (not listed, and unchanged since); the folder, each folder in it and each above it unchanged since
 * the snapshot (a file or folder moved in changes its folder, and keeps its own change time), or changed by a run of
 * the agent's, under which only the agent's own files may lie (a folder its script moved in keeps its files' times).
 * A repository inside (`.git`, a submodule), a name beyond ASCII, anything else, or more entries: false, and git is
 * asked.
 */
function folderAsLeft(ledger: WorkLedger, root: string, abs: string, counts: Record<Whose, number>): boolean {
  const saw = sawTree(ledger)
  if (!saw) return false
  const { state, at } = saw
  // a folder's change time: before the snapshot, or in a run of the agent's (then its files must be the agent's)
  const placed = (path: string, changed: number): "before" | "run" | undefined =>
    state.tracked.has(path.slice(root.length + 1)) // a submodule's folder, changed: git tells what it holds
      ? undefined
      : before(changed, at)
        ? "before"
        : runAt(ledger, changed)
          ? "run"
          : undefined
  let aboveRun = false
  for (let path = abs; path.length > root.length; path = path.slice(0, path.lastIndexOf("/"))) {
    const stat = statOf(path, lstatSync)
    const how = stat && placed(path, stat.ctimeMs)
    if (!how) return false
    aboveRun ||= how === "run"
  }
  let own = 0
  let entries = 0
  const folders: [string, boolean][] = [[abs, aboveRun]] // a folder, and whether a run of the agent's changed it or one above
  for (let next = folders.pop(); next !== undefined; next = folders.pop()) {
    const [dir, underRun] = next
    let names: string[]
    try {
      names = readdirSync(dir)
    } catch {
      return false
    }
    for (const name of names) {
      // a name beyond ASCII may be spelled apart from git's (macOS keeps decomposed Unicode, git composes): git tells
      if (++entries > MAX_FOLDER_WALK || name === ".git" || NOT_ASCII.test(name)) return false
      const path = `${dir}/${name}`
      const stat = statOf(path, lstatSync)
      if (!stat) return false
      if (stat.isDirectory()) {
        const how = placed(path, stat.ctimeMs)
        if (!how) return false
        folders.push([path, underRun || how === "run"])
        continue
      }
      const rel = path.slice(root.length + 1)
      const now = fileNow(stat)
      if (whoseChange(ledger, rel, path, () => now) === "own") own++
      else if (underRun || changedIn(state, rel) || !before(stat.ctimeMs, at)) return false
    }
  }
  counts.own += own
  return true
}
const MAX_FOLDER_WALK = 256
const NOT_ASCII = /[^\x00-\x7f]/

/**
 * Whether a change time is older than a time of the clock, with CHANGE_SLACK_MS for the kernel's coarse time, and a
 * second and more for a file system that keeps whole seconds (its times end in .000).
 */
function before(changed: number, at: number): boolean {
  return changed < at - (changed % 1000 === 0 ? COARSE_SLACK_MS : CHANGE_SLACK_MS)
}
const COARSE_SLACK_MS = 2000

/**
 * A file command's verdict: what it deletes or overwrites that git cannot bring back (untracked files that are not
 * ignored, uncommitted changes, the person's secret files even when ignored), by whose it is. The disk is asked first
 * (no process): a copy's destination, a file that is not there (nothing lost), a file of the agent's own left as it
 * was (lost, and its own), a file clean in the latest snapshot and unchanged since (nothing lost), a folder of such
 * files (folderAsLeft); git is asked only about the rest. In a project that is not a git repository there is no
 * baseline: the command runs (logged once; docs/contracts.md, "Files deleted or overwritten").
 */
async function judgeFiles(
  anchors: Anchors,
  ledger: WorkLedger,
  discard: FileDiscard,
  root: string | undefined,
): Promise<string | null> {
  const protect = (fault: string) => {
    workFault(anchors, fault)
    return `${discard.text} would delete or overwrite files, and the plugin cannot tell whose (${fault}): they are protected`
  }
  const runs = () => {
    logOnce(anchors, NOT_A_REPOSITORY_FILES)
    return null
  }
  if (!root) return runs()
  const lost = discard.unknown ?? lostPaths(discard)
  if (typeof lost === "string") {
    await ledger.baseline?.pending // the session's first snapshot says whether there is a repository at all
    return ledger.baseline?.fault === NOT_A_REPOSITORY ? runs() : protect(lost)
  }
  const counts: Record<Whose, number> = { own: 0, before: 0, other: 0, unknown: 0 }
  const kinds: LostKinds = { untracked: 0, changed: 0, secret: 0 }
  const specs: string[] = []
  const passes: string[] = [] // the folders a glob passes (`vendor/*` of `rm vendor/*/x.c`): a repository there counts
  const reach: string[] = [] // the globs and folders: the person's secret files under them are lost too
  const reals = new Map<string, string>() // the folders' real paths, each resolved once (`rm a.py b.py c.py`)
  const realOf = (path: string) => reals.get(path) ?? (reals.set(path, realpathOf(path)), reals.get(path)!)
  for (const written of lost) {
    if (relativeInside(root, written) === undefined) continue // outside the repository: protect-files judges it
    const slashed = discard.slashed?.includes(written) === true
    const abs = globBelow(written, root) ? written : throughLinks(root, realOf, written, slashed)
    if (abs === undefined) return protect(THROUGH_LINK)
    const rel = relativeInside(root, abs) ?? ""
    if (losesRepository(root, abs, discard)) return `${discard.text} would delete ${REPOSITORY}`
    if (GLOB.test(rel)) {
      // what it matches, and all under a matched folder (`rm -rf src/*`); no folder to search: nothing is lost
      if (fileKind(globBase(abs, root.length)) === "dir") {
        const magic = discard.icase ? ":(glob,icase)" : ":(glob)" // find's `-iname`
        specs.push(`${magic}${rel}`, ...(discard.deep ? [`${magic}${rel}/**`] : [])) // `rm -f src/*` keeps src/lib
        passes.push(...globFolders(rel))
        reach.push(abs)
      }
      continue
    }
    const kind = fileKind(abs)
    if (kind === "none") continue // nothing there: nothing lost
    if (kind === "dir" && discard.deep) reach.push(abs)
    if (kind === "file" && whoseChange(ledger, rel, abs, lookFile) === "own") counts.own++
    else if (kind === "dir" ? !folderAsLeft(ledger, root, abs, counts) : !asSnapshotSaw(ledger, root, rel))
      specs.push(`:(literal)${rel}`)
  }
  const named = [...discard.secrets, ...reachedSecrets(reach, anchors.secrets?.files ?? [], root, discard)]
  const secrets = new Set(named.filter((abs) => fileKind(abs) === "file" && !ownsAsLeft(ledger, root, abs)))
  if (specs.length === 0 && secrets.size === 0) return null
  if (specs.length) {
    if (specs.some((spec) => specInNestedRepository(root, spec))) return protect(IN_SUBMODULE)
    await settledSnapshots(ledger)
    const args = [...STATUS, "--untracked-files=all", "--ignored=no", "--", ...specs]
    const [answer, passed] = await Promise.all([askGit(root, args), passedRepository(root, passes)])
    if ("fault" in answer && answer.fault === NOT_A_REPOSITORY) return runs()
    if ("fault" in answer) return protect(answer.fault)
    if (passed) return protect(passed)
    const state = parseStatus(answer.out)
    if (typeof state === "string") return protect(state)
    // asked for every untracked file, git lists a clone whole (`tools/copy/`): deleting it deep loses its files and commits
    if (state.dirs.length && discard.deep) return protect(HOLDS_REPOSITORY)
    for (const rel of [...state.tracked, ...state.untracked]) {
      const abs = `${root}/${rel}`
      secrets.delete(abs)
      const whose = whoseChange(ledger, rel, abs, lookFile)
      counts[whose]++
      if (whose !== "own") kinds[state.untracked.has(rel) ? "untracked" : "changed"]++
    }
  }
  kinds.secret = secrets.size
  return lossText(discard, counts, kinds)
}

/**
 * The folders a glob passes on its way to what it matches, as globs: `v*\/*\/x.c` passes `v*` and `v*\/*`, find's
 * `src/**\/*.pyc` passes `src/**`. Git lists a submodule (or a clone) there, never the files the glob matches in it.
 */
function globFolders(rel: string): string[] {
  const parts = rel.split("/")
  const first = parts.findIndex((part) => GLOB.test(part))
  const folders: string[] = []
  for (let end = first + 1; first >= 0 && end < parts.length; end++) folders.push(parts.slice(0, end).join("/"))
  return folders
}

/**
 * Why a glob's files in a repository of its own cannot be told, or null: among the folders it passes there is a
 * submodule with uncommitted or untracked files in it (porcelain v2's `S.M.`, `S..U`: a moved commit alone loses
 * nothing), or a clone (listed whole, `tools/copy/`). The project's git lists neither's files, so its answer for the
 * glob would be "nothing". A question of its own, asked with the glob's: of what git lists there, only these count.
 */
async function passedRepository(root: string, folders: string[]): Promise<string | null> {
  if (folders.length === 0) return null
  const specs = folders.flatMap((folder) => [`:(glob)${folder}`, `:(glob)${folder}/**`])
  const answer = await askGit(root, [...STATUS, "--untracked-files=all", "--ignored=no", "--", ...specs])
  if ("fault" in answer) return answer.fault
  const passed = (path: string) => folders.some((folder) => anyBracketGlob(folder, false).test(path))
  for (const { line, path, sub } of statusEntries(answer.out)) {
    if (line[0] === "?" && path.endsWith("/") && passed(path.slice(0, -1))) return HOLDS_REPOSITORY
    if (sub !== undefined && /^S.(?:M.|.U)$/.test(sub) && passed(path)) return IN_SUBMODULE
  }
  return null
}
const HOLDS_REPOSITORY =
  "a folder it reaches holds another repository, whose files and commits the project's git does not hold"

/**
 * Whether a file command deletes the project's repository (`.git` at the root: it was there when opencode started,
 * so it is the person's), or a folder of it, with all it holds: named, or matched by a glob (`rm -rf .g*`, `rm -rf
 * .git/*`, find's `-name .git`). A file inside it (`rm -f .git/index.lock`) is git's business, and `rm .git` without
 * `-r` deletes no folder.
 */
function losesRepository(root: string, abs: string, discard: FileDiscard): boolean {
  const rel = abs.slice(root.length + 1) // the root's own path may hold `[` or `*`: only what is under it is a glob
  if (discard.found && findsHistory(root, rel, discard)) return true
  if (!discard.deep) return false
  if (HISTORY.some((folder) => isInside(rel, folder))) return true // `.git/objects/pack`, `.git/refs/*`
  if (!GLOB.test(rel)) return rel === ".git"
  const glob = discardGlob(rel, discard)
  return [".git", ...HISTORY].some((folder) => glob.test(folder))
}
/**
 * Whether find's name test, searched for where the repository lies, selects what holds its commits and branches:
 * find goes into `.git` as into any folder. Under `.git/objects` or `.git/refs`, anything it selects does. From the
 * project's root or `.git`: a name that a pack, its index or a branch's file there has (read on the disk:
 * `find . -name '*.pack' -delete`, `find . -name main -delete`), or that a loose object may have (38 hex digits, its
 * folder 2: `find . -name '0*' -delete`).
 */
function findsHistory(root: string, rel: string, discard: FileDiscard): boolean {
  const at = rel.indexOf("**/")
  if (at < 0 || rel.endsWith("/**")) return false
  const base = at === 0 ? "" : rel.slice(0, at - 1)
  if (HISTORY.some((folder) => isInside(base, folder))) return true
  if (base !== "" && base !== ".git") return false
  const name = rel.slice(rel.lastIndexOf("/") + 1)
  const git = `${root}/.git`
  const objectName = mayNameObject(discard.icase ? name.toLowerCase() : name, discard.deep === true)
  // the loose objects' folders, `pack` and `info`: read once, and only when one of the tests below asks
  const objects = objectName || discard.deep ? listed(`${git}/objects`) : []
  if (objectName && objects.some((folder) => /^[0-9a-f]{2}$/.test(folder))) return true
  const glob = discardGlob(name, discard)
  const names = [
    ...listed(`${git}/objects/pack`),
    ...(discard.deep ? objects : []), // `find . -name pack -exec rm -rf {} +`
    ...refNames(`${git}/refs`),
    ...(statOf(`${git}/packed-refs`, lstatSync) ? ["packed-refs"] : []),
  ]
  return names.some((file) => glob.test(file))
}

/** Whether a name test may select a loose object (38 hex digits) or, deleting folders whole, its folder (2). */
function mayNameObject(name: string, deep: boolean): boolean {
  const shape = name.replace(BRACKET_EXPRESSION, "?")
  if (/[^0-9a-f*?]/.test(shape)) return false
  const fixed = shape.replace(/\*/g, "").length
  return shape.includes("*") ? fixed <= 38 : fixed === 38 || (deep && fixed === 2)
}

/** The names in a folder (none when it cannot be read). */
function listed(dir: string): string[] {
  try {
    return readdirSync(dir) as string[]
  } catch {
    return []
  }
}

/** The names of the files and folders under `.git/refs` (`heads`, `main`, `v1.0`), up to MAX_REF_NAMES. */
function refNames(refs: string): string[] {
  const names: string[] = []
  const folders = [refs]
  for (let dir = folders.pop(); dir !== undefined && names.length < MAX_REF_NAMES; dir = folders.pop())
    for (const name of listed(dir)) {
      names.push(name)
      if (statOf(`${dir}/${name}`, lstatSync)?.isDirectory()) folders.push(`${dir}/${name}`)
    }
  return names
}
const MAX_REF_NAMES = 256

/** The folders of a repository that hold its commits and branches (`rm -rf .git/rebase-merge` loses neither). */
const HISTORY = [".git/objects", ".git/refs"]
const REPOSITORY = "the project's git repository (.git: its commits, branches and stashes, which git cannot bring back)"

/**
 * A path inside the root as a file command reaches it: the links among its folders followed (`rm -rf alias/lib`,
 * alias a link to src, deletes src/lib), and a link named last when written with a trailing `/` (`rm -rf alias/`
 * empties its folder; `rm -rf alias` removes the link alone). Undefined: it leads out of the root.
 */
function throughLinks(
  root: string,
  realOf: (path: string) => string,
  abs: string,
  slashed: boolean,
): string | undefined {
  const cut = abs.lastIndexOf("/")
  const real = slashed ? realOf(abs) : `${realOf(abs.slice(0, cut) || "/")}${abs.slice(cut)}`
  if (real === abs) return abs
  const rel = relativeInside(realOf(root), real)
  return rel === undefined ? undefined : rel ? `${root}/${rel}` : root
}
const THROUGH_LINK = "a path it names leads through a link out of the project"

/**
 * The secret files protect-secrets knows in the project (`.env`, keys: ignored by git, so git's answer does not list
 * them) that a glob or a folder of the command reaches: `rm -f .env*`, `rm -rf config` holding `config/.env`. A
 * folder's files only when the command deletes deep (`rm -r`, find): `cp -r tpl/conf .` merges, `rm conf` refuses. A
 * shell glob's `*` does not match a leading dot (`rm -rf *` keeps `.env`); find's does.
 */
function reachedSecrets(reach: string[], known: readonly string[], root: string, discard: FileDiscard): string[] {
  if (reach.length === 0) return []
  const inRoot = (path: string) => path.slice(root.length) // the root's own path may hold `[`: not a glob
  return known.filter(
    (file) => isInside(file, root, true) && reach.some((path) => reaches(inRoot(path), inRoot(file), discard)),
  )
}

/**
 * Whether deleting `path` (a glob, or a folder) deletes `file`: the glob matches it, or (deep) a folder above it. A
 * bracket expression is read as any one character (`.e[n]v`), which may reach more than the shell would, never less.
 */
function reaches(path: string, file: string, discard: FileDiscard): boolean {
  const deep = discard.deep === true
  if (!GLOB.test(path)) return deep && isInside(file, path, true)
  const glob = discardGlob(path, discard)
  if (glob.test(file)) return true
  for (let at = file.slice(0, file.lastIndexOf("/")); deep && at.length > 1; at = at.slice(0, at.lastIndexOf("/")))
    if (glob.test(at)) return true
  return false
}

/** A file command's glob as a RegExp: the shell's (no leading dot for a wildcard) or find's, `-iname`'s in any case. */
function discardGlob(glob: string, discard: FileDiscard): RegExp {
  const regex = anyBracketGlob(glob, !discard.found)
  return discard.icase ? new RegExp(regex.source, "i") : regex
}

/** A shell glob as a RegExp, a bracket expression read as any one character (`.e[n]v`: more than bash, never less). */
function anyBracketGlob(glob: string, hideDotfiles: boolean): RegExp {
  return globToRegExp(glob.replace(BRACKET_EXPRESSION, "?"), hideDotfiles)
}
/** `[abc]`, `[!.]`, `[]x]` (a `]` first is one of its characters), `[[:digit:]]` (a class inside). */
const BRACKET_EXPRESSION = /\[[!^]?\]?(?:\[([:.=])[^\]]*\1\]|[^\]/])*\]/g

/** The directory a glob path searches: its path up to the first part with a glob character (after `from`). */
function globBase(abs: string, from = 0): string {
  const glob = from + abs.slice(from).search(GLOB)
  return abs.slice(0, Math.max(1, abs.lastIndexOf("/", glob)))
}

/** What is at a path: a file (or link), a directory, or nothing. */
function fileKind(abs: string): "file" | "dir" | "none" {
  const stat = statOf(abs, statSync) ?? statOf(abs, lstatSync) // a dangling link is a file all the same
  return stat === undefined ? "none" : stat.isDirectory() ? "dir" : "file"
}

/** A file the agent made and left as it was: losing it loses only the agent's work. */
function ownsAsLeft(ledger: WorkLedger, root: string, abs: string): boolean {
  const rel = relativeInside(root, abs)
  return rel !== undefined && whoseChange(ledger, rel, abs, lookFile) === "own"
}

/**
 * The paths a file command loses, a copy's destination read on the disk: into a directory, each source's name there;
 * onto a file, the file; a loop's moves onto one name that is no directory, every file the loop moves. A string: why
 * that cannot be told.
 */
function lostPaths(discard: FileDiscard): string[] | string {
  const onto = discard.onto
  if (!onto) return discard.paths
  const intoDir = onto.dir ?? fileKind(onto.dest) === "dir"
  if (intoDir) return [...discard.paths, ...onto.names.map((name) => `${onto.dest}/${name}`)]
  if (onto.spread === null) return `a loop moves files the plugin cannot tell onto the one name ${onto.dest}`
  return [...discard.paths, onto.dest, ...(onto.spread ?? [])]
}

/** The snapshots a judgement rests on, if still running (each bounded by its own question). */
async function settledSnapshots(ledger: WorkLedger): Promise<void> {
  await Promise.all([
    ledger.baseline?.pending,
    ledger.snapshot?.pending, // what the agent's last command changed, still being attributed
    ...[...ledger.owned.values()].map((file) => file.before?.pending),
  ])
}

/**
 * `stash drop`/`clear`: the entries the agent made in this session, when git's stash holds exactly those, each
 * made of the agent's own changes; anything else is protected.
 */
async function judgeStash(
  root: string,
  mine: boolean[],
  pushedHere: number,
  discard: Discard & { kind: "stash" },
  protect: (fault: string) => string,
): Promise<string | null> {
  const answer = await askGit(root, ["stash", "list", "--format=%gd"])
  if ("fault" in answer) return protect(answer.fault)
  const count = answer.out.split("\n").filter(Boolean).length + pushedHere
  if (count === 0) return null // nothing to lose
  const index = /^(?:stash@\{)?(\d+)\}?$/.exec(discard.entry)
  const own = (n: number) => count === mine.length && n < mine.length && mine[mine.length - 1 - n]
  const lost = discard.clear ? mine.every((_, n) => own(n)) && count === mine.length : index && own(Number(index[1]))
  if (lost) return null
  return `${discard.text} would throw away a stash entry the agent did not make in this session, or one that holds changes not its own`
}

/** `git stash` / `git stash push|save` (which make an entry), `git stash pop` (which removes the top one). */
function stashOpOf(ran: RanCommand): "push" | "pop" | undefined {
  const args = ranArgs(ran)
  const at = gitSubcommandAt(args)
  if (args[at] !== "stash") return undefined
  const sub = args[at + 1]
  if (sub === undefined || sub === "push" || sub === "save" || sub.startsWith("-")) return "push"
  return sub === "pop" ? "pop" : undefined
}

/**
 * Before a bash call: for each discard and file command it runs, git is asked (bounded) what it would lose, and the
 * verdict goes into the call's own WorkView, which the call's facts carry to the decision (CallFacts); a `git stash`
 * is judged likewise (is what it stashes the agent's own?), and a stash entry made earlier on the same line counts
 * for a `git stash drop` after it. Each entry says at once (before any wait) that it is protected, so that a call
 * cut short by the bound is. Any other call returns at once without I/O: a read-only call never starts a process.
 */
export function prepareDiscards(
  anchors: Anchors,
  hookInput: HookInput<"tool.execute.before">,
  args: unknown,
): { work: WorkView; done: Promise<void> } | undefined {
  if (hookInput.tool !== "bash" || !isMapping(args) || typeof args.command !== "string") return
  const { byProgram } = ranIndex(readCommand(args.command))
  const gits = byProgram.get("git")
  const files = FILE_DISCARD_PROGRAMS.some((program) => byProgram.has(program))
  if (!gits && !files) return
  const state = anchors.stateOf(hookInput.sessionID)
  if (!guardsWork(anchors, state)) return
  const places = pathPlaces(anchors.env, typeof args.workdir === "string" ? args.workdir : undefined)
  const steps: Step[] = []
  const loops = lineLoops(args.command)
  for (const ran of gits ?? []) {
    const discard = discardOf(ran, places, loops)
    const op = discard ? undefined : stashOpOf(ran)
    if (discard || op) steps.push({ key: ranKey(ran), discard, op, cwd: resolveOperand(".", places, ran.cwd) })
  }
  if (files) {
    for (const program of FILE_DISCARD_PROGRAMS)
      for (const ran of byProgram.get(program) ?? []) {
        const discard = fileDiscardOf(ran, places, loops)
        if (discard) steps.push({ key: ranKey(ran), discard, cwd: discard.cwd })
      }
  }
  if (steps.length === 0) return
  const ledger = (state.work ??= newLedger())
  const work: WorkView = new Map()
  for (const { key, discard } of steps) if (discard) work.set(key, lateText(discard))
  return { work, done: judgeSteps(anchors, ledger, noteAfter(ledger, hookInput.callID), steps, work) }
}

/** One question of prepareDiscards: a discard (or file command) to judge, or a stash entry made or taken. */
type Step = { key: string; discard?: Discard; op?: "push" | "pop"; cwd: string }

/** prepareDiscards' questions, in the line's order: each discard's verdict, each stash entry's owner. */
async function judgeSteps(
  anchors: Anchors,
  ledger: WorkLedger,
  after: AfterCall,
  steps: Step[],
  work: WorkView,
): Promise<void> {
  const pushed: boolean[] = [] // entries this line makes before its later commands run
  for (const { key, discard, op, cwd } of steps) {
    if (discard) {
      const listed: string[] = [] // the changed tracked files git says it names
      const verdict = await judgeDiscard(anchors, ledger, discard, pushed, listed)
      work.set(key, verdict)
      after.reverted.push(...revertedFiles(ledger, discard, listed))
      if (discard.kind === "stash") after.stash.push(discard.clear ? "clear" : "pop")
    } else if (op === "pop") after.stash.push("pop")
    else {
      const stashed: Discard = { kind: "tree", cwd, text: "`git stash`" }
      const own = (await judgeDiscard(anchors, ledger, stashed)) === null
      pushed.push(own)
      after.stash.push(own ? "push-own" : "push-other")
    }
  }
}

/**
 * The files a git discard puts back as committed, to be stamped once it ran: what the agent reverted is its own
 * again, so that its next change, by any means, is told apart from the person's. Only files it names, that git
 * listed as changed and tracked or that the agent changed (an untracked file it names is left as it was).
 */
function revertedFiles(ledger: WorkLedger, discard: Discard, listed: string[]): string[] {
  if (discard.kind !== "paths") return []
  const named = discard.specs.map((spec) => resolvePath(discard.cwd, spec))
  return named.filter((abs) => listed.includes(abs) || ledger.owned.has(abs))
}

function noteAfter(ledger: WorkLedger, callID: string) {
  let after = ledger.afterCall.peek(callID)
  if (!after) ledger.afterCall.set(callID, (after = { stamp: [], reverted: [], stash: [] }))
  return after
}

/**
 * An allowed changing call: the files it writes become the agent's (with the snapshot before its first change),
 * to be stamped after it ran. No I/O here: the paths come from the arguments and the command's reading.
 */
export function noteAgentWrites(anchors: Anchors, hookInput: HookInput<"tool.execute.before">, args: unknown): void {
  const state = anchors.stateOf(hookInput.sessionID)
  const ledger = state.work
  if (!ledger || !isMapping(args)) return
  const { directory, home } = anchors.paths
  const here =
    typeof args.workdir === "string" && args.workdir.trim() ? resolvePath(directory, args.workdir, home) : directory
  let words: string[]
  if (EDIT_TOOLS.includes(hookInput.tool)) words = editTargets(args)
  else if (hookInput.tool === "bash" && typeof args.command === "string") {
    const read = readCommand(args.command)
    if (!read.changing) return
    words = [...read.readings.flatMap((one) => one.writes.map((target) => target.word)), ...read.redirects]
  } else return
  const written = words.filter((word) => word !== "/dev/null" && !/[*?[{$`]/.test(word))
  if (written.length === 0) return
  const after = noteAfter(ledger, hookInput.callID)
  for (const word of written) {
    const abs = resolvePath(here, word, home)
    const owned = ledger.owned.peek(abs)
    if (!owned) ledger.owned.set(abs, { before: ledger.snapshot })
    else if (owned.stamp !== undefined) asAgentLeft(ledger, abs, owned, performance.now()) // else someone changed it
    after.stamp.push(abs)
  }
}

/** Whether the agent of any session wrote a file and left it as it was: its contents are the agent's (protect-secrets). */
export function agentOwns(anchors: Anchors, abs: string): boolean {
  for (const state of anchors.sessions.all()) {
    const owned = state.work?.owned.peek(abs)
    if (owned?.stamp !== undefined && owned.stamp === stampOf(abs)) return true
  }
  return false
}

/** A call that got no after hook (it failed, or was refused): its run ends now, so that later edits are not its. */
export function endRun(state: SessionState, callID: string): void {
  endRunAt(state.work?.afterCall.peek(callID)?.run, Date.now())
  state.work?.afterCall.delete(callID) // its files are in flight no more: the checks read them again
}

/**
 * After a call ran: the files it wrote are stamped (their state now is the agent's), its stash entry recorded; the
 * background checks of the agent's files go on.
 */
export function afterAgentCall(state: SessionState, callID: string): void {
  const ledger = state.work
  if (!ledger) return
  keepChecking(ledger) // after any call: the session works
  const after = ledger.afterCall.peek(callID)
  if (!after) return
  ledger.afterCall.delete(callID)
  endRunAt(after.run, Date.now())
  const at = performance.now()
  for (const abs of after.stamp) {
    const owned = ledger.owned.peek(abs)
    if (owned) [owned.stamp, owned.seen] = [stampOf(abs), at]
  }
  for (const abs of after.reverted) {
    // as committed: the agent's to change again (its next change is told from the person's by this stamp)
    const owned = ledger.owned.peek(abs)
    if (owned) [owned.stamp, owned.other, owned.seen] = [stampOf(abs), false, at]
    else ledger.owned.set(abs, { before: ledger.snapshot, stamp: stampOf(abs), seen: at })
  }
  for (const op of after.stash)
    if (op === "pop") ledger.stash.pop()
    else if (op === "clear") ledger.stash.length = 0
    else ledger.stash.push(op === "push-own")
}

/**
 * The agent's latest files (MAX_OWN_STAMPED) checked against their stamps at `at`: one as the agent left it is seen
 * so; one a run of the agent's changed since is the agent's still, as it is now; any other change is someone else's.
 * A file seen since `fresh` is not read again, nor one a call still running writes (its after hook stamps it).
 * Returns the files as the agent left them.
 */
function checkOwnFiles(ledger: WorkLedger, at: number, fresh: number): Set<string> {
  const own = new Set<string>()
  let writing: Set<string> | undefined
  let skip = ledger.owned.size - MAX_OWN_STAMPED // the oldest, beyond the latest MAX_OWN_STAMPED
  for (const [abs, file] of ledger.owned.entries()) {
    if (skip-- > 0 || file.stamp === undefined) continue
    if (file.seen !== undefined && file.seen >= fresh) {
      own.add(abs)
      continue
    }
    writing ??= new Set([...ledger.afterCall.values()].flatMap((after) => after.stamp))
    if (!writing.has(abs) && asAgentLeft(ledger, abs, file, at)) own.add(abs)
  }
  return own
}

/**
 * Whether the agent's file is as the agent left it, read now: unchanged, or changed by a run of the agent's since
 * (then it is stamped anew, as it is now). Any other change is someone else's, and marks it so.
 */
function asAgentLeft(ledger: WorkLedger, abs: string, file: OwnedFile, at: number): boolean {
  const now = lookFile(abs)
  if (now.stamp !== file.stamp) {
    if (now.changed === undefined || !runAt(ledger, now.changed)?.own.has(abs)) {
      file.other = true
      return false
    }
    file.stamp = now.stamp
  }
  file.seen = at
  return true
}

/**
 * The background checks of a session's files (checkOwnFiles): the first at once, then every CHECK_EVERY_MS, until
 * CHECK_FOR_MS after the session's last call. A timer never keeps the process alive, and a check that fails
 * confirms nothing (a run then reads the stamps on its path).
 */
function keepChecking(ledger: WorkLedger): void {
  const at = performance.now()
  if (ledger.checks) {
    ledger.checks.last = at
    return
  }
  if (ledger.owned.size === 0 || ledger.baseline?.fault === NOT_A_REPOSITORY) return // no run is begun there
  const checks = (ledger.checks = { last: at })
  const check = () => {
    const now = performance.now()
    try {
      checkOwnFiles(ledger, now, now)
    } catch {
      // nothing is seen: the next run reads what it needs itself
    }
    if (now - checks.last < CHECK_FOR_MS) later(CHECK_EVERY_MS)
    else ledger.checks = undefined
  }
  const later = (ms: number) => (setTimeout(check, ms) as unknown as { unref?: () => void }).unref?.()
  later(0)
}

/**
 * A `git status` of the whole tree, asked in the background: started on the next turn of the event loop, once the
 * hook that asks for it has returned (no process on a call's path).
 */
function treeSnapshot(root: string): Snapshot {
  const snapshot: Snapshot = {}
  snapshot.pending = new Promise<void>((resolve) => setTimeout(resolve, 0))
    .then(() => {
      snapshot.at = Date.now() // what git reports is the tree at this time or later
      return askGit(root, [...STATUS, "--branch", "--untracked-files=normal"])
    })
    .then((answer) => {
      const state = "out" in answer ? parseStatus(answer.out) : answer.fault
      if (typeof state === "string") snapshot.fault = state
      else snapshot.state = state
      snapshot.pending = undefined
    })
  return snapshot
}

/** git's commands that rewrite files of the tree (a branch switch, a merge, `stash pop`): their changes are a run. */
// (`git checkout` is left out: of files it is a discard, and its reverted files are stamped after it)
const REWRITING_GIT = new Set("stash switch merge pull rebase cherry-pick revert am apply".split(" "))

function rewritesTree(read: CommandReading): boolean {
  return (ranIndex(read).byProgram.get("git") ?? []).some((ran) => {
    const args = ranArgs(ran)
    return REWRITING_GIT.has(args[gitSubcommandAt(args)])
  })
}

/**
 * A changing bash call the reader cannot follow (a script, `python3 -c`, an unknown program) is about to run: its run
 * begins (Run), with no process: the time, the latest snapshot, and the agent's own files as it left them (a stamp
 * each, the latest MAX_OWN_STAMPED; one a run of the agent's changed since is its own too, and is stamped anew), so
 * that a discard can tell later what the run changed by the files' change times.
 */
export function beginRun(anchors: Anchors, hookInput: HookInput<"tool.execute.before">, args: unknown): void {
  if (hookInput.tool !== "bash" || !isMapping(args) || typeof args.command !== "string") return
  const ledger = anchors.stateOf(hookInput.sessionID).work
  if (!ledger || !workRoot(anchors)) return
  const read = readCommand(args.command)
  if (!read.changing || !(read.opaque || rewritesTree(read))) return
  const at = Date.now()
  const seen = performance.now()
  const own = checkOwnFiles(ledger, seen, seen - CHECK_FRESH_MS) // read here only what no recent check saw
  keepChecking(ledger)
  endRunAt(ledger.runs[ledger.runs.length - 1], at) // a run whose after hook never came ends where the next begins
  const run: Run = { at, end: Number.POSITIVE_INFINITY, base: ledger.snapshot, own }
  ledger.runs.push(run)
  if (ledger.runs.length > MAX_RUNS) ledger.runs.shift()
  noteAfter(ledger, hookInput.callID).run = run
}
