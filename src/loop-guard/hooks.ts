import { RecentMap } from "../shared/recent-map"
import type { Hooks, Plugin, PluginInput } from "@opencode-ai/plugin"
import { globMatcher, ignoredKeys, signature } from "./signatures"
import { changesProject, errorDigest, isRefusal, newCall, resultDigest } from "./results"
import type { Call } from "./results"
import { findCycle, historyCapacity } from "./cycle"
import type { Cycle } from "./cycle"
import { expectedWait, waitSeconds } from "./waits"
import { findStepRepeat } from "./steps"
import { findCallStreak } from "./call-streak"
import {
  checkWait,
  continuedWait,
  findWaitingCycle,
  isWaiting,
  lastTurn,
  repeatedWait,
  secondLap,
  timedWaiting,
} from "./wait-rule"
import { findStreak } from "./failure-streak"
import { ESCALATE_AT, blockMessage, blockToast, describe, facts, stopToast, warnNote, warnToast } from "./texts"
import type { Finding } from "./texts"
import { StreamWatcher, cutText, streamCut, streamToast, streamWhat } from "./stream-watcher"
import type { StreamCut, StreamLoop } from "./stream-watcher"
import { readSettings, readStreamMode } from "./settings"
import type { Mode } from "./settings"
import {
  MAX_SESSIONS,
  MAX_STREAM_CUTS,
  MAX_STREAM_PARTS,
  Sessions,
  findCall,
  noteStep,
  record,
  resetTarget,
  settleWait,
  stepOf,
  streamEvent,
  toolPartUpdate,
} from "./sessions"
import type { SessionState, WatchedPart } from "./sessions"

type Client = PluginInput["client"] | undefined
type Log = (level: "info" | "warn" | "error", message: string, extra?: Record<string, unknown>) => void

/**
 * Fire and forget: a client call must never delay or fail a tool call, nor be awaited while opencode starts (an
 * awaited call at start-up hung the host). Errors, thrown or rejected, are dropped.
 */
function fireAndForget(send: () => unknown): void {
  try {
    const pending = send() as { catch?: (f: () => void) => void } | undefined
    if (pending && typeof pending.catch === "function") pending.catch(() => {})
  } catch {
    // best effort
  }
}

function logger(client: Client): Log {
  return (level, message, extra) =>
    fireAndForget(() => client?.app?.log({ body: { service: "loop-guard", level, message, extra } }))
}

/** The human's channel: a toast in the TUI (resolves even with no TUI attached). */
type Toast = (message: string, variant: "warning" | "error") => void
function toaster(client: Client): Toast {
  return (message, variant) => fireAndForget(() => client?.tui?.showToast({ body: { message, variant } }))
}

/** The bounded stop: ends the session's run as the human's interrupt would. */
function aborter(client: Client): (sessionID: string) => void {
  return (sessionID) => fireAndForget(() => client?.session?.abort({ path: { id: sessionID } }))
}

/** The process environment, read without Node's type declarations (the plugin runs on Bun; tests too). */
function environment(): Record<string, string | undefined> {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {}
}

/** The verdict on one call, decided synchronously so parallel calls of one step see each other's records. */
type Verdict = { block: string } | null

/**
 * The stream adapter: routes streamed parts to their watchers and acts on a verdict. One watcher per part
 * (reasoning and answer each on their own), created when opencode announces the part, dropped at its end, on the
 * session's idle state or deletion, and beyond MAX_STREAM_PARTS (least recently fed first). A loop: in block mode
 * the session's run is aborted (what is not generated is not paid for), the human gets an error toast, the log a
 * line, and the part is cut in the model's next context; in warn mode the toast says so and nothing is stopped.
 * Fails open: an internal error is logged once per session and the stream goes on.
 */
