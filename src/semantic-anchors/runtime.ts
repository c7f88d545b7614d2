/**
 * The plugin instance (`Anchors`): config load and reload, realpaths (`ResolvedDirs`), status, the one bypass path.
 */
// @ts-ignore -- no Node types in this zero-dependency project; node:fs is built into Bun, which runs the plugin.
import { lstatSync, readFileSync, realpathSync } from "node:fs"
import type { Hooks, PluginInput } from "@opencode-ai/plugin"
import { RecentMap } from "../shared/recent-map"
import {
  MAX_LOGGED_PROBLEMS,
  MAX_RESOLVED_DIRS,
  MAX_ROOT_SESSIONS,
  MAX_TOOL_PLANS,
  SERVICE,
  TAG,
  setTimeout,
} from "./constants"
import { pathLabel } from "./names"
import { roleForAgent, type Config, type Contract } from "./model"
import { defaultConfig, buildConfig, type FileRead } from "./config"
import type { Paths, GuardFiles, RealPath, EngineEnv } from "./types"
import { formatProblem } from "./problems"
import { RootSessions, bypassRefusal, grantPass, type SessionState } from "./sessions"
import { activeContracts, effectiveMode, toolPlan, type ToolPlan } from "./verdicts"
import { bypassGrantedToast, bypassRefusedToast, problemsToast } from "./texts"
import type { SecretStore } from "./secret-files"

function labelFor(path: string, paths: Paths): string {
  return pathLabel(path, paths.directory, paths.home)
}

/**
 * A contract file's text, or why not. Read synchronously: `Bun.file().text()` took 80-100 us per file here (a trip to
 * the thread pool), this 5-20 us; the files are small and read only at start and on /anchor reload. A byte-order mark
 * is dropped, as `Bun.file().text()` did: the duplicate-key scan would take it for a blank before line 1's key.
 */
function readFile(path: string): { text?: string; error?: string } {
  try {
    const text = readFileSync(path, "utf8")
    return { text: text.charCodeAt(0) === 0xfeff ? text.slice(1) : text }
  } catch (error) {
    const code = (error as { code?: string }).code
    if (code === "ENOENT") return { error: "ENOENT" }
    const message = String((error as Error).message ?? error) // node's own starts with the code: `EISDIR: illegal ...`
    return { error: code && message.startsWith(code) ? message : `${code ?? "error"}: ${message}` }
  }
}

export function loadConfig(paths: Paths): Config {
  const reads: FileRead[] = []
  for (const [path, layer] of [
    [paths.globalFile, "global"],
    [paths.projectFile, "project"],
  ] as const) {
    const read = readFile(path)
    // A missing file is the normal case, except the one the user named explicitly.
    if (read.error === "ENOENT" && layer === "global" && paths.globalFromEnv)
      read.error = "ENOENT: OPENCODE_SEMANTIC_ANCHORS_CONFIG names a file that does not exist"
    reads.push({ path, label: labelFor(path, paths), layer, ...read })
  }
  return buildConfig(reads, paths)
}

/**
 * The file system's view of a path for the integrity check: links resolved when the path exists, or when its parent
 * directory does (a new file written into a linked directory). On any error, the path as given: the check by name
 * still applies.
 */
export function realpathOf(abs: string): string {
  try {
    if (lstatSync(abs, { throwIfNoEntry: false })) return realpathSync(abs) as string
    const cut = abs.lastIndexOf("/")
    if (cut > 0 && lstatSync(abs.slice(0, cut), { throwIfNoEntry: false }))
      return `${realpathSync(abs.slice(0, cut))}${abs.slice(cut)}`
  } catch {
    // a dangling link, a permission error: fall back to the name
  }
  return abs
}

/**
 * realpathOf with the realpath of each directory kept, so an edit costs one lstat (of the file: a file that is a link
 * is always seen) instead of an lstat and a realpath, and never more than realpathOf. Same answers as realpathOf while no directory on the way
 * changed into a link or out of one. Such a change is made by a command, not by an edit tool (an edit writes files
 * and creates plain directories; a directory that did not exist is never kept), so the kept directories are
 * forgotten whenever something may have made one: every changing call other than an edit (bash that is not
 * read-only, an MCP tool) before and after it runs, a call that ended in error, and every user message (the human
 * may have changed the tree between turns). What no hook sees (a job the agent left running in the background,
 * another process) can change a kept directory unnoticed until the next of these; a file turned into a link cannot.
 */
export class ResolvedDirs {
  private readonly dirs = new Map<string, string>()

