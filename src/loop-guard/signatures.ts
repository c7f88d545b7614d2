/**
 * What makes two calls the same call: the canonical text of their arguments, the keys left out of a signature, long
 * strings digested. The plugin's overview opens hooks.ts, its entry module (and so the shipped file).
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