function streamGuard(mode: Mode, log: Log, toast: Toast, abort: (sessionID: string) => void) {
  const parts = new RecentMap<WatchedPart>(MAX_STREAM_PARTS)
  const cuts = new RecentMap<StreamCut>(MAX_STREAM_CUTS)
  const failed = new RecentMap<true>(MAX_SESSIONS)

  function onLoop(part: WatchedPart, partID: string, loop: StreamLoop): void {
    const stop = mode === "block"
    const extra = { sessionID: part.sessionID, partID, kind: part.kind, ...loop }
    if (stop) {
      cuts.set(partID, streamCut(loop))
      abort(part.sessionID)
      log("error", `loop-guard: stopped the session's run: ${streamWhat(part.kind, loop)}`, extra)
    } else {
      log("warn", `loop-guard: ${streamWhat(part.kind, loop)} (warn mode, not stopped)`, extra)
    }
    toast(streamToast(part.kind, loop, stop), stop ? "error" : "warning")
  }

  /** Every event: parts starting and ending, deltas, and the session resets that drop a session's parts. */
  function watchStream(event: { type?: unknown; properties?: unknown }): void {
    let sessionID: unknown = undefined
    try {
      sessionID = (event?.properties as { sessionID?: unknown } | undefined)?.sessionID
      const reset = resetTarget(event)
      if (reset?.scope === "turn") {
        parts.deleteWhere((part) => part.sessionID === reset.sessionID)
        return
      }
      const what = streamEvent(event)
      if (!what) return
      if (what.type === "end") return parts.delete(what.partID)
      sessionID = what.sessionID
      if (what.type === "start") {
        if (!parts.get(what.partID))
          parts.set(what.partID, { sessionID: what.sessionID, kind: what.kind, watcher: new StreamWatcher() })
        return
      }
      // only parts opencode announced as reasoning or text: a tool's streamed input (a file being written) is no
      // prose, and a part dropped (ended, idle, least recently fed) stays dropped
      const part = parts.get(what.partID)
      if (!part) return
      const loop = part.watcher.feed(what.delta)
      if (loop) onLoop(part, what.partID, loop)
    } catch (error) {
      const id = typeof sessionID === "string" ? sessionID : "?"
      if (failed.get(id)) return
      failed.set(id, true)
      log("error", `loop-guard: internal error in the stream check, stream let through (fail-open): ${String(error)}`, {
        sessionID: id,
      })
    }
  }

  /** The model's next context: a part stopped for a loop keeps its first passage and a note, not the loop. */
  function cutLoops(output: { messages?: { parts?: unknown[] }[] } | undefined): void {
    if (cuts.size === 0) return
    try {
      for (const message of output?.messages ?? []) {
        for (const part of message?.parts ?? []) {
          const p = part as { id?: unknown; text?: unknown }
          const cut = typeof p?.id === "string" ? cuts.get(p.id) : undefined
          if (cut && typeof p.text === "string") p.text = cutText(p.text, cut)
        }
      }
    } catch (error) {
      log("error", `loop-guard: internal error while cutting a looping part, context left whole: ${String(error)}`)
    }
  }

  return { watchStream, cutLoops, parts }
}

/**
 * The adapter's clock in milliseconds: Date.now, or a `clock` function passed in the plugin's options (tests
 * inject one; opencode's config can hold no function, so a user's options never replace it).
 */
function clockOf(options: Record<string, unknown> | undefined): () => number {
  const clock = options?.clock
  return typeof clock === "function" ? () => Number(clock()) : Date.now
}

