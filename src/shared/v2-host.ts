/**
 * OpenCode 2's host translated into the v1 hooks both plugins answer (`setupV2`). A v2 host calls `setup(ctx)`: this
 * registers on ctx's domains and hands each v2 hook and event to the plugin's v1 hook of the same meaning, in v1's
 * names and shapes: the tool `shell` is `bash` and `subagent` is `task`, `path` is `filePath`, `e.input` is the call's
 * arguments, `session.execution.succeeded` ends a turn as `session.idle` did, `session.text.delta` is a
 * `message.part.delta`. Nothing here judges a call: the same modules decide on both hosts.
 *
 * What the v2 host lacks, and what stands in: no toasts and no `app.log` for a server plugin, so the log lines go to
 * the console (the host's log) and a block reaches the person as the failed tool row that carries its message; no
 * way for a plugin tool to ask the person, so the plugin's own tools are not registered; commands print through
 * `session.synthetic` without waking the model.
 *
 * Follows anomalyco/opencode (path @ commit): the export and ctx, packages/plugin/src/promise/plugin.ts @ 0ef9ef4b;
 * tool hooks, packages/plugin/src/promise/tool.ts @ 196e4612; session hooks and domain, promise/session.ts @
 * 03545fd3; commands, promise/command.ts @ 35952d99; events, packages/schema/src/session-event.ts @ 03130971 and
 * event.ts @ 162a75f9; tool inputs, packages/core/src/tool/plugin/{read,write,edit,shell}.ts. v2's API moved between
 * builds, so each domain is probed at setup: a missing one switches off only what needs it, logged once by name; a
 * context with none of tool, session and event (a v1 host booting the v2 core registers plugins with such a one)
 * gets nothing registered. One host per plugin and project: where the other generation's entry already runs
 * (`claimHost`), the second does nothing, so no call is judged twice.
 */
import type { Hooks, PluginInput } from "@opencode-ai/plugin"

type Fields = Record<string, unknown>
type Registration = { dispose?: () => unknown } | void
type HookRegistrar = (name: string, callback: (event: any) => unknown) => Promise<Registration> | Registration

/** The part of a v2 plugin context the guards use; every domain optional, as a host may lack any. */
export type V2Context = {
  location?: { directory?: unknown; project?: { directory?: unknown } }
  tool?: { hook?: HookRegistrar }
  event?: { subscribe?: (options?: { signal?: unknown }) => AsyncIterable<unknown> }
  session?: {
    hook?: HookRegistrar
    interrupt?: (input: { sessionID: string }) => unknown
    synthetic?: (input: { sessionID: string; text: string; resume?: boolean }) => unknown
  }
  command?: { transform?: (callback: (editor: { add(definition: unknown): void }) => void) => unknown }
}

/** The v2 domains the adapter uses, each a feature that is off without it. */
export type V2Domain = "tool" | "event" | "prompt" | "interrupt" | "command"

/** A command the plugin adds (`/anchor`): its answer is printed in the session, the model not woken. */
export type V2Command = { name: string; description: string; run: (sessionID: string, args: string) => string }

export type HostLog = (level: "info" | "warn" | "error", message: string, extra?: Fields) => void

/** v2's names for tools v1 named otherwise (v2 migrates permission actions the same way: bash -> shell, task -> subagent). */
const V1_NAMES: Readonly<Record<string, string>> = { shell: "bash", subagent: "task" }
/** The same pairs the other way: how a block message names the tool on a v2 host. */
export const V2_NAMES: Readonly<Record<string, string>> = { bash: "shell", task: "subagent" }
/** Tools whose file argument v2 calls `path` and v1 `filePath`. */
const PATH_TOOLS = new Set(["read", "write", "edit"])

const isRecord = (value: unknown): value is Fields =>
  typeof value === "object" && value !== null && !Array.isArray(value)
const hostName = (map: Readonly<Record<string, string>>, key: string) =>
  Object.prototype.hasOwnProperty.call(map, key) ? map[key] : undefined

