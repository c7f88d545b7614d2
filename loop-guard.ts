/**
 * loop-guard: an opencode plugin that stops the agent from cycling through the same tool calls.
 *
 * What: every tool call gets a signature (tool name + canonical arguments). When the last calls of a session,
 * the current one included, repeat a cycle of length k (k = 1..4) for the configured number of repetitions r,
 * the current call is blocked: the hook throws, the tool does not run, and the model reads our message as the
 * tool result. With the default r = 3 a cycle of length k is caught after max(3k, 4) calls:
 *
 *   k = 1  A A A A                   the 4th identical call is blocked
 *   k = 2  A B A B A B               the 6th call
 *   k = 3  A B C A B C A B C         the 9th call
 *   k = 4  A B C D x3                the 12th call
 *
 * Why: opencode's own doom_loop check only looks at the last three parts of the current assistant message, so a
 * model that reads the same file once per step, or ping-pongs edit/test/edit/test with the same edit, runs forever.
 *
 * How to tune (environment, read once when opencode starts; invalid values are logged and replaced by defaults):
 *   OPENCODE_LOOP_GUARD=block|warn|off     block (default), warn (log only, the call runs), off
 *   OPENCODE_LOOP_GUARD_REPETITIONS=r      repetitions that make a cycle, 2..50, default 3 (caught after max(r*k, r+1))
 *   OPENCODE_LOOP_GUARD_EXEMPT=globs       comma-separated tool-name globs (* and ?), e.g. todowrite,mcp_*_poll;
 *                                          a cycle is let through only when every call in it is an exempt tool
 *
 * Layout: pure core (signature, cycle check, message, settings), then session state, then the opencode adapter.
 */
import type { Hooks, Plugin, PluginInput } from "@opencode-ai/plugin"

// ---------------------------------------------------------------------------------------------------------------
// Pure core: signatures
// ---------------------------------------------------------------------------------------------------------------

/**
 * Canonical text of a value: object keys sorted (recursively), array order kept, strings exact (JSON-escaped, never
 * trimmed or normalised), types strict ("1" is quoted, 1 is not; null is written, an absent key is not). Keys are
 * read with Object.keys, so `__proto__`, `constructor` or `toString` are ordinary keys like any other.
 * Values JSON cannot express (undefined, functions, symbols) are written as a tag so they still compare by type;
 * a cycle in the object graph is written as a marker instead of recursing forever.
 */
export function canonicalize(value: unknown): string {
  const sorted = sortedPlainJSON(value, 0)
  return sorted === NOT_PLAIN ? write(value, []) : JSON.stringify(sorted)
}

/**
 * The fast path, for the plain JSON the host passes (objects, arrays, strings, finite numbers, booleans, null):
 * the same value with every object's keys in sorted order, so the engine's native JSON.stringify writes exactly
 * the text `write` would, at close to the cost of one JSON.stringify. Subtrees already in order are reused, not
 * copied. Anything else (a Date, undefined, NaN, a `__proto__` or integer-like key, which objects reorder or treat
 * specially, or nesting deeper than FAST_DEPTH, e.g. a cycle) returns NOT_PLAIN and takes the general writer.
 */
const NOT_PLAIN = Symbol("not plain JSON")
const FAST_DEPTH = 2000

function sortedPlainJSON(value: unknown, depth: number): unknown {
  switch (typeof value) {
    case "string":
    case "boolean":
      return value
    case "number":
      return Number.isFinite(value) ? value : NOT_PLAIN
    case "object":
      if (value === null) return value
      if (depth > FAST_DEPTH) return NOT_PLAIN
      if (Array.isArray(value)) return sortedArray(value, depth)
      if (Object.getPrototypeOf(value) !== Object.prototype) return NOT_PLAIN
      return sortedObject(value as Record<string, unknown>, depth)
    default:
      return NOT_PLAIN
  }
}

function sortedArray(items: unknown[], depth: number): unknown {
  let copy: unknown[] | null = null
  for (let i = 0; i < items.length; i++) {
    const item = items[i]
    if (item === undefined) return NOT_PLAIN // also a hole: JSON writes null, `write` writes #undefined
    const sorted = sortedPlainJSON(item, depth + 1)
    if (sorted === NOT_PLAIN) return NOT_PLAIN
    if (sorted !== item) (copy ??= items.slice())[i] = sorted
  }
  return copy ?? items
}