const server: Plugin = async (input, options) => {
  const clock = clockOf(options)
  const log = logger(input?.client)
  const toast = toaster(input?.client)
  const abort = aborter(input?.client)
  const { settings, problems } = readSettings(environment())
  for (const problem of problems) log("warn", `loop-guard: ${problem}`)
  const streamMode = readStreamMode(environment(), settings.mode)
  for (const problem of streamMode.problems) log("warn", `loop-guard: ${problem}`)
  const stream = streamMode.mode === "off" ? null : streamGuard(streamMode.mode, log, toast, abort)
  if (settings.mode === "off") return stream ? streamHooks(stream) : {}

  const sessions = new Sessions()
  const capacity = historyCapacity(settings.repetitions, settings.failures)
  const isExempt = globMatcher(settings.exempt)
  const keysLeftOut = ignoredKeys(settings.ignoreKeys)

  function judge(sessionID: string, tool: string, callID: string, args: unknown): Verdict {
    const state = sessions.get(sessionID)
    try {
      const step = stepOf(state, callID)
      const identity = signature(tool, args, keysLeftOut(tool))
      const asked = waitSeconds(tool, args)
      const wait = expectedWait(state.history, identity.signature, asked)
      const call = newCall(identity, callID, wait, asked, clock(), step, changesProject(tool, args))
      const finding =
        cycleOrWait(state, call, findCycle(state.history, call, settings.repetitions, isExempt)) ??
        findStepRepeat(state.history, call, settings.repetitions, isExempt) ??
        findCallStreak(state.history, call, settings.repetitions, isExempt) ??
        findStreak(state.history, call, settings.failures, isExempt)
      if (!finding) {
        record(state, call, capacity)
        return null
      }
      const extra = { sessionID, ...facts(finding) }
      if (settings.mode === "warn") {
        call.note = warnNote(finding)
        record(state, call, capacity)
        log("warn", `loop-guard: ${describe(finding)} detected (warn mode, call allowed)`, extra)
        toast(warnToast(finding), "warning")
        return null
      }
      return block(sessionID, state, call, finding, extra)
    } catch (error) {
      if (!state.errorLogged) {
        state.errorLogged = true
        log("error", `loop-guard: internal error, call allowed (fail-open): ${String(error)}`, { sessionID })
      }
      return null
    }
  }

  /**
   * A cycle one of whose calls waits is timed instead of blocked: it runs until its time slept or its laps pass
   * the settings (then the wait is blocked); a cycle without a wait is returned as it is. A waiting cycle is timed
   * from the window of the cycle rule on, whatever its results (a poll's output often changes while it waits), and
   * before it from its 2nd lap: a wait of the cycle being timed is held to its limits (continuedWait), a wait that
   * repeats one of the last calls starts the timing (repeatedWait). With no wait budget (0) every cycle is a loop.
   */
  function cycleOrWait(state: SessionState, call: Call, cycle: Cycle | null): Finding | null {
    if (settings.waitBudget === 0) return cycle
    const k = cycle?.k ?? findWaitingCycle(state.history, call, settings.repetitions, isExempt)
    if (k > 0) {
      const turn = lastTurn(state.history, call, k)
      if (!isWaiting(turn)) return cycle
      state.waiting = timedWaiting(state.waiting, state.history, turn)
      const tools = turn.map((member) => member.tool)
      return checkWait(state.waiting, tools, call, k, settings.waitBudget, settings.waitLaps)
    }
    if (state.waiting?.members.includes(call.signature)) {
      return continuedWait(state.waiting, call, settings.waitBudget, settings.waitLaps)
    }
    const lap = repeatedWait(state.history, call, isExempt)
    if (lap === 0) return null
    const after = Math.max(0, state.history.length - (state.recorded - state.waitEnded)) // calls since a timing ended
    state.waiting = secondLap(state.history, call, lap, after)
    return checkWait(state.waiting, state.waiting.tools, call, lap, settings.waitBudget, settings.waitLaps)
  }

  /** A block: counted, logged, shown to the human; at the turn's limit the run is stopped. Not recorded. */
  function block(
    sessionID: string,
    state: SessionState,
    call: Call,
    finding: Finding,
    extra: Record<string, unknown>,
  ): Verdict {
    state.blocks += 1 // the blocked call is not recorded: a retry is blocked again, a different call breaks it
    const last = state.lastBlock
    const retries = last?.signature === call.signature && last.recorded === state.recorded ? last.retries + 1 : 0
    state.lastBlock = { signature: call.signature, recorded: state.recorded, retries }
    const stop = settings.maxBlocks > 0 && state.blocks >= settings.maxBlocks
    log("warn", `loop-guard: blocked ${describe(finding)}`, { ...extra, blocks: state.blocks })
    if (stop) {
      abort(sessionID)
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
   * A successful call's output: its digest joins the history, its duration its wait; in warn mode the model's note
   * is appended.
   */
  function afterCall(sessionID: string, callID: unknown, output: { output?: unknown } | undefined): void {
    const state = sessions.peek(sessionID)
    if (state) state.stepOpen = false // a result came: the next call starts a step
    const call = findCall(state, callID)
    if (!state || !call || !output) return
    timed(state, call)
    call.result = resultDigest(output.output)
    call.failed = false
    call.refused = false
    if (call.note !== null && typeof output.output === "string") {
      output.output = `${output.output}\n\n${call.note}`
      call.note = null
    }
  }

  /** The seconds a call ran, from tool.execute.before to the first report of its result, settled as its wait. */
  function timed(state: SessionState, call: Call): void {
    if (call.ran === null) settleWait(state, call, Math.max(0, (clock() - call.started) / 1000))
  }

  /**
   * Resets (a new turn, a compaction); failed calls' errors, which join the history as their results; and the end
   * of every call (completed or failed), which times it.
   */
  function onEvent(event: { type?: unknown; properties?: unknown }): void {
    const reset = resetTarget(event)
    if (reset?.scope === "turn") sessions.reset(reset.sessionID)
    if (reset?.scope === "history") {
      const state = sessions.peek(reset.sessionID)
      if (state) {
        state.history = []
        state.waiting = null // the wait budget starts over with the history
      }
    }
    const update = toolPartUpdate(event)
    if (update) onToolPart(update)
  }

  /**
   * A tool part's update: an announced call's step (its assistant message), and a call's end, which times it; a
   * failure's error joins the history as its result and, like a result, ends the step.
   */
  function onToolPart(update: NonNullable<ReturnType<typeof toolPartUpdate>>): void {
    const { sessionID, callID, status, error } = update
    if (status === "pending" || status === "running") return noteStep(sessions.get(sessionID), update)
    if ((status !== "completed" && status !== "error") || typeof callID !== "string") return
    const state = sessions.peek(sessionID)
    if (state && status === "error") state.stepOpen = false
    const call = findCall(state, callID)
    if (!state || !call) return
    timed(state, call)
    if (status === "error") {
      call.result = errorDigest(error)
      call.failed = true
      call.refused = isRefusal(error)
    }
  }

  const hooks: Hooks = {
    "tool.execute.before": async (call, output) => {
      const verdict = judge(String(call?.sessionID), String(call?.tool), String(call?.callID), output?.args)
      if (verdict) throw new Error(verdict.block)
    },
    "tool.execute.after": async (call, output) => {
      try {
        afterCall(String(call?.sessionID), call?.callID, output)
      } catch {
        // a result we cannot read counts as "none"; the call has already run
      }
    },
    event: async ({ event }) => {
      try {
        onEvent(event as { type?: unknown; properties?: unknown })
      } catch {
        // an event we cannot read changes nothing (opencode would print and ignore the throw)
      }
    },
  }
  return stream ? { ...hooks, ...streamHooks(stream, hooks.event) } : hooks
}

/** The stream's hooks: every event goes to its watchers first (synchronously, so deltas are seen in order). */
function streamHooks(stream: ReturnType<typeof streamGuard>, toolEvents?: Hooks["event"]): Hooks {
  return {
    event: async (input) => {
      stream.watchStream(input?.event as { type?: unknown; properties?: unknown })
      await toolEvents?.(input)
    },
    "experimental.chat.messages.transform": async (_input, output) => stream.cutLoops(output),
  }
}

export default { id: "loop-guard", server }

// The names the tests use (opencode reads only the default export).
export { canonicalize, LEAF_DIGEST_MIN, digest, fnv1a64, IGNORED_KEYS, signature } from "./signatures"
export { maskVolatile, newCall } from "./results"
export { isReadOnlyCommand } from "../shared/bash-programs"
export { sleepSeconds } from "./waits"
export { historyCapacity } from "./cycle"
export { duration } from "./texts"
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
export type { LongRule, StreamLoop, StreamKind, StreamCut } from "./stream-watcher"
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
