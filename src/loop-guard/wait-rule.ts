/**
 * The wait rule: waiting cycles timed against a budget and a lap cap (`cycleOrWait`, `checkWait`).
 */
import { EDIT_TOOLS } from "../shared/tools"
import type { Call } from "./results"
import { type Cycle, MAX_CYCLE, hasSmallerPeriod, isPeriodic, windowSize } from "./cycle"

/**
 * A waiting cycle being timed: the signatures of one turn of it, and what its waits have slept so far. A lap is
 * one wait of the cycle (in a sleep + poll cycle, one sleep and its poll).
 */
export type Waiting = { members: string[]; tools: string[]; slept: number; laps: number }

/** A waiting cycle past its budget or its lap cap: the wait that would go past it is blocked. */
export type WaitOver = {
  reason: "wait"
  /** which limit the wait would pass */
  limit: "budget" | "laps"
  k: number
  /** tool names of one turn of the cycle, oldest first, ending with the current call's tool */
  tools: string[]
  /** seconds slept and laps so far, without the blocked wait */
  slept: number
  laps: number
  budget: number
  lapCap: number
}

/** The calls of one turn of a k-cycle the current call completes: the last k - 1 recorded, then the current one. */
export function lastTurn(history: readonly Call[], current: Call, k: number): Call[] {
  const turn = history.slice(history.length - (k - 1))
  turn.push(current)
  return turn
}

/**
 * The length k of the smallest cycle (k = 1..MAX_CYCLE) the current call completes by its calls alone, whatever their
 * results, one of whose calls is a wait; 0 when there is none. The window is the cycle rule's, max(r*k, r+1).
 */
export function findWaitingCycle(
  history: readonly Call[],
  current: Call,
  repetitions: number,
  isExempt: (tool: string) => boolean,
): number {
  if (current.wait <= 0 && !history.slice(-(MAX_CYCLE - 1)).some((call) => call.wait > 0)) return 0 // most calls
  for (let k = 1; k <= MAX_CYCLE; k++) {
    const calls = windowSize(k, repetitions)
    if (history.length + 1 < calls) break
    if (!isPeriodic(history, current, calls, k) || hasSmallerPeriod(history, current, calls, k)) continue
    const turn = lastTurn(history, current, k)
    if (isWaiting(turn) && !turn.every((call) => isExempt(call.tool))) return k
  }
  return 0
}

/**
 * The length k of the turn a wait closes when it repeats a call of the last MAX_CYCLE (the nearest one with its
 * signature: the calls in between are one lap of the pattern), 0 when it is no wait, repeats none, or the turn is
 * no waiting one (isWaiting). A waiting
 * cycle is thus timed from its 2nd lap, before the cycle rule's window (its 3rd lap), so the time slept is checked
 * before each wait runs: with `sleep 20m` + poll the 2nd sleep, which would pass the 30-minute budget, is blocked.
 */
export function repeatedWait(history: readonly Call[], current: Call, isExempt: (tool: string) => boolean): number {
  if (current.wait <= 0) return 0
  for (let k = 1; k <= MAX_CYCLE && k <= history.length; k++) {
    if (history[history.length - k].signature !== current.signature) continue
    const turn = lastTurn(history, current, k)
    return !isWaiting(turn) || turn.every((call) => isExempt(call.tool)) ? 0 : k
  }
  return 0
}

/**
 * The timing of a waiting cycle recognized at its 2nd lap (repeatedWait, turn length k): the waits of the calls that
 * ran just before in the same pattern, i.e. the run at the end of the history in which each call is the one k calls
 * later, plus the calls of the current turn, from index `from` on (the first call after one that ended a timing:
 * a call outside the cycle starts the count over). A call that broke the pattern ends the run: what ran before it
 * is not counted.
 */
export function secondLap(history: readonly Call[], current: Call, k: number, from: number): Waiting {
  const turn = lastTurn(history, current, k)
  const timed: Waiting = {
    members: turn.map((call) => call.signature),
    tools: turn.map((call) => call.tool),
    slept: 0,
    laps: 0,
  }
  const signatureAt = (i: number) => (i < history.length ? history[i].signature : current.signature)
  for (let i = history.length - 1; i >= from; i--) {
    if (i + k <= history.length && history[i].signature !== signatureAt(i + k)) break
    addLap(timed, history[i])
  }
  return timed
}

/**
 * Whether a cycle waits on purpose: one of the calls of its turn is a wait. A call that is a wait only by the time
 * it ran (measuredWait: it asked for no sleep) does not make a cycle that edits files (EDIT_TOOLS) a waiting one:
 * edit -> test -> edit -> test with a test run of 10 s is work retried, the loop the cycle rule is for, not a job
 * waited on (and its block must not speak of waiting). A sleep the command asks for is a wait beside an edit too.
 */
export function isWaiting(turn: readonly Call[]): boolean {
  const edits = turn.some((call) => EDITING.has(call.tool))
  return turn.some((call) => call.wait > 0 && (call.asked > 0 || !edits))
}

