// Streamed texts (README: `npm run bench -- --texts DIR`): every text of DIR/texts.json.gz and every loop of
// DIR/loops.json (the format of ../shared/data/real-texts/README.md, read from there, never copied into this
// repository) is streamed through loop-guard's `server()` and `event` hook as opencode 1.18.33 sends it:
//
//   the part's start  -> message.part.updated, part {id, type: "reasoning" | "text", text: "", time: {start}}
//   each chunk        -> message.part.delta {sessionID, messageID, partID, field: "text", delta}
//   the part's end    -> message.part.updated with the whole text and time.end; session.idle after each session
//
// in chunks of the sizes providers send: a mixed plan (1 to 40 characters, seeded) and a fixed 40. Prints the texts
// and characters streamed, the false positives (a text stopped or warned about) with their ids, each loop with the
// character at which it was stopped and the rule's bound, the cost per streamed character and the state per part;
// then the long-passage rule's margin (the texts it would stop asking fewer copies, or shorter passages) and long
// loops made of real text (each text's first 1,000 to 8,000 characters repeated: the copy at which each is stopped).
//
// The loops: the 4 `traj/` entries are streamed as recorded; each issue quote is extended by repeating its `unit`
// until the text holds at least 50 copies of it and 2,000 characters (the README's recipe). The bound: the loop began
// at the unit's first occurrence; it must be stopped by 1,000 characters after that or by the end of the passage's
// 8th copy, whichever comes later (the passage's length P is the text's own period at its end, found here without
// the plugin, and printed as P).
import { readFileSync } from "node:fs"
import path from "node:path"
import { gunzipSync } from "node:zlib"
import plugin, {
  MAX_STREAM_PARTS,
  STREAM_LONG_CHARS,
  STREAM_LONG_REPEATS,
  STREAM_MAX_PERIOD,
  StreamWatcher,
} from "../loop-guard.ts"
import { printColumns } from "./lib.ts"

type Text = { id: string; kind: "text" | "reasoning"; text: string; session: string }
type Loop = { id: string; kind: string; text: string; unit: string; note?: string }

/** Quotes the real-texts README marks as borderline or a summary: reported, not required. */
export const NOT_REQUIRED = new Set(["issue/spark-vllm-docker-115", "issue/opencode-25960", "issue/mimo-code-914"])

/** Chunk plans: the sizes of successive deltas. */
type Plan = { name: string; sizes: (i: number) => number }
const PLANS: Plan[] = [
  { name: "mixed 1-40", sizes: seededSizes(17, 1, 40) },
  { name: "40", sizes: () => 40 },
]

function seededSizes(seed: number, min: number, max: number): (i: number) => number {
  const table = new Int32Array(4096)
  let x = seed >>> 0
  for (let i = 0; i < table.length; i++) {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0
    table[i] = min + (x % (max - min + 1))
  }
  return (i) => table[i & 4095]
}

function chunked(text: string, plan: Plan): string[] {
  const out: string[] = []
  for (let i = 0, k = 0; i < text.length; k++) {
    const size = plan.sizes(k)
    out.push(text.slice(i, i + size))
    i += size
  }
  return out
}

/** A loop as streamed: traj entries as recorded, quotes extended by their unit to >= 50 copies and >= 2,000 chars. */
export function extendLoop(loop: Loop): string {
  if (loop.id.startsWith("traj/")) return loop.text
  let text = loop.text
  let copies = text.split(loop.unit).length - 1
  while (copies < 50 || text.length < 2000) {
    text += loop.unit
    copies++
  }
  return text
}

/** The smallest period of the text's last 3 * p characters (p <= STREAM_MAX_PERIOD), by brute force: the passage. */
function tailPeriod(text: string): number {
  for (let p = 1; p <= STREAM_MAX_PERIOD && 3 * p <= text.length; p++) {
    let ok = true
    for (let i = text.length - 2 * p; i < text.length && ok; i++) ok = text.charCodeAt(i) === text.charCodeAt(i - p)
    if (ok) return p
  }
  return 0
}

/**
 * The rule's bound for a loop: it began at the unit's first occurrence; it must be stopped 1,000 characters later or
 * at the end of the passage's 8th copy, whichever comes later. The 8th copy ends one passage after the unit's 8th
 * occurrence began (the passage's length there is the distance from the 7th occurrence: the unit can be a part of a
 * longer passage, and a quote's passage can differ from the extension's). `period` is the text's period at its end.
 */
