/**
 * The types more than one layer of loop-guard shares, in one module before all of them: what a rule found (read by
 * the texts and the hooks) and a repetition a stream watcher found (read by the asked-for check before it). A module
 * imports from the modules before it only (the build checks it, types too).
 */
import type { Cycle } from "./cycle"
import type { StepRepeat } from "./steps"
import type { CallStreak } from "./call-streak"
import type { WaitOver } from "./wait-rule"
import type { Streak } from "./failure-streak"

/**
 * What was found: a cycle (results repeated, or at the backstop), a step made again, a per-call streak, a failure
 * streak, or a wait past its limit.
 */
export type Finding = Cycle | StepRepeat | CallStreak | Streak | WaitOver

/** A repetition found in a part: the passage's length, its copies so far, where it began, and when it was certain. */
export type StreamLoop = {
  /** the repeated passage's length when certain */
  period: number
  /** copies of that length since the loop began */
  count: number
  /** the loop's first character (offset in the part) */
  start: number
  /** the length of the passage it began with (the cut keeps one copy of it) */
  first: number
  /** characters seen when certain */
  at: number
  /** whole lines of code, a table or a diagram: stopped at the code backstop */
  code: boolean
}