/** A v2 call as v1 spells it: the tool's v1 name and its arguments (a payload without `input` has none). */
export function v1Call(tool: unknown, input: unknown): { tool: string; args: Fields } {
  const name = typeof tool === "string" ? tool : String(tool)
  const v1 = hostName(V1_NAMES, name) ?? name
  const args: Fields = isRecord(input) ? { ...input } : {}
  if (PATH_TOOLS.has(v1) && typeof args.path === "string" && args.filePath === undefined) {
    args.filePath = args.path
    delete args.path
  }
  return { tool: v1, args }
}

/** The text the model reads of a v2 tool result: its content (a string, or text parts), else its output as JSON. */
export function resultText(result: unknown): string {
  if (!isRecord(result)) return ""
  const { content, output } = result
  if (typeof content === "string") return content
  if (Array.isArray(content))
    return content
      .filter((part) => isRecord(part) && part.type === "text" && typeof part.text === "string")
      .map((part) => (part as { text: string }).text)
      .join("\n")
  if (output === undefined) return ""
  try {
    return JSON.stringify(output) ?? ""
  } catch {
    return ""
  }
}

/**
 * The result as a v1 hook left its text: what it appended (a warn note) appended to the content; a text it changed
 * (secrets taken out) put in place of the content's text, and of a structured `output` the text was made from (the
 * model must not read the value there either).
 */
export function withAppended(result: unknown, before: string, after: string): unknown {
  if (after === before) return result
  const base = isRecord(result) ? result : {}
  const { content } = base
  if (!after.startsWith(before)) {
    const rest = Array.isArray(content) ? content.filter((part) => !(isRecord(part) && part.type === "text")) : []
    const { output: _dropped, ...kept } = base
    return { ...kept, content: rest.length ? [{ type: "text", text: after }, ...rest] : after }
  }
  const added = after.slice(before.length)
  if (Array.isArray(content)) return { ...base, content: [...content, { type: "text", text: added.trim() }] }
  return { ...base, content: `${typeof content === "string" ? content : before}${added}` }
}

/** A v1 event as the plugins read it: a type and its properties. */
export type V1Event = { type: string; properties: Fields }

/**
 * The v1 event a v2 event means, or null (an event the plugins do not read, or one without a session). A run's end
 * (succeeded, failed, interrupted; `session.idle` where still sent) is v1's idle; a streamed text or reasoning part is
 * named by its message, ordinal and kind, since v2 gives it no id of its own.
 */
export function v1Event(envelope: unknown): V1Event | null {
  if (!isRecord(envelope) || typeof envelope.type !== "string") return null
  const data = isRecord(envelope.data) ? envelope.data : isRecord(envelope.properties) ? envelope.properties : {}
  const info = isRecord(data.info) ? data.info : {}
  const sessionID = typeof data.sessionID === "string" ? data.sessionID : typeof info.id === "string" ? info.id : null
  if (sessionID === null) return null
  const type = envelope.type
  switch (type) {
    case "session.execution.succeeded":
    case "session.execution.failed":
    case "session.execution.interrupted":
    case "session.idle":
      return { type: "session.idle", properties: { sessionID } }
    case "session.deleted":
      return { type: "session.deleted", properties: { sessionID, info: { id: sessionID } } }
    case "session.compaction.ended":
      return { type: "session.compacted", properties: { sessionID } }
    case "session.created":
    case "session.updated": {
      const parentID = data.parentID ?? info.parentID
      return { type, properties: { sessionID, info: { id: sessionID, parentID } } }
    }
  }
  const stream = /^session\.(text|reasoning)\.(started|delta|ended)$/.exec(type)
  if (!stream || typeof data.assistantMessageID !== "string") return null
  const [, kind, phase] = stream
  const partID = `${kind}:${data.assistantMessageID}:${String(data.ordinal ?? 0)}`
  if (phase === "delta")
    return typeof data.delta === "string"
      ? { type: "message.part.delta", properties: { sessionID, partID, field: "text", delta: data.delta } }
      : null
  const time = phase === "ended" ? { start: 0, end: 1 } : { start: 0 }
  return { type: "message.part.updated", properties: { sessionID, part: { type: kind, id: partID, sessionID, time } } }
}

