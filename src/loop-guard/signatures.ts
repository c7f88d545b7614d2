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

export function isWellFormed(text: string): boolean {
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
  const hash = bun?.hash ? BigInt(bun.hash(text)).toString(36) : fallbackDigest(text)
  return `${hash}:${text.length}`
}

/**
 * The digest where Bun.hash is missing: two 32-bit passes over UTF-16 code units, an FNV-1a pass and a second
 * FNV-style pass with another offset basis and a shift mixed in (so the two do not fail together). Not FNV-1a itself.
 */
export function fallbackDigest(text: string): string {
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
export type CallRecord = { signature: string; tool: string }

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
export type IgnoredKey = { glob: string; key: string }

/**
 * The keys left out of each tool's signature: its IGNORED_KEYS, then the keys of every setting entry whose glob
 * matches the tool's name. Cached per tool name (a process sees few; the cache is bounded all the same).
 */
export function ignoredKeys(entries: readonly IgnoredKey[]): (tool: string) => readonly string[] {
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
