/**
 * loop-guard: an opencode plugin that stops the agent from cycling through the same tool calls.
 *
 * What: every tool call gets a signature (tool name + canonical arguments) and, once it has run, a digest of its
 * result. When the last calls of a session, the current one included, repeat a cycle of length k (k = 1..8) for
 * the configured number of repetitions r AND the repeated calls returned the same results each time, the current
 * call is blocked: the hook throws, the tool does not run, and the model reads our message as the tool result.
 * With the default r = 3 such a cycle is caught after max(3k, 4) calls:
 *
 *   k = 1  A A A A                   the 4th identical call is blocked
 *   k = 2  A B A B A B               the 6th call
 *   k = 3  A B C A B C A B C         the 9th call
 *   k = 4  A B C D x3                the 12th call
 *   k = 5  A B C D E x3              the 15th call (five reads repeated)
 *   k = 8  A B C D E F G H x3        the 24th call (k = 6: an edit/test/revert/lint cycle, the 18th)
 *
 * Progress is not a loop: when the results changed between repetitions (a poll of a job that advances, a growing
 * log), the cycle runs on until a backstop at max(3r*k, 3r+1) calls (the 10th identical poll by default), so
 * nothing repeats forever. A call whose result was not seen (yet) counts as the result "none".
 *
 * Volatile parts of a result are not progress: dates, clock times with seconds, durations with their unit (3.2s,
 * 120ms, 5 minutes) and numbers under timing keys (duration_seconds, execution_count, createdAt) are masked before
 * a result or an error is digested, so a poll answered "running" with a fresh timestamp each time is caught at its
 * 4th; a count, a percentage, a new log line or another status word still changes the result (see VOLATILE). What
 * the model reads is not changed. A cycle seen advancing just before its window (PROGRESS_CHANGES = 2 or more
 * changed results among the calls before it that continue the cycle, back to the backstop's reach) is a job
 * pausing, not stalled: it too runs on to the backstop (see progressedBefore).
 *
 * Steps as sets: the calls of one step (the parallel calls of one assistant message: opencode announces each tool
 * part with its messageID before it runs; without that, calls that reach the hook one after the other with no
 * result between) compare as a set. When the last r steps (3 by default) each made the same 2..8 calls in any
 * order ([a,b,c], [c,a,b], [b,c,a]) and the complete ones returned the same results, the call that completes the
 * r-th is blocked; with results that changed, the 3r-th step is the backstop. A step that holds a wait is the wait
 * rule's; a step of one call is the cycle rule's k = 1.
 *
 * Per-call streaks: one call that comes back at least every other call (at most STREAK_MAX_GAP = 1 call of other
 * work between two occurrences, counted by steps), among calls that vary, is blocked at its (r+1)-th occurrence
 * (the 4th; repeats inside one step are one occurrence) when every earlier one returned the same result and no
 * call in between changed the project: any tool but the reading ones of READ_ONLY_TOOLS (read, grep, glob, list,
 * webfetch, websearch, ...), or a bash command that is not read-only (isReadOnlyCommand: only a short list of
 * reading programs is read-only, anything else counts as a change; a failed call changes nothing). `websearch x`
 * every other call while the reads between change is caught at its 4th; an agent that re-reads one file while it
 * explores new ones ([a], [a,b], [a,b,c], [a,b,c,d]) does more work every round, its re-reads drift apart (1, 2,
 * 3 calls between) and it runs. A fixed partner (a b a b) is a cycle, left to the cycle rule and its backstop; a
 * call that waits (see below) is left to the wait rule.
 *
 * Bounds: a session keeps its last max(24r, 3r+1) - 1 calls (71 by default: the backstop of an 8-call cycle or
 * of 3r steps of 8 calls), only digests and a few numbers. Per call the cycle check compares signatures for
 * k = 1..8 and stops at the first mismatch (one comparison per k in the usual case), and reads back at most the
 * backstop window for a cycle seen advancing, only when the window's results repeat; the step check reads back
 * only for a step of 2 or more calls, step by step while they hold the same calls (at most 3r steps); the streak
 * reads at most r + 1 + r * STREAK_MAX_GAP + 8 calls back; the wait expected of a call looks at most
 * 2 * MAX_CYCLE calls back. Per result, the masks make one pass each over at most MASK_MAX_CHARS (16 KB)
 * characters; a longer result is compared whole.
 *
 * Failure streaks: when one tool other than bash failed on the last 3 calls of the session with the same error,
 * whatever its arguments (an edit retried with ever different oldStrings, each "not found"), its next call is
 * blocked until a call of any tool succeeds. bash is left out: a failing command is its normal way to report.
 * When those errors are opencode's permission refusals (a deny rule of the user or of the agent, or the human's
 * "no"), the message says the user's rules forbid the call: ask the user, do not try it another way.
 *
 * A wait is not a loop: a cycle one of whose calls waits (a bash command that sleeps 5 s or more before anything
 * else: `sleep 60`, `sleep 30 && gh run view 1`, see sleepSeconds; or a call that itself ran 5 s or more from
 * tool.execute.before to its result, and so did its previous run: a `process wait` with a timeout, `gh run watch`;
 * see measuredWait, and, before it runs again, expectedWait: it is taken to wait as long as the last time; not in
 * a cycle that edits files: edit -> a 10 s test run -> edit is work retried, see isWaiting) is timed instead of
 * blocked, from its 2nd lap (a wait that repeats one of the last calls), whatever its results (a
 * poll's output often changes while it waits), so the time slept is checked before each wait runs. Its calls run
 * while the time its waits slept, in a row, stays within a budget (30 minutes) and their number within a lap cap
 * (60); then the wait that would go past it is blocked (and every later wait of the cycle), and the agent is told
 * to report to the user what it is waiting for. What counts is the sleep a command asks for, or, for a call that
 * asks for none, the time it itself ran; never the time the model takes to answer. A fast poll with the same
 * answer is still a loop at its 4th. The count starts over when a call outside the cycle runs, at a new turn and
 * at a compaction.
 *
 * A bounded stop: at the 5th block in one turn (between two idle states of the session) the session's run is
 * aborted through opencode's SDK, so a model that ignores every message cannot keep paying for requests. Each block
 * and the stop are also shown to the human as a toast, and logged.
 *
 * What is not identity (left out of the signature, because the model rewrites it freely and it does not change
 * what the call does): bash's `description` (a label for the human; the `command` is what runs) and task's
 * `description` (a 3-5 word label; the `prompt` is what the subagent gets), and the top-level keys the setting
 * OPENCODE_LOOP_GUARD_IGNORE_KEYS names for a tool (a fresh `request_id` nonce on every lookup). Every other key of
 * every tool counts.
 *
 * Loops in the stream: every streamed part (reasoning and answer, each on its own, from message.part.delta) is fed to
 * a small watcher. When a part repeats one passage back to back (`!!!!`, ` it it it`, a sentence, a paragraph of up
 * to 8,000 characters) for 6 copies and 800 characters, whichever comes later, or a passage of 1,000 characters or
 * more verbatim for 4 copies (stopped by the end of its 4th copy), the session's run is aborted, the human sees an
 * error toast (reasoning or answer, the passage's length and count, never its text), and in the model's next context
 * that part is cut after the passage's first copy, with a note. Whole lines repeated in a Markdown code fence, a
 * table or a diagram are code, data or layout, stopped only at a backstop (64 copies and 8,000 characters). A
 * repetition the person's latest message asked for, with a count and the passage (`print 'ha' 2000 times`), runs in
 * the answer (not the reasoning) up to 1.5 times the count's worth of characters (askedRepetition, chat.message). See
 * src/loop-guard/stream-watcher.ts.
 *
 * Why: opencode's own doom_loop check only looks at the last three parts of the current assistant message, so a
 * model that reads the same file once per step, or ping-pongs edit/test/edit/test with the same edit, runs forever.
 *
 * How to tune (environment, read once when opencode starts; invalid values are logged and replaced by defaults):
 *   OPENCODE_LOOP_GUARD=block|warn|off     block (default); warn (the call runs, the model reads a note appended to
 *                                          its result, and it is logged); off
 *   OPENCODE_LOOP_GUARD_REPETITIONS=r      repetitions that make a cycle, 2..50, default 3 (caught after max(r*k, r+1),
 *                                          or at the backstop max(3r*k, 3r+1) when the results changed)
 *   OPENCODE_LOOP_GUARD_FAILURES=n         failures in a row of one tool (not bash) that block its next call, 2..50,
 *                                          default 3; 0 switches the failure streak off
 *   OPENCODE_LOOP_GUARD_MAX_BLOCKS=n       blocks in one turn after which the run is stopped, 1..1000, default 5;
 *                                          0 = never stop
 *   OPENCODE_LOOP_GUARD_WAIT_BUDGET=t      the time a waiting cycle may sleep: seconds, or with s, m or h (15s, 30m,
 *                                          1h), 1s..24h, default 30m; 0 = waits get no budget (a cycle is a loop)
 *   OPENCODE_LOOP_GUARD_WAIT_LAPS=n        the waits a waiting cycle may take, 1..10000, default 60
 *   OPENCODE_LOOP_GUARD_STREAM=block|warn|off
 *                                          loops in the streamed text and reasoning: block (abort the run), warn
 *                                          (toast and log only) or off; unset, it follows OPENCODE_LOOP_GUARD
 *   OPENCODE_LOOP_GUARD_EXEMPT=globs       comma-separated tool-name globs (* and ?), e.g. todowrite,mcp_*_poll;
 *                                          a cycle or a step is let through only when every call in it is an
 *                                          exempt tool, a failure streak or a per-call streak when its tool is
 *                                          exempt
 *   OPENCODE_LOOP_GUARD_IGNORE_KEYS=tool:key,...
 *                                          argument keys left out of a tool's signature, each a tool-name glob (as
 *                                          EXEMPT's), a colon and a top-level key (what follows the last colon):
 *                                          mcp_search_lookup:request_id,mcp_*:nonce; none by default
 *
 * Layout: this file is generated by `npm run build` from the modules in src/ (each under a banner naming it; the
 * order is the layering, docs/architecture.md has one line per module): pure core (signatures, the bash reader shared
 * with semantic-anchors, results, cycle check, waits, steps as sets, per-call streak, wait rule, failure streak, the
 * order of the rules, messages, an asked-for repetition, the stream watcher, settings), then session state, then the
 * opencode adapter (the host's channels, the stream's adapter, the hooks).
 */