/** opencode's tools that edit files (see isWaiting). */
const EDITING = new Set(EDIT_TOOLS)

/**
 * The waiting cycle the session times now. The same cycle (the same calls, in any phase) goes on being timed; a
 * cycle seen for the first time starts from the calls of it that ran just before: the longest run at the end of
 * the history made of its calls only (its laps before it was recognized count too).
 */
export function timedWaiting(waiting: Waiting | null, history: readonly Call[], turn: readonly Call[]): Waiting {
  const members = turn.map((call) => call.signature)
  if (waiting && sameMembers(waiting.members, members)) return waiting
  const timed: Waiting = { members, tools: turn.map((call) => call.tool), slept: 0, laps: 0 }
  for (let i = history.length - 1; i >= 0 && members.includes(history[i].signature); i--) addLap(timed, history[i])
  return timed
}

function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  return a.every((signature) => b.includes(signature)) && b.every((signature) => a.includes(signature))
}

/** Counts a call of the waiting cycle that ran: its sleep, and a lap when it is a wait. */
export function addLap(waiting: Waiting, call: Call): void {
  if (call.wait <= 0) return
  waiting.slept += call.wait
  waiting.laps += 1
}

/**
 * The wait rule on a call that completes a waiting cycle: a call that does not wait (the poll) runs; a wait runs
 * while the time slept, this wait included, stays within `budget` seconds and the laps within `lapCap`; otherwise
 * it is blocked. The time a model takes to answer is never counted: only what the commands ask to sleep.
 */
export function checkWait(
  waiting: Waiting,
  tools: string[],
  current: Call,
  k: number,
  budget: number,
  lapCap: number,
): WaitOver | null {
  if (current.wait <= 0) return null
  const limit = waiting.slept + current.wait > budget ? "budget" : waiting.laps + 1 > lapCap ? "laps" : null
  if (!limit) return null
  return { reason: "wait", limit, k, tools, slept: waiting.slept, laps: waiting.laps, budget, lapCap }
}

/**
 * A wait of the cycle being timed that completes no window: a blocked wait is not recorded, so after a block and a
 * poll the next wait breaks the window, yet it is the same waiting and is held to the same limits (otherwise two
 * waits of every three would run past the budget). Null for a call outside the timed cycle.
 */
export function continuedWait(waiting: Waiting | null, current: Call, budget: number, lapCap: number): WaitOver | null {
  const at = waiting ? waiting.members.indexOf(current.signature) : -1
  if (!waiting || at < 0) return null
  const tools = [...waiting.tools.slice(at + 1), ...waiting.tools.slice(0, at + 1)] // ending with the current call
  return checkWait(waiting, tools, current, waiting.members.length, budget, lapCap)
}

/** What the wait rule reads and keeps of a session (its SessionState). */
export type WaitState = { history: Call[]; waiting: Waiting | null; recorded: number; waitEnded: number }

/** The settings the wait rule needs. */
export type WaitLimits = {
  repetitions: number
  waitBudget: number
  waitLaps: number
  isExempt: (tool: string) => boolean
}

/**
 * The wait rule, given what the cycle rule found: a cycle one of whose calls waits is timed instead of blocked; it
 * runs until its time slept or its laps pass the limits (then the wait is blocked); a cycle without a wait is
 * returned as it is. A waiting cycle is timed from the window of the cycle rule on, whatever its results (a poll's
 * output often changes while it waits), and before it from its 2nd lap: a wait of the cycle being timed is held to
 * its limits (continuedWait), a wait that repeats one of the last calls starts the timing (repeatedWait). With no
 * wait budget (0) every cycle is a loop. Keeps the timing in `state.waiting`.
 */
export function cycleOrWait(
  state: WaitState,
  call: Call,
  cycle: Cycle | null,
  limits: WaitLimits,
): Cycle | WaitOver | null {
  const { repetitions, waitBudget, waitLaps, isExempt } = limits
  if (waitBudget === 0) return cycle
  const k = cycle?.k ?? findWaitingCycle(state.history, call, repetitions, isExempt)
  if (k > 0) {
    const turn = lastTurn(state.history, call, k)
    if (!isWaiting(turn)) return cycle
    state.waiting = timedWaiting(state.waiting, state.history, turn)
    const tools = turn.map((member) => member.tool)
    return checkWait(state.waiting, tools, call, k, waitBudget, waitLaps)
  }
  if (state.waiting?.members.includes(call.signature)) {
    return continuedWait(state.waiting, call, waitBudget, waitLaps)
  }
  const lap = repeatedWait(state.history, call, isExempt)
  if (lap === 0) return null
  const after = Math.max(0, state.history.length - (state.recorded - state.waitEnded)) // calls since a timing ended
  state.waiting = secondLap(state.history, call, lap, after)
  return checkWait(state.waiting, state.waiting.tools, call, lap, waitBudget, waitLaps)
}
