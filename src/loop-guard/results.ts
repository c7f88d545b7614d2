/**
 * A call's record (`newCall`), its result digest with volatile parts masked (`maskVolatile`, `VOLATILE`), refusals,
 * whether a call may change the project (`changesProject`, `callChanges`: a bash command read only when a rule
 * asks).
 */
import { READING_TOOLS } from "../shared/tools"
import { canonicalize, digest, isWellFormed, type CallRecord } from "./signatures"
import { isReadOnlyCommand } from "../shared/bash-programs"

/** The result of a call that has not been seen (yet): a parallel call still running, or an event that never came. */
export const NO_RESULT = "none"

/**
 * Digest of what a call returned (the output the model reads), its volatile parts masked (maskVolatile): a poll
 * answered "running" with a new timestamp each time returned the same result. Only the digest is kept.
 */
export function resultDigest(output: unknown): string {
  return "ok:" + exactDigest(maskVolatile(output))
}

/** Digest of a failed call's error text, volatile parts masked too; failures and outputs never compare equal. */
export function errorDigest(error: unknown): string {
  return "error:" + exactDigest(maskVolatile(error))
}

/** A month's name as dates write it: full or its 3-letter abbreviation (not `Decimal`, not `Marks`). */
const MONTH = String.raw`(?:Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?)`

/**
 * The parts of a result that move with the clock, not with the work: named patterns, applied in this order, each
 * match replaced by its name (`<date>`, `<time>`, `<duration>`; a timing key keeps its key and loses its value). So
 * `running, 04:48:27` and `running, 04:49:01` are the same result while `3 files` and `4 files` stay apart. NOT
 * masked, on purpose: bare numbers (a line count, a size, an id; an epoch-like 1733028507 may be a byte count),
 * percentages, `HH:MM` without seconds (a path's line:column, `a.ts:12:30`), versions (`1.2.3`), hashes, colour
 * codes (`ESC[32m` is no 32 minutes), and words: a different status word, or a new log line (even one whose
 * timestamp is masked), is progress. One pass per pattern with a fixed replacement is the engine's fast path (one
 * regex of alternatives with a function per match cost 1.3 times as much on 64 KB of source or of timestamped log).
 */
const VOLATILE: readonly { name: string; pattern: RegExp; replacement: string }[] = [
  {
    // a date, with its time of day when given: 2025-12-01, 2025/12/01, 2025-12-01T04:48:27.620Z,
    // 2025-12-01 04:48:27+01:00 (Claude Code's bashoutput stamps every answer with one: E1-E5)
    name: "date",
    pattern:
      /(?<!\d)\d{4}[-/]\d{2}[-/]\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?(?:Z|[+-]\d{2}:?\d{2}(?!\d))?)?(?!\d)/g,
    replacement: "<date>",
  },
  {
    // a written date (date(1), HTTP headers, ls -l, logs): Mon, 01 Dec 2025 10:00:00 / Dec  1 04:48 / 1 Dec 2025;
    // a month is its full name or its 3-letter abbreviation (not `Decimal`, not `Marks`)
    name: "written date",
    pattern: new RegExp(
      String.raw`\b(?:(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*,? +)?(?:\d{1,2} +${MONTH}\b(?: +\d{4})?|${MONTH} +\d{1,2}\b(?:,? +\d{4})?)(?: +\d{1,2}:\d{2}(?::\d{2})?)?(?![\d:])`,
      "g",
    ),
    replacement: "<date>",
  },
  {
    // a clock time with seconds, or with AM/PM: 04:48:27, 4:48:27.5 PM, 4:48 pm, an elapsed 00:01:23
    name: "time",
    pattern: /(?<![\d:.])\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?(?: ?[AaPp][Mm]\b)?| ?[AaPp][Mm]\b)(?![\d:])/g,
    replacement: "<time>",
  },
  {
    // a duration with its unit: 3.2s, 120ms, 1m20s, 2h, 12.5 s, 3 seconds (ago), 5 minutes; not after [ or ;
    // (ESC[32m, ESC[1;31m: colours) nor inside a word or a number (x2s; 1.5s is read from its 1)
    name: "duration",
    pattern:
      /(?<![\w.[;])\d+(?:\.\d+)?(?:(?:ns|us|µs|ms|s|m|h)(?:\d+(?:\.\d+)?(?:ms|s|m))*| ?(?:ms|s)| ?(?:milliseconds?|seconds?|secs?|minutes?|mins?|hours?|hrs?))(?![\w%])/g,
    replacement: "<duration>",
  },
  {
    // a number under a timing key (hermes drops duration_seconds and execution_count before comparing):
    // "duration_seconds": 12.5, elapsed=3, execution_count: 7, "createdAt": 1733028507, uptime: 5, elapsed_ms=40
    // (matched from the key's last word on, which is all it takes to tell a timing key; the key is kept). A key
    // ending in `time` only with a fraction (`Best time: 0.23`, `evaluation_time: 45.2`): `time: 24` is an xarray
    // dimension in the real trajectories, `time_perception: 5` a score; a suffix is a unit, not any word
    name: "timing key",
    pattern:
      /(?:((?:[Tt]imestamp|[Dd]uration|[Ee]lapsed|[Tt]ook|[Uu]ptime|execution_count|_at|At)(?:_(?:s|ms|us|ns|secs?|seconds|millis|milliseconds|minutes|mins|hours))?"?\s*[:=]\s*"?)-?\d+(?:\.\d+)?|([Tt]ime(?:_(?:s|ms|us|ns|secs?|seconds|millis|milliseconds|minutes|mins|hours))?"?\s*[:=]\s*"?)-?\d+\.\d+)(?![\d.:])/g,
    replacement: "$1$2<timing>",
  },
]

