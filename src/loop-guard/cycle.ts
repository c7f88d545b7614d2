/**
 * The cycle check: cycles of 1..8 calls with repeating results, a cycle seen advancing, the backstop (`findCycle`,
 * `MAX_CYCLE`, `historyCapacity`).
 */
import type { CallRecord } from "./signatures"
import type { Call } from "./results"

/** The longest cycle looked for, and the most calls of one step compared as a set. */
export const MAX_CYCLE = 8

/** How many calls, the current one included, must repeat a cycle of length k: max(r*k, r+1). */
export function windowSize(k: number, repetitions: number): number {
  return Math.max(repetitions * k, repetitions + 1)
}

/** The backstop for a cycle whose results kept changing: three times the window, max(3r*k, 3r+1). */
function backstopSize(k: number, repetitions: number): number {
  return windowSize(k, 3 * repetitions)
}

/** The history length the rules need: the backstop window of the longest cycle, or the failure streak. */
export function historyCapacity(repetitions: number, failures = 0): number {
  return Math.max(backstopSize(MAX_CYCLE, repetitions) - 1, failures)
}

export type Cycle = {
  /** "cycle": the results repeated too; "backstop": they changed, but the cycle reached the backstop */
  reason: "cycle" | "backstop"
  /** cycle length */
  k: number
  /** calls in the window, the current one included */
  calls: number
  /** times the cycle repeats in the window (calls / k) */
  repetitions: number
  /** tool names of one turn of the cycle, oldest first, ending with the current call's tool */
  tools: string[]
}

/**
 * The smallest cycle (k = 1..MAX_CYCLE) that the current call completes, or null. `history` is the recorded calls,
 * oldest first, without the current one. A cycle whose results repeated is caught at windowSize; one whose results
 * changed at backstopSize. `isExempt(tool)` lets a cycle through when every call in it is an exempt tool. A k whose
 * turn is itself periodic (A A as k = 2) is the smaller cycle, already judged, and is skipped.
 */
export function findCycle(
  history: readonly Call[],
  current: CallRecord,
  repetitions: number,
  isExempt: (tool: string) => boolean = () => false,
): Cycle | null {
  for (let k = 1; k <= MAX_CYCLE; k++) {
    const calls = windowSize(k, repetitions)
    if (history.length + 1 < calls) break // longer cycles need even more calls
    if (!isPeriodic(history, current, calls, k) || hasSmallerPeriod(history, current, calls, k)) continue
    const tools = history.slice(history.length - (k - 1)).map((call) => call.tool)
    tools.push(current.tool)
    if (tools.every(isExempt)) continue
    const backstop = backstopSize(k, repetitions)
    if (resultsRepeat(history, calls, k) && !progressedBefore(history, calls, k, backstop)) {
      return { reason: "cycle", k, calls, repetitions: calls / k, tools }
    }
    if (history.length + 1 >= backstop && isPeriodic(history, current, backstop, k)) {
      return { reason: "backstop", k, calls: backstop, repetitions: backstop / k, tools }
    }
  }
  return null
}

/**
 * Whether the window (the last calls - 1 records, then the current call) has period k. Indexed in place: this
 * runs on every call, and copying the window for each k cost more than the comparisons.
 */
export function isPeriodic(history: readonly Call[], current: CallRecord, calls: number, k: number): boolean {
  const start = history.length - (calls - 1) // index in history of the window's first call
  if (current.signature !== history[start + calls - 1 - k].signature) return false
  for (let i = k; i < calls - 1; i++) {
    if (history[start + i].signature !== history[start + i - k].signature) return false
  }
  return true
}

/** Whether a window of period k also has a period d that divides k (then it is that smaller cycle). */
export function hasSmallerPeriod(history: readonly Call[], current: CallRecord, calls: number, k: number): boolean {
  for (let d = 1; d < k; d++) if (k % d === 0 && isPeriodic(history, current, calls, d)) return true
  return false
}

/**
 * Whether the cycle was seen to advance just before its window: among the calls before it that continue the cycle
 * (each the same call as the one k later), back to the backstop's reach, at least PROGRESS_CHANGES returned
 * something else than the same call one turn earlier. A job seen advancing that then answers the same a few times
 * is pausing, not stalled: it runs on to the backstop, as a cycle whose results change in the window does (the real
 * trajectories' E7: a long ingestion whose poll showed a new book every few polls, then the same book 4 times in
 * 14 s). A poll that never moved is caught at the window (E1-E5: "running" 4 times since the job started).
 */
function progressedBefore(history: readonly Call[], calls: number, k: number, backstop: number): boolean {
  const reach = Math.max(0, history.length - (backstop - 1)) // the oldest call the backstop window holds
  let changes = 0
  for (let i = history.length - (calls - 1) + k - 1; i - k >= reach; i--) {
    if (history[i].signature !== history[i - k].signature) return false // the cycle started after it
    if (history[i].result !== history[i - k].result && ++changes >= PROGRESS_CHANGES) return true
  }
  return false
}

/**
 * Changes before the window that show a job advancing. One is not enough: a poll's first change is often the job
 * starting (no output yet, then its first line), and `x y y y` stays a loop at its window.
 */
const PROGRESS_CHANGES = 2

/** Whether each repeated call of the window returned what the same call one turn earlier returned. */
function resultsRepeat(history: readonly Call[], calls: number, k: number): boolean {
  const start = history.length - (calls - 1)
  for (let i = k; i < calls - 1; i++) {
    if (history[start + i].result !== history[start + i - k].result) return false
  }
  return true
}
