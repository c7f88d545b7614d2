// Real-trajectory replay (README: `npm run bench -- --traces DIR`): every trajectory of every `*.json.gz` in DIR
// (the format of ../shared/data/real-traces/README.md, read from there, never copied into this repository) runs
// through loop-guard's `server()` and hooks as opencode would drive them, results included:
//
//   each call        -> tool.execute.before (a throw is a block)
//   a call that ran  -> its recorded result: tool.execute.after with `obs` as the output, or, when `err`, a
//                       message.part.updated event with state.status "error" and `obs` as the error
//   a blocked call   -> the host's error event carrying loop-guard's own message (as opencode emits it)
//   end of a turn    -> session.idle (also at the end of the trajectory)
//
// A replay counts a blocked call and still feeds the calls the agent really made next, so every block after the
// first of an episode is counterfactual. The plugin's log (reason of each block), toasts and session aborts (the
// bounded stop) are recorded by a fake client. Prints per system: trajectories, calls, blocks, episodes, blocks by
// reason, stops, the calls a stop would have saved; then every episode, one line each.
import { readdirSync, readFileSync } from "node:fs"
import path from "node:path"
import { gunzipSync } from "node:zlib"
import plugin, { isReadOnlyCommand, signature } from "../loop-guard.ts"
import { printColumns } from "./lib.ts"

type Call = { tool: string; args: unknown; obs?: string; err?: boolean }
type Trajectory = { id: string; system: string; turns: Call[][] }

export type Episode = {
  system: string
  id: string
  turn: number
  /** 1-based call numbers in the trajectory of the first and last block */
  first: number
  last: number
  blocks: number
  reasons: Record<string, number>
  tools: string[]
  stops: number
}

export type SystemFigures = {
  system: string
  trajectories: number
  calls: number
  blocks: number
  episodes: number
  byReason: Record<string, number>
  stops: number
  callsAfterStop: number
  toasts: Record<string, number>
}

type TraceFile = { file: string; trajectories: Trajectory[] }
let lastLoaded: { dir: string; traces: TraceFile[] } | undefined // both replays read the same DIR: read it once

/** Every trajectory in DIR's gzipped JSON files, by file (the file name is the system's label). */
export function loadTraces(dir: string): TraceFile[] {
  if (lastLoaded?.dir === dir) return lastLoaded.traces
  const files = readdirSync(dir)
    .filter((f) => f.endsWith(".json.gz"))
    .sort()
  if (files.length === 0) throw new Error(`--traces ${dir}: no *.json.gz files there`)
  const traces = files.map((file) => ({
    file: file.replace(/\.json\.gz$/, ""),
    trajectories: JSON.parse(gunzipSync(readFileSync(path.join(dir, file))).toString("utf8")),
  }))
  lastLoaded = { dir, traces }
  return traces
}

/**
 * The rule a block's log line names, in the bench's words: cycle (k <= 4, results repeated), long cycle (k = 5..8,
 * results repeated), backstop (any k, results changed), step set, per-call streak, failure streak, wait.
 */
export const RULES = ["cycle", "per-call streak", "step set", "long cycle", "backstop", "failure streak", "wait"]
function ruleOf(extra: Record<string, unknown> | undefined): string {
  const reason = String(extra?.reason ?? "cycle")
  if (reason === "cycle" && Number(extra?.k) > 4) return "long cycle"
  return { streak: "per-call streak", step: "step set", failures: "failure streak" }[reason] ?? reason
}

/** A fake opencode client: the log's block reasons, the toasts and the session aborts loop-guard asks for. */
function fakeClient() {
  const seen = { reasons: [] as string[], toasts: [] as { message: string; variant: string }[], aborts: [] as string[] }
  const client = {
    app: {
      log: async ({ body }: { body: { message: string; extra?: Record<string, unknown> } }) => {
        if (/blocked/.test(body.message)) seen.reasons.push(ruleOf(body.extra))
        return true
      },
    },
    tui: {
      showToast: async ({ body }: { body: { message: string; variant: string } }) => (seen.toasts.push(body), true),
    },
    session: { abort: async ({ path: p }: { path: { id: string } }) => (seen.aborts.push(p.id), true) },
  }
  return { client, seen }
}