function sortedObject(object: Record<string, unknown>, depth: number): unknown {
  const keys = Object.keys(object)
  let inOrder = true
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]
    const first = key.charCodeAt(0)
    if (first >= 48 && first <= 57) return NOT_PLAIN // digits first: an integer-like key would not stay in place
    if (key === "__proto__") return NOT_PLAIN
    if (i > 0 && keys[i - 1] > key) inOrder = false
  }
  if (!inOrder) sortKeys(keys)
  let copy: Record<string, unknown> | null = inOrder ? null : {}
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i]
    const value = object[key]
    const sorted = sortedPlainJSON(value, depth + 1)
    if (sorted === NOT_PLAIN) return NOT_PLAIN
    if (copy === null && sorted !== value) {
      copy = {} // keys already in order, a child changed: copy the keys before this one as they are
      for (let j = 0; j < i; j++) copy[keys[j]] = object[keys[j]]
    }
    if (copy !== null) copy[key] = sorted
  }
  return copy ?? object
}

/** Sorts in place by UTF-16 code units, like Array.prototype.sort; insertion sort for the few keys args have. */
function sortKeys(keys: string[]): void {
  if (keys.length > 16) {
    keys.sort()
    return
  }
  for (let i = 1; i < keys.length; i++) {
    const key = keys[i]
    let j = i - 1
    for (; j >= 0 && keys[j] > key; j--) keys[j + 1] = keys[j]
    keys[j + 1] = key
  }
}

function write(value: unknown, ancestors: object[]): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(value)
    case "number":
      // JSON writes NaN and Infinity as null; keep them distinct from null and from each other.
      return Number.isFinite(value) ? String(value) : `#${String(value)}`
    case "boolean":
      return value ? "true" : "false"
    case "bigint":
      return `#${value}n`
    case "undefined":
      return "#undefined"
    case "function":
    case "symbol":
      return `#${typeof value}`
  }
  if (value === null) return "null"
  const object = value as object
  if (ancestors.includes(object)) return "#circular"
  ancestors.push(object)
  const text = Array.isArray(object)
    ? writeArray(object, ancestors)
    : writeObject(object as Record<string, unknown>, ancestors)
  ancestors.pop()
  return text
}

function writeArray(items: unknown[], ancestors: object[]): string {
  let text = "["
  for (let i = 0; i < items.length; i++) text += (i ? "," : "") + write(items[i], ancestors)
  return text + "]"
}

function writeObject(object: Record<string, unknown>, ancestors: object[]): string {
  // A Date, Map or typed array has no enumerable keys of its own that say what it holds; its constructor name and
  // its string form keep two different ones apart without special-casing every class.
  const keys = Object.keys(object).sort()
  const proto = Object.getPrototypeOf(object)
  const tag =
    proto === Object.prototype || proto === null ? "" : `#${proto?.constructor?.name ?? "?"}(${safeString(object)})`
  let text = tag + "{"
  for (let i = 0; i < keys.length; i++) {
    text += (i ? "," : "") + JSON.stringify(keys[i]) + ":" + write(object[keys[i]], ancestors)
  }
  return text + "}"
}

function safeString(object: object): string {
  try {
    if (object instanceof Date) return String(object.getTime()) // String(date) drops the milliseconds
    return String(object).slice(0, 200)
  } catch {
    return ""
  }
}

/**
 * 64-bit digest of a string. The history keeps only digests, so a 1 MB `write` costs a few dozen bytes per slot.
 * Under opencode (Bun) this is Bun.hash (wyhash, 64 bit, native); elsewhere a 2 x 32-bit FNV-1a in plain JS.
 * Collision risk: a false block needs two different calls of the same tool whose digests collide inside one window
 * of at most 4r calls. With 64 bits that is about n^2 / 2^65 per window (n = 12 by default: ~4e-18); the digest
 * also carries the text's length. wyhash is not cryptographic, but the only party that could craft a collision is
 * the model, and all it would gain is having its own call blocked.
 */
export function digest(text: string): string {
  const bun = (globalThis as { Bun?: { hash?: (data: string) => bigint | number } }).Bun
  const hash = bun?.hash ? BigInt(bun.hash(text)).toString(36) : fnv1a64(text)
  return `${hash}:${text.length}`
}