/**
 * The opencode adapter: each hook a named function that hands opencode's input to the rules (findLoop) and acts on
 * the verdict: a block (the hook throws; the model reads the message), a note in warn mode, the toast and the log,
 * the stop at the turn's limit. Fails open: an internal error lets the call through and is logged once per session.
 * v1 hosts call `server`; OpenCode 2 hosts call `setup`, which translates their hooks into these (setupV2).
 */
import type { Hooks, Plugin, PluginInput } from "@opencode-ai/plugin"
import { globMatcher, ignoredKeys, signature } from "./signatures"
import { changesProject, errorDigest, isRefusal, newCall, resultDigest, type Call } from "./results"
import { historyCapacity } from "./cycle"
import { expectedWait, waitSeconds } from "./waits"
import { findLoop, type Rules } from "./rules"
import {
  ESCALATE_AT,
  blockMessage,
  blockToast,
  describe,
  facts,
  inHostNames,
  stopToast,
  warnNote,
  warnToast,
} from "./texts"
import type { Finding } from "./types"
import { readSettings, readStreamMode, type Settings } from "./settings"
import {
  Sessions,
  findCall,
  noteStep,
  record,
  resetTarget,
  settleWait,
  stepOf,
  toolPartUpdate,
  type SessionState,
} from "./sessions"
import { aborter, clockOf, environment, logger, toaster, type Log, type Toast } from "./host"
import { streamGuard, streamHooks } from "./stream-guard"
import { V2_NAMES, claimHost, setupV2 } from "../shared/v2-host"

