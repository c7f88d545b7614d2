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
 * table or a diagram are code, data or layout, stopped only at a backstop (64 copies and 8,000 characters). See
 * "Pure core: the stream watcher".
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
 * Layout: pure core (signature, results, waits, cycle check, steps as sets, per-call streak, wait rule, failure
 * streak, messages, the stream watcher, settings), then session state (sessions, streamed parts), then the opencode
 * adapter.
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
 * a cycle in the object graph is written as a marker instead of recursing forever. A string value of `leafMin`
 * characters or more is written as its digest (see stringLeaf): the text then never grows with file contents.
 */
export function canonicalize(value: unknown, leafMin = LEAF_DIGEST_MIN): string {
  const sorted = sortedPlainJSON(value, 0, leafMin)
  return sorted === NOT_PLAIN ? write(value, [], leafMin) : JSON.stringify(sorted)
}

/**
 * String values this long or longer are hashed natively where they stand instead of being JSON-escaped into the
 * canonical text and hashed again as part of it (bench/signature-experiment.ts: a 10 KB edit and a 1 MB write
 * cost a fraction; short strings and keys stay inline, where a hash per leaf would cost more than it saves).
 */
export const LEAF_DIGEST_MIN = 1024

/**
 * The form a string value takes in the canonical text, keeping equality exact: a long string becomes NUL + its
 * digest (NUL + "!" + the digest of its JSON form when it holds a lone surrogate, which the native hash would read
 * as U+FFFD); a short string that itself starts with NUL gets one more NUL in front, so it can never read as a
 * digest (a digest never starts with NUL); any other string is itself.
 */
function stringLeaf(text: string, leafMin: number): string {
  if (text.length >= leafMin) {
    return isWellFormed(text) ? `\u0000${digest(text)}` : `\u0000!${digest(JSON.stringify(text))}`
  }
  return text.charCodeAt(0) === 0 ? `\u0000${text}` : text
}

