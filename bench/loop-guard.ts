// loop-guard benchmarks: the cost of `tool.execute.before` per call against one JSON.stringify of the same
// arguments (the floor: any signature reads the arguments once), and the heap per session and after 100,000.
import plugin, { MAX_SESSIONS, digest, historyCapacity, maskVolatile } from "../loop-guard.ts"
import { heapUsed, now, summarize, type Row } from "./lib.ts"

type Hooks = {
  "tool.execute.before": (input: unknown, output: unknown) => Promise<void>
  "tool.execute.after": (input: unknown, output: unknown) => Promise<void>
  event: (e: unknown) => Promise<void>
}

async function start(): Promise<Hooks> {
  const client = { app: { log: async () => true } }
  return (await plugin.server(
    { client, directory: "/tmp/bench", worktree: "/tmp/bench" } as any,
    {},
  )) as unknown as Hooks
}

// Source-like text: quotes, backslashes, tabs, newlines and some non-ASCII, so string escaping costs what it costs.
const LINE = "  const label = `caf\u00e9 \"${name}\"` + '\\t' // \u2713 ok\n"
const text = (bytes: number, salt: number) =>
  `/* ${salt} */\n` + LINE.repeat(Math.ceil(bytes / LINE.length)).slice(0, bytes)

/** Nested objects and arrays, keys out of order at every level (as a model writes them), `levels` deep. */
function deep(levels: number, salt: number): unknown {
  let node: unknown = { value: salt, kind: "leaf" }
  for (let i = 0; i < levels; i++) node = i % 2 ? { child: node, depth: i, before: "x" } : [i, node]
  return node
}

/**
 * Argument shapes, each made in 9 variants: a rotation of 9 distinct calls never forms a cycle of length 1..8 (and,
 * with no result reported, all of a batch is one step: more than 8 calls are not compared as a set, and a repeat
 * inside one step is no new occurrence of a per-call streak).
 */
export const SHAPES: { name: string; tool: string; make: (salt: number) => unknown }[] = [
  {
    name: "~100 B (read)",
    tool: "read",
    make: (s) => ({ filePath: `/home/dev/project/src/components/button-${s}.tsx`, offset: 120, limit: 80 }),
  },
  {
    name: "~100 B (bash)",
    tool: "bash",
    make: (s) => ({ command: `cd /home/dev/project && npm test -- --grep "button ${s}" 2>&1 | tail -20`, description: "Run tests" }),
  },
  {
    name: "~10 KB (edit, 2 strings)",
    tool: "edit",
    make: (s) => ({ filePath: "/home/dev/project/src/app.ts", oldString: text(4800, s), newString: text(4800, s + 1) }),
  },
  {
    name: "~10 KB (todowrite, 60 objects)",
    tool: "todowrite",
    make: (s) => ({
      todos: Array.from({ length: 60 }, (_, i) => ({
        content: `Step ${i} of ${s}: update the handler and its test`,
        status: i % 3 ? "pending" : "completed",
        priority: "medium",
        id: `t-${i}`,
      })),
    }),
  },
  {
    name: "~1 MB (write)",
    tool: "write",
    make: (s) => ({ filePath: "/home/dev/project/src/big.ts", content: text(1_000_000, s) }),
  },
  { name: "deep nesting (100 levels)", tool: "x", make: (s) => ({ tree: deep(100, s) }) },
  { name: "deep nesting (1000 levels)", tool: "x", make: (s) => ({ tree: deep(1000, s) }) },
]

