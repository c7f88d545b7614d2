// Issue 11, item 8: can a signature that reads every byte once natively beat the whole-text one?
//
// Three ways to the same equality, timed on the hook benchmark's argument shapes (interleaved batches, median
// ratio against the first):
//   whole text   the signature before this experiment: keys sorted in JavaScript, the whole canonical text written
//                by the engine's JSON.stringify (every string escaped and copied), then hashed with Bun.hash
//                (loop-guard.ts `canonicalize(args, Infinity)`);
//   every leaf   `leafHashSignature` below: every string leaf hashed natively where it stands (no escaping, no
//                copy), only the key structure written, with each string as its digest, and that hashed once more;
//   long leaves  what the plugin now does (`signature`): the whole-text way, except that a string value of
//                LEAF_DIGEST_MIN characters or more is hashed natively and written as its digest.
// Equality must stay the same: the same value (keys in any order) gives the same signature, any difference in a
// key, a string, a number's type or value, null vs absent or array order gives another (up to 64-bit collisions,
// as before). Lone surrogates are escaped before hashing, because Bun.hash reads a string as UTF-8 and maps every
// lone surrogate to U+FFFD. The equality check compares all three on random trees, key-shuffled clones and near
// misses (long strings, lone surrogates, NUL-prefixed strings included).
import { canonicalize, digest, signature } from "../loop-guard.ts"
import { SHAPES } from "./loop-guard.ts"
import { now, summarize, type Row } from "./lib.ts"
import { prng, type Rng } from "../test/lib/prng.ts"

const hash = (text: string): string => Bun.hash(text).toString(36)
const toolHashes = new Map<string, string>()

/** Short strings (and keys) are written inline as JSON; longer ones as their native digest (LEAF_MIN or more). */
const LEAF_MIN = 64

export function leafHashSignature(tool: string, args: unknown): string {
  let toolHash = toolHashes.get(tool)
  if (toolHash === undefined) toolHashes.set(tool, (toolHash = hash(JSON.stringify(tool)) + "/"))
  return toolHash + hash(structure(args)) // one more hash, over the (short) structure text
}

function structure(value: unknown): string {
  switch (typeof value) {
    case "string":
      return leaf(value)
    case "number":
      return Number.isFinite(value) ? String(value) : `#${String(value)}`
    case "boolean":
      return value ? "true" : "false"
    case "undefined":
      return "#undefined"
    case "object":
      if (value === null) return "null"
      if (Array.isArray(value)) {
        let text = "["
        for (let i = 0; i < value.length; i++) text += (i ? "," : "") + structure(value[i])
        return text + "]"
      } else {
        const keys = Object.keys(value).sort()
        let text = "{"
        for (let i = 0; i < keys.length; i++)
          text +=
            (i ? "," : "") + JSON.stringify(keys[i]) + ":" + structure((value as Record<string, unknown>)[keys[i]])
        return text + "}"
      }
    default:
      return `#${typeof value}`
  }
}

/** A string as its native digest and length; a string with lone surrogates is escaped first (see header). */
function leaf(text: string): string {
  if (text.length < LEAF_MIN) return JSON.stringify(text)
  const safe = (text as string & { isWellFormed(): boolean }).isWellFormed() ? text : JSON.stringify(text)
  return `s${hash(safe)}.${text.length}${safe === text ? "" : "e"}`
}

// ---------------------------------------------------------------------------------------------------------------

const LONG = "x".repeat(1023)
const LEAVES = [
  ...["", "a", "A", "1", "caf\u00e9", "cafe\u0301", "\ud800", "\udc00", "\u0000", "\u0000a", "\u0000\u0000a"],
  ...["x".repeat(64), "x".repeat(63) + "\ud800", "x".repeat(63) + "\udc00", "x".repeat(63) + "y", '"'.repeat(70)],
  ...[LONG, LONG + "x", LONG + "y", LONG + "\ud800", LONG + "\udc00", "\u0000" + LONG, "\u0000!" + LONG, LONG + "xx"],
]

function randomTree(rng: Rng, depth = 0): unknown {
  const r = rng.next()
  if (depth > 3 || r < 0.45) {
    const p = rng.next()
    if (p < 0.4) return rng.pick(LEAVES)
    if (p < 0.7) return rng.pick([0, 1, -1, 1.5, 1e21])
    if (p < 0.85) return rng.chance(0.5)
    return null
  }
  if (r < 0.7) return Array.from({ length: rng.int(4) }, () => randomTree(rng, depth + 1))
  const object: Record<string, unknown> = {}
  for (let i = rng.int(4); i > 0; i--)
    object[rng.pick(["a", "b", "filePath", "1", "caf\u00e9"])] = randomTree(rng, depth + 1)
  return object
}

