/**
 * Every message, note and toast the model and the human read (`blockMessage`, `blockToast`, `ESCALATE_AT`).
 */
import type { Cycle } from "./cycle"
import type { StepRepeat } from "./steps"
import type { CallStreak } from "./call-streak"
import type { WaitOver } from "./wait-rule"
import type { Finding } from "./types"

/**
 * The finding with its tools named as the host names them (`names`: v1's name to the host's; on an OpenCode 2 host
 * `bash` is `shell`): the rules compare v1's names, the model and the person read the host's.
 */
export function inHostNames(finding: Finding, names: Readonly<Record<string, string>>): Finding {
  const name = (tool: string) => (Object.prototype.hasOwnProperty.call(names, tool) ? names[tool] : tool)
  const named = { ...finding } as Finding & { tool?: string; tools?: string[] }
  if (named.tools) named.tools = named.tools.map(name)
  if (named.tool !== undefined) named.tool = name(named.tool)
  return named
}

/** Blocks from this one on escalate: the agent is told to stop calling tools and report. */
export const ESCALATE_AT = 3

/**
 * The message the model reads as the blocked call's result. The first line is a sentence for the human; the
 * rest is for the model. It names tools, k and counts only: arguments (paths, commands, file contents) and error
 * texts may hold secrets and never appear. `stopped` adds that the run has been stopped.
 */
export function blockMessage(finding: Finding, blocks: number, stopped = false): string {
  const lines = [`loop-guard blocked this ${currentTool(finding)} call: it was not run.`, ...explanation(finding)]
  if (stopped) {
    lines.push(
      `loop-guard has now stopped this run: this is block number ${blocks} since the user's last message. ` +
        "The user has been told.",
    )
  } else if (blocks >= ESCALATE_AT) {
    lines.push(
      `This is the ${ordinal(blocks)} time loop-guard has blocked you since the user's last message. ` +
        "Stop calling tools now and report to the user: what you tried, what you found, and what blocks you.",
    )
  } else if (!asksForTheUser(finding)) {
    lines.push(
      "Reassess what you have learned and choose a materially different action: another tool, or different " +
        "arguments that test a new idea. If you cannot make progress, stop and explain to the user what blocks you.",
    )
  }
  return lines.join("\n")
}

/**
 * Findings only the user can resolve (a wait past its limit, calls the user's permission rules refused): their
 * explanation already says to stop and report, and the advice to try something different would contradict it.
 */
function asksForTheUser(finding: Finding): boolean {
  return finding.reason === "wait" || (finding.reason === "failures" && finding.refused)
}

/** The note warn mode appends to the result of a call it let run: the same facts, no block. */
export function warnNote(finding: Finding): string {
  return [
    `loop-guard warning: this ${currentTool(finding)} call ran, but it repeats what you did before ` +
      "(OPENCODE_LOOP_GUARD=warn, so it was not blocked).",
    ...explanation(finding),
    ...(asksForTheUser(finding)
      ? []
      : ["Choose a materially different action next, or stop and explain to the user what blocks you."]),
  ].join("\n")
}

function currentTool(finding: Finding): string {
  if (finding.reason === "failures" || finding.reason === "streak" || finding.reason === "step") return finding.tool
  return finding.tools[finding.tools.length - 1]
}

/** Why the call was caught, and the advice that goes with the reason. */
function explanation(finding: Finding): string[] {
  if (finding.reason === "wait") return waitExplanation(finding)
  if (finding.reason === "failures" && finding.refused) {
    return [
      `Your last ${finding.failures} tool calls were ${finding.tool} calls, and opencode refused each of them: the ` +
        "user's permission rules forbid them (or the user answered no), so they were not run.",
      "Do not try to do the same thing another way (another tool, another path, another command): the user " +
        "decides what is allowed. Stop calling tools now, tell the user what you wanted to do and why, and ask " +
        "them to allow it or to choose another way.",
    ]
  }
  if (finding.reason === "streak") return streakExplanation(finding)
  if (finding.reason === "step") return stepExplanation(finding)
  if (finding.reason === "failures") {
    return [
      `Your last ${finding.failures} tool calls were ${finding.tool} calls, and each failed with the same error, ` +
        "whatever the arguments.",
      "Re-read the current state before you try again (for edit: read the file again; its text may not be what " +
        "you remember) and change your approach: repeating the call with small changes fails the same way.",
    ]
  }
  const lines = [
    `Your last ${finding.calls} tool calls, this one included, repeat the same cycle ${finding.repetitions} times ` +
      `with identical arguments: ${finding.tools.join(" -> ")} (cycle length ${finding.k}).`,
  ]
  if (finding.reason === "cycle") {
    lines.push(
      "Each time they returned the same results, and those are already in your context; running them again will " +
        "not tell you anything new.",
    )
  } else {
    lines.push(
      "Their results changed, so loop-guard let them run until now; this many identical calls is a loop, not " +
        "progress.",
    )
  }
  if (finding.k === 1) {
    lines.push(
      "If you are waiting for something (a job, a server, a build), wait first (for example with sleep) or read " +
        "its log before asking again.",
    )
  }
  return lines
}