/** Two independent 32-bit FNV-1a passes (different offset bases) over UTF-16 code units: the fallback digest. */
export function fnv1a64(text: string): string {
  let a = 0x811c9dc5
  let b = 0x01000193 ^ 0x5bd1e995
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    a = Math.imul(a ^ c, 0x01000193)
    b = Math.imul(b ^ c, 0x01000193) ^ (b >>> 15)
  }
  return (a >>> 0).toString(36) + "." + (b >>> 0).toString(36)
}

/** What the history remembers of one call: the signature digest and the tool name (for the message). */
export type CallRecord = { signature: string; tool: string }

/** The signature of a call: tool name + digest of its canonical arguments. Arguments are never stored. */
export function signature(tool: string, args: unknown): CallRecord {
  return { signature: toolKey(tool) + digest(canonicalize(args)), tool: toolLabel(tool) }
}

/**
 * The digest of a tool name, cached (a process sees few tool names; the cache is bounded all the same). The name
 * is hashed apart from the arguments: prefixing it to a 1 MB argument text would copy that text once more.
 */
function toolKey(tool: string): string {
  let key = toolKeys.get(tool)
  if (key === undefined) {
    if (toolKeys.size >= 1000) toolKeys.clear()
    key = digest(JSON.stringify(tool)) + "/"
    toolKeys.set(tool, key)
  }
  return key
}
const toolKeys = new Map<string, string>()

/** Tool names reach the message and the log; keep them short and printable (they are not argument values). */
function toolLabel(tool: unknown): string {
  const text = typeof tool === "string" ? tool : String(tool)
  if (PRINTABLE_LABEL.test(text)) return text // the usual case, without building a new string
  return text.replace(/[^\x20-\x7e]/g, "?").slice(0, 64)
}
const PRINTABLE_LABEL = /^[\x20-\x7e]{0,64}$/

// ---------------------------------------------------------------------------------------------------------------
// Pure core: the cycle check
// ---------------------------------------------------------------------------------------------------------------

export const MAX_CYCLE = 4

/** How many calls, the current one included, must repeat a cycle of length k: max(r*k, r+1). */
export function windowSize(k: number, repetitions: number): number {
  return Math.max(repetitions * k, repetitions + 1)
}

/** The history length the rule needs: the window of the longest cycle, minus the current call. */
export function historyCapacity(repetitions: number): number {
  return windowSize(MAX_CYCLE, repetitions) - 1
}

export type Cycle = {
  /** cycle length */
  k: number
  /** calls in the window, the current one included */
  calls: number
  /** times the cycle repeats in the window (calls / k) */
  repetitions: number
  /** tool names of one turn of the cycle, oldest first, ending with the current call's tool */
  tools: string[]
}

/**
 * The smallest cycle (k = 1..4) that the current call completes, or null. `history` is the recorded calls, oldest
 * first, without the current one. `isExempt(tool)` lets a cycle through when every call in it is an exempt tool.
 */
export function findCycle(
  history: readonly CallRecord[],
  current: CallRecord,
  repetitions: number,
  isExempt: (tool: string) => boolean = () => false,
): Cycle | null {
  for (let k = 1; k <= MAX_CYCLE; k++) {
    const calls = windowSize(k, repetitions)
    if (history.length + 1 < calls) break // longer cycles need even more calls
    if (!isPeriodic(history, current, calls, k)) continue
    const tools = history.slice(history.length - (k - 1)).map((call) => call.tool)
    tools.push(current.tool)
    if (tools.every(isExempt)) continue
    return { k, calls, repetitions: calls / k, tools }
  }
  return null
}

/**
 * Whether the window (the last calls - 1 records, then the current call) has period k. Indexed in place: this
 * runs on every call, and copying the window for each k cost more than the comparisons.
 */