/** One plugin instance: its settings and rules, the sessions it watches, and its channels to the host. */
type Guard = {
  settings: Settings
  rules: Rules
  sessions: Sessions
  capacity: number
  keysLeftOut: (tool: string) => readonly string[]
  clock: () => number
  log: Log
  toast: Toast
  abort: (sessionID: string) => void
  /** v1's tool names as the host names them in what the model and the person read (empty on a v1 host) */
  hostNames: Readonly<Record<string, string>>
}

/** The verdict on one call, decided synchronously so parallel calls of one step see each other's records. */
type Verdict = { block: string } | null

/** tool.execute.before: a call that completes a loop is blocked (the throw is what the model reads). */
async function onToolBefore(
  guard: Guard,
  input: { sessionID?: unknown; tool?: unknown; callID?: unknown } | undefined,
  output: { args?: unknown } | undefined,
): Promise<void> {
  const verdict = judge(guard, String(input?.sessionID), String(input?.tool), String(input?.callID), output?.args)
  if (verdict) throw new Error(verdict.block)
}

/** The call made into a record and judged by the rules; recorded when it may run. */
function judge(guard: Guard, sessionID: string, tool: string, callID: string, args: unknown): Verdict {
  const { settings, sessions, capacity, log, toast } = guard
  const state = sessions.get(sessionID)
  try {
    const step = stepOf(state, callID)
    const identity = signature(tool, args, guard.keysLeftOut(tool))
    const asked = waitSeconds(tool, args)
    const wait = expectedWait(state.history, identity.signature, asked)
    const call = newCall(identity, callID, wait, asked, guard.clock(), step, changesProject(tool, args))
    const found = findLoop(state, call, guard.rules)
    if (!found) {
      record(state, call, capacity)
      return null
    }
    const finding = inHostNames(found, guard.hostNames)
    const extra = { sessionID, ...facts(finding) }
    if (settings.mode === "warn") {
      call.note = warnNote(finding)
      record(state, call, capacity)
      log("warn", `loop-guard: ${describe(finding)} detected (warn mode, call allowed)`, extra)
      toast(warnToast(finding), "warning")
      return null
    }
    return block(guard, sessionID, state, call, finding, extra)
  } catch (error) {
    if (!state.errorLogged) {
      state.errorLogged = true
      log("error", `loop-guard: internal error, call allowed (fail-open): ${String(error)}`, { sessionID })
    }
    return null
  }
}