function streakExplanation(streak: CallStreak): string[] {
  return [
    `Your last ${streak.calls} tool calls, this one included, make this same ${streak.tool} call ` +
      `${streak.occurrences} times with identical arguments, between other calls, and nothing was changed in between ` +
      "(no edit, write or changing command).",
    "Each time it returned the same result, and that result is already in your context; running it again will not " +
      "tell you anything new.",
  ]
}

function stepExplanation(step: StepRepeat): string[] {
  const lines = [
    `Your last ${step.repetitions} steps each made the same ${step.k} tool calls at once, in some order, with ` +
      `identical arguments: ${step.tools.join(", ")}.`,
  ]
  if (!step.changing) {
    lines.push(
      "Each time they returned the same results, and those are already in your context; making them again will " +
        "not tell you anything new.",
    )
  } else {
    lines.push(
      "Their results changed, so loop-guard let them run until now; this many identical steps is a loop, not " +
        "progress.",
    )
  }
  return lines
}

function waitExplanation(wait: WaitOver): string[] {
  const limit =
    wait.limit === "budget"
      ? `loop-guard's wait budget of ${duration(wait.budget)} (OPENCODE_LOOP_GUARD_WAIT_BUDGET)`
      : `loop-guard's cap of ${wait.lapCap} laps (OPENCODE_LOOP_GUARD_WAIT_LAPS)`
  return [
    `You have been waiting in a cycle: ${wait.tools.join(" -> ")} (cycle length ${wait.k}), ${wait.laps} ` +
      `${wait.laps === 1 ? "wait" : "waits"} so far, ${duration(wait.slept)} slept in all. One more wait would go ` +
      `past ${limit}.`,
    "Whether to wait longer is for the user to decide. Stop calling tools now and report to the user what you are " +
      "waiting for, what the last check showed, and how they can check it themselves; do not start waiting again " +
      "another way.",
  ]
}

/** A number of seconds as the human reads it: 15s, 1m30s, 30m, 2h, 1h0m5s (whole seconds). */
export function duration(seconds: number): string {
  if (!Number.isFinite(seconds)) return "forever"
  const whole = Math.round(seconds)
  const h = Math.floor(whole / 3600)
  const m = Math.floor((whole % 3600) / 60)
  const s = whole % 60
  if (h > 0) return `${h}h` + (m || s ? `${m}m` : "") + (s ? `${s}s` : "")
  if (m > 0) return `${m}m` + (s ? `${s}s` : "")
  return `${s}s`
}

/** The toast's words for a wait past its limit: which limit, the time slept and the laps (no argument value). */
function waitText(wait: WaitOver): string {
  const cycle = wait.tools.join(" -> ")
  return wait.limit === "budget"
    ? `a wait past its budget (${duration(wait.slept)} slept in ${wait.laps} ${wait.laps === 1 ? "lap" : "laps"} of ${cycle})`
    : `a wait past its lap cap (${wait.laps} laps of ${cycle}, ${duration(wait.slept)} slept)`
}

/**
 * The toast the human sees for a block: loop-guard, the tool(s), the cycle's shape and what the agent was told,
 * never an argument value. Its wording is stable (the TUI tests look for it).
 */
export function blockToast(finding: Finding, blocks: number, retries = 0): string {
  return `loop-guard: blocked ${caughtText(finding, retries)}; the agent was told to ${toldText(finding, blocks)}`
}

/**
 * What was caught, in the toasts' words: "a 4th identical read", "a cycle read -> bash repeated 3 times", "edit
 * after 3 failures in a row", "edit after 3 calls the user's permission rules refused", "a wait past its budget
 * (30m slept in 30 laps of bash -> bash)".
 */