function isPeriodic(history: readonly CallRecord[], current: CallRecord, calls: number, k: number): boolean {
  const start = history.length - (calls - 1) // index in history of the window's first call
  if (current.signature !== history[start + calls - 1 - k].signature) return false
  for (let i = k; i < calls - 1; i++) {
    if (history[start + i].signature !== history[start + i - k].signature) return false
  }
  return true
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: what the model reads
// ---------------------------------------------------------------------------------------------------------------

/** Blocks from this one on escalate: the agent is told to stop calling tools and report. */
export const ESCALATE_AT = 3

/**
 * The message the model reads as the blocked call's result. It names tools, k and counts only: arguments (paths,
 * commands, file contents) may be secrets and never appear.
 */
export function blockMessage(cycle: Cycle, blocks: number): string {
  const shape = cycle.tools.join(" -> ")
  const lines = [
    `loop-guard blocked this ${cycle.tools[cycle.tools.length - 1]} call: it was not run.`,
    `Your last ${cycle.calls} tool calls, this one included, repeat the same cycle ${cycle.repetitions} times ` +
      `with identical arguments: ${shape} (cycle length ${cycle.k}).`,
    "The results of those calls are already in your context; running them again will not tell you anything new.",
  ]
  if (blocks >= ESCALATE_AT) {
    lines.push(
      `This is the ${ordinal(blocks)} time loop-guard has blocked you in this session. ` +
        "Stop calling tools now and report to the user: what you tried, what you found, and what blocks you.",
    )
  } else {
    lines.push(
      "Reassess what you have learned and choose a materially different action: another tool, or different " +
        "arguments that test a new idea. If you cannot make progress, stop and explain to the user what blocks you.",
    )
  }
  return lines.join("\n")
}

function ordinal(n: number): string {
  const tens = n % 100
  if (tens >= 11 && tens <= 13) return `${n}th`
  return `${n}${["th", "st", "nd", "rd"][n % 10] ?? "th"}`
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: settings from the environment
// ---------------------------------------------------------------------------------------------------------------

export type Mode = "block" | "warn" | "off"
export type Settings = { mode: Mode; repetitions: number; exempt: string[] }
export function defaultSettings(): Settings {
  return { mode: "block", repetitions: 3, exempt: [] }
}
const MAX_REPETITIONS = 50

/** Reads the three variables; every invalid value is reported (to be logged) and replaced by its default. */
export function readSettings(env: Record<string, string | undefined>): { settings: Settings; problems: string[] } {
  const problems: string[] = []
  const settings = defaultSettings()

  const mode = env.OPENCODE_LOOP_GUARD?.trim().toLowerCase()
  if (mode === "block" || mode === "warn" || mode === "off") settings.mode = mode
  else if (mode)
    problems.push(`OPENCODE_LOOP_GUARD=${quote(env.OPENCODE_LOOP_GUARD)} is not block, warn or off; using block`)

  const reps = env.OPENCODE_LOOP_GUARD_REPETITIONS?.trim()
  if (reps) {
    const r = /^\d+$/.test(reps) ? Number(reps) : NaN
    if (r >= 2 && r <= MAX_REPETITIONS) settings.repetitions = r
    else
      problems.push(
        `OPENCODE_LOOP_GUARD_REPETITIONS=${quote(reps)} is not a whole number from 2 to ${MAX_REPETITIONS}; using 3`,
      )
  }

  for (const glob of (env.OPENCODE_LOOP_GUARD_EXEMPT ?? "").split(",").map((g) => g.trim())) {
    if (!glob) continue
    if (/^[\w.*?:/-]+$/.test(glob)) settings.exempt.push(glob)
    else
      problems.push(
        `OPENCODE_LOOP_GUARD_EXEMPT: ${quote(glob)} is not a tool-name glob (letters, digits, _ . : / - * ?); ignored`,
      )
  }
  return { settings, problems }
}

function quote(text: string | undefined): string {
  return JSON.stringify(String(text).slice(0, 40))
}

/** A tool-name glob as a matcher: `*` is any run of characters, `?` one character, the rest literal. */
export function globMatcher(globs: readonly string[]): (tool: string) => boolean {
  if (globs.length === 0) return () => false
  const source = globs
    .map((glob) =>
      glob
        .replace(/[.+^${}()|[\]\\/-]/g, "\\$&")
        .replace(/\*/g, ".*")
        .replace(/\?/g, "."),
    )
    .join("|")
  const regex = new RegExp(`^(?:${source})$`)
  return (tool) => regex.test(tool)
}

// ---------------------------------------------------------------------------------------------------------------
// Session state
// ---------------------------------------------------------------------------------------------------------------

/** Sessions kept at once; the least recently used is dropped beyond it (a long `opencode serve` runs many). */
export const MAX_SESSIONS = 1000

export type SessionState = { history: CallRecord[]; blocks: number; errorLogged: boolean }

/** Per-session histories in a Map whose insertion order doubles as the LRU order. */
export class Sessions {
  private readonly map = new Map<string, SessionState>()
  /** The most recently used session: consecutive calls of one session skip the Map reordering. */
  private lastID: string | null = null
  private last: SessionState | null = null
  constructor(readonly capacity = MAX_SESSIONS) {}

  /** The session's state, created when new, and marked most recently used. */
  get(sessionID: string): SessionState {
    if (sessionID === this.lastID && this.last) return this.last // already the most recent: nothing to reorder
    let state = this.map.get(sessionID)
    if (state) this.map.delete(sessionID)
    else state = { history: [], blocks: 0, errorLogged: false }
    this.map.set(sessionID, state)
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as string)
    this.lastID = sessionID
    this.last = state
    return state
  }

  has(sessionID: string): boolean {
    return this.map.has(sessionID)
  }

  reset(sessionID: string): void {
    this.map.delete(sessionID)
    if (sessionID === this.lastID) this.last = this.lastID = null
  }

  get size(): number {
    return this.map.size
  }
}

/** Remembers a call that ran, keeping only as many as the rule can look at. */
export function record(state: SessionState, call: CallRecord, capacity: number): void {
  state.history.push(call)
  if (state.history.length > capacity) state.history.splice(0, state.history.length - capacity)
}

/** The session an opencode event resets, or null: idle (both forms) and deleted do; compacted and busy do not. */
export function resetTarget(event: { type?: unknown; properties?: any } | undefined): string | null {
  const props = event?.properties ?? {}
  switch (event?.type) {
    case "session.idle":
      return typeof props.sessionID === "string" ? props.sessionID : null
    case "session.status":
      return props.status?.type === "idle" && typeof props.sessionID === "string" ? props.sessionID : null
    case "session.deleted": {
      const id = props.info?.id ?? props.sessionID
      return typeof id === "string" ? id : null
    }
    default:
      return null
  }
}

// ---------------------------------------------------------------------------------------------------------------
// The opencode adapter
// ---------------------------------------------------------------------------------------------------------------

type Log = (level: "info" | "warn" | "error", message: string, extra?: Record<string, unknown>) => void

/** Fire and forget: a log call must never delay or fail a tool call, nor be awaited while opencode starts. */
function logger(client: PluginInput["client"] | undefined): Log {
  return (level, message, extra) => {
    try {
      const pending = client?.app?.log({ body: { service: "loop-guard", level, message, extra } })
      if (pending && typeof pending.catch === "function") pending.catch(() => {})
    } catch {
      // logging is best effort
    }
  }
}

/** The process environment, read without Node's type declarations (the plugin runs on Bun; tests too). */
function environment(): Record<string, string | undefined> {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {}
}

/** The verdict on one call, decided synchronously so parallel calls of one step see each other's records. */
type Verdict = { block: string } | null

const server: Plugin = async (input, _options) => {
  const log = logger(input?.client)
  const { settings, problems } = readSettings(environment())
  for (const problem of problems) log("warn", `loop-guard: ${problem}`)
  if (settings.mode === "off") return {}

  const sessions = new Sessions()
  const capacity = historyCapacity(settings.repetitions)
  const isExempt = globMatcher(settings.exempt)

  function judge(sessionID: string, tool: string, args: unknown): Verdict {
    const state = sessions.get(sessionID)
    try {
      const call = signature(tool, args)
      const cycle = findCycle(state.history, call, settings.repetitions, isExempt)
      if (!cycle) {
        record(state, call, capacity)
        return null
      }
      const extra = { sessionID, tools: cycle.tools, k: cycle.k, repetitions: cycle.repetitions }
      if (settings.mode === "warn") {
        record(state, call, capacity)
        log("warn", `loop-guard: cycle detected (warn mode, call allowed): ${cycle.tools.join(" -> ")}`, extra)
        return null
      }
      state.blocks += 1 // the blocked call is not recorded: a retry is blocked again, a different call breaks it
      log("warn", `loop-guard: blocked a cycle: ${cycle.tools.join(" -> ")}`, { ...extra, blocks: state.blocks })
      return { block: blockMessage(cycle, state.blocks) }
    } catch (error) {
      if (!state.errorLogged) {
        state.errorLogged = true
        log("error", `loop-guard: internal error, call allowed (fail-open): ${String(error)}`, { sessionID })
      }
      return null
    }
  }

  const hooks: Hooks = {
    "tool.execute.before": async (call, output) => {
      const verdict = judge(String(call?.sessionID), String(call?.tool), output?.args)
      if (verdict) throw new Error(verdict.block)
    },
    event: async ({ event }) => {
      const sessionID = resetTarget(event as { type?: unknown; properties?: unknown })
      if (sessionID !== null) sessions.reset(sessionID)
    },
  }
  return hooks
}

export default { id: "loop-guard", server }