/** A tool part's update in v1's form: a call announced (running, with its message) or ended. */
function toolPart(sessionID: string, callID: string, messageID: unknown, status: string, error?: string): V1Event {
  const part = {
    type: "tool",
    sessionID,
    callID,
    messageID,
    state: { status, ...(error === undefined ? {} : { error }) },
  }
  return { type: "message.part.updated", properties: { sessionID, part } }
}

/** Which generation runs each plugin for each project, kept on globalThis: a file imported twice shares it. */
type Claims = Record<string, "v1" | { v2: number }>
function claims(): Claims {
  const global = globalThis as { [key: symbol]: Claims | undefined }
  return (global[Symbol.for("opencode-guards.host")] ??= {})
}

const claimKey = (id: string, directory: unknown) => `${id}\0${String(directory)}`

/**
 * Claims a plugin and project for one host generation: false when the other one runs it there already (a v1 host
 * that also boots the v2 core calls both `server` and `setup`). v1 instances stay for the process; v2 ones until
 * their cleanup (`releaseV2`).
 */
export function claimHost(id: string, directory: unknown, host: "v1" | "v2"): boolean {
  const key = claimKey(id, directory)
  const all = claims()
  const held = all[key]
  if (host === "v1") {
    if (held !== undefined && held !== "v1") return false
    all[key] = "v1"
    return true
  }
  if (held === "v1") return false
  all[key] = { v2: (held?.v2 ?? 0) + 1 }
  return true
}

function releaseV2(id: string, directory: unknown): void {
  const key = claimKey(id, directory)
  const held = claims()[key]
  if (held === undefined || held === "v1") return
  if (--held.v2 <= 0) delete claims()[key]
}

type Console = Record<"log" | "warn" | "error", (line: string) => void>

/** The host's log for a server plugin: the console, whose lines land in the v2 service's log. */
export function consoleLog(): HostLog {
  return (level, message, extra) => {
    try {
      const line = extra && Object.keys(extra).length ? `${message} ${JSON.stringify(extra)}` : message
      const out = (globalThis as { console?: Console }).console
      out?.[level === "info" ? "log" : level](line)
    } catch {
      // logging never breaks the session
    }
  }
}

/** What a plugin gives setupV2: its id, how to start its v1 hooks, what each missing domain switches off. */
export type V2Plugin = {
  id: string
  /** The plugin's v1 hooks for this host, from the same start-up as server(). */
  start: (input: PluginInput, log: HostLog) => Hooks | Promise<Hooks>
  /** Per domain, what is off without it: the log line says "<id>: v2 host has no <ctx...>: <this>". */
  offWithout: Partial<Record<V2Domain, string>>
  commands?: (log: HostLog) => V2Command[]
}

const PROBES: Record<V2Domain, { path: string; has: (ctx: V2Context) => boolean }> = {
  tool: { path: "ctx.tool.hook", has: (ctx) => typeof ctx.tool?.hook === "function" },
  event: { path: "ctx.event.subscribe", has: (ctx) => typeof ctx.event?.subscribe === "function" },
  prompt: { path: "ctx.session.hook", has: (ctx) => typeof ctx.session?.hook === "function" },
  interrupt: { path: "ctx.session.interrupt", has: (ctx) => typeof ctx.session?.interrupt === "function" },
  command: {
    path: "ctx.command.transform",
    has: (ctx) => typeof ctx.command?.transform === "function" && typeof ctx.session?.synthetic === "function",
  },
}

/** The v1 plugin input a v2 context stands for: its project, and a client whose calls go to v2's domains. */
function v1Input(ctx: V2Context, log: HostLog): PluginInput {
  const directory = typeof ctx.location?.directory === "string" ? ctx.location.directory : undefined
  const project = ctx.location?.project?.directory
  const worktree = typeof project === "string" ? project : directory
  const client = {
    app: {
      log: ({ body }: { body: { level: "info" | "warn" | "error"; message: string; extra?: Fields } }) =>
        log(body.level, body.message, body.extra),
    },
    tui: { showToast: () => undefined }, // no toasts for a v2 server plugin: the log and the tool row have it
    session: {
      abort: ({ path }: { path: { id: string } }) => ctx.session?.interrupt?.({ sessionID: path.id }),
    },
  }
  return { client, directory, worktree, project: {}, serverUrl: undefined } as unknown as PluginInput
}