  resolve(abs: string): string {
    const cut = abs.lastIndexOf("/")
    if (cut <= 0) return realpathOf(abs)
    try {
      const own = lstatSync(abs, { throwIfNoEntry: false })
      if (own?.isSymbolicLink()) return realpathSync(abs) as string
      const dir = abs.slice(0, cut)
      let realDir = this.dirs.get(dir)
      if (realDir === undefined) {
        // No file and no parent directory: nothing to resolve (realpathOf answers the same).
        if (!own && !lstatSync(dir, { throwIfNoEntry: false })) return abs
        realDir = realpathSync(dir) as string
        if (this.dirs.size >= MAX_RESOLVED_DIRS) this.dirs.clear()
        this.dirs.set(dir, realDir)
      }
      return `${realDir}${abs.slice(cut)}` // not a link itself: its directory's realpath and its own name
    } catch {
      return abs // a dangling link, a permission error: the check by name still applies (as realpathOf)
    }
  }

  /** Whether any directory is kept (nothing to forget otherwise, so no need to ask whether a call changes links). */
  get empty(): boolean {
    return this.dirs.size === 0
  }

  forget(): void {
    this.dirs.clear()
  }
}

/** Adds the resolved form of each guard path, so a project reached through a link (macOS /tmp) still matches. */
export function withResolvedLinks(guard: GuardFiles, realpath: RealPath): GuardFiles {
  const exact = new Set(guard.exact)
  for (const path of guard.exact) exact.add(realpath(path))
  const roots = [...new Set([...guard.roots, ...guard.roots.map(realpath)])]
  return { ...guard, exact, roots }
}

type Client = PluginInput["client"]
type Level = "debug" | "info" | "warn" | "error"
type Variant = "info" | "success" | "warning" | "error"
export type Part = { type?: string; text?: string; synthetic?: boolean; ignored?: boolean }
type HookName =
  | "config"
  | "event"
  | "chat.message"
  | "command.execute.before"
  | "experimental.chat.system.transform"
  | "tool.execute.before"
  | "tool.execute.after"
export type HookInput<K extends HookName> = Parameters<NonNullable<Hooks[K]>>[0]
export type HookOutput<K extends HookName> = Parameters<NonNullable<Hooks[K]>>[1]

export const ECHO_MARK = `${TAG} /anchor`

/**
 * A line of opencode's log, fire and forget. opencode prints no service name for a plugin's line, so the message
 * starts with it (`semantic-anchors: `, here and nowhere else: a person greps for it); the level is opencode's own
 * field.
 */
export function logLine(client: Client | undefined, level: Level, message: string, extra?: Record<string, unknown>) {
  try {
    const pending = client?.app?.log?.({ body: { service: SERVICE, level, message: `${SERVICE}: ${message}`, extra } })
    ;(pending as Promise<unknown> | undefined)?.catch?.(() => {})
  } catch {
    // logging must never break the session
  }
}

/** Strips the literal double quotes `opencode run` wraps around a multi-word argument. */
export function stripArgumentQuotes(text: string): string {
  let out = text.trim()
  while (out.length >= 2 && ((out.startsWith('"') && out.endsWith('"')) || (out.startsWith("'") && out.endsWith("'"))))
    out = out.slice(1, -1).trim()
  return out
}

/** Distinct internal errors remembered so each is logged once; beyond, a new one is logged every time. */
const MAX_LOGGED_FAILURES = 100

/** One plugin instance: the config in force, the root sessions, and the host's client. */
export class Anchors {
  config = defaultConfig()
  readonly sessions = new RootSessions()
  private activeCache = new Map<string, Map<string, Contract[]>>() // role -> agent ("" for none) -> contracts
  private readonly loggedFailures = new Set<string>()
  /** Whether the model's anchor_bypass can ask the human (a v1 host); on OpenCode 2 the user types /anchor bypass. */
  askTool = true
  /** v1's tool names as the host names them in what the model and the person read (OpenCode 2: bash is shell). */
  hostNames: Readonly<Record<string, string>> = {}
  /** The person's secrets, learned in the background (protect-secrets); none when the plugin could not start it. */
  secrets: SecretStore | undefined = undefined
  /** Whether a user message has come in this process (the first one re-sends the config-problems toast). */
  heardUser = false
  /** Sessions whose current turn is an /anchor command: the model is told to answer it in one line. */
  readonly commandTurns = new Set<string>()
  /** Sessions whose next user message is a slash command's expanded template, not the person's own words. */
  readonly templateTurns = new Set<string>()
  /** The call of a session's `/anchor test`, judged again in chat.message once the agent (and so the role) is known. */
  private readonly pendingTests = new RecentMap<string>(MAX_ROOT_SESSIONS)

