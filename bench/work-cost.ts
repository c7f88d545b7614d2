// What the work ledger costs per real bash call, in a real git repository (docs/performance.md, "The work ledger
// per real bash call"): `bun bench/work-cost.ts DIR [BASE] [EVERY]`.
//
// Every EVERY-th trajectory of DIR (default 4) is replayed as one session in a real git repository (a fresh one per
// trajectory: its project moved there, its paths in the calls too, and the files its commands name committed, as in
// bench/traces-protection.ts), with no config file: a user message first and at each turn, each call through
// tool.execute.before and, when it ran, tool.execute.after, then 20 ms (the model's next turn, in which the
// background snapshots run). The time of both hooks of each bash call is taken, for this plugin and for the one of
// `git show BASE:semantic-anchors.ts` (default 86fb395, the release before the default protection), trajectory by
// trajectory in turn, so that a load that changes weighs on both alike. The calls' effects are not run (the corpus
// holds commands, not files; the committed files stay as they are): what is measured is what the plugin starts and
// waits for on the call's path, the discards' and file commands' own git questions included. Prints the median, p90,
// p99 and mean of each, and their ratios.
import { execFileSync } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { now, printColumns, summarize } from "./lib.ts"
import { startAnchors } from "./semantic-anchors.ts"
import { loadTraces } from "./traces.ts"
import { projectOf } from "./traces-anchors.ts"
import { committedFiles, movedInto } from "./trees.ts"

type Call = { tool: string; args: unknown; obs?: string }
type Trajectory = { id: string; system: string; turns: Call[][] }

const quiet = { app: { log: async () => true }, tui: { showToast: async () => true } }
const PAUSE_MS = 20

/**
 * A fresh git repository for a trajectory's project: the files its bash commands name, committed (so that a discard
 * finds them and asks git, and the agent's edits are inside the project, as in the trajectory).
 */
async function gitProject(root: string, n: number, trajectory: Trajectory): Promise<string> {
  const dir = path.join(root, `p${n}`)
  execFileSync("git", ["init", "-q", "-b", "main", dir])
  writeFileSync(path.join(dir, "README.md"), "replay\n")
  const moved = movedInto(projectOf(trajectory), dir)
  for (const call of trajectory.turns.flat()) {
    const command = (moved(call.args) as { command?: unknown }).command
    if (call.tool === "bash" && typeof command === "string") committedFiles(dir, command)
  }
  const id = ["-c", "user.email=r@r", "-c", "user.name=r"]
  execFileSync("git", ["-C", dir, ...id, "add", "."])
  execFileSync("git", ["-C", dir, ...id, "commit", "-qm", "replay"])
  await new Promise((resolve) => setTimeout(resolve, 30)) // the tree's ctimes older than the first command's run
  return dir
}

async function start(project: string, root: string, baseFile: string | undefined): Promise<any> {
  const dirs = {
    home: path.join(root, "home"),
    xdg: path.join(root, "xdg"),
    project,
    configFile: path.join(root, "c.yaml"),
  }
  if (!baseFile) return startAnchors(dirs, quiet)
  const plugin = (await import(baseFile)).default
  process.env.OPENCODE_SEMANTIC_ANCHORS_CONFIG = dirs.configFile
  return plugin.server({ client: quiet, directory: project, worktree: project } as any, {})
}

/** One trajectory as one session in `project`: the time of both hooks of each bash call. */
async function replay(trajectory: Trajectory, project: string, hooks: any, costs: number[]) {
  const sessionID = `ses_cost_${trajectory.id}`
  const moved = movedInto(projectOf(trajectory), project)
  let n = 0
  for (const turn of trajectory.turns) {
    const parts = [{ id: "prt_u", sessionID, messageID: "msg_u", type: "text", text: "go on" }]
    await hooks["chat.message"]({ sessionID }, { message: { agent: "build" }, parts })
    await new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
    for (const original of turn) {
      const call = { ...original, args: moved(original.args) }
      const callID = `${sessionID}#${++n}`
      const bash = call.tool === "bash"
      const began = now()
      let ran = true
      try {
        await hooks["tool.execute.before"]({ tool: call.tool, sessionID, callID }, { args: call.args })
      } catch {
        ran = false
      }
      if (ran)
        await hooks["tool.execute.after"](
          { tool: call.tool, sessionID, callID, args: call.args },
          { title: "", output: call.obs ?? "", metadata: {} },
        )
      if (bash) costs.push(now() - began)
      await new Promise((resolve) => setTimeout(resolve, PAUSE_MS))
    }
  }
}

export async function workCost(dir: string, base = "86fb395", every = 4) {
  const root = mkdtempSync(path.join(tmpdir(), "anchors-work-cost-"))
  writeFileSync(path.join(root, "c.yaml"), "version: 1\npresets:\n  software-developer: []\n")
  const baseFile = path.join(root, "base-semantic-anchors.ts")
  writeFileSync(baseFile, execFileSync("git", ["show", `${base}:semantic-anchors.ts`], { encoding: "utf8" }))
  const costs: number[] = []
  const baseCosts: number[] = []
  let n = 0
  try {
    for (const { trajectories } of loadTraces(dir))
      for (const trajectory of trajectories as Trajectory[]) {
        if (n++ % every !== 0) continue
        const baseProject = await gitProject(root, n, trajectory)
        await replay(trajectory, baseProject, await start(baseProject, root, baseFile), baseCosts)
        const project = await gitProject(root, -n, trajectory)
        await replay(trajectory, project, await start(project, root, undefined), costs)
      }
  } finally {
    rmSync(root, { recursive: true, force: true })
  }
  const a = summarize(costs)
  const b = summarize(baseCosts)
  const mean = (xs: number[]) => xs.reduce((sum, x) => sum + x, 0) / xs.length
  const us = (ns: number) => `${(ns / 1000).toFixed(1)} us`
  const row = (name: string, s: typeof a, m: number) => [name, us(s.median), us(s.p90), us(s.p99), us(m)]
  console.log(
    `\nboth hooks per real bash call (${costs.length} calls, every ${every}th trajectory of ${dir}), real git\n`,
  )
  printColumns(
    ["", "median", "p90", "p99", "mean"],
    [
      row(`base (${base})`, b, mean(baseCosts)),
      row("this plugin", a, mean(costs)),
      [
        "ratio",
        ...[a.median / b.median, a.p90 / b.p90, a.p99 / b.p99, mean(costs) / mean(baseCosts)].map(
          (r) => `${r.toFixed(2)}x`,
        ),
      ],
    ],
  )
  return { after: a, before: b }
}

if (import.meta.main) {
  const dir = process.argv[2] ?? "../shared/data/real-traces"
  await workCost(path.resolve(dir), process.argv[3] ?? "86fb395", Number(process.argv[4] ?? 4))
}