/** A block: counted, logged, shown to the human; at the turn's limit the run is stopped. Not recorded. */
function block(
  guard: Guard,
  sessionID: string,
  state: SessionState,
  call: Call,
  finding: Finding,
  extra: Record<string, unknown>,
): Verdict {
  const { settings, log, toast } = guard
  state.blocks += 1 // the blocked call is not recorded: a retry is blocked again, a different call breaks it
  const last = state.lastBlock
  const retries = last?.signature === call.signature && last.recorded === state.recorded ? last.retries + 1 : 0
  state.lastBlock = { signature: call.signature, recorded: state.recorded, retries }
  const stop = settings.maxBlocks > 0 && state.blocks >= settings.maxBlocks
  log("warn", `loop-guard: blocked ${describe(finding)}`, { ...extra, blocks: state.blocks })
  if (stop) {
    guard.abort(sessionID)
    log("error", `loop-guard: stopped the session's run after ${state.blocks} blocks in one turn`, {
      ...extra,
      blocks: state.blocks,
      maxBlocks: settings.maxBlocks,
    })
    toast(stopToast(finding, state.blocks, retries), "error")
  } else {
    toast(blockToast(finding, state.blocks, retries), state.blocks >= ESCALATE_AT ? "error" : "warning")
  }
  return { block: blockMessage(finding, state.blocks, stop) }
}

/**
 * tool.execute.after, a successful call's output: its digest joins the history, its duration its wait; in warn mode
 * the model's note is appended. A result we cannot read counts as "none"; the call has already run.
 */
async function onToolAfter(
  guard: Guard,
  input: { sessionID?: unknown; callID?: unknown } | undefined,
  output: { output?: unknown } | undefined,
): Promise<void> {
  try {
    const state = guard.sessions.peek(String(input?.sessionID))
    if (state) state.stepOpen = false // a result came: the next call starts a step
    const call = findCall(state, input?.callID)
    if (!state || !call || !output) return
    timed(guard, state, call)
    call.result = resultDigest(output.output)
    call.failed = false
    call.refused = false
    if (call.note !== null && typeof output.output === "string") {
      output.output = `${output.output}\n\n${call.note}`
      call.note = null
    }
  } catch {
    // a result we cannot read counts as "none"
  }
}

/** The seconds a call ran, from tool.execute.before to the first report of its result, settled as its wait. */
function timed(guard: Guard, state: SessionState, call: Call): void {
  if (call.ran === null) settleWait(state, call, Math.max(0, (guard.clock() - call.started) / 1000))
}

/**
 * event: resets (a new turn, a compaction); failed calls' errors, which join the history as their results; and the
 * end of every call (completed or failed), which times it. An event we cannot read changes nothing.
 */
async function onEvent(guard: Guard, event: { type?: unknown; properties?: unknown }): Promise<void> {
  try {
    const reset = resetTarget(event)
    if (reset?.scope === "turn") guard.sessions.reset(reset.sessionID)
    if (reset?.scope === "history") {
      const state = guard.sessions.peek(reset.sessionID)
      if (state) {
        state.history = []
        state.waiting = null // the wait budget starts over with the history
      }
    }
    const update = toolPartUpdate(event)
    if (update) onToolPart(guard, update)
  } catch {
    // opencode would print and ignore the throw
  }
}

/**
 * A tool part's update: an announced call's step (its assistant message), and a call's end, which times it; a
 * failure's error joins the history as its result and, like a result, ends the step.
 */