/**
 * The v2 entry: probes ctx, starts the plugin's v1 hooks and registers their translations. Resolves to the cleanup
 * v2 calls at unload. Never throws: a v2 host shows a plugin whose setup threw as failed, and the person's session
 * must go on (fail open).
 */
export async function setupV2(plugin: V2Plugin, context: unknown): Promise<(() => void) | void> {
  const ctx = (isRecord(context) ? context : {}) as V2Context
  const log = consoleLog()
  const has = (domain: V2Domain) => PROBES[domain].has(ctx)
  if (!has("tool") && !has("event") && !has("prompt")) return // registration only: nothing to watch here
  // Without tool hooks there is no guard to run; claiming the project would only switch a v1 entry off.
  if (!has("tool")) return log("warn", `${plugin.id}: v2 host has no ${PROBES.tool.path}: the plugin stays off`)
  const directory = ctx.location?.directory
  if (!claimHost(plugin.id, directory, "v2")) {
    log("info", `${plugin.id}: the v1 entry already runs for this project; the v2 entry stays off`)
    return
  }
  const controller = new (
    globalThis as unknown as { AbortController: new () => { signal: unknown; abort(): void } }
  ).AbortController()
  const registrations: Registration[] = []
  try {
    for (const domain of Object.keys(plugin.offWithout) as V2Domain[])
      if (!has(domain)) log("warn", `${plugin.id}: v2 host has no ${PROBES[domain].path}: ${plugin.offWithout[domain]}`)
    const hooks = await plugin.start(v1Input(ctx, log), log)
    const odd = oddOnce(plugin.id, log)
    if (has("tool")) registrations.push(...(await toolHooks(ctx, hooks, odd)))
    if (has("prompt") && hooks["chat.message"]) registrations.push(await promptHook(ctx, hooks))
    if (has("event") && hooks.event) void events(ctx, hooks, controller.signal, odd, log, plugin.id, directory)
    if (has("command") && plugin.commands) await addCommands(ctx, plugin.commands(log), log, plugin.id)
  } catch (error) {
    log("error", `${plugin.id}: internal error while starting on the v2 host, partly off (fail-open): ${String(error)}`)
  }
  return () => {
    releaseV2(plugin.id, directory)
    controller.abort()
    for (const registration of registrations) {
      try {
        const pending = registration?.dispose?.() as { catch?: (f: () => void) => void } | undefined
        pending?.catch?.(() => {}) // the host disposes them at unload too
      } catch {
        // already disposed
      }
    }
  }
}

/** One log line per kind of odd input from the host (a payload without input, an event without its fields). */
function oddOnce(id: string, log: HostLog): (what: string) => void {
  const said = new Set<string>()
  return (what) => {
    if (said.has(what)) return
    said.add(what)
    log("warn", `${id}: ${what}`)
  }
}

type ToolEvent = {
  tool?: unknown
  sessionID?: unknown
  agent?: unknown
  messageID?: unknown
  id?: unknown
  input?: unknown
  status?: unknown
  result?: unknown
  error?: unknown
}

/**
 * execute.before and execute.after. Before: the call is announced (its step is its message), then judged by the v1
 * hook; its throw is rethrown, which v2 turns into the failed result the model and the person read. After: a
 * completed call's text goes to the v1 hook (a note it appends is appended to the result), and its end, completed or
 * failed, goes to the v1 event hook as v1's tool part would. A text the hook changed replaces the result's
 * (withAppended).
 */
