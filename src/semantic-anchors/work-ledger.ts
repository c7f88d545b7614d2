/**
 * The work ledger, its pure part: per root session, what the agent changed and the tree's state before it, so that a
 * discard of uncommitted work can be judged by whose work it would lose (git is asked in work-git.ts).
 */
import type { RanCommand } from "../shared/bash-programs"
import { isInside } from "./names"
import { RecentMap } from "../shared/recent-map"
import type { Discard, Run, TreeState, WorkLedger } from "./types"
// Per root session, what the agent changed: the files its edit tools wrote and the files its bash commands are seen
// to write (the reader's written operands and redirects), each with the tree's state before it first touched the file
// (a snapshot: `git status`, asked in the background at each user message, never on a call's path) and a stamp (size
// and mtime) taken after its last change (in tool.execute.after of that changing call). A discard asks git once, in
// tool.execute.before of that call (a changing call: no read-only call ever waits on git), what it would throw away,
// bounded by WORK_GIT_MS; then each file is the agent's own (changed by it, clean before it first did, and unchanged
// since its last change), there before the session, or someone else's. Only all-own runs. Git missing, no
// repository, a detached HEAD, a huge tree, a hang or a failure: the discard is protected, and the log says which,
// once (workFault).

export const WORK_GIT_MS = 1500 // the bound on one question to git; past it the discard is protected
export const WORK_CALL_MS = 2000 // the bound on all a call waits for git (a snapshot still running, its questions)
export const GIT_LATE = `git did not answer in time (${WORK_GIT_MS / 1000} s a question, ${WORK_CALL_MS / 1000} s a call)`
const WORK_MAX_ENTRIES = 20_000 // changed files in one `git status` beyond which a tree is too large to judge
export const WORK_MAX_OUTPUT = 8 * 1024 * 1024 // bytes of one git answer
export const MAX_OWNED_FILES = 4096 // files per session the ledger keeps; beyond, the oldest is forgotten (then protected)
export const MAX_RUNS = 256 // commands the reader cannot follow a session remembers; beyond, the oldest is forgotten
export const MAX_AFTER_CALLS = 64 // calls whose after hook is awaited (what to stamp once each ran)

export const CHANGE_SLACK_MS = 20 // a file's change time may trail the clock by a tick of the kernel's coarse time
export const MAX_OWN_STAMPED = 64 // the agent's files checked against their stamps (the latest changed)
// While a session works, its agent's files are checked against their stamps in the background (after each call, then
// every CHECK_EVERY_MS), so that a run need not read them on its path: a file confirmed within CHECK_FRESH_MS before a
// run begins is taken as confirmed then. That is the window in which the person's edit to a file of the agent's, which
// the run then changes too, is read as the agent's (docs/contracts.md, "Whose work it is"). Past CHECK_FOR_MS after
// the session's last call the checks stop, and a run reads the stamps on its path again.
export const CHECK_EVERY_MS = 200
export const CHECK_FRESH_MS = 2 * CHECK_EVERY_MS // a late check (a busy event loop) still counts
export const CHECK_FOR_MS = 10 * 60_000

/** A file as the disk has it now: its stamp (size and mtime, or `gone`) and when it last changed (its ctime). */
export type FileNow = { stamp: string; changed?: number }

/** The run whose time holds a file's change time, the latest first. */
export function runAt(ledger: WorkLedger, changed: number): Run | undefined {
  for (let k = ledger.runs.length - 1; k >= 0; k--) {
    const run = ledger.runs[k]
    if (changed >= run.at - CHANGE_SLACK_MS && changed <= run.end + CHANGE_SLACK_MS) return run
  }
  return undefined
}

/** A run ends at `at` unless it ended before (its after hook, its failure, the next run, the person's turn). */
export function endRunAt(run: Run | undefined, at: number): void {
  if (run && run.end > at) run.end = at
}

export function newLedger(): WorkLedger {
  return {
    owned: new RecentMap(MAX_OWNED_FILES),
    runs: [],
    stash: [],
    afterCall: new RecentMap(MAX_AFTER_CALLS),
  }
}

/** A simple command's key in a call's WorkView: its words and where it runs (the line's `cd`s). */
export function ranKey(ran: RanCommand): string {
  return `${ran.cwd.join("\0")}\0\0${ran.words.join("\0")}`
}

/** Why a discard is protected while git has not answered (past WORK_CALL_MS, it never did). */
export function lateText(discard: Discard): string {
  return `${discard.text} would throw away uncommitted changes, and the plugin cannot tell whose (git was not asked, or did not answer in time): they are protected`
}

/**
 * The entries of `git status --porcelain=v2 -z` as git writes them: the line (its first character the kind: `#`, `1`,
 * `2`, `u`, `?`, `!`), its path (after the fields of its kind), a rename's original path, and a changed entry's
 * submodule field (`N...`, or `S<c><m><u>`).
 */