function caughtText(finding: Finding, retries = 0): string {
  if (finding.reason === "wait") return waitText(finding)
  if (finding.reason === "failures") {
    const how = finding.refused ? "calls the user's permission rules refused" : "failures in a row"
    return `${finding.tool} after ${finding.failures} ${how}`
  }
  if (finding.reason === "streak") {
    const n = finding.occurrences + retries
    return `${article(n)} ${ordinal(n)} identical ${finding.tool} among other calls`
  }
  if (finding.reason === "step") {
    const changing = finding.changing ? " whose results kept changing" : ""
    return `a step of ${finding.k} calls (${finding.tools.join(", ")}) made ${finding.repetitions} times in any order${changing}`
  }
  return shapeText(finding, retries)
}

/** What the agent was told, in the toasts' words: the advice of the finding, or to stop from ESCALATE_AT on. */
function toldText(finding: Finding, blocks: number): string {
  if (finding.reason === "wait") return "stop and report what it is waiting for"
  if (finding.reason === "failures" && finding.refused) return "stop and ask the user"
  const escalated = blocks >= ESCALATE_AT
  if (finding.reason === "failures") return `re-read and ${escalated ? "stop and report" : "change approach"}`
  if (escalated) return "stop and report"
  const changing = finding.reason === "backstop" || (finding.reason === "step" && finding.changing)
  return changing ? "wait or change course" : "change course"
}

/** The toast for a call warn mode let run. */
export function warnToast(finding: Finding): string {
  return `loop-guard: warned about ${caughtText(finding)}; it ran (warn mode) and the agent was told`
}

/** The toast for the bounded stop. */
export function stopToast(finding: Finding, blocks: number, retries = 0): string {
  return `loop-guard: stopped the agent after ${blocks} blocks in one turn (the last: ${caughtText(finding, retries)})`
}

/** The log's words and fields for a finding (no argument values). */
export function describe(finding: Finding): string {
  if (finding.reason === "wait")
    return `a wait past its ${finding.limit === "budget" ? "budget" : "lap cap"}: ${finding.tools.join(" -> ")}`
  if (finding.reason === "failures")
    return `a failure streak: ${finding.failures} ${finding.refused ? "refused" : "failed"} ${finding.tool} calls in a row`
  if (finding.reason === "streak")
    return `a per-call streak: ${finding.occurrences} identical ${finding.tool} calls among other calls`
  if (finding.reason === "step")
    return `a step made again: ${finding.repetitions} steps of the same ${finding.k} calls (${finding.tools.join(", ")})`
  return `${finding.reason === "backstop" ? "a cycle at the backstop" : "a cycle"}: ${finding.tools.join(" -> ")}`
}

export function facts(finding: Finding): Record<string, unknown> {
  if (finding.reason === "wait") {
    const { reason, limit, tools, k, slept, laps, budget, lapCap } = finding
    return { reason, limit, tools, k, slept, laps, budget, lapCap }
  }
  if (finding.reason === "failures")
    return { reason: finding.reason, tools: [finding.tool], failures: finding.failures, refused: finding.refused }
  if (finding.reason === "streak")
    return { reason: finding.reason, tools: [finding.tool], occurrences: finding.occurrences, calls: finding.calls }
  if (finding.reason === "step") {
    const { reason, changing, tools, k, repetitions } = finding
    return { reason, changing, tools, k, repetitions }
  }
  return { reason: finding.reason, tools: finding.tools, k: finding.k, repetitions: finding.repetitions }
}

/**
 * "a 4th identical read", "a 10th identical read whose results kept changing", "a cycle read -> bash repeated 3
 * times". For k = 1 the count includes the blocked retries before this one: the 2nd retry of a 4th read is a 6th.
 */
function shapeText(cycle: Cycle, retries = 0): string {
  const changing = cycle.reason === "backstop" ? " whose results kept changing" : ""
  const n = cycle.calls + retries
  if (cycle.k === 1) return `${article(n)} ${ordinal(n)} identical ${cycle.tools[0]}${changing}`
  return `a cycle ${cycle.tools.join(" -> ")} repeated ${cycle.repetitions} times${changing}`
}

function ordinal(n: number): string {
  const tens = n % 100
  if (tens >= 11 && tens <= 13) return `${n}th`
  return `${n}${["th", "st", "nd", "rd"][n % 10] ?? "th"}`
}

/** "an" before 8th, 11th, 18th, 80th..., "a" otherwise. */
export function article(n: number): string {
  return /^8/.test(String(n)) || n === 11 || n === 18 ? "an" : "a"
}