async function toolHooks(ctx: V2Context, hooks: Hooks, odd: (what: string) => void): Promise<Registration[]> {
  const hook = ctx.tool!.hook!
  const before = await hook("execute.before", async (e: ToolEvent) => {
    if (!isRecord(e)) return odd("a v2 execute.before without its event: the call runs unjudged")
    if (!("input" in e)) odd(`a v2 execute.before without input (tool ${String(e.tool)}): judged with no arguments`)
    const { tool, args } = v1Call(e.tool, e.input)
    const sessionID = String(e.sessionID)
    const callID = String(e.id)
    await hooks.event?.({ event: toolPart(sessionID, callID, e.messageID, "running") as never })
    const input = { tool, sessionID, callID, agent: e.agent }
    await hooks["tool.execute.before"]?.(input as never, { args } as never)
  })
  const after = await hook("execute.after", async (e: ToolEvent) => {
    try {
      if (!isRecord(e)) return
      const { tool, args } = v1Call(e.tool, e.input)
      const sessionID = String(e.sessionID)
      const callID = String(e.id)
      if (e.status === "completed") {
        const text = resultText(e.result)
        const output = { title: "", output: text, metadata: {} }
        await hooks["tool.execute.after"]?.({ tool, sessionID, callID, args } as never, output as never)
        e.result = withAppended(e.result, text, output.output)
      }
      const error = e.status === "completed" ? undefined : errorText(e.error)
      await hooks.event?.({
        event: toolPart(sessionID, callID, e.messageID, error === undefined ? "completed" : "error", error) as never,
      })
    } catch {
      // the call has run: nothing to undo
    }
  })
  return [before, after]
}

function errorText(error: unknown): string {
  if (isRecord(error) && typeof error.message === "string") return error.message
  return typeof error === "string" ? error : String(error ?? "")
}

/** The person's message at admission, as v1's chat.message: its text in one text part. */
async function promptHook(ctx: V2Context, hooks: Hooks): Promise<Registration> {
  return ctx.session!.hook!(
    "prompt",
    async (e: { sessionID?: unknown; messageID?: unknown; prompt?: { text?: unknown } }) => {
      try {
        const text = typeof e?.prompt?.text === "string" ? e.prompt.text : ""
        const parts = [{ type: "text", text, sessionID: e?.sessionID, messageID: e?.messageID }]
        await hooks["chat.message"]?.({ sessionID: String(e?.sessionID) } as never, { message: {}, parts } as never)
      } catch {
        // a throw here would fail the person's prompt
      }
    },
  )
}

/**
 * The event stream, each event the v1 event it means; ends at cleanup. A v2 service runs one instance per location
 * and each sees every location's events: one whose envelope names another directory is not ours. A stream that ends
 * before cleanup is said in the log (turn resets, the stream check and subagent links stop with it).
 */
async function events(
  ctx: V2Context,
  hooks: Hooks,
  signal: unknown,
  odd: (what: string) => void,
  log: HostLog,
  id: string,
  directory: unknown,
) {
  try {
    for await (const envelope of ctx.event!.subscribe!({ signal })) {
      try {
        if (elsewhere(envelope, directory)) continue
        const event = v1Event(envelope)
        if (event) await hooks.event!({ event: event as never })
        else if (isRecord(envelope) && /^session\.(text|reasoning)\./.test(String(envelope.type)))
          odd(`a v2 ${String(envelope.type)} event without its session or message was ignored`)
      } catch {
        // one event we cannot read changes nothing
      }
    }
    if (!(signal as { aborted?: boolean }).aborted) log("warn", `${id}: the v2 event stream ended; events are off`)
  } catch (error) {
    if (!(signal as { aborted?: boolean }).aborted) log("error", `${id}: the v2 event stream ended: ${String(error)}`)
  }
}

/** Whether an event's envelope names a location other than this instance's. */
function elsewhere(envelope: unknown, directory: unknown): boolean {
  const location = isRecord(envelope) && isRecord(envelope.location) ? envelope.location : undefined
  return typeof location?.directory === "string" && typeof directory === "string" && location.directory !== directory
}

/** The plugin's commands: each answer printed in the session as a synthetic message that does not wake the model. */
async function addCommands(ctx: V2Context, commands: V2Command[], log: HostLog, id: string): Promise<void> {
  await ctx.command!.transform!((editor) => {
    for (const command of commands)
      editor.add({
        name: command.name,
        description: command.description,
        execute: async (invocation: { sessionID?: unknown; prompt?: { text?: unknown } }) => {
          try {
            const sessionID = String(invocation?.sessionID)
            const args = typeof invocation?.prompt?.text === "string" ? invocation.prompt.text : ""
            await ctx.session!.synthetic!({ sessionID, text: command.run(sessionID, args), resume: false })
          } catch (error) {
            log("error", `${id}: /${command.name} failed: ${String(error)}`)
          }
        },
      })
  })
}