export function* statusEntries(out: string): Generator<{ line: string; path: string; old?: string; sub?: string }> {
  const parts = out.split("\0")
  for (let i = 0; i < parts.length; i++) {
    const line = parts[i]
    if (line === "") continue
    const kind = line[0]
    const at = kind === "1" ? 8 : kind === "2" ? 9 : kind === "u" ? 10 : -1
    if (at < 0) {
      yield { line, path: line.slice(2) }
      continue
    }
    const fields = line.split(" ")
    const old = kind === "2" && i + 1 < parts.length ? parts[++i] : undefined // the renamed file's original path
    yield { line, path: fields.slice(at).join(" "), old, sub: fields[2] }
  }
}

/**
 * `git status --porcelain=v2 -z --branch` read: every path with a change (`1`, `2` and its original path, `u`),
 * untracked (`?`) and ignored (`!`) ones, directories (a trailing `/`) apart; a string when the tree is too large.
 */
export function parseStatus(out: string): TreeState | string {
  const state: TreeState = { tracked: new Set(), untracked: new Set(), dirs: [], detached: false }
  let entries = 0
  for (const { line, path, old } of statusEntries(out)) {
    if (line.startsWith("# branch.head ")) state.detached = line === "# branch.head (detached)"
    if (line[0] === "#") continue
    if (++entries > WORK_MAX_ENTRIES) return `the tree has more than ${WORK_MAX_ENTRIES} changed files`
    const kind = line[0]
    if (kind === "1" || kind === "2" || kind === "u") {
      state.tracked.add(path)
      if (old !== undefined) state.tracked.add(old)
    } else if (kind === "?" || kind === "!") {
      if (path.endsWith("/")) state.dirs.push(path)
      else state.untracked.add(path)
    }
  }
  return state
}

/**
 * Whether a snapshot shows a path (relative to the repository) changed, under an untracked directory, or inside a
 * changed submodule (a tracked path above it: git lists a submodule with changes, never the files in it).
 */
export function changedIn(state: TreeState, rel: string): boolean {
  if (state.tracked.has(rel) || state.untracked.has(rel) || state.dirs.some((dir) => isInside(rel, dir))) return true
  for (let cut = rel.lastIndexOf("/"); cut > 0; cut = rel.lastIndexOf("/", cut - 1))
    if (state.tracked.has(rel.slice(0, cut))) return true
  return false
}

/** Whose a changed file is: the agent's own, there before the session, someone else's, or not known. */
export type Whose = "own" | "before" | "other" | "unknown"

export function whoseChange(ledger: WorkLedger, rel: string, abs: string, look: (abs: string) => FileNow): Whose {
  const now = look(abs)
  const run = now.changed === undefined ? undefined : runAt(ledger, now.changed)
  const owned = ledger.owned.peek(abs)
  if (!owned) {
    const baseline = ledger.baseline?.state
    if (!baseline) return "unknown"
    if (changedIn(baseline, rel)) return "before"
    // changed by a run of the agent's, and clean before it; or gone (a deleted file is not dated) after a run
    const base = run?.base?.state
    if (run) return base && !changedIn(base, rel) ? "own" : "other"
    return now.changed === undefined && ledger.runs.length ? "own" : "other"
  }
  const before = owned.before?.state
  if (!before) return "unknown"
  if (changedIn(before, rel)) return "before"
  if (owned.other) return "other"
  if (owned.stamp !== undefined && owned.stamp === now.stamp) return "own"
  return run?.own.has(abs) ? "own" : "other" // changed by a run that began with it as the agent left it
}

/** Of the files a file command loses that are not the agent's: how many are untracked, changed, or ignored secrets. */
export type LostKinds = { untracked: number; changed: number; secret: number }

/** What a discard would lose that is not the agent's own, in words (counts and kinds, never contents); null: none. */
export function lossText(discard: Discard, counts: Record<Whose, number>, kinds?: LostKinds): string | null {
  const files = (n: number) => `${n} file${n === 1 ? "" : "s"}`
  const parts: string[] = []
  if (counts.before) parts.push(`${files(counts.before)} with changes that were there before this session`)
  if (counts.other)
    parts.push(
      `${files(counts.other)} changed during the session by someone other than the agent (or by a command the plugin could not follow)`,
    )
  if (counts.unknown) parts.push(`${files(counts.unknown)} whose changes the plugin cannot tell apart`)
  if (kinds?.secret)
    parts.push(`${kinds.secret} of the person's secret files (git ignores them, and cannot bring them back)`)
  if (parts.length === 0) return null
  const own = counts.own ? `; ${files(counts.own)} with the agent's own changes may go` : ""
  if (discard.kind !== "files") return `${discard.text} would throw away uncommitted work: ${parts.join(", ")}${own}`
  const kind = [
    kinds?.untracked ? `${kinds.untracked} untracked` : "",
    kinds?.changed ? `${kinds.changed} with uncommitted changes` : "",
  ].filter(Boolean)
  const of = kind.length ? ` (${kind.join(", ")})` : ""
  return `${discard.text} would delete or overwrite what git cannot bring back: ${parts.join(", ")}${of}${own}`
}
