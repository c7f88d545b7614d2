// A stand-in for the OpenCode 2 plugin host, small and in our own words, built from v2's source at anomalyco/opencode
// (no v2 binary is served by the registries reachable here). It reproduces what our plugins meet, each piece after
// the file and commit named:
//   - discovery: packages/core/src/plugin/source-directory.ts @ 8ff468ab6e736d53de4175cce7433ad2601586e3: in a
//     config dir's `plugin/` and `plugins/`, a file ending `.ts` or `.js` is a plugin (`.mjs`, `.tsx` are not);
//   - loading: packages/core/src/plugin/module.ts @ 07db2b925a415a95954142697bb11adc460c1906: the default export must
//     be `{ id: string, setup: function }` or `{ id, effect }`, extra keys ignored, else PluginModule.LoadError
//     "Plugin must export a default definition with an id and an effect or setup function.";
//   - the Promise adapter's hooks: packages/plugin/src/promise/adapter.ts @ 07bc181c5a59665bff25bccbee89fe95e3dff70f
//     and packages/core/src/plugin/hooks.ts @ 0f2daebab09744095deb6a12c230aa7430e830ca: callbacks run in registration
//     order on one mutable event; a throw in tool `execute.before` rejects the call, and the runner settles it as a
//     failed tool result the model reads (PR #41668); `execute.after` runs for completed and for failed calls with
//     `status` (packages/plugin/src/promise/tool.ts @ 196e46122874caa1df7d28dab7a64f6fddf0730a);
//   - events: the envelope `{ id, created, type, data }` (packages/schema/src/event.ts @ 162a75f9), the session's
//     run and streamed text (packages/schema/src/session-event.ts @ 03130971e20a847d77cd70e13faabca0de4f512d);
//   - session.interrupt, session.synthetic and the prompt hook (packages/plugin/src/promise/session.ts @ 03545fd3),
//     command.transform with an executor (packages/plugin/src/promise/command.ts @ 35952d99);
//   - tool inputs: read/write/edit take `path`, shell takes `command` (packages/core/src/tool/plugin/*.ts).
// A domain can be left out (`without`), or the context made registration-only, as some hosts do.
import { execFileSync } from "node:child_process"
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs"
import { isAbsolute, join } from "node:path"

export const LOAD_ERROR = "Plugin must export a default definition with an id and an effect or setup function."

export type Domain = "tool" | "event" | "session" | "command"
type Callback = (event: any) => unknown
export type ToolOutcome =
  { status: "completed"; result: { content?: unknown; output?: unknown } } | { status: "error"; error: string }

/** Plugin files v2 discovers in a config directory: single `.ts`/`.js` files in `plugin/` and `plugins/`. */
export function discover(configDir: string): string[] {
  const found: string[] = []
  for (const name of ["plugin", "plugins"]) {
    const dir = join(configDir, name)
    if (!existsSync(dir)) continue
    for (const entry of readdirSync(dir, { withFileTypes: true }))
      if (entry.isFile() && /\.(ts|js)$/.test(entry.name)) found.push(join(dir, entry.name))
  }
  return found.sort()
}

/** The loader's check of a module's default export: the definition, or the LoadError's message. */
export function validate(mod: unknown): { id: string; setup: (ctx: unknown) => unknown } | { error: string } {
  const value = (mod as { default?: unknown })?.default as Record<string, unknown> | undefined
  const ok =
    typeof value === "object" &&
    value !== null &&
    typeof value.id === "string" &&
    (typeof value.setup === "function" || typeof value.effect === "function")
  if (!ok) return { error: LOAD_ERROR }
  return value as { id: string; setup: (ctx: unknown) => unknown }
}

const tick = () => new Promise((resolve) => setTimeout(resolve, 0))

export class StandIn {
  readonly interrupts: string[] = []
  readonly synthetic: { sessionID: string; text: string; resume?: boolean }[] = []
  readonly commands = new Map<string, { name: string; execute: (input: unknown) => unknown }>()
  readonly hooks = new Map<string, Callback[]>()
  private readonly subscribers = new Set<{ queue: unknown[]; wake?: () => void }>()
  private readonly cleanups: (() => unknown)[] = []
  private events = 0
  private calls = 0

  constructor(
    readonly directory: string,
    readonly options: { without?: Domain[]; registrationOnly?: boolean } = {},
  ) {}