/**
 * A result with its volatile parts (VOLATILE) replaced by their names; anything but a string as it is. A result of
 * more than MASK_MAX_CHARS characters is compared whole: a poll's answer is short (Claude Code's bashoutput "running"
 * is 75 characters), and masking costs 2-230 times the digest of the same text (a 16 KB log with a timestamp a
 * line: 0.1-0.3 ms on a loaded 2-core machine; bench: `npm run bench -- --only=loop-guard`, "result mask" rows).
 */
export function maskVolatile(result: unknown): unknown {
  if (typeof result !== "string" || result.length > MASK_MAX_CHARS) return result
  let masked = result
  for (const { pattern, replacement } of VOLATILE) masked = masked.replace(pattern, replacement)
  return masked
}
const MASK_MAX_CHARS = 16384

/**
 * A digest that tells every two results apart (up to collisions): a string as it is, one with a lone surrogate in
 * its JSON form (the native hash reads text as UTF-8, see stringLeaf), anything else canonicalized; each form with
 * its own tag, so no two forms compare equal.
 */
function exactDigest(value: unknown): string {
  if (typeof value !== "string") return "c" + digest(canonicalize(value))
  return isWellFormed(value) ? "s" + digest(value) : "j" + digest(JSON.stringify(value))
}

/**
 * opencode's own permission refusals, as its tool parts' error texts word them (opencode 1.18.33:
 * PermissionDeniedError, a rule of the user's config or of the agent, e.g. the plan agent's edit rules;
 * PermissionRejectedError and PermissionCorrectedError, the human answered no). Only the fact that a failure was a
 * refusal is kept, never the text.
 */
const PERMISSION_REFUSAL =
  /The user has specified a rule which prevents you from using this specific tool call|The user rejected permission to use this specific tool call/

/** Whether a failed call's error is one of opencode's permission refusals (the call never ran). */
export function isRefusal(error: unknown): boolean {
  return typeof error === "string" && PERMISSION_REFUSAL.test(error)
}

/** One call of the session's history: its signature, and its result once the host reports it. */
export type Call = CallRecord & {
  callID: string
  /** resultDigest / errorDigest, or NO_RESULT */
  result: string
  failed: boolean
  /** failed because opencode's permission rules (or the human) refused it */
  refused: boolean
  /**
   * seconds the call waits: before it runs, what it asks to sleep (waitSeconds) or else what the same call took
   * the last time (expectedWait); once its result is seen, what it asked, or else what it took (measuredWait); 0
   * when it is no wait
   */
  wait: number
  /** seconds its command asks to sleep first (waitSeconds), 0 when none */
  asked: number
  /** seconds from tool.execute.before to its result, as the adapter measured them; null until the result */
  ran: number | null
  /** the adapter's clock (ms) when tool.execute.before let it run */
  started: number
  /** warn mode: the note to append to this call's result when it arrives */
  note: string | null
  /** the step (one assistant message's calls, made at once) the call belongs to; see stepOf in the adapter */
  step: string
  /** the call may change the project when it succeeds (changesProject): it ends a per-call streak; read with callChanges */
  changes: boolean
  /** its bash command while nobody has asked whether it changes anything (callChanges reads it once, then drops it) */
  unread: string | null
}

export function newCall(
  record: CallRecord,
  callID: string,
  wait = 0,
  asked = wait,
  started = 0,
  step = callID,
  changes: boolean | string = false,
): Call {
  const { signature, tool } = record // one object literal of a fixed shape: this runs on every call
  return {
    signature,
    tool,
    callID,
    result: NO_RESULT,
    failed: false,
    refused: false,
    wait,
    asked,
    ran: null,
    started,
    note: null,
    step,
    changes: changes === true,
    unread: typeof changes === "string" ? changes : null,
  }
}

/**
 * Tools that only read (READING_TOOLS, shared with semantic-anchors). Any other tool (edit, write, patch, `task`: a
 * subagent may edit files; an MCP tool loop-guard knows nothing of) may change something when it succeeds: it ends a
 * per-call streak, which only makes a streak harder to reach. bash is read by isReadOnlyCommand.
 */
const READ_ONLY_TOOLS = new Set(READING_TOOLS)

/** A bash command up to this long is kept with its call, unread, until a rule asks; a longer one is read at once. */
const MAX_COMMAND_KEPT = 1024

/**
 * Whether a call may change the project: a tool that is not in READ_ONLY_TOOLS, or a bash command that is not
 * read-only (isReadOnlyCommand: the bash reader semantic-anchors uses too). Reading a command costs more than the
 * rest of the hook, and only a per-call streak ever asks, for a few calls: so a bash command of up to
 * MAX_COMMAND_KEPT characters is returned as it is, to be read by callChanges when asked (kept in memory with its
 * call, never logged); any other answer is the boolean.
 */
export function changesProject(tool: string, args: unknown): boolean | string {
  if (READ_ONLY_TOOLS.has(tool)) return false
  if (tool !== "bash") return true
  const command = typeof args === "object" && args !== null ? (args as { command?: unknown }).command : undefined
  if (typeof command !== "string") return true
  return command.length <= MAX_COMMAND_KEPT ? command : !isReadOnlyCommand(command)
}

/** Whether the call may change the project when it succeeds: its bash command is read the first time this asks. */
export function callChanges(call: Call): boolean {
  if (call.unread !== null) {
    call.changes = !isReadOnlyCommand(call.unread)
    call.unread = null
  }
  return call.changes
}