/** Replays one system's trajectories in a fresh plugin; returns its figures and its block episodes. */
export async function replaySystem(
  system: string,
  trajectories: Trajectory[],
): Promise<{ figures: SystemFigures; episodes: Episode[] }> {
  const { client, seen } = fakeClient()
  const hooks: any = await plugin.server({ client, directory: "/tmp/replay", worktree: "/tmp/replay" } as any, {})
  const before = hooks["tool.execute.before"]
  const after = hooks["tool.execute.after"]
  const figures = emptyFigures(system, trajectories.length)
  const episodes: Episode[] = []
  for (const trajectory of trajectories) {
    const sessionID = `${system}/${trajectory.id}`
    let n = 0
    let episode: Episode | null = null
    for (let t = 0; t < trajectory.turns.length; t++) {
      let stopped = false
      for (const call of trajectory.turns[t]) {
        n++
        figures.calls++
        if (stopped) figures.callsAfterStop++
        const callID = `${sessionID}#${n}`
        const reasonsBefore = seen.reasons.length
        const abortsBefore = seen.aborts.length
        let blocked: string | null = null
        try {
          await before?.({ tool: call.tool, sessionID, callID }, { args: call.args })
        } catch (error) {
          blocked = error instanceof Error ? error.message : String(error)
        }
        if (blocked !== null) {
          const reason = seen.reasons[reasonsBefore] ?? "cycle"
          const stop = seen.aborts.length > abortsBefore
          if (stop && !stopped) figures.stops++
          if (stop) stopped = true
          figures.blocks++
          figures.byReason[reason] = (figures.byReason[reason] ?? 0) + 1
          // One episode: blocks of one turn with at most 10 calls between them.
          if (!episode || episode.turn !== t || n - episode.last > 11) {
            episode = {
              system,
              id: trajectory.id,
              turn: t,
              first: n,
              last: n,
              blocks: 0,
              reasons: {},
              tools: [],
              stops: 0,
            }
            episodes.push(episode)
          }
          episode.last = n
          episode.blocks++
          episode.reasons[reason] = (episode.reasons[reason] ?? 0) + 1
          if (!episode.tools.includes(call.tool)) episode.tools.push(call.tool)
          if (stop) episode.stops++
          await emitError(hooks, sessionID, callID, call.tool, blocked)
          continue
        }
        if (call.err) await emitError(hooks, sessionID, callID, call.tool, call.obs ?? "")
        else
          await after?.(
            { tool: call.tool, sessionID, callID, args: call.args },
            { title: "", output: call.obs ?? "", metadata: {} },
          )
      }
      await hooks.event?.({ event: { type: "session.idle", properties: { sessionID } } })
    }
  }
  figures.episodes = episodes.length
  for (const toast of seen.toasts) figures.toasts[toast.variant] = (figures.toasts[toast.variant] ?? 0) + 1
  return { figures, episodes }
}

/** The event opencode publishes when a tool part ends in error (a failed call, or a call a plugin blocked). */
export async function emitError(
  hooks: any,
  sessionID: string,
  callID: string,
  tool: string,
  error: string,
  input?: unknown,
) {
  const state = input === undefined ? { status: "error", error } : { status: "error", input, error }
  const part = { type: "tool", tool, callID, sessionID, state }
  await hooks.event?.({ event: { type: "message.part.updated", properties: { sessionID, part } } })
}

/** Runs the replay over DIR and prints the figures and the episodes. */
export async function replayTraces(
  dir: string,
): Promise<{ figures: SystemFigures[]; episodes: Episode[]; streakGaps: Record<string, Record<string, number>> }> {
  const all: SystemFigures[] = []
  const episodes: Episode[] = []
  for (const { file, trajectories } of loadTraces(dir)) {
    const r = await replaySystem(file, trajectories)
    all.push(r.figures)
    episodes.push(...r.episodes)
  }
  const total = emptyFigures("all", 0)
  for (const f of all) {
    for (const key of ["trajectories", "calls", "blocks", "episodes", "stops", "callsAfterStop"] as const)
      total[key] += f[key]
    for (const [r, c] of Object.entries(f.byReason)) total.byReason[r] = (total.byReason[r] ?? 0) + c
    for (const [v, c] of Object.entries(f.toasts)) total.toasts[v] = (total.toasts[v] ?? 0) + c
  }
  const reasons = RULES
  const header = ["system", "trajectories", "calls", "blocks", "episodes", ...reasons, "stops", "calls after a stop"]
  const rows = [...all, total].map((f) => [
    f.system,
    String(f.trajectories),
    String(f.calls),
    String(f.blocks),
    String(f.episodes),
    ...reasons.map((r) => String(f.byReason[r] ?? 0)),
    String(f.stops),
    String(f.callsAfterStop),
  ])
  console.log(`\nreal-trajectory replay: ${dir}\n`)
  printColumns(header, rows)
  console.log(
    `\nblocks by rule: cycle = a cycle of 1-4 calls whose results did not change, per-call streak = one call back at least`,
  )
  console.log(
    `every other call with the same result, step set = the same parallel calls again in any order, long cycle = a cycle`,
  )
  console.log(
    `of 5-8 calls, backstop = a cycle whose results changed, failure streak = the same tool failing the same way, wait =`,
  )
  console.log(
    `a waiting cycle past its budget; stops = turns the bounded stop ended. Toasts: ${JSON.stringify(total.toasts)}\n`,
  )
  console.log(`episodes (${episodes.length}): system id turn calls first-last, blocks, reasons, tools`)
  for (const e of episodes) {
    const reasonText = Object.entries(e.reasons)
      .map(([r, c]) => `${r} ${c}`)
      .join(", ")
    console.log(
      `  ${e.system} ${e.id} turn ${e.turn + 1} calls ${e.first}-${e.last}: ${e.blocks} blocks (${reasonText}) ${e.tools.join(",")}${e.stops ? `, stop` : ""}`,
    )
  }
  const streakGapCounts = streakGaps(dir)
  return { figures: [...all, total], episodes, streakGaps: streakGapCounts }
}

