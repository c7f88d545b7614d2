// The default protection over the real trajectories (docs/real-data.md, "The default protection over real
// trajectories"), and what it costs per real bash call.
//
// With no config file (the role's preset emptied, so that only guard-integrity and the protection are in force and a
// step count never hides a block), every bash call of DIR runs through `server()` and the hooks as opencode drives
// them: a user message opens each turn, each call gets tool.execute.before and, when it ran, tool.execute.after. One
// plugin instance per trajectory, its project the directory the trajectory works in (projectOf, as for the ready
// rules), its home /home/replay.
//
// The tree: each trajectory's project is moved under a temporary root (its path in the calls too), where the replay
// makes what the agent's edit tools write (so their stamps are real) and, before the session, each file a bash command
// of it names is there as a committed file (old, untouched); a file the agent changed only through a script is not made (the corpus
// holds commands, not files). Each trajectory is replayed as if its tree was clean when the session began. A stand-in `git` first on
// PATH answers the plugin's questions: the snapshot at a user message is clean; what a discard would throw away is
// the files the agent changed so far with its edit tools (whole-tree discards, `git checkout .`) and, for a pathspec,
// each path it names that looks like a file (a `.` or a `/`, not a ref such as `origin/main`): the pessimistic side,
// since a real tree holds no change in a file the agent never changed. The plugin then decides, as it would, whose
// those changes are: its ledger knows the agent's edit tools and the files its bash commands are seen to write.
//
// Prints the blocks by family and every block with its command and `Why now`, to be judged by hand (the target is 0
// blocks of work a person would let run), the discards seen and how many ran; then the cost of tool.execute.before
// per real bash call, mean and median, for this plugin and for the one of `git show BASE:semantic-anchors.ts`
// (the second argument, default 86fb395, the commit before the protection): both plugins get each trajectory in
// turn, in one pass (a second, measured, after a warm-up pass), so that a load that changes weighs on both alike.
import { execFileSync } from "node:child_process"
import { appendFileSync, chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import path from "node:path"
import { now, printColumns, summarize } from "./lib.ts"
import { startAnchors } from "./semantic-anchors.ts"
import { loadTraces } from "./traces.ts"
import { projectOf } from "./traces-anchors.ts"
import { committedFiles, movedInto } from "./trees.ts"
import { EDIT_TOOLS } from "../src/shared/tools"

type Call = { tool: string; args: unknown; obs?: string; err?: boolean }
type Trajectory = { id: string; system: string; turns: Call[][] }

const FAMILIES = [
  "protect-remote-history",
  "protect-local-work",
  "protect-files",
  "protect-disks",
  "protect-secrets",
  "guard-integrity",
]
const REPLAY_HOME = "/home/replay"
const EDITING = new Set(EDIT_TOOLS)

/**
 * The stand-in git: `status ... -- SPECS` lists as changed each spec that looks like a file, and every file of
 * $REPLAY_DIRTY (the agent's edit-tool files, relative to the project) under `.`; a file command's question
 * (`--ignored=no`, `:(literal)` and `:(glob)` specs) lists the files of $REPLAY_DIRTY each spec names: a tree clean
 * when the session began holds no other change or untracked file; `status` with no spec lists the
 * files of $REPLAY_DIRTY, or nothing in the snapshot of a user message (no --untracked-files=no there); `stash list`
 * is empty; anything else succeeds silently.
 */
const FAKE_GIT = `#!/bin/sh
[ "$1" = "-C" ] && shift 2
entry() { printf '1 .M N... 100644 100644 100644 0000000000000000000000000000000000000000 0000000000000000000000000000000000000000 %s\\0' "$1"; }
if [ "$1" = "status" ]; then
  printf '# branch.oid 0000000000000000000000000000000000000000\\0# branch.head main\\0'
  snapshot=yes; specs=no; files=no
  for a in "$@"; do
    [ "$a" = "--ignored=no" ] && files=yes
    [ "$a" = "--untracked-files=no" ] && snapshot=no
    [ "$a" = "--untracked-files=all" ] && snapshot=no
    if [ "$specs" = yes ] && [ "$files" = yes ]; then
      # a file command's question: the edit-tool files under a literal path, or matching a glob
      [ -f "$REPLAY_DIRTY" ] && while IFS= read -r f; do
        case "$a" in
          ":(literal)$f"|":(literal)$f/"*) entry "$f" ;;
          ":(glob)"*) pattern="\${a#:(glob)}"; case "$f" in $pattern) entry "$f" ;; esac ;;
          ":(literal)"*) case "$f" in "\${a#:(literal)}"/*) entry "$f" ;; esac ;;
        esac
      done < "$REPLAY_DIRTY"
    elif [ "$specs" = yes ]; then
      case "$a" in
        .|./) [ -f "$REPLAY_DIRTY" ] && while IFS= read -r f; do entry "$f"; done < "$REPLAY_DIRTY" ;;
        origin/*|upstream/*|refs/*|HEAD*|@*) ;;
        */*|*.*) entry "$a" ;;
      esac
    fi
    [ "$a" = "--" ] && specs=yes
  done
  if [ "$specs" = no ] && [ "$snapshot" = no ] && [ -f "$REPLAY_DIRTY" ]; then
    while IFS= read -r f; do entry "$f"; done < "$REPLAY_DIRTY"
  fi
fi
exit 0
`

type Counts = {
  bashCalls: number
  discards: number
  discardsRan: number
  fileCommands: number
  fileCommandsRan: number
}
type Block = { system: string; id: string; call: number; families: string[]; command: string; why: string[] }

const quiet = { app: { log: async () => true }, tui: { showToast: async () => true } }

/** The plugin module to replay: this one, or another version's file. */
async function pluginAt(file: string | undefined): Promise<any> {
  return file ? (await import(file)).default : undefined
}

async function start(project: string, root: string, plugin?: any): Promise<any> {
  const configFile = path.join(root, "protection.yaml")
  const dirs = { home: REPLAY_HOME, xdg: path.join(root, "xdg"), project, configFile }
  if (!plugin) return startAnchors(dirs, quiet)
  const saved = {
    HOME: process.env.HOME,
    XDG: process.env.XDG_CONFIG_HOME,
    CFG: process.env.OPENCODE_SEMANTIC_ANCHORS_CONFIG,
  }
  process.env.HOME = dirs.home
  process.env.XDG_CONFIG_HOME = dirs.xdg
  process.env.OPENCODE_SEMANTIC_ANCHORS_CONFIG = configFile
  try {
    return await plugin.server({ client: quiet, directory: project, worktree: project } as any, {})
  } finally {
    process.env.HOME = saved.HOME
    process.env.XDG_CONFIG_HOME = saved.XDG
    if (saved.CFG === undefined) delete process.env.OPENCODE_SEMANTIC_ANCHORS_CONFIG
    else process.env.OPENCODE_SEMANTIC_ANCHORS_CONFIG = saved.CFG
  }
}

/**
 * One pass over every trajectory, both plugins on each in turn (the base one over the whole trajectory, then this
 * one, then a pause for this one's background git to end, so that it never lands in the base's time): this plugin's
 * blocks and discards, and for each bash call the time of each plugin's before hook.
 */
async function pass(dir: string, root: string, dirtyFile: string, base: any) {
  const blocks: Block[] = []
  const costs: number[] = []
  const baseCosts: number[] = []
  const counts: Counts = { bashCalls: 0, discards: 0, discardsRan: 0, fileCommands: 0, fileCommandsRan: 0 }
  for (const { file: system, trajectories } of loadTraces(dir))
    for (const trajectory of trajectories as Trajectory[]) {
      await replay(system, trajectory, root, dirtyFile, base, baseCosts, [], undefined)
      await replay(system, trajectory, root, dirtyFile, undefined, costs, blocks, counts)
      await new Promise((resolve) => setTimeout(resolve, 20))
    }
  return { blocks, costs, baseCosts, ...counts }
}

const DISCARD =
  /\bgit\b[^|;&]*\b(?:checkout|restore|stash\s+(?:drop|clear)|clean|reset\s+--hard|switch\s+(?:-f|--discard))/
/** A file command that may delete or overwrite (counted apart from the git discards). */
const FILE_COMMAND =
  /(?:^|[;&|({]\s*|\bdo\s+|\bthen\s+)(?:rm|unlink|mv|cp|install|rsync|truncate|shred)\s|-delete\b|-exec\s+rm\b/m

/** One trajectory through one plugin: the time of each bash call's before hook, and (for this one) its blocks. */
let trees = 0
async function replay(
  system: string,
  trajectory: Trajectory,
  root: string,
  dirtyFile: string,
  plugin: any,
  costs: number[],
  blocks: Block[],
  counts: Counts | undefined,
) {
  // the trajectory's project, moved under the replay's root (its paths in the calls too), where files can be made
  const project = path.join(root, "trees", `${plugin ? "base" : "this"}-${++trees}`)
  mkdirSync(project, { recursive: true })
  const moved = movedInto(projectOf(trajectory), project)
  // the tree before the session: every file a bash command of it names, there as committed (created now, so its
  // ctime is older than the session's first command by more than CHANGE_SLACK_MS)
  for (const call of trajectory.turns.flat()) {
    const command = (moved(call.args) as { command?: unknown }).command
    if (call.tool === "bash" && typeof command === "string") committedFiles(project, command)
  }
  await new Promise((resolve) => setTimeout(resolve, 30))
  const hooks = await start(project, root, plugin)
  const sessionID = `ses_p_${system}/${trajectory.id}`
  const dirty = new Set<string>()
  writeFileSync(dirtyFile, "")
  let n = 0
  for (const turn of trajectory.turns) {
    const parts = [{ id: "prt_u", sessionID, messageID: "msg_u", type: "text", text: "go on" }]
    await hooks["chat.message"]({ sessionID }, { message: { agent: "build" }, parts })
    for (const original of turn) {
      const call = { ...original, args: moved(original.args) }
      n++
      const callID = `${sessionID}#${n}`
      const command = (call.args as { command?: unknown } | undefined)?.command
      const bash = call.tool === "bash" && typeof command === "string"
      let blocked: string | undefined
      const began = now()
      try {
        await hooks["tool.execute.before"]({ tool: call.tool, sessionID, callID }, { args: call.args })
      } catch (error) {
        blocked = error instanceof Error ? error.message : String(error)
      }
      const took = now() - began
      if (bash) {
        costs.push(took)
        if (counts) {
          counts.bashCalls++
          if (DISCARD.test(command as string)) {
            counts.discards++
            if (blocked === undefined) counts.discardsRan++
          }
          if (FILE_COMMAND.test(command as string)) {
            counts.fileCommands++
            if (blocked === undefined) counts.fileCommandsRan++
          }
        }
      }
      if (blocked !== undefined) {
        const families = [...blocked.matchAll(/^Contract "([a-z0-9-]+)":/gm)].map((m) => m[1])
        if (counts && families.some((id) => FAMILIES.includes(id))) {
          const why = [...blocked.matchAll(/^Why now: (.*)$/gm)].map((m) => m[1])
          const text = bash ? (command as string) : JSON.stringify(call.args)
          blocks.push({ system, id: trajectory.id, call: n, families, command: text.slice(0, 300), why })
        }
        continue
      }
      if (EDITING.has(call.tool)) {
        const file = (call.args as { filePath?: unknown } | undefined)?.filePath
        if (typeof file === "string") {
          const abs = path.resolve(project, file)
          if (abs.startsWith(`${project}/`))
            try {
              mkdirSync(path.dirname(abs), { recursive: true }) // the edit, made: its stamp is the agent's
              appendFileSync(abs, `edit ${n}\n`)
            } catch {
              // a path made a file by an earlier command's word (`tests`): the edit is not made
            }
          const rel = path.relative(project, abs)
          if (!rel.startsWith("..") && !dirty.has(rel)) {
            dirty.add(rel)
            writeFileSync(dirtyFile, [...dirty].join("\n") + "\n")
          }
        }
      }
      await hooks["tool.execute.after"](
        { tool: call.tool, sessionID, callID, args: call.args },
        { title: "", output: call.obs ?? "", metadata: {} },
      )
    }
  }
  await new Promise((resolve) => setTimeout(resolve, 20)) // its background snapshot, before the tree goes
  rmSync(project, { recursive: true, force: true })
}

export async function replayProtection(dir: string, base = "86fb395") {
  const root = mkdtempSync(path.join(tmpdir(), "anchors-protection-"))
  mkdirSync(path.join(root, "bin"))
  writeFileSync(path.join(root, "bin", "git"), FAKE_GIT)
  chmodSync(path.join(root, "bin", "git"), 0o755)
  writeFileSync(path.join(root, "protection.yaml"), "version: 1\npresets:\n  software-developer: []\n")
  const dirtyFile = path.join(root, "dirty.txt")
  const saved = { PATH: process.env.PATH, DIRTY: process.env.REPLAY_DIRTY }
  process.env.PATH = `${path.join(root, "bin")}:${process.env.PATH}`
  process.env.REPLAY_DIRTY = dirtyFile
  const baseFile = path.join(root, "base-semantic-anchors.ts")
  writeFileSync(baseFile, execFileSync("git", ["show", `${base}:semantic-anchors.ts`], { encoding: "utf8" }))
  try {
    // twice: the first pass warms the JIT and the caches; the second is measured
    const basePlugin = await pluginAt(baseFile)
    await pass(dir, root, dirtyFile, basePlugin)
    const after = await pass(dir, root, dirtyFile, basePlugin)
    const byFamily: Record<string, number> = {}
    for (const b of after.blocks) for (const id of b.families) byFamily[id] = (byFamily[id] ?? 0) + 1
    console.log(`\nthe default protection, no config file, over the ${after.bashCalls} bash calls of ${dir}`)
    console.log("(each trajectory as if its tree was clean when the session began; see bench/traces-protection.ts)\n")
    printColumns(
      ["family", "blocked calls"],
      FAMILIES.map((id) => [id, String(byFamily[id] ?? 0)]),
    )
    console.log(`\ndiscards of uncommitted work seen: ${after.discards}, of them ran: ${after.discardsRan}`)
    console.log(
      `file commands that may delete or overwrite: ${after.fileCommands}, of them ran: ${after.fileCommandsRan}`,
    )
    console.log(`\nevery blocked call (${after.blocks.length}), to be judged:`)
    for (const b of after.blocks)
      console.log(
        `  ${b.system} ${b.id} call ${b.call} [${b.families.join(", ")}]: ${b.command.replace(/\n/g, "\\n")}\n      ${b.why.join(" | ")}`,
      )
    const stats = (xs: number[]) => {
      const s = summarize(xs)
      const mean = xs.reduce((a, b) => a + b, 0) / xs.length
      return { mean, median: s.median }
    }
    const b = stats(after.baseCosts)
    const a = stats(after.costs)
    const us = (ns: number) => `${(ns / 1000).toFixed(2)} us`
    console.log(`\ntool.execute.before per real bash call (${after.costs.length} calls), base ${base} vs this plugin\n`)
    printColumns(
      ["", "mean", "median"],
      [
        [`base (${base})`, us(b.mean), us(b.median)],
        ["this plugin", us(a.mean), us(a.median)],
        ["ratio", (a.mean / b.mean).toFixed(2) + "x", (a.median / b.median).toFixed(2) + "x"],
      ],
    )
    return {
      blocks: after.blocks,
      byFamily,
      before: b,
      after: a,
      discards: after.discards,
      discardsRan: after.discardsRan,
    }
  } finally {
    process.env.PATH = saved.PATH
    if (saved.DIRTY === undefined) delete process.env.REPLAY_DIRTY
    else process.env.REPLAY_DIRTY = saved.DIRTY
  }
}

if (import.meta.main) {
  const dir = process.argv[2] ?? "../shared/data/real-traces"
  await replayProtection(path.resolve(dir), process.argv[3] ?? "86fb395")
}
