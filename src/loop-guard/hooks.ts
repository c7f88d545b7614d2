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
