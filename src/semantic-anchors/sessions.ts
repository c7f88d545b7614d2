/**
 * Per root session state: counters, confirmations, bypasses, seen texts (`RootSessions`, `bypassRefusal`).
 */
import type { WorkLedger, Reservation } from "./types"
import { MAX_PARENT_LINKS, MAX_PENDING_NOTES, MAX_RESERVED, MAX_ROOT_SESSIONS, MAX_SEEN, SEEN_CAP } from "./constants"
import { RecentMap } from "../shared/recent-map"
import { capText } from "../shared/text"
import type { Settings } from "./model"

export type SessionState = {
  role: string
  agent?: string
  steps: Map<string, number> // state-contract id -> matching calls since the last confirmation
  touchedDirs: Map<string, number> // top-level directory -> changing calls into it since the last confirmation
  reserved: RecentMap<Reservation> // callID -> what a call not finished yet was counted for; beyond MAX_RESERVED the oldest is taken as run (one call counted too many is the safe side)
  overridesUsed: number
  passes: number // granted bypasses not yet used (0 or 1)
  lastConfirmation: number | null
  lastBlocked?: LastBlocked // what the human is told a bypass is for
  seen: string[] // bounded evidence: user messages and tool results
  seenHits: Set<RegExp> // which unlessSeen patterns matched anything seen so far
  pendingNotes: RecentMap<PendingNote> // callID -> warn note for tool.execute.after
  warnedThisTurn: Set<string> // warn contracts whose note the model got since the last user message
  work?: WorkLedger // what the agent changed, for the discards of uncommitted work (made at the first user message)
}

/** The last blocked call: its contracts' ids and the tool (never an argument value). */
type LastBlocked = { contracts: string; tool: string }

/** A warn note waiting for its call's result, and the contracts it speaks for. */
type PendingNote = { text: string; contracts: string[] }

export function newState(role: string): SessionState {
  return {
    role,
    steps: new Map(),
    touchedDirs: new Map(),
    reserved: new RecentMap(MAX_RESERVED),
    overridesUsed: 0,
    passes: 0,
    lastConfirmation: null,
    seen: [],
    seenHits: new Set(),
    pendingNotes: new RecentMap(MAX_PENDING_NOTES),
    warnedThisTurn: new Set(),
  }
}

/** Step counters and the spread start again; calls still running belong before this point, so none is given back. */
export function resetCounters(state: SessionState): void {
  state.steps.clear()
  state.touchedDirs.clear()
  state.reserved.clear()
}

export function confirm(state: SessionState, now: number): void {
  resetCounters(state)
  state.lastConfirmation = now
}

export function recordSeen(state: SessionState, text: string, patterns: readonly RegExp[]): void {
  if (!text) return
  const kept = capText(text, SEEN_CAP)
  state.seen.push(kept)
  if (state.seen.length > MAX_SEEN) state.seen.shift()
  for (const pattern of patterns) if (!state.seenHits.has(pattern) && pattern.test(kept)) state.seenHits.add(pattern)
}

/** Subagent depth followed to a root session; opencode nests a few levels, a deeper chain is a loop of links. */
const MAX_PARENT_HOPS = 32

/**
 * Session state lives with the root session: a subagent's calls count for the session that started it. At most
 * MAX_ROOT_SESSIONS states and MAX_PARENT_LINKS links are kept; beyond that the least recently used is dropped.
 */
export class RootSessions {
  private readonly states = new RecentMap<SessionState>(MAX_ROOT_SESSIONS)
  private readonly parents = new RecentMap<string>(MAX_PARENT_LINKS)

  link(childID: string, parentID: string): void {
    if (parentID !== childID) this.parents.set(childID, parentID)
  }

  /** The root of a session: parent links followed (at most MAX_PARENT_HOPS) (a bounded walk, so a linked loop cannot hang a call). */
  rootOf(sessionID: string): string {
    let id = sessionID
    for (let hops = 0; hops < MAX_PARENT_HOPS; hops++) {
      const parent = this.parents.get(id)
      if (!parent || parent === id) break
      id = parent
    }
    return id
  }

  /** The state of a root session, created with `role` when new. */
  state(rootID: string, role: string): SessionState {
    let state = this.states.get(rootID)
    if (!state) this.states.set(rootID, (state = newState(role)))
    return state
  }

  /** The state of a root session, or undefined when it has none (an event must not create one). */
  find(rootID: string): SessionState | undefined {
    return this.states.get(rootID)
  }

  /** session.deleted: the session's state and its own parent link go. */
  forget(sessionID: string): void {
    this.states.delete(sessionID)
    this.parents.delete(sessionID)
  }

  all(): IterableIterator<SessionState> {
    return this.states.values()
  }
}

/**
 * Why a bypass cannot be granted now, or undefined. The one list of refusals, in one order and one wording, for both
 * ways to ask: the human's `/anchor bypass` and the model's anchor_bypass (checked before the human is asked, and
 * again when granting, since the state may change while the question is open).
 */
export function bypassRefusal(state: SessionState, reason: string, settings: Settings): string | undefined {
  if (!reason)
    return "Bypass refused: a reason is required (/anchor bypass <reason>; for anchor_bypass the string `reason` is required)."
  if (state.passes > 0) return "Bypass refused: a bypass is already pending; it lets the next blocked call run once."
  if (state.overridesUsed >= settings.maxOverrides)
    return `Error: Max overrides (${settings.maxOverrides}) reached. Cannot bypass.`
  return undefined
}

/** Grants one pass: an override is spent, the next blocked call runs once, and the grant confirms. */
export function grantPass(state: SessionState, now: number): void {
  state.overridesUsed++
  state.passes = 1
  confirm(state, now)
}