  constructor(
    readonly client: Client | undefined,
    readonly paths: Paths,
    readonly env: EngineEnv,
    /** The directories env.realpath has resolved, forgotten when a call may have changed links (ResolvedDirs). */
    readonly resolvedDirs = new ResolvedDirs(),
  ) {}

  // Client calls are fire and forget: never awaited (an awaited toast at init hung opencode), failures swallowed.
  log(level: Level, message: string, extra?: Record<string, unknown>): void {
    logLine(this.client, level, message, extra)
  }

  toast(message: string, variant: Variant): void {
    try {
      const pending = this.client?.tui?.showToast?.({ body: { message, variant } })
      ;(pending as Promise<unknown> | undefined)?.catch?.(() => {})
    } catch {
      // no TUI, or an older client: the log has it
    }
  }

  /** Fail open: an internal error allows, and is logged once per distinct message. */
  failOpen(where: string, error: unknown): void {
    const text = `${where}: ${(error as Error)?.message ?? String(error)}`
    if (this.loggedFailures.has(text)) return
    if (this.loggedFailures.size < MAX_LOGGED_FAILURES) this.loggedFailures.add(text)
    this.log("error", `internal error, allowing (fail-open): ${text}`)
  }

  /** Logs each file's first MAX_LOGGED_PROBLEMS problems, then one line with the rest's count; status lists all. */
  reportProblems(): void {
    const problems = this.config.problems
    const perFile = new Map<string, number>()
    for (const problem of problems) {
      const count = (perFile.get(problem.file) ?? 0) + 1
      perFile.set(problem.file, count)
      if (count <= MAX_LOGGED_PROBLEMS)
        this.log(problem.severity === "error" ? "error" : "warn", formatProblem(problem))
    }
    for (const [file, count] of perFile) {
      if (count > MAX_LOGGED_PROBLEMS)
        this.log(
          "warn",
          `${file}: ${count - MAX_LOGGED_PROBLEMS} more problems not logged (${count} in all); run /anchor status to see them all`,
        )
    }
    this.toastProblems(0)
  }

  /**
   * The config-problems toast. A toast sent while opencode starts is never seen (the TUI is not listening yet), so
   * it is sent again shortly after the process's first user message: once, not on every message.
   */
  toastProblems(delayMs: number): void {
    const problems = this.config.problems
    if (problems.length === 0) return
    const errors = problems.some((p) => p.severity === "error")
    this.toastSoon(problemsToast(problems), errors ? "error" : "warning", delayMs)
  }

  /**
   * A toast sent while the first message switches the TUI to the session view is painted over; one sent about half a
   * second later is seen whole (measured in opencode 1.18.33). The timer does not keep the process alive.
   */
  toastSoon(message: string, variant: Variant, delayMs: number): void {
    if (delayMs <= 0) return this.toast(message, variant)
    const timer = setTimeout(() => this.toast(message, variant), delayMs) as { unref?: () => void }
    timer.unref?.()
  }

  install(next: Config): void {
    this.config = next
    this.activeCache = new Map()
    this.plans = new WeakMap()
    this.roles = new Map()
  }

  /** The role of an agent under the config in force (kept per config: an OpenCode 2 host names it on every call). */
  roleFor(agent: string): string {
    let role = this.roles.get(agent)
    if (role === undefined) {
      if (this.roles.size >= MAX_TOOL_PLANS) this.roles.clear()
      this.roles.set(agent, (role = roleForAgent(this.config, agent)))
    }
    return role
  }
  private roles = new Map<string, string>()

  /** The active contracts of a role and agent (locks follow the agent), computed once per config. */
  active(role: string, agent: string | undefined): Contract[] {
    // Two maps, not one key made of both names: this runs on every tool call, and a new string per call costs.
    let byAgent = this.activeCache.get(role)
    if (!byAgent) this.activeCache.set(role, (byAgent = new Map()))
    let list = byAgent.get(agent ?? "")
    if (!list) byAgent.set(agent ?? "", (list = activeContracts(this.config, role, agent)))
    return list
  }

  /** Whether a contract is in force for a session's role and agent (a built-in family: whether to do its work at all). */
  inForce(state: SessionState, id: string): boolean {
    return this.active(state.role, state.agent).some((contract) => contract.id === id)
  }