  /** The context a plugin's setup gets, with the domains this host has. */
  context(): Record<string, unknown> {
    const has = (domain: Domain) => !this.options.registrationOnly && !this.options.without?.includes(domain)
    const register = (prefix: string) => async (name: string, callback: Callback) => {
      const key = `${prefix}:${name}`
      this.hooks.set(key, [...(this.hooks.get(key) ?? []), callback])
      return {
        dispose: async () =>
          this.hooks.set(
            key,
            (this.hooks.get(key) ?? []).filter((it) => it !== callback),
          ),
      }
    }
    const ctx: Record<string, unknown> = {
      app: { name: "opencode", version: "2.0.23", channel: "stand-in" },
      options: {},
      location: {
        directory: this.directory,
        project: { id: "prj", directory: this.directory, canonical: this.directory },
      },
      agent: { transform: async () => ({ dispose: async () => {} }) },
      skill: {},
    }
    if (has("tool")) ctx.tool = { hook: register("tool"), transform: async () => ({ dispose: async () => {} }) }
    if (has("event")) ctx.event = { subscribe: (options?: { signal?: AbortSignal }) => this.subscribe(options?.signal) }
    if (has("session"))
      ctx.session = {
        hook: register("session"),
        interrupt: async ({ sessionID }: { sessionID: string }) => void this.interrupts.push(sessionID),
        synthetic: async (input: { sessionID: string; text: string; resume?: boolean }) =>
          void this.synthetic.push(input),
      }
    if (has("command"))
      ctx.command = {
        transform: async (callback: (editor: { add(definition: any): void }) => void) => {
          callback({ add: (definition) => this.commands.set(definition.name, definition) })
          return { dispose: async () => {} }
        },
      }
    return ctx
  }

