// semantic-anchors benchmarks: cost per tool check with 0, 10 and 100 user contracts (command rules, regex and glob
// matchers, on top of the built-ins), config load + validation of 100 contracts, heap per session and after 100,000 sessions.
import { lstatSync, mkdirSync, mkdtempSync, realpathSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import plugin, { MAX_ROOT_SESSIONS, loadConfig, resolvePaths } from "../semantic-anchors.ts"
import { heapUsed, now, summarize, type Row } from "./lib.ts"

/**
 * N user contracts for every role; none fires on the bench's calls. One in five is a command rule (`runs:`, three
 * patterns on git, npm and rm, the programs the bench's bash calls run: each is read as far as its subcommand); of
 * the rest, even ones are a regex on `command`, odd ones a glob on `filePath`. 100 contracts: 20 command rules.
 */
export function contractsYaml(n: number): string {
  const lines = ["version: 1", "contracts:"]
  for (let i = 0; i < n; i++) {
    lines.push(
      `  - id: bench-${i}`,
      `    description: Bench contract ${i}.`,
      `    mode: ${["block", "warn", "info"][i % 3]}`,
      "    trigger:",
      "      type: tool",
    )
    if (i % 5 === 0)
      lines.push(
        `      runs: ["git push --force bench-${i}", "npm publish --tag bench-${i} !--dry-run", "rm -r /srv/bench-${i}"]`,
      )
    else if (i % 2 === 0)
      lines.push(
        '      tools: ["bash", "*shell*"]',
        "      args:",
        `        command: { regex: '\\bdeploy-${i}\\s+--(prod|force)\\b', flags: i }`,
      )
    else
      lines.push(
        '      tools: ["edit", "write", "read"]',
        "      args:",
        `        filePath: { glob: ["secrets-${i}/**", "**/*.key${i}"] }`,
      )
  }
  if (n === 0) lines.splice(1, 1)
  return `${lines.join("\n")}\n`
}

type Sandbox = { root: string; project: string; home: string; xdg: string; cleanup(): void }

function sandbox(projectYaml: string | null): Sandbox {
  const root = mkdtempSync(join(tmpdir(), "sa-bench-"))
  const project = join(root, "project")
  const home = join(root, "home")
  const xdg = join(root, "xdg")
  for (const dir of [join(project, ".opencode"), home, xdg]) mkdirSync(dir, { recursive: true })
  if (projectYaml !== null) writeFileSync(join(project, ".opencode", "opencode-semantic-anchors.yaml"), projectYaml)
  return { root, project, home, xdg, cleanup: () => rmSync(root, { recursive: true, force: true }) }
}

/**
 * semantic-anchors' server() with HOME and XDG_CONFIG_HOME set to the given directories and
 * OPENCODE_SEMANTIC_ANCHORS_CONFIG to `configFile`, or unset (the plugin reads them at server()), restored afterwards. The bench's and the
 * trace replay's one way to start the plugin.
 */
export async function startAnchors(
  dirs: { home: string; xdg: string; project: string; configFile?: string },
  client: unknown = { app: { log: async () => true }, tui: { showToast: async () => true } },
): Promise<any> {
  const names = ["HOME", "XDG_CONFIG_HOME", "OPENCODE_SEMANTIC_ANCHORS_CONFIG"] as const
  const saved = names.map((name) => process.env[name])
  process.env.HOME = dirs.home
  process.env.XDG_CONFIG_HOME = dirs.xdg
  if (dirs.configFile) process.env.OPENCODE_SEMANTIC_ANCHORS_CONFIG = dirs.configFile
  else delete process.env.OPENCODE_SEMANTIC_ANCHORS_CONFIG
  try {
    return await plugin.server({ client, directory: dirs.project, worktree: dirs.project } as any, {})
  } finally {
    names.forEach((name, k) => {
      if (saved[k] === undefined) delete process.env[name]
      else process.env[name] = saved[k]
    })
  }
}

async function userMessage(hooks: any, sessionID: string, text: string) {
  await hooks["chat.message"]({ sessionID }, { message: { agent: "build" }, parts: [{ type: "text", text }] })
}

/**
 * The calls a session makes, in turn: a read, a bash command, an edit (all inside the project, all allowed, no note:
 * the session's first message cites a source). Each call is a little different (`salt`): a cache keyed by the
 * command or path would find nothing to reuse, as in a real session.
 */
function callFor(project: string, i: number, shortBash = false) {
  const file = `${project}/src/server/handlers/user-${i % 97}.ts`
  switch (i % 3) {
    case 0:
      return { tool: "read", args: { filePath: file, offset: 40, limit: 120 } }
    case 1:
      return {
        tool: "bash",
        args: {
          command: shortBash ? `ls a${i}` : `npm test -- --grep 'user handler ${i}' && git diff --stat`,
          description: "Run the tests",
        },
      }
    default:
      return { tool: "edit", args: { filePath: file, oldString: "return null", newString: `return user${i} ?? null` } }
  }
}

const FIRST_MESSAGE = "Add a null check to the user handler so that the tests pass. Source: ticket 42."
const TOOLS = ["read", "bash", "edit"]

/**
 * Per-call cost of tool.execute.before with 0, 10 and 100 user contracts, in interleaved rounds (each round runs a
 * batch for every contract count, so machine load falls on all alike); a user message after each 3 calls (not timed),
 * so the step counters never block. Medians over all calls, and per tool in the spread.
 */
export async function checkCost(opts: { samples: number }): Promise<{ rows: Row[]; json: Record<string, unknown> }> {
  const counts = [0, 10, 100]
  const rounds = 30
  const batch = Math.ceil(opts.samples / rounds / 3) * 3
  type Setup = {
    n: number
    shortBash: boolean
    sb: Sandbox
    hooks: any
    active: number
    times: number[]
    byTool: number[][]
    i: number
  }
  const setups: Setup[] = []
  // The last setup: the built-ins again, with the shortest bash command that is read (`ls aN`) in the same rounds: the
  // floor of a bash check on this machine, among the same reads and edits.
  for (const [n, shortBash] of [...counts.map((n) => [n, false] as const), [0, true] as const]) {
    const sb = sandbox(contractsYaml(n))
    const hooks = await startAnchors(sb)
    const status = await hooks.tool.anchor_status.execute({}, { sessionID: "bench" })
    const active = (status.match(/^ {2}(block|warn|info) /gm) ?? []).length
    await userMessage(hooks, "bench", FIRST_MESSAGE)
    setups.push({ n, shortBash, sb, hooks, active, times: [], byTool: TOOLS.map(() => [] as number[]), i: 0 })
  }
  try {
    const run = async (setup: Setup, calls: number, timed: boolean) => {
      const before = setup.hooks["tool.execute.before"]
      for (let k = 0; k < calls; k++) {
        const i = setup.i++
        const c = callFor(setup.sb.project, i, setup.shortBash)
        const t = now()
        try {
          await before({ tool: c.tool, sessionID: "bench", callID: `c${i}` }, { args: c.args })
        } catch (error) {
          throw new Error(
            `bench: a ${c.tool} call was blocked with ${setup.n} contracts; the bench calls must all be allowed: ${error}`,
          )
        }
        const dt = now() - t
        if (timed) {
          setup.times.push(dt)
          setup.byTool[i % 3].push(dt)
        }
        if (i % 3 === 2) await userMessage(setup.hooks, "bench", "ok, go on")
      }
    }
    // The file-system floor of an edit: guard-integrity resolves links of the path it writes (realpathOf), which for
    // a new file (the bench's edits) is an lstat of the file and one of its directory, and for an existing file an
    // lstat and a realpath. Timed in the same rounds.
    const floor: number[] = []
    const existingFloor: number[] = []
    const existing = `${setups[0].sb.project}/src/existing.ts`
    mkdirSync(`${setups[0].sb.project}/src`, { recursive: true })
    writeFileSync(existing, "export {}\n")
    const lstatFloor = (i: number) => {
      let t = now()
      lstatSync(`${setups[0].sb.project}/src/server/handlers/user-${i % 97}.ts`, { throwIfNoEntry: false })
      floor.push(now() - t)
      t = now()
      if (lstatSync(existing, { throwIfNoEntry: false })) realpathSync(existing)
      existingFloor.push(now() - t)
    }
    for (const setup of setups) await run(setup, 2001, false) // warm the JIT
    for (let round = 0; round < rounds; round++) {
      const order = round % 2 ? [...setups].reverse() : setups
      for (const setup of order) await run(setup, batch, true)
      for (let i = 0; i < batch / 3; i++) lstatFloor(round * batch + i)
    }
    const rows: Row[] = []
    const json: Record<string, unknown> = {}
    for (const { n, active, times, byTool, shortBash } of setups) {
      if (shortBash) continue // its row is a floor row, below
      const s = summarize(times)
      const perTool = TOOLS.map((tool, k) => `${tool} ${(summarize(byTool[k]).median / 1000).toFixed(2)}`).join(", ")
      const target = n === 0 ? 2_000 : n === 100 ? 5_000 : undefined
      rows.push({
        group: "semantic-anchors",
        figure: `tool check, ${n} user contracts (+ built-ins; ${active} active)`,
        value: s.median,
        unit: "ns",
        spread: `p10-p90 ${(s.p10 / 1000).toFixed(2)}-${(s.p90 / 1000).toFixed(2)} us; medians ${perTool} us; n=${s.n}`,
        target: target ? { text: `<= ${target / 1000} us median`, met: s.median <= target } : undefined,
      })
      json[`check_${n}`] = {
        contracts: n,
        activeContracts: active,
        ns: s,
        byTool: Object.fromEntries(TOOLS.map((tool, k) => [tool, summarize(byTool[k])])),
      }
    }
    const floorRow = (figure: string, samples: number[]) => {
      const s = summarize(samples)
      const spread = `p10-p90 ${(s.p10 / 1000).toFixed(2)}-${(s.p90 / 1000).toFixed(2)} us; n=${s.n}`
      rows.push({ group: "semantic-anchors", figure, value: s.median, unit: "ns", spread })
      return s
    }
    json.shortBashFloor = floorRow(
      "floor: a bash check of the shortest command that is read (`ls aN`), built-ins, among the same reads and edits",
      setups[setups.length - 1].byTool[1],
    )
    json.lstatFloor = floorRow(
      "floor: one lstat of a path that does not exist (an edit's guard check makes two)",
      floor,
    )
    json.existingFloor = floorRow(
      "floor: lstat + realpath of an existing file (an edit's guard check of a file that exists)",
      existingFloor,
    )
    return { rows, json }
  } finally {
    for (const { sb } of setups) sb.cleanup()
  }
}

/**
 * Edits of files that exist, as in a real session (the edits of checkCost write new files into a directory that does
 * not exist: two failed lstats). guard-integrity resolves the links of the path it writes: the first edit of a turn
 * resolves the file's directory (lstat + realpath), the next edits in that directory reuse it until a user message or
 * a changing bash command (one lstat). Built-ins only; turns of three edits, timed apart, in interleaved rounds.
 */
export async function editCost(opts: { turns: number }): Promise<{ rows: Row[]; json: Record<string, unknown> }> {
  const sb = sandbox(null)
  const dir = `${sb.project}/src/server/handlers`
  mkdirSync(dir, { recursive: true })
  for (let i = 0; i < 97; i++) writeFileSync(`${dir}/user-${i}.ts`, "export {}\n")
  try {
    const hooks = await startAnchors(sb)
    const before = hooks["tool.execute.before"]
    const first: number[] = []
    const next: number[] = []
    let i = 0
    const turn = async (timed: boolean) => {
      await userMessage(hooks, "edits", i === 0 ? FIRST_MESSAGE : "ok, go on")
      for (let k = 0; k < 3; k++, i++) {
        const args = {
          filePath: `${dir}/user-${i % 97}.ts`,
          oldString: "export {}",
          newString: `export const n = ${i}`,
        }
        const t = now()
        await before({ tool: "edit", sessionID: "edits", callID: `e${i}` }, { args })
        const dt = now() - t
        if (timed) (k === 0 ? first : next).push(dt)
      }
    }
    for (let w = 0; w < 500; w++) await turn(false) // warm the JIT
    for (let w = 0; w < opts.turns; w++) await turn(true)
    const rows: Row[] = []
    const json: Record<string, unknown> = {}
    for (const [figure, times, key] of [
      ["edit of an existing file, first of a turn (its directory resolved: lstat + realpath)", first, "editFirst"],
      ["edit of an existing file after an edit in its directory (directory kept: one lstat)", next, "editNext"],
    ] as const) {
      const s = summarize(times)
      rows.push({
        group: "semantic-anchors",
        figure,
        value: s.median,
        unit: "ns",
        spread: `p10-p90 ${(s.p10 / 1000).toFixed(2)}-${(s.p90 / 1000).toFixed(2)} us; n=${s.n}`,
      })
      json[key] = s
    }
    return { rows, json }
  } finally {
    sb.cleanup()
  }
}

/** Reading, parsing and validating a project file of 100 contracts (loadConfig: the I/O included). */
export async function loadCost(opts: { runs: number }): Promise<{ rows: Row[]; json: Record<string, unknown> }> {
  const sb = sandbox(contractsYaml(100))
  try {
    const paths = resolvePaths(
      { directory: sb.project, worktree: sb.project },
      { HOME: sb.home, XDG_CONFIG_HOME: sb.xdg },
    )
    const first = loadConfig(paths)
    const userContracts = [...first.contracts.keys()].filter((id) => id.startsWith("bench-")).length
    const errors = first.problems.filter((p: any) => p.severity === "error")
    if (userContracts !== 100 || errors.length)
      throw new Error(`bench: expected 100 valid contracts, got ${userContracts}; ${errors.length} errors`)
    const times: number[] = []
    for (let i = 0; i < opts.runs + 5; i++) {
      const t = now()
      loadConfig(paths)
      if (i >= 5) times.push(now() - t)
    }
    const s = summarize(times)
    return {
      rows: [
        {
          group: "semantic-anchors",
          figure: "config load + validation, 100 contracts",
          value: s.median,
          unit: "ns",
          spread: `p99 ${(s.p99 / 1e6).toFixed(2)} ms, min-max ${(s.min / 1e6).toFixed(2)}-${(s.max / 1e6).toFixed(2)} ms, n=${s.n}, ${contractsYaml(100).length} B of YAML`,
          target: { text: "<= 5 ms median", met: s.median <= 5e6 },
        },
      ],
      json: { load100: { ns: s, bytes: contractsYaml(100).length } },
    }
  } finally {
    sb.cleanup()
  }
}

/**
 * Runs in a child process of its own (bench/memory-child.ts). Heap per live root session at the session bound,
 * typical (a few messages, calls and results) or worst case (every per-session bound full: 16 seen texts of 8 KiB
 * kept from large results and messages, 256 warn notes whose tool.execute.after never came); with `checkpoints`,
 * the heap after that many sessions came and went (half deleted, half dropped by the bound; every 4th with a
 * subagent session linked to it).
 */
export async function memoryScenario(
  kind: "typical" | "worst",
  checkpoints: number[],
): Promise<Record<string, number>> {
  const sb = sandbox(contractsYaml(10))
  try {
    const out: Record<string, number> = {}
    const bigResult = "lorem ipsum dolor sit amet, ".repeat(2000) // 56 KB; the plugin keeps 8 KiB of it
    const base = heapUsed()
    const hooks = await startAnchors(sb)
    out.plugin = heapUsed() - base
    const calls = [0, 1, 2].map((i) => callFor(sb.project, i))
    const session = async (sessionID: string, rounds: number, worst: boolean) => {
      await userMessage(hooks, sessionID, `Session ${sessionID}: fix the handler so that the tests pass.`)
      for (let i = 0; i < rounds * 3; i++) {
        const c = calls[i % 3]
        const callID = `${sessionID}-${i}`
        try {
          await hooks["tool.execute.before"]({ tool: c.tool, sessionID, callID }, { args: c.args })
        } catch {}
        if (!worst || c.tool !== "edit") {
          const output = worst ? `${bigResult}${i}` : "ok"
          await hooks["tool.execute.after"](
            { tool: c.tool, sessionID, callID, args: c.args },
            { title: c.tool, output, metadata: {} },
          )
        }
        if (i % 3 === 2) await userMessage(hooks, sessionID, worst ? `${bigResult} ${i}` : "ok, go on")
      }
    }
    for (let s = 0; s < MAX_ROOT_SESSIONS; s++) await session(`live-${s}`, kind === "worst" ? 90 : 2, kind === "worst")
    out.atCapacity = heapUsed() - base
    out.perSession = (out.atCapacity - out.plugin) / MAX_ROOT_SESSIONS
    let done = 0
    for (const checkpoint of checkpoints) {
      for (let s = done; s < checkpoint; s++) {
        const sessionID = `churn-${s}`
        if (s % 4 === 0) {
          const child = `${sessionID}-child`
          await hooks.event({
            event: {
              type: "session.created",
              properties: { sessionID: child, info: { id: child, parentID: sessionID } },
            },
          })
        }
        await session(sessionID, 2, false)
        if (s % 2)
          await hooks.event({ event: { type: "session.deleted", properties: { sessionID, info: { id: sessionID } } } })
      }
      done = checkpoint
      out[`after${checkpoint}`] = heapUsed() - base
    }
    ;(globalThis as { keep?: unknown }).keep = hooks
    return out
  } finally {
    sb.cleanup()
  }
}