function onToolPart(guard: Guard, update: NonNullable<ReturnType<typeof toolPartUpdate>>): void {
  const { sessionID, callID, status, error } = update
  if (status === "pending" || status === "running") return noteStep(guard.sessions.get(sessionID), update)
  if ((status !== "completed" && status !== "error") || typeof callID !== "string") return
  const state = guard.sessions.peek(sessionID)
  if (state && status === "error") state.stepOpen = false
  const call = findCall(state, callID)
  if (!state || !call) return
  timed(guard, state, call)
  if (status === "error") {
    call.result = errorDigest(error)
    call.failed = true
    call.refused = isRefusal(error)
  }
}

/** One plugin instance from the environment (read once; problems are logged) and the host's channels. */
function startGuard(
  input: PluginInput | undefined,
  options: Record<string, unknown> | undefined,
  hostNames: Readonly<Record<string, string>> = {},
) {
  const log = logger(input?.client)
  const toast = toaster(input?.client)
  const abort = aborter(input?.client)
  const { settings, problems } = readSettings(environment())
  for (const problem of problems) log("warn", `loop-guard: ${problem}`)
  const streamMode = readStreamMode(environment(), settings.mode)
  for (const problem of streamMode.problems) log("warn", `loop-guard: ${problem}`)
  const stream = streamMode.mode === "off" ? null : streamGuard(streamMode.mode, log, toast, abort)
  const guard: Guard = {
    settings,
    rules: { ...settings, isExempt: globMatcher(settings.exempt) },
    sessions: new Sessions(),
    capacity: historyCapacity(settings.repetitions, settings.failures),
    keysLeftOut: ignoredKeys(settings.ignoreKeys),
    clock: clockOf(options),
    log,
    toast,
    abort,
    hostNames,
  }
  return { guard, stream }
}

/** The hooks of one plugin instance: opencode's hooks, each handed to its named function above; the stream's
 * watchers see every event first (streamHooks). */
function hooksFor(
  input: PluginInput | undefined,
  options: Record<string, unknown> | undefined,
  hostNames?: Readonly<Record<string, string>>,
): Hooks {
  const { guard, stream } = startGuard(input, options, hostNames)
  if (guard.settings.mode === "off") return stream ? streamHooks(stream) : {}
  const hooks: Hooks = {
    "tool.execute.before": (hookInput, output) => onToolBefore(guard, hookInput, output),
    "tool.execute.after": (hookInput, output) => onToolAfter(guard, hookInput, output),
    event: ({ event }) => onEvent(guard, event as { type?: unknown; properties?: unknown }),
  }
  return stream ? { ...hooks, ...streamHooks(stream, hooks.event) } : hooks
}

const ID = "loop-guard"

// The v1 adapter: opencode 1.x calls server() once per project; nothing when the v2 entry already runs there.
const server: Plugin = async (input, options) => {
  if (claimHost(ID, input?.directory, "v1")) return hooksFor(input, options)
  logger(input?.client)("info", `${ID}: the v2 entry already runs for this project; the v1 entry stays off`)
  return {}
}

// The v2 adapter: OpenCode 2 calls setup(ctx); its hooks and events are translated into the same hooks (setupV2).
const setup = (ctx: unknown) =>
  setupV2(
    {
      id: ID,
      start: (input) => hooksFor(input, {}, V2_NAMES),
      offWithout: {
        tool: "tool calls are not checked for loops",
        event: "turns do not reset the block count, and the stream check is off",
        interrupt: "a looping answer and the turn's block limit cannot stop the run",
        prompt: "a repetition the person asked for is not recognised",
      },
    },
    ctx,
  )

export default { id: ID, server, setup }

// The names the tests use (opencode reads only the default export).
export { canonicalize, LEAF_DIGEST_MIN, digest, fallbackDigest, IGNORED_KEYS, signature } from "./signatures"
export { maskVolatile, newCall } from "./results"
export { isReadOnlyCommand } from "../shared/bash-programs"
export { sleepSeconds } from "./waits"
export { historyCapacity } from "./cycle"
export { duration } from "./texts"
export { ASKED_MARGIN, askedRepetition, madeOfAsked } from "./asked"
export {
  STREAM_MAX_PERIOD,
  STREAM_REPEATS,
  STREAM_MIN_CHARS,
  STREAM_LONG_CHARS,
  STREAM_LONG_REPEATS,
  STREAM_CODE_REPEATS,
  STREAM_CODE_CHARS,
  StreamWatcher,
  cutText,
} from "./stream-watcher"
export type { LongRule, StreamKind, StreamCut } from "./stream-watcher"
export type { StreamLoop } from "./types"
export {
  MAX_SESSIONS,
  newSessionState,
  Sessions,
  record,
  settleWait,
  resetTarget,
  MAX_STREAM_PARTS,
  MAX_STREAM_CUTS,
  streamEvent,
} from "./sessions"
