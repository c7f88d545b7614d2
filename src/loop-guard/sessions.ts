/**
 * Session state: history, blocks this turn, resets, a call's step, measured waits, streamed parts (`Sessions`,
 * `record`, `resetTarget`, `stepOf`, `settleWait`, `toolPartUpdate`).
 */
import { RecentMap } from "../shared/recent-map"
import type { Call } from "./results"
import { lastRun, measuredWait } from "./waits"
import { addLap, type Waiting } from "./wait-rule"
import { StreamWatcher, type StreamKind } from "./stream-watcher"

/** Sessions kept at once; the least recently used is dropped beyond it (a long `opencode serve` runs many). */
export const MAX_SESSIONS = 1000

/** One session: its recent calls, and the blocks since its last idle state (a turn). */
export type SessionState = {
  history: Call[]
  blocks: number
  errorLogged: boolean
  /** calls recorded so far (the history keeps only the last ones): tells a retry from a new repeat */
  recorded: number
  /** the last block, to count the blocked retries of one call for the human's toast ("a 5th identical read") */
  lastBlock: { signature: string; recorded: number; retries: number } | null
  /** the waiting cycle being timed, until a call outside it runs or the history starts over */
  waiting: Waiting | null
  /** `recorded` when a call outside the timed cycle ended its timing: a count started later never reaches back */
  waitEnded: number
  /** steps told apart by their order (stepOf): how many so far, and whether no result has come since the last call */
  steps: number
  stepOpen: boolean
  /** the current step's name: "o:" and its number */
  step: string
  /** the assistant message of each call opencode announced (a tool part's messageID), by callID; made when needed */
  messages: RecentMap<string> | null
}

export function newSessionState(): SessionState {
  return {
    history: [],
    blocks: 0,
    errorLogged: false,
    recorded: 0,
    lastBlock: null,
    waiting: null,
    waitEnded: 0,
    steps: 0,
    stepOpen: false,
    step: "o:0",
    messages: null,
  }
}

/** Calls whose assistant message a session remembers (their parts are announced just before they run). */
const MAX_STEP_MESSAGES = 64

/**
 * The step of a call: its assistant message when opencode announced the call's tool part (message.part.updated
 * with its messageID, before the call runs); otherwise the calls that reach tool.execute.before one after the
 * other with no result in between (a parallel fan-out), a result (after, or a failure's event) ending the step.
 */
export function stepOf(state: SessionState, callID: string): string {
  const message = state.messages?.get(callID)
  if (message !== undefined) return message
  if (!state.stepOpen) state.step = `o:${++state.steps}` // one string per step, shared by its calls
  state.stepOpen = true
  return state.step
}

/** Remembers the assistant message of a tool part opencode announced (pending or running), for stepOf. */
export function noteStep(state: SessionState, part: { callID?: unknown; messageID?: unknown }): void {
  if (typeof part.callID !== "string" || typeof part.messageID !== "string") return
  state.messages ??= new RecentMap<string>(MAX_STEP_MESSAGES)
  state.messages.set(part.callID, `m:${part.messageID}`)
}

/** Per-session states, bounded by MAX_SESSIONS (the least recently used dropped). */
export class Sessions {
  private readonly states: RecentMap<SessionState>
  constructor(readonly capacity = MAX_SESSIONS) {
    this.states = new RecentMap<SessionState>(capacity)
  }

  /** The session's state, created when new, and marked most recently used. */
  get(sessionID: string): SessionState {
    let state = this.states.get(sessionID)
    if (!state) this.states.set(sessionID, (state = newSessionState()))
    return state
  }

  /** The session's state if it is kept, without creating it or changing the LRU order (for results). */
  peek(sessionID: string): SessionState | undefined {
    return this.states.peek(sessionID)
  }

  has(sessionID: string): boolean {
    return this.states.has(sessionID)
  }

  reset(sessionID: string): void {
    this.states.delete(sessionID)
  }

  get size(): number {
    return this.states.size
  }
}

/**
 * Remembers a call that ran, keeping only as many as the rules can look at. A call of the waiting cycle being timed
 * adds its wait; any other call ends the timing (the next waiting cycle starts over).
 */
export function record(state: SessionState, call: Call, capacity: number): void {
  state.recorded += 1
  state.history.push(call)
  if (state.history.length > capacity) state.history.splice(0, state.history.length - capacity)
  if (state.waiting?.members.includes(call.signature)) addLap(state.waiting, call)
  else if (state.waiting) {
    state.waiting = null
    state.waitEnded = state.recorded
  }
}

