/**
 * The per-call streak: one call repeated among varying calls with nothing changed between (`findCallStreak`,
 * `STREAK_MAX_GAP`).
 */
import { callChanges, type Call } from "./results"
import { MAX_CYCLE } from "./cycle"

/**
 * The most calls of other work between two occurrences of a streak's call: it comes back at least every other
 * call (every step, beside one other call). An agent that re-reads one file while it explores ([a], [a,b],
 * [a,b,c], [a,b,c,d]) does more work every round, so its re-reads drift apart and never make a streak.
 */
const STREAK_MAX_GAP = 1

/** The calls a streak can span, the current one included: r + 1 occurrences and r gaps of STREAK_MAX_GAP calls. */
function streakWindow(repetitions: number): number {
  return repetitions + 1 + repetitions * STREAK_MAX_GAP
}

/** One call repeated among other calls: `occurrences` times (the current one included) in the last `calls`. */
export type CallStreak = { reason: "streak"; tool: string; occurrences: number; calls: number }

/**
 * The per-call streak the current call completes: its r + 1st occurrence (the 4th by default; occurrences are
 * the steps that make the call: repeats inside one step are one, identical parallel calls being opencode's own
 * doom_loop check) where each two occurrences have at most STREAK_MAX_GAP calls of other work between them (the
 * other calls of the earlier occurrence's step and of the steps up to the later one's), every earlier occurrence
 * returned the same result, no call in the streak changed the project (changesProject, a failed one does not),
 * and the calls around it vary (at least two different ones: a fixed partner makes it a cycle, the cycle rule's).
 * Null otherwise, for an exempt tool, and for a call that waits (a `sleep 30 && gh run view` or a slow `process
 * wait` between reads of logs is the wait rule's, held to its budget: its answer repeating is what waiting looks
 * like). Reads at most streakWindow + MAX_CYCLE calls back.
 */
export function findCallStreak(
  history: readonly Call[],
  current: Call,
  repetitions: number,
  isExempt: (tool: string) => boolean = () => false,
): CallStreak | null {
  if (current.wait > 0 || isExempt(current.tool)) return null
  const limit = Math.max(0, history.length - (streakWindow(repetitions) + MAX_CYCLE))
  if (!occursTimes(history, current.signature, limit, repetitions)) return null // most calls: one quick scan
  let occurrences = 1
  let laterStep = current.step // the step of the newest occurrence found so far
  let gap = 0 // other calls between the newest occurrence found and the one before it, being counted
  let laterGap = 0 // the other calls counted for the pair already found (its earlier step's calls come later)
  let result: string | null = null
  let other: string | null = null // the first other call seen, and whether another one differs from it
  let varied = false
  let i = history.length - 1
  // on to the first occurrence, then over the calls before it in its step (they are its pair's work too)
  for (; i >= limit && (occurrences <= repetitions || history[i].step === laterStep); i--) {
    const call = history[i]
    if (call.signature === current.signature) {
      if (result !== null && call.result !== result) return null
      result = call.result
      if (call.step !== laterStep) {
        occurrences += 1 // a step that makes it again; a repeat inside one step is no new occurrence
        ;[laterGap, gap] = [gap, 0]
      }
      laterStep = call.step
      continue
    }
    if (!call.failed && callChanges(call)) return null
    if (other === null) other = call.signature
    else if (call.signature !== other) varied = true
    if (call.step !== laterStep) gap += 1
    else if (laterStep !== current.step) laterGap += 1 // beside an earlier occurrence, in its step: its pair's
    if (gap > STREAK_MAX_GAP || laterGap > STREAK_MAX_GAP) return null
  }
  if (occurrences <= repetitions || !varied) return null
  if (i >= 0 && history[i].step === laterStep) return null // the first occurrence's step reaches past the bound
  return { reason: "streak", tool: current.tool, occurrences, calls: history.length - i }
}

/** Whether the signature occurs at least `times` times in history[from..]. */
function occursTimes(history: readonly Call[], signature: string, from: number, times: number): boolean {
  let count = 0
  for (let i = history.length - 1; i >= from; i--)
    if (history[i].signature === signature && ++count >= times) return true
  return false
}