function isWellFormed(text: string): boolean {
  const check = (text as string & { isWellFormed?: () => boolean }).isWellFormed
  return typeof check === "function" ? check.call(text) : false // unknown: take the JSON form, always exact
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

function sortedPlainJSON(value: unknown, depth: number, leafMin: number): unknown {
  switch (typeof value) {
    case "string":
      return stringLeaf(value, leafMin)
    case "boolean":
      return value
    case "number":
      return Number.isFinite(value) ? value : NOT_PLAIN
    case "object":
      if (value === null) return value
      if (depth > FAST_DEPTH) return NOT_PLAIN
      if (Array.isArray(value)) return sortedArray(value, depth, leafMin)
      if (Object.getPrototypeOf(value) !== Object.prototype) return NOT_PLAIN
      return sortedObject(value as Record<string, unknown>, depth, leafMin)
    default:
      return NOT_PLAIN
  }
}

function sortedArray(items: unknown[], depth: number, leafMin: number): unknown {
  let copy: unknown[] | null = null
  for (let i = 0; i < items.length; i++) {
    const item = items[i]
    if (item === undefined) return NOT_PLAIN // also a hole: JSON writes null, `write` writes #undefined
    const sorted = sortedPlainJSON(item, depth + 1, leafMin)
    if (sorted === NOT_PLAIN) return NOT_PLAIN
    if (sorted !== item) (copy ??= items.slice())[i] = sorted
  }
  return copy ?? items
}

function sortedObject(object: Record<string, unknown>, depth: number, leafMin: number): unknown {
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
    const sorted = sortedPlainJSON(value, depth + 1, leafMin)
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

function write(value: unknown, ancestors: object[], leafMin: number): string {
  switch (typeof value) {
    case "string":
      return JSON.stringify(stringLeaf(value, leafMin))
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
    ? writeArray(object, ancestors, leafMin)
    : writeObject(object as Record<string, unknown>, ancestors, leafMin)
  ancestors.pop()
  return text
}

function writeArray(items: unknown[], ancestors: object[], leafMin: number): string {
  let text = "["
  for (let i = 0; i < items.length; i++) text += (i ? "," : "") + write(items[i], ancestors, leafMin)
  return text + "]"
}

function writeObject(object: Record<string, unknown>, ancestors: object[], leafMin: number): string {
  // A Date, Map or typed array has no enumerable keys of its own that say what it holds; its constructor name and
  // its string form keep two different ones apart without special-casing every class.
  const keys = Object.keys(object).sort()
  const proto = Object.getPrototypeOf(object)
  const tag =
    proto === Object.prototype || proto === null ? "" : `#${proto?.constructor?.name ?? "?"}(${safeString(object)})`
  let text = tag + "{"
  for (let i = 0; i < keys.length; i++) {
    text += (i ? "," : "") + JSON.stringify(keys[i]) + ":" + write(object[keys[i]], ancestors, leafMin)
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
 * of at most 24r calls (the backstop of an 8-call cycle). With 64 bits that is about n^2 / 2^65 per window (n = 72
 * by default: ~1.4e-16); the digest also carries the text's length. A result digest that collides only makes a
 * changing result look unchanged, i.e. brings a block forward from the backstop to the cycle's window. wyhash is not cryptographic, but the only party that could craft a collision is
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

/** What the history remembers of one call's arguments: the signature digest and the tool name (for the message). */
type CallRecord = { signature: string; tool: string }

/**
 * Free-text keys left out of a tool's signature: the model rewrites them at will and they do not change what the
 * call does, so a reworded label must not make a repeat look new. One list; the README repeats it. The setting
 * OPENCODE_LOOP_GUARD_IGNORE_KEYS adds to it (see ignoredKeys).
 */
export const IGNORED_KEYS: Readonly<Record<string, readonly string[]>> = {
  bash: ["description"], // a few words for the human; `command` is what runs
  task: ["description"], // a 3-5 word label; `prompt` is what the subagent gets
}
const NO_KEYS: readonly string[] = []

/**
 * The signature of a call: tool name + digest of its canonical arguments, the `ignored` keys left out (by default
 * the tool's IGNORED_KEYS). Arguments are never stored.
 */
export function signature(tool: string, args: unknown, ignored = builtInKeys(tool)): CallRecord {
  return { signature: toolKey(tool) + digest(canonicalize(identityOf(args, ignored))), tool: toolLabel(tool) }
}

function builtInKeys(tool: string): readonly string[] {
  return Object.hasOwn(IGNORED_KEYS, tool) ? IGNORED_KEYS[tool] : NO_KEYS
}

/** The arguments that make a call's identity: the `ignored` top-level keys removed (a shallow copy, only then). */
function identityOf(args: unknown, ignored: readonly string[]): unknown {
  if (ignored.length === 0 || typeof args !== "object" || args === null || Array.isArray(args)) return args
  if (!ignored.some((key) => Object.hasOwn(args, key))) return args
  const copy: Record<string, unknown> = { ...(args as Record<string, unknown>) } // spread keeps an own __proto__ key
  for (const key of ignored) delete copy[key]
  return copy
}

/** One entry of OPENCODE_LOOP_GUARD_IGNORE_KEYS: a top-level argument key left out of the matching tools' calls. */
type IgnoredKey = { glob: string; key: string }

/**
 * The keys left out of each tool's signature: its IGNORED_KEYS, then the keys of every setting entry whose glob
 * matches the tool's name. Cached per tool name (a process sees few; the cache is bounded all the same).
 */
function ignoredKeys(entries: readonly IgnoredKey[]): (tool: string) => readonly string[] {
  if (entries.length === 0) return builtInKeys
  const matchers = entries.map((entry) => ({ key: entry.key, matches: globMatcher([entry.glob]) }))
  const cache = new Map<string, readonly string[]>()
  return (tool) => {
    let keys = cache.get(tool)
    if (keys === undefined) {
      if (cache.size >= 1000) cache.clear()
      const added = matchers.filter((m) => m.matches(tool)).map((m) => m.key)
      keys = added.length === 0 ? builtInKeys(tool) : [...new Set([...builtInKeys(tool), ...added])]
      cache.set(tool, keys)
    }
    return keys
  }
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
// Pure core: results
// ---------------------------------------------------------------------------------------------------------------

/** The result of a call that has not been seen (yet): a parallel call still running, or an event that never came. */
const NO_RESULT = "none"

/**
 * Digest of what a call returned (the output the model reads), its volatile parts masked (maskVolatile): a poll
 * answered "running" with a new timestamp each time returned the same result. Only the digest is kept.
 */
function resultDigest(output: unknown): string {
  return "ok:" + exactDigest(maskVolatile(output))
}

/** Digest of a failed call's error text, volatile parts masked too; failures and outputs never compare equal. */
function errorDigest(error: unknown): string {
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
function isRefusal(error: unknown): boolean {
  return typeof error === "string" && PERMISSION_REFUSAL.test(error)
}

/** One call of the session's history: its signature, and its result once the host reports it. */
type Call = CallRecord & {
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
  /** the call may change the project when it succeeds (changesProject): it ends a per-call streak */
  changes: boolean
}

export function newCall(
  record: CallRecord,
  callID: string,
  wait = 0,
  asked = wait,
  started = 0,
  step = callID,
  changes = false,
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
    changes,
  }
}

/**
 * Tools that only read (opencode's own, and Claude Code's `bashoutput` poll). Any other tool (edit, write, patch,
 * task, an MCP tool loop-guard knows nothing of) may change something when it succeeds: it ends a per-call streak,
 * which only makes a streak harder to reach. bash is read by isReadOnlyCommand.
 */
const READ_ONLY_TOOLS = new Set([
  "read",
  "grep",
  "glob",
  "list",
  "webfetch",
  "websearch",
  "codesearch",
  "todoread",
  "todowrite",
  "bashoutput",
])

/**
 * Programs a bash command may run and still count as read-only (it cannot end a per-call streak). Kept short on
 * purpose: a command it does not know counts as changing, which only makes a streak harder to reach.
 */
const READ_ONLY_PROGRAMS = new Set([
  "cat",
  "cd",
  "echo",
  "file",
  "grep",
  "egrep",
  "fgrep",
  "head",
  "ls",
  "nl",
  "pwd",
  "rg",
  "stat",
  "tail",
  "tree",
  "wc",
  "which",
  "find",
  "git",
])
/** The git subcommands that only read. */
const READ_ONLY_GIT = new Set(["status", "log", "diff", "show", "branch", "blame", "grep", "ls-files", "rev-parse"])
/** find's actions that write or run something. */
const FIND_ACTIONS = /^-(?:delete|exec|execdir|ok|okdir|fprint|fprint0|fprintf|fls)$/

/**
 * Whether a call may change the project: a tool that is not in READ_ONLY_TOOLS, or a bash command that is not
 * read-only (isReadOnlyCommand). Only this boolean is kept, never the command.
 */
function changesProject(tool: string, args: unknown): boolean {
  if (READ_ONLY_TOOLS.has(tool)) return false
  if (tool !== "bash") return true
  const command = typeof args === "object" && args !== null ? (args as { command?: unknown }).command : undefined
  return typeof command !== "string" || !isReadOnlyCommand(command)
}

/**
 * A bash command line that only reads: no redirection, no command substitution, and every command of it (cut at
 * |, ||, &&, ; and line breaks) runs a program of READ_ONLY_PROGRAMS (git only with a READ_ONLY_GIT subcommand,
 * find without an action that writes or runs). `cat a.txt | grep x` reads; `ls > out`, `rm x`, `npm test`,
 * `sed -i ...` and anything unknown change.
 */
export function isReadOnlyCommand(command: string): boolean {
  if (command.length > MAX_COMMAND_READ * 4 || /[>`]|\$\(/.test(command)) return false
  for (const part of command.split(/\|\|?|&&|;|\n/)) {
    const words = part.split(/[ \t\r]+/).filter((word) => word !== "")
    if (words.length === 0) continue
    const program = words[0]
    if (!READ_ONLY_PROGRAMS.has(program)) return false
    if (program === "git" && !READ_ONLY_GIT.has(words[1] ?? "")) return false
    if (program === "find" && words.some((word) => FIND_ACTIONS.test(word))) return false
  }
  return true
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: waits
// ---------------------------------------------------------------------------------------------------------------

/** A sleep shorter than this is no wait: a loop that slips in `sleep 1` is still a loop. */
const WAIT_MIN_SECONDS = 5

/** Seconds a call waits on purpose: a bash command that sleeps WAIT_MIN_SECONDS or more first; otherwise 0. */
function waitSeconds(tool: string, args: unknown): number {
  if (tool !== "bash" || typeof args !== "object" || args === null) return 0
  const command = (args as { command?: unknown }).command
  if (typeof command !== "string") return 0
  const seconds = sleepSeconds(command)
  return seconds >= WAIT_MIN_SECONDS ? seconds : 0
}

/**
 * The wait a call is taken to make before it runs: the sleep its command asks for, or else the wait of the same
 * call's (same signature) latest run: what that run measured, or, while its result is pending, what was expected of
 * it (a `process wait` that blocked 30 s will block again; one that answered at once will answer at once). The core
 * has no clock: durations come from the adapter.
 */
function expectedWait(history: readonly Call[], signature: string, asked: number): number {
  if (asked > 0) return asked
  return lastRun(history, signature, history.length, false)?.wait ?? 0
}

/**
 * The newest call with this signature among the `before` first of the history (only a measured one when
 * `measured`), no further back than 2 * MAX_CYCLE calls: this runs on every call, and most calls are new. A cycle's
 * calls repeat within MAX_CYCLE calls, and a blocked wait (never recorded) puts at most one more turn between two
 * runs of the same call.
 */
function lastRun(history: readonly Call[], signature: string, before: number, measured: boolean): Call | undefined {
  for (let i = before - 1; i >= Math.max(0, before - 2 * MAX_CYCLE); i--) {
    const call = history[i]
    if (call.signature === signature && (!measured || call.ran !== null)) return call
  }
  return undefined
}

/**
 * The wait a call made, once it ran for `ran` seconds (from tool.execute.before to its result): the sleep it asked
 * for, when it asked for one (the budget counts what was asked, not the shell's start-up around it: three `sleep 5`
 * fit a 15 s budget); otherwise a call that itself ran WAIT_MIN_SECONDS or more waited that long (a `gh run watch`,
 * a `process wait` with a timeout, a test runner polled with a timeout), as surely as a `sleep`, when its previous
 * run (`previous` seconds, the same call) did too: one slow run is no wait (the host's first bash call, 2.4 s here;
 * a loaded machine, where an echo/read loop of the real-host tests once ran past its window, most likely for one
 * slow call; a permission the human took a while to grant). A fast call is no wait.
 */
function measuredWait(asked: number, ran: number, previous: number | null): number {
  if (asked > 0) return asked
  return ran >= WAIT_MIN_SECONDS && previous !== null && previous >= WAIT_MIN_SECONDS ? ran : 0
}

/**
 * The seconds a shell command line sleeps before it does anything else; 0 when it does not start by sleeping.
 * It reads the line as the shell would run it, one command after the other:
 * - the line is cut into commands at `&&`, `||`, `;` and line breaks; empty commands are skipped;
 * - leading `cd DIR` commands are passed over: changing directory takes no time;
 * - then every `sleep` command in a row adds its operands, each a plain number with an optional unit as GNU sleep
 *   reads it (`60`, `1.5`, `.5`, `30s`, `1m`, `2h`, `1d`; several operands add up);
 * - the reading ends at the first other command (`echo sleep 60` is no wait, `sleep 60 && echo x` is one), and
 *   at a sleep it cannot read: an option, a variable, a quoted or computed operand, `infinity`, or a `&`, `|` or
 *   redirection in that command (`sleep 60 &` runs in the background: no wait). A `#` word starts a comment.
 * Nothing of the command is kept: only the number.
 */
export function sleepSeconds(command: string): number {
  if (!MAY_SLEEP_FIRST.test(command)) return 0 // most commands: no reading at all
  let total = 0
  let started = false // a sleep was read: from now on only further sleeps add
  for (let start = 0; start <= command.length;) {
    SEPARATOR.lastIndex = start
    const separator = SEPARATOR.exec(command)
    const end = separator ? separator.index : command.length
    const words = commandWords(command.slice(start, end))
    start = end + (separator ? separator[0].length : 1)
    if (words === null) return total
    if (words.length === 0) continue
    if (!started && words[0] === "cd" && words.length <= 2 && words.every(isPlainWord)) continue
    if (words[0] !== "sleep" || words.length < 2) return total
    let seconds = 0
    for (const operand of words.slice(1)) {
      const value = sleepOperand(operand)
      if (value === null) return total
      seconds += value
    }
    total += seconds
    started = true
  }
  return total
}
const MAY_SLEEP_FIRST = /^[\s;]*(?:sleep|cd)\b/
const SEPARATOR = /&&|\|\||;|\n/g
/** A `sleep` or `cd` command is short; a longer one is some other command and ends the reading (and its cost). */
const MAX_COMMAND_READ = 256

/** The words of one command, split at blanks, a `#` word and what follows it (a comment) left out; null: too long. */
function commandWords(command: string): string[] | null {
  if (command.length > MAX_COMMAND_READ) return null
  const words = command.split(/[ \t\r]+/).filter((word) => word !== "")
  const comment = words.findIndex((word) => word.startsWith("#"))
  return comment === -1 ? words : words.slice(0, comment)
}

/** A word the shell takes as it is: no quote, variable, glob, subshell, pipe, background or redirection. */
function isPlainWord(word: string): boolean {
  return /^[\w./~+,:@%=-]+$/.test(word)
}

const SLEEP_UNITS: Readonly<Record<string, number>> = { "": 1, s: 1, m: 60, h: 3600, d: 86400 }

/** One operand of GNU sleep in seconds (`1.5m` is 90), or null when it is not a plain number with a unit. */
function sleepOperand(operand: string): number | null {
  const match = /^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$/.exec(operand)
  return match ? Number(match[1]) * SLEEP_UNITS[match[2]] : null
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: the cycle check
// ---------------------------------------------------------------------------------------------------------------

/** The longest cycle looked for, and the most calls of one step compared as a set. */
const MAX_CYCLE = 8

/** How many calls, the current one included, must repeat a cycle of length k: max(r*k, r+1). */
function windowSize(k: number, repetitions: number): number {
  return Math.max(repetitions * k, repetitions + 1)
}

/** The backstop for a cycle whose results kept changing: three times the window, max(3r*k, 3r+1). */
function backstopSize(k: number, repetitions: number): number {
  return windowSize(k, 3 * repetitions)
}

/** The history length the rules need: the backstop window of the longest cycle, or the failure streak. */
export function historyCapacity(repetitions: number, failures = 0): number {
  return Math.max(backstopSize(MAX_CYCLE, repetitions) - 1, failures)
}

type Cycle = {
  /** "cycle": the results repeated too; "backstop": they changed, but the cycle reached the backstop */
  reason: "cycle" | "backstop"
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
 * The smallest cycle (k = 1..MAX_CYCLE) that the current call completes, or null. `history` is the recorded calls,
 * oldest first, without the current one. A cycle whose results repeated is caught at windowSize; one whose results
 * changed at backstopSize. `isExempt(tool)` lets a cycle through when every call in it is an exempt tool. A k whose
 * turn is itself periodic (A A as k = 2) is the smaller cycle, already judged, and is skipped.
 */
function findCycle(
  history: readonly Call[],
  current: CallRecord,
  repetitions: number,
  isExempt: (tool: string) => boolean = () => false,
): Cycle | null {
  for (let k = 1; k <= MAX_CYCLE; k++) {
    const calls = windowSize(k, repetitions)
    if (history.length + 1 < calls) break // longer cycles need even more calls
    if (!isPeriodic(history, current, calls, k) || hasSmallerPeriod(history, current, calls, k)) continue
    const tools = history.slice(history.length - (k - 1)).map((call) => call.tool)
    tools.push(current.tool)
    if (tools.every(isExempt)) continue
    const backstop = backstopSize(k, repetitions)
    if (resultsRepeat(history, calls, k) && !progressedBefore(history, calls, k, backstop)) {
      return { reason: "cycle", k, calls, repetitions: calls / k, tools }
    }
    if (history.length + 1 >= backstop && isPeriodic(history, current, backstop, k)) {
      return { reason: "backstop", k, calls: backstop, repetitions: backstop / k, tools }
    }
  }
  return null
}

/**
 * Whether the window (the last calls - 1 records, then the current call) has period k. Indexed in place: this
 * runs on every call, and copying the window for each k cost more than the comparisons.
 */
function isPeriodic(history: readonly Call[], current: CallRecord, calls: number, k: number): boolean {
  const start = history.length - (calls - 1) // index in history of the window's first call
  if (current.signature !== history[start + calls - 1 - k].signature) return false
  for (let i = k; i < calls - 1; i++) {
    if (history[start + i].signature !== history[start + i - k].signature) return false
  }
  return true
}

/** Whether a window of period k also has a period d that divides k (then it is that smaller cycle). */
function hasSmallerPeriod(history: readonly Call[], current: CallRecord, calls: number, k: number): boolean {
  for (let d = 1; d < k; d++) if (k % d === 0 && isPeriodic(history, current, calls, d)) return true
  return false
}

/**
 * Whether the cycle was seen to advance just before its window: among the calls before it that continue the cycle
 * (each the same call as the one k later), back to the backstop's reach, at least PROGRESS_CHANGES returned
 * something else than the same call one turn earlier. A job seen advancing that then answers the same a few times
 * is pausing, not stalled: it runs on to the backstop, as a cycle whose results change in the window does (the real
 * trajectories' E7: a long ingestion whose poll showed a new book every few polls, then the same book 4 times in
 * 14 s). A poll that never moved is caught at the window (E1-E5: "running" 4 times since the job started).
 */
function progressedBefore(history: readonly Call[], calls: number, k: number, backstop: number): boolean {
  const reach = Math.max(0, history.length - (backstop - 1)) // the oldest call the backstop window holds
  let changes = 0
  for (let i = history.length - (calls - 1) + k - 1; i - k >= reach; i--) {
    if (history[i].signature !== history[i - k].signature) return false // the cycle started after it
    if (history[i].result !== history[i - k].result && ++changes >= PROGRESS_CHANGES) return true
  }
  return false
}

/**
 * Changes before the window that show a job advancing. One is not enough: a poll's first change is often the job
 * starting (no output yet, then its first line), and `x y y y` stays a loop at its window.
 */
const PROGRESS_CHANGES = 2

/** Whether each repeated call of the window returned what the same call one turn earlier returned. */
function resultsRepeat(history: readonly Call[], calls: number, k: number): boolean {
  const start = history.length - (calls - 1)
  for (let i = k; i < calls - 1; i++) {
    if (history[start + i].result !== history[start + i - k].result) return false
  }
  return true
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: steps as sets
// ---------------------------------------------------------------------------------------------------------------

/** One step made again: the same calls at once, in any order. `changing`: their results changed (the backstop). */
type StepRepeat = {
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
function findStepRepeat(
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

// ---------------------------------------------------------------------------------------------------------------
// Pure core: the per-call streak
// ---------------------------------------------------------------------------------------------------------------

/**
 * The most calls of other work between two occurrences of a streak's call: it comes back at least every other
 * call (every step, beside one other call). An agent that re-reads one file while it explores ([a], [a,b],
 * [a,b,c], [a,b,c,d]) does more work every round, so its re-reads drift apart and never make a streak.
 */
const STREAK_MAX_GAP = 1

/** The calls a streak can span, the current one included: r + 1 occurrences and r gaps of STREAK_MAX_GAP calls. */
function streakWindow(repetitions: number): number {
  return repetitions + 1 + repetitions * STREAK_MAX_GAP
}

/** One call repeated among other calls: `occurrences` times (the current one included) in the last `calls`. */
type CallStreak = { reason: "streak"; tool: string; occurrences: number; calls: number }

/**
 * The per-call streak the current call completes: its r + 1st occurrence (the 4th by default; occurrences are
 * the steps that make the call: repeats inside one step are one, identical parallel calls being opencode's own
 * doom_loop check) where each two occurrences have at most STREAK_MAX_GAP calls of other work between them (the
 * other calls of the earlier occurrence's step and of the steps up to the later one's), every earlier occurrence
 * returned the same result, no call in the streak changed the project (changesProject, a failed one does not),
 * and the calls around it vary (at least two different ones: a fixed partner makes it a cycle, the cycle rule's).
 * Null otherwise, for an exempt tool, and for a call that waits (a `sleep 30 && gh run view` or a slow `process
 * wait` between reads of logs is the wait rule's, held to its budget: its answer repeating is what waiting looks
 * like). Reads at most streakWindow + MAX_CYCLE calls back.
 */
function findCallStreak(
  history: readonly Call[],
  current: Call,
  repetitions: number,
  isExempt: (tool: string) => boolean = () => false,
): CallStreak | null {
  if (current.wait > 0 || isExempt(current.tool)) return null
  const limit = Math.max(0, history.length - (streakWindow(repetitions) + MAX_CYCLE))
  if (!occursTimes(history, current.signature, limit, repetitions)) return null // most calls: one quick scan
  let occurrences = 1
  let laterStep = current.step // the step of the newest occurrence found so far
  let gap = 0 // other calls between the newest occurrence found and the one before it, being counted
  let laterGap = 0 // the other calls counted for the pair already found (its earlier step's calls come later)
  let result: string | null = null
  let other: string | null = null // the first other call seen, and whether another one differs from it
  let varied = false
  let i = history.length - 1
  // on to the first occurrence, then over the calls before it in its step (they are its pair's work too)
  for (; i >= limit && (occurrences <= repetitions || history[i].step === laterStep); i--) {
    const call = history[i]
    if (call.signature === current.signature) {
      if (result !== null && call.result !== result) return null
      result = call.result
      if (call.step !== laterStep) {
        occurrences += 1 // a step that makes it again; a repeat inside one step is no new occurrence
        ;[laterGap, gap] = [gap, 0]
      }
      laterStep = call.step
      continue
    }
    if (call.changes && !call.failed) return null
    if (other === null) other = call.signature
    else if (call.signature !== other) varied = true
    if (call.step !== laterStep) gap += 1
    else if (laterStep !== current.step) laterGap += 1 // beside an earlier occurrence, in its step: its pair's
    if (gap > STREAK_MAX_GAP || laterGap > STREAK_MAX_GAP) return null
  }
  if (occurrences <= repetitions || !varied) return null
  if (i >= 0 && history[i].step === laterStep) return null // the first occurrence's step reaches past the bound
  return { reason: "streak", tool: current.tool, occurrences, calls: history.length - i }
}

/** Whether the signature occurs at least `times` times in history[from..]. */
function occursTimes(history: readonly Call[], signature: string, from: number, times: number): boolean {
  let count = 0
  for (let i = history.length - 1; i >= from; i--)
    if (history[i].signature === signature && ++count >= times) return true
  return false
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: the wait rule
// ---------------------------------------------------------------------------------------------------------------

/**
 * A waiting cycle being timed: the signatures of one turn of it, and what its waits have slept so far. A lap is
 * one wait of the cycle (in a sleep + poll cycle, one sleep and its poll).
 */
type Waiting = { members: string[]; tools: string[]; slept: number; laps: number }

/** A waiting cycle past its budget or its lap cap: the wait that would go past it is blocked. */
type WaitOver = {
  reason: "wait"
  /** which limit the wait would pass */
  limit: "budget" | "laps"
  k: number
  /** tool names of one turn of the cycle, oldest first, ending with the current call's tool */
  tools: string[]
  /** seconds slept and laps so far, without the blocked wait */
  slept: number
  laps: number
  budget: number
  lapCap: number
}

/** The calls of one turn of a k-cycle the current call completes: the last k - 1 recorded, then the current one. */
function lastTurn(history: readonly Call[], current: Call, k: number): Call[] {
  const turn = history.slice(history.length - (k - 1))
  turn.push(current)
  return turn
}

/**
 * The length k of the smallest cycle (k = 1..MAX_CYCLE) the current call completes by its calls alone, whatever their
 * results, one of whose calls is a wait; 0 when there is none. The window is the cycle rule's, max(r*k, r+1).
 */
function findWaitingCycle(
  history: readonly Call[],
  current: Call,
  repetitions: number,
  isExempt: (tool: string) => boolean,
): number {
  if (current.wait <= 0 && !history.slice(-(MAX_CYCLE - 1)).some((call) => call.wait > 0)) return 0 // most calls
  for (let k = 1; k <= MAX_CYCLE; k++) {
    const calls = windowSize(k, repetitions)
    if (history.length + 1 < calls) break
    if (!isPeriodic(history, current, calls, k) || hasSmallerPeriod(history, current, calls, k)) continue
    const turn = lastTurn(history, current, k)
    if (isWaiting(turn) && !turn.every((call) => isExempt(call.tool))) return k
  }
  return 0
}

/**
 * The length k of the turn a wait closes when it repeats a call of the last MAX_CYCLE (the nearest one with its
 * signature: the calls in between are one lap of the pattern), 0 when it is no wait, repeats none, or the turn is
 * no waiting one (isWaiting). A waiting
 * cycle is thus timed from its 2nd lap, before the cycle rule's window (its 3rd lap), so the time slept is checked
 * before each wait runs: with `sleep 20m` + poll the 2nd sleep, which would pass the 30-minute budget, is blocked.
 */
function repeatedWait(history: readonly Call[], current: Call, isExempt: (tool: string) => boolean): number {
  if (current.wait <= 0) return 0
  for (let k = 1; k <= MAX_CYCLE && k <= history.length; k++) {
    if (history[history.length - k].signature !== current.signature) continue
    const turn = lastTurn(history, current, k)
    return !isWaiting(turn) || turn.every((call) => isExempt(call.tool)) ? 0 : k
  }
  return 0
}

/**
 * The timing of a waiting cycle recognized at its 2nd lap (repeatedWait, turn length k): the waits of the calls that
 * ran just before in the same pattern, i.e. the run at the end of the history in which each call is the one k calls
 * later, plus the calls of the current turn, from index `from` on (the first call after one that ended a timing:
 * a call outside the cycle starts the count over). A call that broke the pattern ends the run: what ran before it
 * is not counted.
 */
function secondLap(history: readonly Call[], current: Call, k: number, from: number): Waiting {
  const turn = lastTurn(history, current, k)
  const timed: Waiting = {
    members: turn.map((call) => call.signature),
    tools: turn.map((call) => call.tool),
    slept: 0,
    laps: 0,
  }
  const signatureAt = (i: number) => (i < history.length ? history[i].signature : current.signature)
  for (let i = history.length - 1; i >= from; i--) {
    if (i + k <= history.length && history[i].signature !== signatureAt(i + k)) break
    addLap(timed, history[i])
  }
  return timed
}

/**
 * Whether a cycle waits on purpose: one of the calls of its turn is a wait. A call that is a wait only by the time
 * it ran (measuredWait: it asked for no sleep) does not make a cycle that edits files (EDIT_TOOLS) a waiting one:
 * edit -> test -> edit -> test with a test run of 10 s is work retried, the loop the cycle rule is for, not a job
 * waited on (and its block must not speak of waiting). A sleep the command asks for is a wait beside an edit too.
 */
function isWaiting(turn: readonly Call[]): boolean {
  const edits = turn.some((call) => EDIT_TOOLS.has(call.tool))
  return turn.some((call) => call.wait > 0 && (call.asked > 0 || !edits))
}

/** opencode's tools that edit files (see isWaiting). */
const EDIT_TOOLS = new Set(["edit", "write", "patch", "multiedit", "apply_patch"])

/**
 * The waiting cycle the session times now. The same cycle (the same calls, in any phase) goes on being timed; a
 * cycle seen for the first time starts from the calls of it that ran just before: the longest run at the end of
 * the history made of its calls only (its laps before it was recognized count too).
 */
function timedWaiting(waiting: Waiting | null, history: readonly Call[], turn: readonly Call[]): Waiting {
  const members = turn.map((call) => call.signature)
  if (waiting && sameMembers(waiting.members, members)) return waiting
  const timed: Waiting = { members, tools: turn.map((call) => call.tool), slept: 0, laps: 0 }
  for (let i = history.length - 1; i >= 0 && members.includes(history[i].signature); i--) addLap(timed, history[i])
  return timed
}

function sameMembers(a: readonly string[], b: readonly string[]): boolean {
  return a.every((signature) => b.includes(signature)) && b.every((signature) => a.includes(signature))
}

/** Counts a call of the waiting cycle that ran: its sleep, and a lap when it is a wait. */
function addLap(waiting: Waiting, call: Call): void {
  if (call.wait <= 0) return
  waiting.slept += call.wait
  waiting.laps += 1
}

/**
 * The wait rule on a call that completes a waiting cycle: a call that does not wait (the poll) runs; a wait runs
 * while the time slept, this wait included, stays within `budget` seconds and the laps within `lapCap`; otherwise
 * it is blocked. The time a model takes to answer is never counted: only what the commands ask to sleep.
 */
function checkWait(
  waiting: Waiting,
  tools: string[],
  current: Call,
  k: number,
  budget: number,
  lapCap: number,
): WaitOver | null {
  if (current.wait <= 0) return null
  const limit = waiting.slept + current.wait > budget ? "budget" : waiting.laps + 1 > lapCap ? "laps" : null
  if (!limit) return null
  return { reason: "wait", limit, k, tools, slept: waiting.slept, laps: waiting.laps, budget, lapCap }
}

/**
 * A wait of the cycle being timed that completes no window: a blocked wait is not recorded, so after a block and a
 * poll the next wait breaks the window, yet it is the same waiting and is held to the same limits (otherwise two
 * waits of every three would run past the budget). Null for a call outside the timed cycle.
 */
function continuedWait(waiting: Waiting | null, current: Call, budget: number, lapCap: number): WaitOver | null {
  const at = waiting ? waiting.members.indexOf(current.signature) : -1
  if (!waiting || at < 0) return null
  const tools = [...waiting.tools.slice(at + 1), ...waiting.tools.slice(0, at + 1)] // ending with the current call
  return checkWait(waiting, tools, current, waiting.members.length, budget, lapCap)
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: the failure streak
// ---------------------------------------------------------------------------------------------------------------

/** Tools a failure streak never blocks: a failing command is how bash reports, and its next command is new work. */
const STREAK_FREE_TOOLS = new Set(["bash"])

/** `refused`: every failure of the streak was opencode's permission refusal (the user's rules forbid the call). */
type Streak = { reason: "failures"; tool: string; failures: number; refused: boolean }

/**
 * A failure streak the current call would extend: the last `failures` calls of the session were all of the
 * current call's tool and all failed with the same error digest, whatever their arguments. Null when `failures`
 * is 0 (off), for bash, and for an exempt tool.
 */
function findStreak(
  history: readonly Call[],
  current: CallRecord,
  failures: number,
  isExempt: (tool: string) => boolean = () => false,
): Streak | null {
  if (failures === 0 || history.length < failures) return null
  if (STREAK_FREE_TOOLS.has(current.tool) || isExempt(current.tool)) return null
  const last = history[history.length - 1]
  let refused = true
  for (let i = history.length - failures; i < history.length; i++) {
    const call = history[i]
    if (!call.failed || call.tool !== current.tool || call.result !== last.result) return null
    refused &&= call.refused
  }
  return { reason: "failures", tool: current.tool, failures, refused }
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: what the model and the human read
// ---------------------------------------------------------------------------------------------------------------

/**
 * What was found: a cycle (results repeated, or at the backstop), a step made again, a per-call streak, a failure
 * streak, or a wait past its limit.
 */
type Finding = Cycle | StepRepeat | CallStreak | Streak | WaitOver

/** Blocks from this one on escalate: the agent is told to stop calling tools and report. */
const ESCALATE_AT = 3

/**
 * The message the model reads as the blocked call's result. The first line is a sentence for the human; the
 * rest is for the model. It names tools, k and counts only: arguments (paths, commands, file contents) and error
 * texts may hold secrets and never appear. `stopped` adds that the run has been stopped.
 */
function blockMessage(finding: Finding, blocks: number, stopped = false): string {
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
function warnNote(finding: Finding): string {
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
function blockToast(finding: Finding, blocks: number, retries = 0): string {
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
function warnToast(finding: Finding): string {
  return `loop-guard: warned about ${caughtText(finding)}; it ran (warn mode) and the agent was told`
}

/** The toast for the bounded stop. */
function stopToast(finding: Finding, blocks: number, retries = 0): string {
  return `loop-guard: stopped the agent after ${blocks} blocks in one turn (the last: ${caughtText(finding, retries)})`
}

/** The log's words and fields for a finding (no argument values). */
function describe(finding: Finding): string {
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

function facts(finding: Finding): Record<string, unknown> {
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
function article(n: number): string {
  return /^8/.test(String(n)) || n === 11 || n === 18 ? "an" : "a"
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: the stream watcher
// ---------------------------------------------------------------------------------------------------------------

/**
 * A streamed part (reasoning or answer) is fed to its own StreamWatcher one delta at a time. The watcher looks for
 * a passage of p characters (1 <= p <= STREAM_MAX_PERIOD) repeated back to back, exactly: each character equal to
 * the one p characters before it (a run). A run is solid from one and a half copies and STREAM_SOLID_CHARS
 * characters. Solid runs that follow one another without a gap (at most STREAM_GAP characters) make one repetition
 * region, so a loop that drifts stays one loop: its period changes (`the the the` becoming `thehehe`), a space or a
 * word differs now and then. The part is stopped when the region has lasted STREAM_REPEATS copies of the running
 * passage and STREAM_MIN_CHARS characters, whichever comes later, and the running passage is itself repeated (two
 * copies and STREAM_OWN_CHARS characters, unless it began the region): `!` at 800 characters, a 43-character
 * sentence at 800, a 500-character paragraph at its 6th copy. The issue's rule allows 8 copies and 1,000
 * characters: the margin covers the chunk that carries the verdict (the abort follows it).
 *
 * Long passages: a passage of STREAM_LONG_CHARS characters or more repeated verbatim, STREAM_LONG_REPEATS copies
 * back to back (its own run, not the region: a copy that differs by one character starts the count again), is a
 * loop at the last character of that copy: a 1,200-character paragraph at character 4,800 of the loop, where the
 * main rule waited for 7,200 (the abort follows the chunk that carries that character). Three copies, or three and
 * most of a fourth, run. A long passage that varies (a counter, a word) is left to the main rule, which chains it
 * only when the running passage is itself repeated (two copies): so long copies that all differ a little run, as a
 * quoted log with timestamps does. Why 4: the issue asks the end of the 4th copy and 3 copies must run; the real
 * texts leave room below (see next paragraph), but 2 copies of a 776-character listing are real text. Passages up to
 * STREAM_MAX_PERIOD (8,000) characters are seen: the ring of STREAM_WINDOW characters holds one copy and the
 * characters to check a proposal back (STREAM_WINDOW - STREAM_MAX_PERIOD >= STREAM_GRAM); a longer one is not.
 *
 * What the real texts say (../shared/data/real-texts, bench: `npm run bench -- --texts`): with these values no
 * text of the 15,784 is stopped; at 4 copies and 400 characters one is (a reasoning that quotes a duplicated line of
 * code 4 times). A passage whose counter changes at every copy (`assistant57`, `assistant58`, ...) is not chained:
 * a quoted log with timestamps has that shape too. The long rule asked less: at 2 copies of 1,000+ characters, or 3
 * and 4 copies of 250+, no text is stopped; at 2 copies of 500+ one is (a transcript showing a listing twice).
 *
 * Whole lines of code, tables and diagrams: a passage that holds a line break, inside a Markdown code fence or
 * made only of table or diagram rows (lines that start with |, + or a box-drawing character, or hold a cell
 * separator, a | with a blank beside it, further on), is repeated code, data or layout (the same row of a dummy
 * weights file 16 times, the empty rows of a box, a table without outer pipes). It stops only at a backstop of
 * STREAM_CODE_REPEATS copies and STREAM_CODE_CHARS characters. A cycle inside a line (a made-up hash degenerating
 * into `JibdJibd...`) is no line of code and follows the main rule.
 *
 * Cost: bounded work per character, never a rescan of the part. The last STREAM_WINDOW characters sit in a ring;
 * a rolling hash of the last STREAM_GRAM characters indexes a table of the position where that gram was last seen,
 * which proposes the period p = distance back (a loop proposes its own period at almost every character). A
 * proposed period is checked back through the ring, at most STREAM_CHECK_BACK characters (so its run counts from
 * where the repetition began), then followed as one of at most STREAM_CANDIDATES candidates until its first
 * difference. The long rule adds no state: a candidate's run is its copies. Memory: the ring (16 KB) and the table
 * (16 KB), allocated at the first character; never the text. The table's slots are overwritten by the grams in
 * between: a proposal 8,000 characters back survives in about 1 slot of 7 (4,000: 1 of 3), enough for a loop, which
 * proposes its period at almost every character.
 */
export const STREAM_MAX_PERIOD = 8000
/** copies of the passage, and characters from the loop's start, before a stop (both must be reached) */
export const STREAM_REPEATS = 6
export const STREAM_MIN_CHARS = 800
/** the long-passage rule: a passage of STREAM_LONG_CHARS or more, repeated verbatim STREAM_LONG_REPEATS times */
export const STREAM_LONG_CHARS = 1000
export const STREAM_LONG_REPEATS = 4
/** the backstop for whole lines repeated in code, tables and diagrams */
export const STREAM_CODE_REPEATS = 64
export const STREAM_CODE_CHARS = 8000
/** a run is solid (part of a loop) from 1.5 copies spanning this many characters: shorter is coincidence */
const STREAM_SOLID_CHARS = 12
/** characters between two solid runs that still make one region (a glitch in a loop) */
const STREAM_GAP = 8
/** the running passage's own repetition, when the region began with another: copies beyond the first, characters */
const STREAM_OWN_COPIES = 1
const STREAM_OWN_CHARS = 100
/** characters kept: a power of two above STREAM_MAX_PERIOD + STREAM_GRAM, so a proposal can be checked back */
const STREAM_WINDOW = 8192
/** characters hashed to propose a period; grams shorter than this would propose noise in ordinary prose */
const STREAM_GRAM = 10
/** characters a proposed period is checked back: bounds the work per proposal (a loop is proposed early anyway) */
const STREAM_CHECK_BACK = 1024
/** slots of the gram table (a power of two); a collision only loses a proposal or proposes a period that fails */
const STREAM_TABLE = 4096
/** candidate periods followed at once */
const STREAM_CANDIDATES = 8

/** The long-passage rule: a passage of `chars` characters or more repeated verbatim `repeats` times is a loop. */
export type LongRule = { chars: number; repeats: number }

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

const HASH_BASE = 0x01000193
const HASH_OUT = (() => {
  let power = 1
  for (let i = 0; i < STREAM_GRAM; i++) power = Math.imul(power, HASH_BASE)
  return power
})()
const LINE_FEED = 10
const BACKTICK = 96
const TILDE = 126
const SPACE = 32
const TAB = 9
const QUOTE_MARK = 62

const PIPE = 124

/**
 * A table or diagram row starts with | or + or a box-drawing character (U+2500 to U+257F); a line that holds a cell
 * separator further on is a row too (a Markdown table may leave out its outer pipes: `n/a | skipped | none`).
 */
function isRowStart(c: number): boolean {
  return c === PIPE || c === 43 || (c >= 0x2500 && c <= 0x257f)
}

/** A table cell separator inside a line, seen at its second character: a | after a blank, or a blank after a |. */
function isCellSeparator(previous: number, c: number): boolean {
  const blank = (x: number) => x === SPACE || x === TAB
  return (c === PIPE && blank(previous)) || (previous === PIPE && blank(c))
}

export class StreamWatcher {
  /** characters seen */
  private seen = 0
  private ring: Uint16Array | null = null
  private grams: Int32Array | null = null
  private hash = 0
  private readonly periods = new Int32Array(STREAM_CANDIDATES)
  private readonly runs = new Int32Array(STREAM_CANDIDATES)
  private candidates = 0
  /** Markdown fence state: fence characters at the line's start, inside or not */
  private fenceChars = 0
  private fenceChar = 0
  private inFence = false
  private lastFence = -1
  private lastLineFeed = -1
  /**
   * The first character of the last line that is no table or diagram row, whether this line's first character was
   * seen, and the first character of this line while it may still be plain: a line that does not start as a row is
   * plain when it ends without a cell separator (a | with a blank beside it); one makes it a row at once. Until
   * then it counts as neither (its first characters, `n/a ` of `n/a | skipped`, do not tell), so a verdict taken
   * inside it rests on the lines before. A | between two other characters is no separator: chat-template tokens
   * such as `<|im_end|>`, repeated by a looping model, are text. The previous character tells a separator.
   */
  private lastPlainLine = -1
  private lineOpened = false
  private plainStart = -1
  private previous = 0
  /** the repetition region: its first character, its last, and the period it began with */
  private regionStart = 0
  private regionEnd = -1
  private regionPeriod = 0
  private verdict: StreamLoop | null = null

  /** The long-passage rule's bounds; only the bench sets others, to measure how near real text comes to the rule. */
  constructor(private readonly long: LongRule = { chars: STREAM_LONG_CHARS, repeats: STREAM_LONG_REPEATS }) {}

  /** Feeds one delta; returns the loop the first time one is certain, else null (and null after it). */
  feed(delta: string): StreamLoop | null {
    if (this.verdict) return null
    if (this.ring === null) {
      this.ring = new Uint16Array(STREAM_WINDOW)
      this.grams = new Int32Array(STREAM_TABLE)
    }
    for (let i = 0; i < delta.length; i++) {
      const loop = this.step(delta.charCodeAt(i))
      if (loop) return (this.verdict = loop)
    }
    return null
  }

  /** Characters fed so far. */
  get length(): number {
    return this.seen
  }

  /** Bytes this watcher holds (the bench's "state per part"). */
  get bytes(): number {
    return (this.ring?.byteLength ?? 0) + (this.grams?.byteLength ?? 0) + 2 * 4 * STREAM_CANDIDATES + 96
  }

  private step(c: number): StreamLoop | null {
    const ring = this.ring!
    const n = this.seen
    this.trackLines(c, n)
    let solidStart = -1
    let solidPeriod = 0
    let bestRun = 0
    let bestPeriod = 0
    for (let k = 0; k < this.candidates; k++) {
      const p = this.periods[k]
      if (ring[(n - p) & (STREAM_WINDOW - 1)] === c) {
        const run = ++this.runs[k]
        // solid: one and a half copies back to back, and not a coincidence of a few characters
        if (2 * run >= p && run + p >= STREAM_SOLID_CHARS) {
          const start = n + 1 - run - p
          if (solidPeriod === 0 || start < solidStart) {
            solidStart = start
            solidPeriod = p
          }
          if (run + p > bestRun + bestPeriod) {
            bestRun = run
            bestPeriod = p
          }
        }
      } else {
        this.candidates--
        this.periods[k] = this.periods[this.candidates]
        this.runs[k] = this.runs[this.candidates]
        k--
      }
    }
    ring[n & (STREAM_WINDOW - 1)] = c
    this.seen = n + 1
    if (solidPeriod > 0) {
      const loop = this.extendRegion(solidStart, solidPeriod, bestPeriod, bestRun)
      if (loop) return loop
    }
    this.propose(c, n)
    return null
  }

  /**
   * The repetition region: where the text has been repeating itself without a break, a solid run after another
   * (a loop that drifts: its period changes, a counter or a space differs now and then). A solid run that starts
   * inside the region, or right after it, extends it; one that starts later opens a new region.
   */
  private extendRegion(start: number, period: number, p: number, run: number): StreamLoop | null {
    if (this.regionEnd < 0 || start > this.regionEnd + STREAM_GAP) {
      this.regionStart = start
      this.regionPeriod = period
    } else if (start < this.regionStart) {
      this.regionStart = start // a longer passage, solid only now, began before the shorter one that opened it
      this.regionPeriod = period
    }
    this.regionEnd = this.seen - 1
    return this.judge(p, run)
  }

  /** The running passage of p characters, repeated verbatim for its last run + p characters: a loop or not yet. */
  private judge(p: number, run: number): StreamLoop | null {
    return this.judgeLong(p, run + p) ?? this.judgeRegion(p, run + p)
  }

  /**
   * The long-passage rule: a passage of long.chars (STREAM_LONG_CHARS) or more repeated verbatim (own: its copies
   * back to back, from the first copy's start) for long.repeats (STREAM_LONG_REPEATS) copies is a loop, unless it is
   * whole lines of code, a table or a diagram (those keep the code backstop, judged on the region). The cut keeps
   * the first of those copies.
   */
  private judgeLong(p: number, own: number): StreamLoop | null {
    if (p < this.long.chars || own < this.long.repeats * p) return null
    const start = this.seen - own
    if (this.isCode(start, p)) return null
    return { period: p, count: Math.floor(own / p), start, first: p, at: this.seen, code: false }
  }

  /** The main rule: the region has lasted STREAM_REPEATS copies and STREAM_MIN_CHARS, or the code backstop. */
  private judgeRegion(p: number, own: number): StreamLoop | null {
    const n = this.seen
    const span = n - this.regionStart
    if (span < STREAM_MIN_CHARS || span < STREAM_REPEATS * p) return null
    if (n - own > this.regionStart && (own < (STREAM_OWN_COPIES + 1) * p || own < STREAM_OWN_CHARS)) return null
    const code = this.isCode(this.regionStart, p)
    if (code && (span < STREAM_CODE_REPEATS * p || span < STREAM_CODE_CHARS)) return null
    return {
      period: p,
      count: Math.floor(span / p),
      start: this.regionStart,
      first: this.regionPeriod,
      at: n,
      code,
    }
  }

  /**
   * Whether a passage of p characters repeated since start is whole lines of code, a table or a diagram: every line
   * since start is inside one fence or a row, and the passage holds a line break.
   */
  private isCode(start: number, p: number): boolean {
    const rows = (this.inFence && this.lastFence < start) || this.lastPlainLine < start
    return rows && this.lastLineFeed >= this.seen - p
  }

  /**
   * Line feeds and Markdown code fences: ``` or ~~~ at a line's start opens or closes one, after any indentation or
   * blockquote marks (a fence inside a nested list item is indented 4 spaces or more, one in a quote follows `>`;
   * taking an indented code block's ``` line for a fence only gives its lines the code backstop).
   */
  private trackLines(c: number, n: number): void {
    const previous = this.previous
    this.previous = c
    if (c === LINE_FEED) {
      this.lastLineFeed = n
      this.fenceChars = 0
      this.lineOpened = false
      if (this.plainStart >= 0) this.lastPlainLine = this.plainStart // it ended with no |: a plain line
      this.plainStart = -1
      return
    }
    if (!this.lineOpened && c !== SPACE && c !== TAB) {
      this.lineOpened = true
      if (!isRowStart(c)) this.plainStart = n
    } else if (isCellSeparator(previous, c)) {
      this.plainStart = -1 // a table row without outer pipes
    }
    if (this.fenceChars < 0) return // this line is no fence line
    if (this.fenceChars === 0 && (c === SPACE || c === TAB || c === QUOTE_MARK)) return
    if ((c === BACKTICK || c === TILDE) && (this.fenceChars === 0 || c === this.fenceChar)) {
      this.fenceChar = c
      this.fenceChars += 1
      if (this.fenceChars === 3) {
        this.inFence = !this.inFence
        this.lastFence = n
      }
      return
    }
    this.fenceChars = -1
  }

  /** The last STREAM_GRAM characters' hash proposes the period back to where that gram was last seen. */
  private propose(c: number, n: number): void {
    const ring = this.ring!
    const grams = this.grams!
    const out = n >= STREAM_GRAM ? ring[(n - STREAM_GRAM) & (STREAM_WINDOW - 1)] : 0
    this.hash = (Math.imul(this.hash, HASH_BASE) + c - Math.imul(out, HASH_OUT)) | 0
    const seen = this.seen
    if (seen < STREAM_GRAM) return
    const slot = (this.hash ^ (this.hash >>> 15)) & (STREAM_TABLE - 1)
    const before = grams[slot]
    grams[slot] = seen
    const p = seen - before
    if (before === 0 || p > STREAM_MAX_PERIOD) return
    for (let k = 0; k < this.candidates; k++) if (this.periods[k] === p) return
    const run = this.runBack(p)
    if (run < STREAM_GRAM) return // a hash collision, not a repeat
    this.adopt(p, run)
  }

  /** Characters, counted back from the last one, equal to the one p before (as far as the ring reaches). */
  private runBack(p: number): number {
    const ring = this.ring!
    const limit = Math.min(this.seen - p, STREAM_WINDOW - p, STREAM_CHECK_BACK)
    let run = 0
    while (
      run < limit &&
      ring[(this.seen - 1 - run) & (STREAM_WINDOW - 1)] === ring[(this.seen - 1 - run - p) & (STREAM_WINDOW - 1)]
    )
      run++
    return run
  }

  /** A new candidate takes a free slot, or the slot of the shortest run when its own is longer. */
  private adopt(p: number, run: number): void {
    if (this.candidates < STREAM_CANDIDATES) {
      this.periods[this.candidates] = p
      this.runs[this.candidates] = run
      this.candidates++
      return
    }
    let weakest = 0
    for (let k = 1; k < STREAM_CANDIDATES; k++) if (this.runs[k] < this.runs[weakest]) weakest = k
    if (this.runs[weakest] >= run) return
    this.periods[weakest] = p
    this.runs[weakest] = run
  }
}

/** Which part looped: the model's reasoning or its visible answer (the part's type as opencode announces it). */
export type StreamKind = "reasoning" | "text"

function streamWhat(kind: StreamKind, loop: StreamLoop): string {
  const whose = kind === "reasoning" ? "its reasoning" : "its answer"
  return `${whose} repeated ${article(loop.period)} ${loop.period}-character passage ${loop.count} times`
}

/** The toast: loop-guard, reasoning or answer, the passage's length and count; never the passage itself. */
function streamToast(kind: StreamKind, loop: StreamLoop, stopped: boolean): string {
  return stopped
    ? `loop-guard: stopped the agent: ${streamWhat(kind, loop)}`
    : `loop-guard: ${streamWhat(kind, loop)} (warn mode: not stopped)`
}

/** Where the looping part is cut in the model's next context, and the note that replaces the rest. */
export type StreamCut = { offset: number; note: string }

function streamCut(loop: StreamLoop): StreamCut {
  return {
    offset: loop.start + loop.first,
    note:
      `[loop-guard stopped a repetition here: the passage above was repeated ${loop.count} times; ` +
      "the repetitions were cut. Do not repeat it: continue with what comes next, or tell the user what blocks you.]",
  }
}

/** A part's text cut after the loop's first passage, with the note (unchanged when shorter than the cut). */
export function cutText(text: string, cut: StreamCut): string {
  let offset = cut.offset
  if (text.length <= offset) return text
  const unit = text.charCodeAt(offset - 1)
  if (unit >= 0xd800 && unit <= 0xdbff) offset += 1 // never split a surrogate pair
  return `${text.slice(0, offset)}\n\n${cut.note}`
}

/**
 * OPENCODE_LOOP_GUARD_STREAM=block|warn|off: what a loop in the stream does; unset, it follows OPENCODE_LOOP_GUARD
 * (so `off` there switches both off).
 */
function readStreamMode(env: Record<string, string | undefined>, main: Mode): { mode: Mode; problems: string[] } {
  const text = env.OPENCODE_LOOP_GUARD_STREAM?.trim().toLowerCase()
  if (!text) return { mode: main, problems: [] }
  if (text === "block" || text === "warn" || text === "off") return { mode: text, problems: [] }
  return {
    mode: main,
    problems: [
      `OPENCODE_LOOP_GUARD_STREAM=${quote(env.OPENCODE_LOOP_GUARD_STREAM)} is not block, warn or off; using ${main}`,
    ],
  }
}

// ---------------------------------------------------------------------------------------------------------------
// Pure core: settings from the environment
// ---------------------------------------------------------------------------------------------------------------

type Mode = "block" | "warn" | "off"
type Settings = {
  mode: Mode
  repetitions: number
  failures: number
  maxBlocks: number
  exempt: string[]
  /** seconds a waiting cycle may sleep in all; 0: waits get no budget (a cycle with a sleep is a loop) */
  waitBudget: number
  /** waits (laps) a waiting cycle may take */
  waitLaps: number
  /** argument keys left out of the signature of the tools their glob matches, besides IGNORED_KEYS */
  ignoreKeys: IgnoredKey[]
}
function defaultSettings(): Settings {
  return {
    mode: "block",
    repetitions: 3,
    failures: 3,
    maxBlocks: 5,
    exempt: [],
    waitBudget: 30 * 60,
    waitLaps: 60,
    ignoreKeys: [],
  }
}
const MAX_REPETITIONS = 50
/** The longest wait budget a setting may ask for: a day. */
const MAX_WAIT_BUDGET = 86400

/** Reads the variables; every invalid value is reported (to be logged) and replaced by its default. */
function readSettings(env: Record<string, string | undefined>): { settings: Settings; problems: string[] } {
  const problems: string[] = []
  const settings = defaultSettings()

  const mode = env.OPENCODE_LOOP_GUARD?.trim().toLowerCase()
  if (mode === "block" || mode === "warn" || mode === "off") settings.mode = mode
  else if (mode)
    problems.push(`OPENCODE_LOOP_GUARD=${quote(env.OPENCODE_LOOP_GUARD)} is not block, warn or off; using block`)

  const defaults = defaultSettings()
  settings.repetitions = wholeNumber(
    env,
    "OPENCODE_LOOP_GUARD_REPETITIONS",
    2,
    MAX_REPETITIONS,
    false,
    defaults.repetitions,
    problems,
  )
  settings.failures = wholeNumber(env, "OPENCODE_LOOP_GUARD_FAILURES", 2, 50, true, defaults.failures, problems)
  settings.maxBlocks = wholeNumber(env, "OPENCODE_LOOP_GUARD_MAX_BLOCKS", 1, 1000, true, defaults.maxBlocks, problems)
  settings.waitBudget = waitBudget(env, defaults.waitBudget, problems)
  settings.waitLaps = wholeNumber(env, "OPENCODE_LOOP_GUARD_WAIT_LAPS", 1, 10000, false, defaults.waitLaps, problems)

  for (const glob of (env.OPENCODE_LOOP_GUARD_EXEMPT ?? "").split(",").map((g) => g.trim())) {
    if (!glob) continue
    if (TOOL_GLOB.test(glob)) settings.exempt.push(glob)
    else
      problems.push(
        `OPENCODE_LOOP_GUARD_EXEMPT: ${quote(glob)} is not a tool-name glob (letters, digits, _ . : / - * ?); ignored`,
      )
  }
  settings.ignoreKeys = ignoreKeysSetting(env, problems)
  return { settings, problems }
}
/** A tool-name glob as the settings take it: letters, digits, _ . : / - and the wildcards * and ?. */
const TOOL_GLOB = /^[\w.*?:/-]+$/
/** A top-level argument key as OPENCODE_LOOP_GUARD_IGNORE_KEYS names it: letters, digits, _ $ and -. */
const ARGUMENT_KEY = /^[\w$-]+$/

/**
 * OPENCODE_LOOP_GUARD_IGNORE_KEYS=tool:key,tool:key (e.g. mcp_search_lookup:request_id,mcp_*:nonce): each entry a
 * tool-name glob (as OPENCODE_LOOP_GUARD_EXEMPT's), a colon, and a top-level argument key left out of the signature
 * of the matching tools' calls. The key is what follows the last colon (a tool name may hold colons). An invalid
 * entry is reported and ignored; the valid ones apply.
 */
function ignoreKeysSetting(env: Record<string, string | undefined>, problems: string[]): IgnoredKey[] {
  const entries: IgnoredKey[] = []
  for (const entry of (env.OPENCODE_LOOP_GUARD_IGNORE_KEYS ?? "").split(",").map((e) => e.trim())) {
    if (!entry) continue
    const colon = entry.lastIndexOf(":")
    const glob = entry.slice(0, Math.max(colon, 0))
    const key = entry.slice(colon + 1)
    if (colon > 0 && TOOL_GLOB.test(glob) && ARGUMENT_KEY.test(key)) entries.push({ glob, key })
    else
      problems.push(
        `OPENCODE_LOOP_GUARD_IGNORE_KEYS: ${quote(entry)} is not tool:key (a tool-name glob, a colon, an argument ` +
          `key: letters, digits, _ $ -; e.g. mcp_search_lookup:request_id); ignored`,
      )
  }
  return entries
}

/** A whole-number variable in min..max (or 0 when `zeroIsOff`); unset gives `fallback`, invalid is reported. */
function wholeNumber(
  env: Record<string, string | undefined>,
  name: string,
  min: number,
  max: number,
  zeroIsOff: boolean,
  fallback: number,
  problems: string[],
): number {
  const text = env[name]?.trim()
  if (!text) return fallback
  const n = /^\d+$/.test(text) ? Number(text) : NaN
  if ((n >= min && n <= max) || (zeroIsOff && n === 0)) return n
  const range = `a whole number from ${min} to ${max}${zeroIsOff ? " (or 0 = off)" : ""}`
  problems.push(`${name}=${quote(text)} is not ${range}; using ${fallback}`)
  return fallback
}

/** OPENCODE_LOOP_GUARD_WAIT_BUDGET: whole seconds, or a whole number with s, m or h (90, 15s, 30m, 1h); 0 = none. */
function waitBudget(env: Record<string, string | undefined>, fallback: number, problems: string[]): number {
  const name = "OPENCODE_LOOP_GUARD_WAIT_BUDGET"
  const text = env[name]?.trim()
  if (!text) return fallback
  const match = /^(\d+)([smh]?)$/.exec(text.toLowerCase())
  const seconds = match ? Number(match[1]) * SLEEP_UNITS[match[2]] : NaN
  if (seconds >= 1 && seconds <= MAX_WAIT_BUDGET) return seconds
  if (seconds === 0) return 0
  problems.push(
    `${name}=${quote(text)} is not a duration from 1s to 24h (whole seconds, or with s, m or h: 90, 15s, 30m, 1h; ` +
      `or 0 = waits get no budget); using ${duration(fallback)}`,
  )
  return fallback
}

function quote(text: string | undefined): string {
  return JSON.stringify(String(text).slice(0, 40))
}

/** A tool-name glob as a matcher: `*` is any run of characters, `?` one character, the rest literal. */
function globMatcher(globs: readonly string[]): (tool: string) => boolean {
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

/** One session: its recent calls, and the blocks since its last idle state (a turn). */
type SessionState = {
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
  messages: Bounded<string> | null
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
function stepOf(state: SessionState, callID: string): string {
  const message = state.messages?.get(callID)
  if (message !== undefined) return message
  if (!state.stepOpen) state.step = `o:${++state.steps}` // one string per step, shared by its calls
  state.stepOpen = true
  return state.step
}

/** Remembers the assistant message of a tool part opencode announced (pending or running), for stepOf. */
function noteStep(state: SessionState, part: { callID?: unknown; messageID?: unknown }): void {
  if (typeof part.callID !== "string" || typeof part.messageID !== "string") return
  state.messages ??= new Bounded<string>(MAX_STEP_MESSAGES)
  state.messages.set(part.callID, `m:${part.messageID}`)
}

/**
 * The one eviction rule: a Map in LRU order (insertion order, refreshed on use), bounded; beyond its capacity the
 * least recently used entry is dropped. Sessions, watched parts, cuts and the stream's logged sessions all use it.
 */
class Bounded<V> {
  private readonly map = new Map<string, V>()
  /** The most recently used key: consecutive uses of one key skip the Map reordering. */
  private newest: string | null = null
  constructor(readonly capacity: number) {}

  /** The value, marked most recently used; undefined when it is not kept. */
  get(key: string): V | undefined {
    const value = this.map.get(key)
    if (value !== undefined && key !== this.newest) {
      this.map.delete(key)
      this.map.set(key, value)
      this.newest = key
    }
    return value
  }

  /** The value without changing the LRU order. */
  peek(key: string): V | undefined {
    return this.map.get(key)
  }

  set(key: string, value: V): void {
    this.map.delete(key)
    this.map.set(key, value)
    this.newest = key
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as string)
  }

  has(key: string): boolean {
    return this.map.has(key)
  }

  delete(key: string): void {
    this.map.delete(key)
    if (key === this.newest) this.newest = null
  }

  /** Deletes every entry whose value matches. */
  deleteWhere(matches: (value: V) => boolean): void {
    for (const [key, value] of [...this.map]) if (matches(value)) this.delete(key)
  }

  get size(): number {
    return this.map.size
  }
}

/** Per-session states, bounded by MAX_SESSIONS (the least recently used dropped). */
export class Sessions {
  private readonly states: Bounded<SessionState>
  constructor(readonly capacity = MAX_SESSIONS) {
    this.states = new Bounded<SessionState>(capacity)
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
function findCall(state: SessionState | undefined, callID: unknown): Call | undefined {
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

type WatchedPart = { sessionID: string; kind: StreamKind; watcher: StreamWatcher }

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
function toolPartUpdate(
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

// ---------------------------------------------------------------------------------------------------------------
// The opencode adapter
// ---------------------------------------------------------------------------------------------------------------

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
  const parts = new Bounded<WatchedPart>(MAX_STREAM_PARTS)
  const cuts = new Bounded<StreamCut>(MAX_STREAM_CUTS)
  const failed = new Bounded<true>(MAX_SESSIONS)

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