/** Interleaved batches: in each round one batch of JSON.stringify and one of hook calls, order alternating. */
export async function hookCost(opts: { rounds: number }): Promise<{ rows: Row[]; json: Record<string, unknown> }> {
  const rows: Row[] = []
  const json: Record<string, unknown> = {}
  const hooks = await start()
  const before = hooks["tool.execute.before"]

  // The host's own floor for any hook: awaiting an empty async function.
  const empty = async (_i: unknown, _o: unknown) => {}

  for (const shape of SHAPES) {
    const variants = [0, 1, 2, 3, 4, 5, 6, 7, 8].map(shape.make)
    const bytes = JSON.stringify(variants[0]).length
    const reps = Math.max(5, Math.min(20_000, Math.round(2_000_000 / bytes)))
    const ratios: number[] = []
    const hookNs: number[] = []
    const jsonNs: number[] = []
    const emptyNs: number[] = []
    let sink = 0
    let blocked = 0
    let made = 0
    const stringifyBatch = () => {
      const t = now()
      for (let i = 0; i < reps; i++) sink += JSON.stringify(variants[i % 9]).length
      return (now() - t) / reps
    }
    const hookBatch = async () => {
      const t = now()
      for (let i = 0; i < reps; i++) {
        try {
          const n = made++ // on across batches: a batch shorter than 9 calls must not restart the rotation
          await before({ tool: shape.tool, sessionID: "bench", callID: `c${n}` }, { args: variants[n % 9] })
        } catch {
          blocked++
        }
      }
      return (now() - t) / reps
    }
    for (let w = 0; w < 3; w++) (stringifyBatch(), await hookBatch()) // warm-up: let the JIT settle
    for (let r = 0; r < opts.rounds; r++) {
      let js: number, hook: number
      if (r % 2) ((js = stringifyBatch()), (hook = await hookBatch()))
      else ((hook = await hookBatch()), (js = stringifyBatch()))
      ratios.push(hook / js)
      hookNs.push(hook)
      jsonNs.push(js)
      if (bytes < 1000) {
        const t = now()
        for (let i = 0; i < reps; i++) await empty(null, null)
        emptyNs.push((now() - t) / reps)
      }
    }
    if (blocked)
      throw new Error(`bench: ${blocked} calls of ${shape.name} were blocked; the rotation must never form a cycle`)
    const ratio = summarize(ratios)
    const hook = summarize(hookNs)
    const js = summarize(jsonNs)
    rows.push({
      group: "loop-guard",
      figure: `before-hook / JSON.stringify, ${shape.name}`,
      value: ratio.median,
      unit: "x",
      spread: `p10-p90 ${ratio.p10.toFixed(2)}-${ratio.p90.toFixed(2)}; hook ${fmtNs(hook.median)}, stringify ${fmtNs(js.median)}`,
      target: { text: "<= 1.5x", met: ratio.median <= 1.5 },
      note: emptyNs.length
        ? `awaiting an empty async hook alone costs ${fmtNs(summarize(emptyNs).median)} per call (the host's floor for any hook)`
        : undefined,
    })
    json[shape.name] = {
      bytes,
      reps,
      rounds: opts.rounds,
      ratio,
      hookNs: hook,
      stringifyNs: js,
      emptyHookNs: emptyNs.length ? summarize(emptyNs) : null,
      sink,
    }
  }
  return { rows, json }
}

/** Results as tools return them, for the cost of masking their volatile parts (issue 22, item 4). */
const STAMP = (i: number) => `2025-12-01T04:${String(i % 60).padStart(2, "0")}:27.620Z`
const RESULTS: { name: string; make: (salt: number) => string }[] = [
  { name: "a poll, ~75 B", make: (s) => `<status>running</status> <timestamp>${STAMP(s)}</timestamp>` },
  {
    name: "a log, ~4 KB, a timestamp a line",
    make: (s) => Array.from({ length: 60 }, (_, i) => `${STAMP(s + i)} INFO step ${i} done in 12ms`).join("\n"),
  },
  { name: "source, 16 KB (the bound)", make: (s) => text(16_000, s) },
  {
    name: "a log, 16 KB (the bound), a timestamp a line",
    make: (s) => Array.from({ length: 270 }, (_, i) => `${STAMP(s + i)} INFO request ${i} took 3.2s`).join("\n"),
  },
  { name: "source, 1 MB (over the bound: not masked)", make: (s) => text(1_000_000, s) },
]

/**
 * The cost of masking a result's volatile parts (maskVolatile) against hashing the result (digest, which every
 * result pays anyway): per result and as a ratio, interleaved batches as above.
 */
