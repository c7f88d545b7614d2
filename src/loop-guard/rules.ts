/**
 * The order of the rules, in one place: a cycle or a wait, then a step set, then a per-call streak, then a failure
 * streak. The first that finds something decides; the call is then blocked (or, in warn mode, noted).
 */
import { findCycle } from "./cycle"
import { findStepRepeat } from "./steps"
import { findCallStreak } from "./call-streak"
import { cycleOrWait, type WaitLimits, type WaitState } from "./wait-rule"
import { findStreak } from "./failure-streak"
import type { Call } from "./results"
import type { Finding } from "./types"

/** The settings the rules read (from the environment, see readSettings), with EXEMPT as a matcher. */
export type Rules = WaitLimits & { failures: number }

/** What the current call completes, or null: it may run. */
export function findLoop(state: WaitState, call: Call, rules: Rules): Finding | null {
  const { history } = state
  return (
    cycleOrWait(state, call, findCycle(history, call, rules.repetitions, rules.isExempt), rules) ??
    findStepRepeat(history, call, rules.repetitions, rules.isExempt) ??
    findCallStreak(history, call, rules.repetitions, rules.isExempt) ??
    findStreak(history, call, rules.failures, rules.isExempt)
  )
}