/**
 * A call's result arrived `ran` seconds after it started: its wait becomes what it measured (measuredWait, with the
 * time its previous run took). When the waiting cycle being timed counted it, that count follows: the time slept by
 * the difference, a lap when it turned into a wait (or stopped being one). Only the first report counts
 * (tool.execute.after and the part's event both report a success).
 */
export function settleWait(state: SessionState, call: Call, ran: number): void {
  if (call.ran !== null) return
  call.ran = ran
  const at = state.history.lastIndexOf(call)
  const previous = lastRun(state.history, call.signature, at < 0 ? state.history.length : at, true)
  const wait = measuredWait(call.asked, ran, previous?.ran ?? null)
  if (state.waiting?.members.includes(call.signature)) {
    state.waiting.slept += wait - call.wait
    state.waiting.laps += (wait > 0 ? 1 : 0) - (call.wait > 0 ? 1 : 0)
  }
  call.wait = wait
}

/** The recorded call with this callID (the newest first: results arrive soon after their call), or undefined. */
export function findCall(state: SessionState | undefined, callID: unknown): Call | undefined {
  if (!state || typeof callID !== "string") return undefined
  for (let i = state.history.length - 1; i >= 0; i--) if (state.history[i].callID === callID) return state.history[i]
  return undefined
}

/**
 * What an opencode event resets, or null. "turn": the session went idle (both forms) or was deleted, so its
 * history and its block count start over. "history": the session was compacted, so its context is now a summary
 * and the calls before it are no longer "in your context"; the turn, and its block count, go on.
 */
type Reset = { sessionID: string; scope: "turn" | "history" }
export function resetTarget(event: { type?: unknown; properties?: any } | undefined): Reset | null {
  const props = event?.properties ?? {}
  const id = (value: unknown, scope: Reset["scope"]): Reset | null =>
    typeof value === "string" ? { sessionID: value, scope } : null
  switch (event?.type) {
    case "session.idle":
      return id(props.sessionID, "turn")
    case "session.status":
      return props.status?.type === "idle" ? id(props.sessionID, "turn") : null
    case "session.deleted":
      return id(props.info?.id ?? props.sessionID, "turn")
    case "session.compacted":
      return id(props.sessionID, "history")
    default:
      return null
  }
}

/** Streamed parts watched at once; the least recently fed is dropped beyond it. */
export const MAX_STREAM_PARTS = 64
/** Cuts remembered for the model's next context (small records; they outlive the part's watcher). */
export const MAX_STREAM_CUTS = 256

export type WatchedPart = { sessionID: string; kind: StreamKind; watcher: StreamWatcher; told?: boolean }

/** What a streaming event says: a part starts or ends (with its type), or a piece of its text arrives. */
type StreamEvent =
  | { type: "start"; sessionID: string; partID: string; kind: StreamKind }
  | { type: "end"; partID: string }
  | { type: "delta"; sessionID: string; partID: string; delta: string }

export function streamEvent(event: { type?: unknown; properties?: any } | undefined): StreamEvent | null {
  const props = event?.properties
  if (event?.type === "message.part.delta") {
    if (props?.field !== "text" || typeof props.delta !== "string") return null
    if (typeof props.partID !== "string" || typeof props.sessionID !== "string") return null
    return { type: "delta", sessionID: props.sessionID, partID: props.partID, delta: props.delta }
  }
  if (event?.type !== "message.part.updated") return null
  const part = props?.part
  if ((part?.type !== "reasoning" && part?.type !== "text") || typeof part.id !== "string") return null
  if (part.time?.end !== undefined && part.time?.end !== null) return { type: "end", partID: part.id }
  const sessionID = part.sessionID ?? props.sessionID
  if (typeof sessionID !== "string") return null
  return { type: "start", sessionID, partID: part.id, kind: part.type }
}

/**
 * A tool part's update from a `message.part.updated` event, or null: its session, call, assistant message, status
 * (`pending` and `running` announce a call before it runs; `completed` and `error` end it) and, for `error`, the
 * error text (tool.execute.after fires for successes only, so a failure's error comes from here).
 */
export function toolPartUpdate(
  event: { type?: unknown; properties?: any } | undefined,
): { sessionID: string; callID: unknown; messageID: unknown; status: unknown; error: unknown } | null {
  if (event?.type !== "message.part.updated") return null
  const part = event.properties?.part
  if (part?.type !== "tool") return null
  const sessionID = event.properties?.sessionID ?? part.sessionID
  if (typeof sessionID !== "string") return null
  const status = part.state?.status
  return { sessionID, callID: part.callID, messageID: part.messageID, status, error: part.state?.error ?? "" }
}