export function maskCost(opts: { rounds: number }): { rows: Row[]; json: Record<string, unknown> } {
  const rows: Row[] = []
  const json: Record<string, unknown> = {}
  let sink = 0
  for (const result of RESULTS) {
    const variants = [0, 1, 2, 3, 4].map(result.make)
    const reps = Math.max(5, Math.min(20_000, Math.round(2_000_000 / variants[0].length)))
    const batch = (work: (text: string) => number) => {
      const t = now()
      for (let i = 0; i < reps; i++) sink += work(variants[i % 5])
      return (now() - t) / reps
    }
    const mask = (text: string) => String(maskVolatile(text)).length
    const hash = (text: string) => digest(text).length
    for (let w = 0; w < 3; w++) (batch(mask), batch(hash)) // warm-up
    const maskNs: number[] = []
    const ratios: number[] = []
    for (let r = 0; r < opts.rounds; r++) {
      let m: number, h: number
      if (r % 2) ((m = batch(mask)), (h = batch(hash)))
      else ((h = batch(hash)), (m = batch(mask)))
      maskNs.push(m)
      ratios.push(m / h)
    }
    const m = summarize(maskNs)
    const ratio = summarize(ratios)
    rows.push({
      group: "loop-guard",
      figure: `result mask, ${result.name}`,
      value: m.median,
      unit: "ns",
      spread: `p10-p90 ${fmtNs(m.p10)}-${fmtNs(m.p90)}; ${ratio.median.toFixed(1)}x the digest of the same result`,
    })
    json[result.name] = { chars: variants[0].length, reps, maskNs: m, ratioToDigest: ratio, sink }
  }
  return { rows, json }
}

function fmtNs(ns: number): string {
  return ns >= 1e6 ? `${(ns / 1e6).toFixed(2)} ms` : ns >= 1e3 ? `${(ns / 1e3).toFixed(2)} us` : `${ns.toFixed(0)} ns`
}

/**
 * Fills `count` sessions with a full history (as many distinct calls as the default rules keep, each with its
 * result digest); half end with session.idle when `finish`.
 */
const FULL = historyCapacity(3, 3)
async function fillSessions(hooks: Hooks, prefix: string, count: number, finish: boolean) {
  const before = hooks["tool.execute.before"]
  const after = hooks["tool.execute.after"]
  for (let s = 0; s < count; s++) {
    const sessionID = `${prefix}-${s}`
    for (let c = 0; c < FULL; c++) {
      const callID = `call_${s}_${c}_abcdefghijklmnop` // about the length of opencode's call ids
      await before({ tool: "read", sessionID, callID }, { args: { filePath: `src/file-${c}.ts`, limit: 100 } })
      await after(
        { tool: "read", sessionID, callID, args: {} },
        { title: "", output: `content of file ${c}`, metadata: {} },
      )
    }
    if (finish && s % 2) await hooks.event({ event: { type: "session.idle", properties: { sessionID } } })
  }
}

/**
 * Runs in a child process of its own (bench/memory-child.ts), so no other benchmark's garbage is counted: the heap
 * of a started plugin, with MAX_SESSIONS sessions of full history, and after each churn checkpoint (sessions that
 * came and went: half ended by session.idle, half dropped by the session bound).
 */
export async function memoryScenario(checkpoints: number[]): Promise<Record<string, number>> {
  const out: Record<string, number> = {}
  const base = heapUsed()
  const hooks = await start()
  out.plugin = heapUsed() - base
  await fillSessions(hooks, "live", MAX_SESSIONS, false)
  out.atCapacity = heapUsed() - base
  out.perSession = (out.atCapacity - out.plugin) / MAX_SESSIONS
  let done = 0
  for (const checkpoint of checkpoints) {
    await fillSessions(hooks, `churn${done}`, checkpoint - done, true)
    done = checkpoint
    out[`after${checkpoint}`] = heapUsed() - base
  }
  ;(globalThis as { keep?: unknown }).keep = hooks // alive until the last reading
  return out
}
