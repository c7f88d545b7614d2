/**
 * The failure streak: one tool failing the same way (`findStreak`).
 */
import type { CallRecord } from "./signatures"
import type { Call } from "./results"

/** Tools a failure streak never blocks: a failing command is how bash reports, and its next command is new work. */
const STREAK_FREE_TOOLS = new Set(["bash"])

/** `refused`: every failure of the streak was opencode's permission refusal (the user's rules forbid the call). */
export type Streak = { reason: "failures"; tool: string; failures: number; refused: boolean }

/**
 * A failure streak the current call would extend: the last `failures` calls of the session were all of the
 * current call's tool and all failed with the same error digest, whatever their arguments. Null when `failures`
 * is 0 (off), for bash, and for an exempt tool.
 */
export function findStreak(
  history: readonly Call[],
  current: CallRecord,
  failures: number,
  isExempt: (tool: string) => boolean = () => false,
): Streak | null {
  if (failures === 0 || history.length < failures) return null
  if (STREAK_FREE_TOOLS.has(current.tool) || isExempt(current.tool)) return null
  const last = history[history.length - 1]
  let refused = true
  for (let i = history.length - failures; i < history.length; i++) {
    const call = history[i]
    if (!call.failed || call.tool !== current.tool || call.result !== last.result) return null
    refused &&= call.refused
  }
  return { reason: "failures", tool: current.tool, failures, refused }
}
