/**
 * Steps as sets: the same 2..8 parallel calls made again in any order (`findStepRepeat`).
 */
import type { CallRecord } from "./signatures"
import { NO_RESULT, type Call } from "./results"
import { MAX_CYCLE } from "./cycle"

/** One step made again: the same calls at once, in any order. `changing`: their results changed (the backstop). */
export type StepRepeat = {
  reason: "step"
  changing: boolean
  /** calls in the step */
  k: number
  /** steps in the window, the current one included */
  repetitions: number
  /** calls in the window */
  calls: number
  /** tool names of the step, sorted, and the current call's tool */
  tools: string[]
  tool: string
}

/** The calls of one step as a set: their signatures sorted (a multiset: a call made twice counts twice). */
function stepKey(calls: readonly CallRecord[]): string {
  return calls
    .map((call) => call.signature)
    .sort()
    .join("\n")
}

/** What one step returned, by call: each signature with its result, sorted; equal when every call's result is. */
function stepResults(calls: readonly Call[]): string {
  return calls
    .map((call) => `${call.signature}=${call.result}`)
    .sort()
    .join("\n")
}

/**
 * The step the current call completes, when the last steps (r of them with the current one; 3r at the backstop)
 * made the same 2..MAX_CYCLE calls each, in any order: [a,b,c], [c,a,b], [b,c,a]. Null otherwise. A step of one
 * call is the cycle rule's k = 1. The results are compared between the complete steps before the current one (the
 * current step's calls may still be running), and, for those of the current step already answered, with the step
 * before; when they changed the steps run on to the backstop. A step with a wait is the wait rule's. `history` is
 * recorded calls, oldest first, without the current one; at most 3r * MAX_CYCLE of them are read.
 */
export function findStepRepeat(
  history: readonly Call[],
  current: Call,
  repetitions: number,
  isExempt: (tool: string) => boolean = () => false,
): StepRepeat | null {
  let start = history.length
  while (start > 0 && history[start - 1].step === current.step && history.length - start < MAX_CYCLE) start--
  const size = history.length - start + 1
  if (size < 2 || size > MAX_CYCLE || history[start - 1]?.step === current.step) return null // none, or too many
  const mine = [...history.slice(start), current]
  if (mine.some((call) => call.wait > 0) || mine.every((call) => isExempt(call.tool))) return null
  const key = stepKey(mine)
  const steps: Call[][] = [] // the complete steps before the current one with the same calls, newest first
  for (let end = start; end > 0 && steps.length < 3 * repetitions - 1;) {
    let begin = end - 1
    while (begin > 0 && history[begin - 1].step === history[end - 1].step) begin--
    const step = history.slice(begin, end)
    if (step.length !== size || stepKey(step) !== key) break
    steps.push(step)
    end = begin
  }
  if (steps.length < repetitions - 1) return null
  const tools = mine.map((call) => call.tool).sort()
  const found = (changing: boolean, count: number): StepRepeat => ({
    reason: "step",
    changing,
    k: size,
    repetitions: count,
    calls: count * size,
    tools,
    tool: current.tool,
  })
  if (stepResultsRepeat(steps.slice(0, repetitions - 1), mine)) return found(false, repetitions)
  return steps.length >= 3 * repetitions - 1 ? found(true, 3 * repetitions) : null
}

/** Whether the complete steps (newest first) returned the same, and the answered calls of `mine` the same again. */
function stepResultsRepeat(steps: readonly Call[][], mine: readonly Call[]): boolean {
  for (let i = 1; i < steps.length; i++) if (stepResults(steps[i]) !== stepResults(steps[0])) return false
  const answered = mine.filter((call) => call.result !== NO_RESULT)
  return answered.every((call) =>
    steps[0].some((before) => before.signature === call.signature && before.result === call.result),
  )
}