export function loopBound(text: string, unit: string): { began: number; period: number; bound: number } {
  const began = text.indexOf(unit)
  const at: number[] = []
  for (let i = began; i >= 0 && at.length < 8; i = text.indexOf(unit, i + unit.length)) at.push(i)
  const eighth = at.length === 8 ? at[7] + (at[7] - at[6]) : text.length
  return { began, period: tailPeriod(text), bound: Math.max(began + 1000, eighth) }
}

/** The plugin with a client that records aborts, toasts and the loop log lines. */
async function startPlugin(env: Record<string, string> = {}) {
  const seen = {
    aborts: [] as string[],
    toasts: [] as { message: string; variant: string }[],
    loops: [] as Record<string, any>[],
  }
  const client = {
    app: {
      log: async ({ body }: { body: { message: string; extra?: Record<string, unknown> } }) => {
        if (body.extra?.period !== undefined) seen.loops.push(body.extra)
        return true
      },
    },
    tui: {
      showToast: async ({ body }: { body: { message: string; variant: string } }) => (seen.toasts.push(body), true),
    },
    session: { abort: async ({ path: p }: { path: { id: string } }) => (seen.aborts.push(p.id), true) },
  }
  const saved = { ...process.env }
  Object.assign(process.env, env)
  const hooks: any = await plugin.server({ client, directory: "/tmp/texts", worktree: "/tmp/texts" } as any, {})
  for (const key of Object.keys(env)) if (saved[key] === undefined) delete process.env[key]
  return { event: hooks.event as (input: { event: unknown }) => Promise<void>, seen }
}

const partEvent = (sessionID: string, id: string, type: string, text: string, end?: number) => ({
  type: "message.part.updated",
  properties: {
    sessionID,
    part: { id, sessionID, messageID: `msg_${id}`, type, text, time: end ? { start: 1, end } : { start: 1 } },
  },
})
const deltaEvent = (sessionID: string, partID: string, delta: string) => ({
  type: "message.part.delta",
  properties: { sessionID, messageID: `msg_${partID}`, partID, field: "text", delta },
})

/** Streams every text with one plan; returns the false positives and the time spent in the event hook. */
async function streamCorpus(texts: Text[], plan: Plan, event: (input: { event: unknown }) => Promise<void>) {
  const pieces = texts.map((t) => chunked(t.text, plan)) // cut before timing: the bench's slicing is not the hook's cost
  let events = 0
  const started = performance.now()
  let session = ""
  for (let i = 0; i < texts.length; i++) {
    const t = texts[i]
    if (t.session !== session) {
      if (session) await event({ event: { type: "session.idle", properties: { sessionID: session } } })
      session = t.session
    }
    const partID = `prt_${i}`
    await event({ event: partEvent(session, partID, t.kind, "") })
    for (const piece of pieces[i]) await event({ event: deltaEvent(session, partID, piece) })
    await event({ event: partEvent(session, partID, t.kind, t.text, 2) })
    events += pieces[i].length + 2
  }
  return { ms: performance.now() - started, events }
}