function shuffled(rng: Rng, value: unknown): unknown {
  if (Array.isArray(value)) return value.map((v) => shuffled(rng, v))
  if (typeof value !== "object" || value === null) return value
  const keys = Object.keys(value).sort(() => rng.next() - 0.5)
  const copy: Record<string, unknown> = {}
  for (const key of keys) copy[key] = shuffled(rng, (value as Record<string, unknown>)[key])
  return copy
}

const wholeText = (tool: string, args: unknown) =>
  signature(tool, null).signature + digest(canonicalize(args, Infinity))
const longLeaves = (tool: string, args: unknown) => signature(tool, args).signature

/**
 * Same equality: for pairs of random trees, "same signature" agrees with the reference (the canonical text itself,
 * not its hash, written with no string hashed: exact equality) for each method.
 */
function equalityCheck(pairs: number): {
  pairs: number
  equalPairs: number
  everyLeaf: number
  longLeaves: number
  wholeText: number
} {
  const rng = prng(20261201)
  const out = { pairs, equalPairs: 0, everyLeaf: 0, longLeaves: 0, wholeText: 0 }
  for (let i = 0; i < pairs; i++) {
    const a = randomTree(rng)
    const b = rng.chance(0.3) ? shuffled(rng, a) : rng.chance(0.5) ? randomTree(rng) : shuffled(rng, randomTree(rng))
    const same = canonicalize(a, Infinity) === canonicalize(b, Infinity)
    if (same) out.equalPairs++
    if ((leafHashSignature("x", a) === leafHashSignature("x", b)) !== same) out.everyLeaf++
    if ((longLeaves("x", a) === longLeaves("x", b)) !== same) out.longLeaves++
    if ((wholeText("x", a) === wholeText("x", b)) !== same) out.wholeText++
  }
  return out
}

export function signatureExperiment(opts: { rounds: number }): { rows: Row[]; json: Record<string, unknown> } {
  const rows: Row[] = []
  const json: Record<string, unknown> = {}
  const equality = equalityCheck(50_000)
  json.equality = equality
  const wrong = equality.everyLeaf + equality.longLeaves + equality.wholeText
  rows.push({
    group: "signature experiment",
    figure: "random pairs judged unlike exact equality (every leaf / long leaves / whole text)",
    value: wrong,
    unit: "pairs",
    spread: `${equality.everyLeaf} / ${equality.longLeaves} / ${equality.wholeText} of ${equality.pairs} pairs (${equality.equalPairs} equal)`,
    target: { text: "0 (same equality)", met: wrong === 0 },
  })
  for (const shape of SHAPES) {
    const variants = [0, 1, 2, 3, 4].map(shape.make)
    const bytes = JSON.stringify(variants[0]).length
    const reps = Math.max(5, Math.min(20_000, Math.round(2_000_000 / bytes)))
    let sink = 0
    const batch = (fn: (tool: string, args: unknown) => unknown) => {
      const t = now()
      for (let i = 0; i < reps; i++) sink += String(fn(shape.tool, variants[i % 5])).length
      return (now() - t) / reps
    }
    for (let w = 0; w < 3; w++) (batch(wholeText), batch(leafHashSignature), batch(longLeaves))
    const every: number[] = []
    const long: number[] = []
    const ns = { wholeText: [] as number[], everyLeaf: [] as number[], longLeaves: [] as number[] }
    for (let r = 0; r < opts.rounds; r++) {
      const order = r % 2 ? [wholeText, leafHashSignature, longLeaves] : [longLeaves, leafHashSignature, wholeText]
      const t = new Map(order.map((fn) => [fn, batch(fn)]))
      ns.wholeText.push(t.get(wholeText)!)
      ns.everyLeaf.push(t.get(leafHashSignature)!)
      ns.longLeaves.push(t.get(longLeaves)!)
      every.push(t.get(leafHashSignature)! / t.get(wholeText)!)
      long.push(t.get(longLeaves)! / t.get(wholeText)!)
    }
    const median = (xs: number[]) => summarize(xs).median
    const e = summarize(every)
    const l = summarize(long)
    rows.push({
      group: "signature experiment",
      figure: `${shape.name}: every leaf / whole text; long leaves (adopted) / whole text`,
      value: l.median,
      unit: "x",
      spread: `every leaf ${e.median.toFixed(2)}x (p10-p90 ${e.p10.toFixed(2)}-${e.p90.toFixed(2)}), long leaves p10-p90 ${l.p10.toFixed(2)}-${l.p90.toFixed(2)}; whole text ${fmtNs(median(ns.wholeText))}, every leaf ${fmtNs(median(ns.everyLeaf))}, long leaves ${fmtNs(median(ns.longLeaves))}`,
      target: { text: "<= 1.05x (no slower)", met: l.median <= 1.05 },
    })
    json[shape.name] = {
      everyLeaf: e,
      longLeaves: l,
      ns: Object.fromEntries(Object.entries(ns).map(([k, v]) => [k, summarize(v)])),
      sink,
    }
  }
  return { rows, json }
}

function fmtNs(ns: number): string {
  return ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} us` : `${ns.toFixed(0)} ns`
}