  rememberTest(sessionID: string, call: string): void {
    this.pendingTests.set(sessionID, call)
  }

  /** The call of the session's `/anchor test` in this turn, taken (once). */
  takeTest(sessionID: string): string | undefined {
    const call = this.pendingTests.peek(sessionID)
    this.pendingTests.delete(sessionID)
    return call
  }

  /** Tool plans per list of active contracts (so per config, role and agent), by tool name. */
  private plans = new WeakMap<readonly Contract[], Map<string, ToolPlan>>()

  /** The plan of a tool for a list of active contracts, made on the tool's first call (bounded: MCP tools vary). */
  planFor(active: readonly Contract[], tool: string): ToolPlan {
    let byTool = this.plans.get(active)
    if (!byTool) this.plans.set(active, (byTool = new Map()))
    let plan = byTool.get(tool)
    if (!plan) {
      if (byTool.size >= MAX_TOOL_PLANS) byTool.clear()
      byTool.set(tool, (plan = toolPlan(active, tool)))
    }
    return plan
  }

  /** The state a session's calls count in: its root session's. */
  stateOf(sessionID: string): SessionState {
    return this.sessions.state(this.sessions.rootOf(sessionID), this.config.defaultRole)
  }
}

/** The files read and what each gave, as one line: `built-ins (6 contracts, 12 presets); ~/.config/... (loaded)`. */
export function filesSummary(config: Config): string {
  return config.files.map((file) => `${file.label} (${file.status})`).join("; ")
}

/** The text of `/anchor status` and of the anchor_status tool. */
export function statusText(anchors: Anchors, sessionID: string): string {
  const { config } = anchors
  const root = anchors.sessions.rootOf(sessionID)
  const state = anchors.stateOf(sessionID)
  const lines = [`semantic-anchors status (session ${sessionID}${root !== sessionID ? `, root ${root}` : ""})`]
  lines.push(`role: ${state.role}${state.agent ? ` (agent ${state.agent})` : ""}`)
  lines.push("active contracts:")
  for (const contract of anchors.active(state.role, state.agent)) {
    const trigger = contract.trigger
    const counter =
      trigger.type === "state"
        ? ` (${state.steps.get(contract.id) ?? 0}/${trigger.every} since the last confirmation)`
        : ""
    const spread = trigger.type === "spread" ? ` (${state.touchedDirs.size} top-level directories touched)` : ""
    lines.push(
      `  ${effectiveMode(contract).padEnd(5)} ${contract.id}${contract.lockedBy ? " [locked]" : ""}${counter}${spread} - ${contract.description}`,
    )
  }
  const max = config.settings.maxOverrides
  lines.push(
    `overrides: ${state.overridesUsed} used, ${Math.max(0, max - state.overridesUsed)} left (max ${max}); pending pass: ${state.passes > 0 ? "yes" : "no"}`,
  )
  lines.push(
    `last confirmation: ${state.lastConfirmation ? new Date(state.lastConfirmation).toISOString() : "none yet"}`,
  )
  lines.push(`files: ${filesSummary(config)}`)
  lines.push(config.problems.length ? `problems (${config.problems.length}):` : "problems: none")
  for (const problem of config.problems) lines.push(`  ${problem.severity}: ${formatProblem(problem)}`)
  return lines.join("\n")
}

/**
 * The one bypass path. Callers: the human's `/anchor bypass`, and anchor_bypass once the human approved. Returns what
 * the caller shows: the refusal, or the grant; the person also gets the outcome as a toast (`toastDelayMs` later: a
 * command's toast is sent before its message is on screen).
 */
export function bypass(anchors: Anchors, sessionID: string, reason: string, via: string, toastDelayMs: number): string {
  const state = anchors.stateOf(sessionID)
  const settings = anchors.config.settings
  const refusal = bypassRefusal(state, reason, settings)
  if (refusal) {
    anchors.toastSoon(bypassRefusedToast(refusal), "warning", toastDelayMs)
    return refusal
  }
  grantPass(state, Date.now())
  const max = settings.maxOverrides
  anchors.toastSoon(bypassGrantedToast(state.overridesUsed, max), "success", toastDelayMs)
  anchors.log("info", `bypass granted (${via}), override ${state.overridesUsed}/${max}: ${reason}`, {
    reason,
    sessionID,
  })
  return `Override ${state.overridesUsed}/${max} granted (${via}): the next blocked call in this session may run once, and the step counters are reset. Reason: ${reason}`
}