/** Figures with every count at zero, for one system or for the whole corpus. */
function emptyFigures(system: string, trajectories: number): SystemFigures {
  return {
    system,
    trajectories,
    calls: 0,
    blocks: 0,
    episodes: 0,
    byReason: {},
    stops: 0,
    callsAfterStop: 0,
    toasts: {},
  }
}

/**
 * How the per-call streak's gap rule reads the real trajectories: every call that is the 4th (r + 1) or later
 * occurrence of the same call in its turn, the last 3 before it with the same recorded result, with no successful
 * changing call (changesProject's reading: a tool that does not only read, or a bash command that is not read-only) since the
 * first of those 4 and at least two different calls around them: a re-read the streak rule could see. They are
 * counted by the largest number of other calls between two of the 4 occurrences: the rule blocks at 0-1
 * (STREAK_MAX_GAP); the rest are the look-alikes it lets run. Each trajectory with such calls at a gap of 2-3 (the
 * nearest look-alikes) is listed with its first call number.
 */
export function streakGaps(dir: string): Record<string, Record<string, number>> {
  const names = ["0-1 (blocked)", "2", "3", "4-7", "8+"]
  const counts: Record<string, Record<string, number>> = {}
  const near: string[] = []
  for (const reading of ["as the rule reads", "if changing calls did not count"]) {
    const buckets: Record<string, number> = Object.fromEntries(names.map((name) => [name, 0]))
    counts[reading] = buckets
    const ignoreChanges = reading !== "as the rule reads"
    for (const { trajectories } of loadTraces(dir)) {
      for (const trajectory of trajectories) {
        let n = 0
        for (const turn of trajectory.turns) {
          const seen: { key: string; obs: string; changes: boolean; err: boolean }[] = []
          for (const call of turn) {
            n++
            const key = signature(call.tool, call.args).signature
            const gap = repeatGap(seen, key)
            if (gap !== null) {
              buckets[gap <= 1 ? names[0] : gap <= 3 ? String(gap) : gap <= 7 ? names[3] : names[4]]++
              if (gap <= (ignoreChanges ? 1 : 7))
                near.push(`${reading}: ${trajectory.id} call ${n} (${call.tool}, gap ${gap})`)
            }
            const changes = !ignoreChanges && changesProject(call.tool, call.args)
            seen.push({ key, obs: call.obs ?? "", changes, err: !!call.err })
          }
        }
      }
    }
  }
  console.log(`\nper-call streak on the real trajectories: re-reads (4th occurrence or later, the same result 3 times,`)
  console.log(`nothing changed between, varied calls around) by the most other calls between two occurrences`)
  printColumns(
    ["reading", ...names],
    Object.entries(counts).map(([reading, buckets]) => [reading, ...names.map((name) => String(buckets[name]))]),
  )
  console.log(`\nthe re-reads within a gap of 7 as the rule reads, and of 1 if changes did not count (${near.length}):`)
  for (const line of near) console.log(`  ${line}`)
  return counts
}

/** The changing-call reading of loop-guard (a tool that does not only read, or bash not read-only), for the above. */
function changesProject(tool: string, args: unknown): boolean {
  const reads = ["read", "grep", "glob", "list", "webfetch", "websearch", "codesearch", "todoread", "todowrite"]
  if ([...reads, "bashoutput"].includes(tool)) return false
  const command = typeof args === "object" && args !== null ? (args as { command?: unknown }).command : undefined
  return tool !== "bash" || typeof command !== "string" || !isReadOnlyCommand(command)
}

/** For a call with 3 earlier occurrences (same result, nothing changed since, varied calls around): the largest gap. */
function repeatGap(
  seen: readonly { key: string; obs: string; changes: boolean; err: boolean }[],
  key: string,
): number | null {
  const at: number[] = []
  const around = new Set<string>()
  for (let i = seen.length - 1; i >= 0 && at.length < 3; i--) {
    if (seen[i].key === key) at.unshift(i)
    else if (seen[i].changes && !seen[i].err) return null
    else around.add(seen[i].key)
  }
  if (at.length < 3 || around.size < 2 || !at.every((i) => seen[i].obs === seen[at[0]].obs)) return null
  const positions = [...at, seen.length]
  let gap = 0
  for (let p = 1; p < positions.length; p++) gap = Math.max(gap, positions[p] - positions[p - 1] - 1)
  return gap
}