export async function streamTexts(dir: string): Promise<Record<string, unknown>> {
  const texts: Text[] = JSON.parse(gunzipSync(readFileSync(path.join(dir, "texts.json.gz"))).toString("utf8"))
  const loops: Loop[] = JSON.parse(readFileSync(path.join(dir, "loops.json"), "utf8"))
  const chars = texts.reduce((sum, t) => sum + t.text.length, 0)
  const reasoning = texts.filter((t) => t.kind === "reasoning").length
  console.log(`\nstreamed texts: ${dir}\n`)
  console.log(
    `texts: ${texts.length} (${texts.length - reasoning} answers, ${reasoning} reasoning), ${chars.toLocaleString("en")} characters, ` +
      `streamed once per chunk plan (${PLANS.map((p) => p.name).join("; ")})`,
  )

  // False positives, and the cost on ordinary text (the same loop with an empty event hook is the baseline).
  const json: Record<string, unknown> = { texts: texts.length, chars, plans: {} }
  let falsePositives: string[] = []
  for (const plan of PLANS) {
    const { event, seen } = await startPlugin()
    const base = await streamCorpus(texts, plan, async () => {})
    const run = await streamCorpus(texts, plan, event)
    const ids = [...new Set(seen.loops.map((l) => texts[Number(String(l.partID).slice(4))].id))]
    falsePositives = [...new Set([...falsePositives, ...ids])]
    const ns = ((run.ms - base.ms) * 1e6) / chars
    console.log(
      `chunks ${plan.name}: ${run.events.toLocaleString("en")} events, false positives ${ids.length}` +
        `${ids.length ? ` (${ids.join(", ")})` : ""}, aborts ${seen.aborts.length}, toasts ${seen.toasts.length}; ` +
        `cost ${ns.toFixed(0)} ns per character (hook ${((run.ms * 1e6) / chars).toFixed(0)}, empty hook ${((base.ms * 1e6) / chars).toFixed(0)})`,
    )
    ;(json.plans as Record<string, unknown>)[plan.name] = { falsePositives: ids, nsPerChar: ns, events: run.events }
  }

  // The loops, each in a fresh plugin, per plan: the character at which the abort came.
  console.log(`\nloops: ${loops.length} (${loops.length - NOT_REQUIRED.size} required)`)
  const header = [
    "loop",
    "kind",
    "chars",
    "unit",
    "began",
    "P",
    "bound",
    ...PLANS.map((p) => `stopped (${p.name})`),
    "count",
    "",
  ]
  const rows: string[][] = []
  const results: Record<string, unknown>[] = []
  let loopChars = 0
  let loopMs = 0
  let required = 0
  let withinBound = 0
  for (const loop of loops) {
    const text = extendLoop(loop)
    const { began, period, bound } = loopBound(text, loop.unit)
    const stops: (number | null)[] = []
    let count = 0
    for (const plan of PLANS) {
      const { event, seen } = await startPlugin()
      await event({ event: partEvent("ses_loop", "prt_loop", loop.kind === "reasoning" ? "reasoning" : "text", "") })
      let sent = 0
      let stoppedAt: number | null = null
      const pieces = chunked(text, plan)
      const started = performance.now()
      for (const piece of pieces) {
        await event({ event: deltaEvent("ses_loop", "prt_loop", piece) })
        sent += piece.length
        if (seen.aborts.length > 0) {
          stoppedAt = sent
          break
        }
      }
      loopMs += performance.now() - started
      loopChars += sent
      stops.push(stoppedAt)
      count = seen.loops[0]?.count ?? count
    }
    const need = !NOT_REQUIRED.has(loop.id)
    const ok = stops.every((s) => s !== null && s <= bound)
    if (need) required++
    if (need && ok) withinBound++
    const verdict = stops.some((s) => s === null) ? "MISSED" : ok ? "ok" : "LATE"
    rows.push([
      loop.id,
      loop.kind,
      String(text.length),
      String(loop.unit.length),
      String(began),
      String(period),
      String(bound),
      ...stops.map((s) => (s === null ? "-" : String(s))),
      String(count),
      `${verdict}${need ? "" : " (not required)"}`,
    ])
    results.push({ id: loop.id, chars: text.length, began, period, bound, stops, verdict, required: need })
  }
  printColumns(header, rows, { separator: "  ", rule: false })
  console.log(
    `required loops stopped within the bound: ${withinBound} of ${required}; ` +
      `cost while a loop streams: ${((loopMs * 1e6) / loopChars).toFixed(0)} ns per character (hook, until the stop)`,
  )

  // The watcher alone (the pure core, no event), and the state per part: the watcher's own arrays (allocated at its
  // first character), the largest over every text.
  const pieces = texts.map((t) => chunked(t.text, PLANS[1]))
  let peak = 0
  const started = performance.now()
  for (const textPieces of pieces) {
    const watcher = new StreamWatcher()
    for (const piece of textPieces) watcher.feed(piece)
    peak = Math.max(peak, watcher.bytes)
  }
  const coreNs = ((performance.now() - started) * 1e6) / chars
  console.log(`the watcher alone (pure core, chunks of 40): ${coreNs.toFixed(0)} ns per character`)
  console.log(
    `state per part: peak ${(peak / 1024).toFixed(1)} KiB (a fixed ring and gram table, whatever the part's length); ` +
      `at most ${MAX_STREAM_PARTS} parts tracked at once`,
  )
  console.log(
    `false positives over both plans: ${falsePositives.length}${falsePositives.length ? ` (${falsePositives.join(", ")})` : ""}`,
  )
  const margin = longRuleMargin(texts, pieces)
  const long = longLoops(texts)
  return {
    ...json,
    longRuleMargin: margin,
    longLoops: long,
    loops: results,
    falsePositives,
    coreNsPerChar: coreNs,
    peakBytesPerPart: peak,
    requiredWithinBound: withinBound,
    required,
  }
}

/**
 * How near the real texts come to the long-passage rule: the watcher alone, with the rule asking fewer copies
 * (STREAM_LONG_REPEATS - 1 down to 2) of a passage of STREAM_LONG_CHARS or more, or of a shorter one (half, a
 * quarter); prints, for each, the texts stopped by the long rule (a passage of that length or more), with their
 * ids, the passage's length and copies.
 */