  /** Imports a discovered file and runs its setup, as the loader does: "loaded", or "failed" with the error. */
  async load(
    file: string,
    env: Record<string, string> = {},
  ): Promise<{ status: "loaded" } | { status: "failed"; error: string }> {
    const definition = validate(await import(file))
    if ("error" in definition) return { status: "failed", error: definition.error }
    const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]))
    Object.assign(process.env, env)
    try {
      const cleanup = await definition.setup(this.context())
      if (typeof cleanup === "function") this.cleanups.push(cleanup as () => unknown)
      return { status: "loaded" }
    } catch (error) {
      return { status: "failed", error: String(error) }
    } finally {
      for (const [key, value] of Object.entries(saved)) {
        if (value === undefined) delete process.env[key]
        else process.env[key] = value
      }
    }
  }

  async unload(): Promise<void> {
    for (const cleanup of this.cleanups.splice(0)) await cleanup()
    await this.settle()
  }

  private subscribe(signal?: AbortSignal): AsyncIterable<unknown> {
    const subscriber: { queue: unknown[]; wake?: () => void } = { queue: [] }
    this.subscribers.add(subscriber)
    signal?.addEventListener("abort", () => subscriber.wake?.())
    const subscribers = this.subscribers
    return (async function* () {
      try {
        while (!signal?.aborted) {
          if (subscriber.queue.length) yield subscriber.queue.shift()
          else await new Promise<void>((resolve) => (subscriber.wake = resolve))
        }
      } finally {
        subscribers.delete(subscriber)
      }
    })()
  }

  /** An event to every subscriber, in v2's envelope (a service's subscribers see every location's events). */
  publish(type: string, data: unknown, location?: { directory: string }): void {
    const envelope = { id: `evt_${++this.events}`, created: Date.now(), type, data, ...(location ? { location } : {}) }
    for (const subscriber of this.subscribers) {
      subscriber.queue.push(envelope)
      subscriber.wake?.()
    }
  }

  /** Lets the subscribers and any pending hook work run. */
  async settle(): Promise<void> {
    for (let i = 0; i < 10; i++) await tick()
  }

  private async run(key: string, event: unknown): Promise<void> {
    for (const callback of this.hooks.get(key) ?? []) await callback(event)
  }

  /** The person's message, at admission: the prompt hooks. */
  async prompt(sessionID: string, text: string): Promise<void> {
    await this.run("session:prompt", {
      sessionID,
      messageID: `msg_p${++this.calls}`,
      prompt: { text, files: [], agents: [], skills: [] },
      delivery: "queue",
    })
  }

  /** A slash command the person types: its executor, with the arguments as the prompt's text. */
  async command(sessionID: string, name: string, text: string): Promise<"unknown" | "done"> {
    const command = this.commands.get(name)
    if (!command) return "unknown"
    await command.execute({
      sessionID,
      messageID: `msg_c${++this.calls}`,
      prompt: { text, files: [] },
      delivery: "queue",
    })
    return "done"
  }

  /**
   * One tool call as the runner makes it: execute.before (a throw is the failed result), the tool, execute.after
   * with its status. `messageID` is the assistant message (the step) the call belongs to.
   */
  async call(
    sessionID: string,
    tool: string,
    input: unknown,
    messageID = `msg_a${this.calls + 1}`,
    agent = "build",
  ): Promise<ToolOutcome> {
    const id = `call_${++this.calls}`
    const before = { tool, sessionID, agent, messageID, id, input }
    try {
      await this.run("tool:execute.before", before)
    } catch (error) {
      const outcome: ToolOutcome = { status: "error", error: (error as Error)?.message ?? String(error) }
      await this.run("tool:execute.after", { ...before, status: "error", error: { message: outcome.error } })
      return outcome
    }
    let outcome: ToolOutcome
    try {
      outcome = { status: "completed", result: this.execute(before.tool, before.input) }
    } catch (error) {
      outcome = { status: "error", error: (error as Error).message }
    }
    const after: Record<string, unknown> = { ...before, status: outcome.status }
    if (outcome.status === "completed") after.result = outcome.result
    else after.error = { message: outcome.error }
    await this.run("tool:execute.after", after)
    if (outcome.status === "completed") outcome.result = after.result as { content?: unknown }
    await this.settle()
    return outcome
  }

  /** The built-in tools, enough for the scenarios: shell, read, write, edit; any other answers "ok". */
  private execute(tool: string, input: any): { content: string } {
    const at = (path: string) => (isAbsolute(path) ? path : join(this.directory, path))
    if (tool === "shell") {
      try {
        return {
          content: execFileSync("bash", ["-c", input.command], {
            cwd: this.directory,
            encoding: "utf8",
            stdio: "pipe",
          }),
        }
      } catch (error) {
        const e = error as { stdout?: string; stderr?: string; status?: number }
        return { content: `${e.stdout ?? ""}${e.stderr ?? ""}\nexit code ${e.status}` }
      }
    }
    if (tool === "read") return { content: readFileSync(at(input.path), "utf8") }
    if (tool === "write") return (writeFileSync(at(input.path), input.content), { content: `Wrote ${input.path}` })
    if (tool === "edit") {
      const text = readFileSync(at(input.path), "utf8")
      if (!text.includes(input.oldString)) throw new Error(`Could not find oldString in ${input.path}.`)
      writeFileSync(at(input.path), text.replace(input.oldString, input.newString))
      return { content: `Edited ${input.path} (1 replacement)` }
    }
    return { content: "ok" }
  }

  /**
   * A run whose answer streams `pieces`, one delta at a time, until it ends or the session is interrupted: the
   * pieces sent before the stop.
   */
  async stream(
    sessionID: string,
    pieces: string[],
    kind: "text" | "reasoning" = "text",
    location?: { directory: string },
  ): Promise<number> {
    const assistantMessageID = `msg_s${++this.calls}`
    this.publish("session.execution.started", { sessionID })
    this.publish(`session.${kind}.started`, { sessionID, assistantMessageID, ordinal: 0 }, location)
    await this.settle()
    let sent = 0
    for (const delta of pieces) {
      if (this.interrupts.includes(sessionID)) break
      this.publish(`session.${kind}.delta`, { sessionID, assistantMessageID, ordinal: 0, delta }, location)
      sent++
      await this.settle()
    }
    const stopped = this.interrupts.includes(sessionID)
    this.publish(`session.${kind}.ended`, {
      sessionID,
      assistantMessageID,
      ordinal: 0,
      text: pieces.slice(0, sent).join(""),
    })
    this.publish(
      stopped ? "session.execution.interrupted" : "session.execution.succeeded",
      stopped ? { sessionID, reason: "user" } : { sessionID },
    )
    await this.settle()
    return sent
  }

  /** The end of a run (the person's turn is over). */
  async endRun(sessionID: string): Promise<void> {
    this.publish("session.execution.succeeded", { sessionID })
    await this.settle()
  }
}

/** The console lines a plugin writes while `run` runs: v2 gives server plugins no log API, so they use it. */
export function captureConsole(): { lines: string[]; restore: () => void } {
  const lines: string[] = []
  const saved = { log: console.log, warn: console.warn, error: console.error }
  for (const level of ["log", "warn", "error"] as const)
    console[level] = (...args: unknown[]) => void lines.push(args.map(String).join(" "))
  return { lines, restore: () => Object.assign(console, saved) }
}