function longRuleMargin(texts: Text[], pieces: string[][]): Record<string, string[]> {
  const out: Record<string, string[]> = {}
  console.log(`\nthe long-passage rule (${STREAM_LONG_REPEATS} copies of ${STREAM_LONG_CHARS}+ characters) asked less:`)
  for (const chars of [STREAM_LONG_CHARS, STREAM_LONG_CHARS / 2, STREAM_LONG_CHARS / 4]) {
    for (let repeats = STREAM_LONG_REPEATS - (chars === STREAM_LONG_CHARS ? 1 : 0); repeats >= 2; repeats--) {
      const hits: string[] = []
      for (let i = 0; i < texts.length; i++) {
        const watcher = new StreamWatcher({ chars, repeats })
        let loop = null
        for (const piece of pieces[i]) loop ??= watcher.feed(piece)
        if (loop && loop.period >= chars) hits.push(`${texts[i].id} (${loop.period} x${loop.count})`)
      }
      out[`${repeats} copies of ${chars}+`] = hits
      console.log(
        `  ${repeats} copies of ${chars}+ characters: ${hits.length} texts stopped${hits.length ? ` (${hits.join(", ")})` : ""}`,
      )
    }
  }
  return out
}

/** Passage lengths of the long loops made from real text: the threshold, a few between, and the longest period. */
const LONG_LENGTHS = [STREAM_LONG_CHARS, 1200, 2500, 5000, STREAM_MAX_PERIOD]
/** Copies of the passage streamed: one more than the rule needs, so a late stop shows. */
const LONG_COPIES = STREAM_LONG_REPEATS + 2

/**
 * Long loops made of real text (there is no recorded real loop of a passage of 1,000+ characters): for each length
 * L, each text of L characters or more gives its first L characters as the passage, streamed LONG_COPIES times
 * through the watcher alone in chunks of 40. Prints how many were stopped by the end of the 4th copy, later, or not
 * at all; the copies at the stop (fewest, most, mean); and, for comparison, the copies at the stop of the main rule
 * alone (the long rule off: what the watcher did before it; before, passages over 4,000 characters were not seen).
 * A stop before the 4th copy is the cut's doing, not the long rule's: a passage cut inside a code fence flips the
 * fence state of every later copy, so lines that were code in the text (a weights file's rows) are prose there.
 */
function longLoops(texts: Text[]): Record<number, Record<string, number>> {
  const out: Record<number, Record<string, number>> = {}
  console.log(
    `\nlong loops made of real text: each text's first L characters repeated ${LONG_COPIES} times (chunks of 40)`,
  )
  const header = [
    "L",
    "loops",
    `stopped by copy ${STREAM_LONG_REPEATS}`,
    "later",
    "not stopped",
    "copies at stop (fewest, most, mean)",
    "main rule alone: stopped, copies (mean)",
  ]
  const rows: string[][] = []
  const mainOnly = { chars: Infinity, repeats: STREAM_LONG_REPEATS }
  for (const length of LONG_LENGTHS) {
    const now = { loops: 0, early: 0, late: 0, missed: 0, fewest: Infinity, most: 0, sum: 0 }
    const main = { stopped: 0, sum: 0 }
    for (const t of texts) {
      if (t.text.length < length) continue
      const text = t.text.slice(0, length).repeat(LONG_COPIES)
      now.loops++
      const at = stopAt(new StreamWatcher(), text)
      const before = stopAt(new StreamWatcher(mainOnly), text)
      if (before !== null) {
        main.stopped++
        main.sum += before / length
      }
      if (at === null) {
        now.missed++
        continue
      }
      const copies = at / length
      now.fewest = Math.min(now.fewest, copies)
      now.most = Math.max(now.most, copies)
      now.sum += copies
      if (at <= STREAM_LONG_REPEATS * length) now.early++
      else now.late++
    }
    const stopped = now.early + now.late
    const mean = stopped ? now.sum / stopped : 0
    out[length] = { ...now, mean, mainStopped: main.stopped, mainMean: main.stopped ? main.sum / main.stopped : 0 }
    rows.push([
      String(length),
      String(now.loops),
      String(now.early),
      String(now.late),
      String(now.missed),
      stopped ? `${now.fewest.toFixed(2)}, ${now.most.toFixed(2)}, ${mean.toFixed(2)}` : "-",
      `${main.stopped}, ${main.stopped ? (main.sum / main.stopped).toFixed(2) : "-"}`,
    ])
  }
  printColumns(header, rows, { separator: "  ", rule: false })
  return out
}

/** The character at which the watcher stops a text fed in chunks of 40 (its verdict's `at`), or null. */
function stopAt(watcher: StreamWatcher, text: string): number | null {
  for (let i = 0; i < text.length; i += 40) {
    const loop = watcher.feed(text.slice(i, i + 40))
    if (loop) return loop.at
  }
  return null
}
