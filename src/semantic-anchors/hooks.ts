/**
 * Opencode's hooks, each a named function (`onConfig`, `onEvent`, `onChatMessage`, `onCommand`, `onToolBefore`,
 * `onToolAfter`), then `server()` for v1 hosts and `setup()` for OpenCode 2, which translates its hooks into these.
 */
import { WORK_CALL_MS, GIT_LATE } from "./work-ledger"
import {
  snapshotTree,
  prepareDiscards,
  workFault,
  noteAgentWrites,
  beginRun,
  endRun,
  afterAgentCall,
  agentOwns,
} from "./work-git"
import {
  setTimeout,
  clearTimeout,
  MESSAGE_CAP,
  OWN_TOOLS,
  SERVICE,
  TOAST_AFTER_MESSAGE_MS,
  TOAST_SHOWN_MS,
  process,
} from "./constants"
import { SECRET_WAIT_MS, SecretStore } from "./secret-files"
import type { Hooks, Plugin, PluginInput } from "@opencode-ai/plugin"
import { capText } from "../shared/text"
import { isMapping } from "./problems"
import type { Raw, EngineEnv, CallFacts, WorkView } from "./types"
import { guardFiles } from "./integrity"
import { confirm, recordSeen, resetCounters, type SessionState } from "./sessions"
import { evaluateMessage, evaluatePlan, mayChangeLinks, release, reserve, settle, type Hit } from "./verdicts"
import { resolvePaths } from "./config"
import { PROTECTION_IDS } from "./model"
import {
  BYPASS_PERMISSION,
  BYPASS_RULE,
  aTool,
  blockMessage,
  blockToast,
  rulesInWords,
  secretsNote,
  secretsToast,
  tipText,
  warnNote,
  warnToast,
} from "./texts"
import {
  Anchors,
  ECHO_MARK,
  ResolvedDirs,
  filesSummary,
  loadConfig,
  logLine,
  realpathOf,
  statusText,
  stripArgumentQuotes,
  withResolvedLinks,
  type HookInput,
  type HookOutput,
  type Part,
} from "./runtime"
import { anchorTools, runAnchorCommand, testText } from "./anchor-command"
import { V2_NAMES, claimHost, setupV2, v1Call } from "../shared/v2-host"

// The hooks: what opencode calls, and what we decide. Each fails open: an internal error allows and is logged once.

/**
 * opencode's config: register `/anchor`, and make every bypass question (`anchor-bypass: <facts>`) a question for the
 * human, unless the user chose: the rule `anchor-bypass*` matches the names; a user's own rule on the documented key
 * `anchor-bypass` (which alone no longer matches a name with facts) is carried over to it, so "deny" still denies.
 */
async function onConfig(anchors: Anchors, cfg: HookInput<"config">): Promise<void> {
  try {
    const target = cfg as unknown as Raw
    const commands = isMapping(target.command) ? target.command : {}
    target.command = {
      ...commands,
      anchor: {
        template:
          "The user ran /anchor $ARGUMENTS (semantic-anchors). Report the result to the user in one or two sentences.",
        description: "semantic-anchors: status | test <tool> <arguments> | bypass <reason> | reload",
      },
    }
    const permission = target.permission
    if (typeof permission === "string") target.permission = { "*": permission, [BYPASS_RULE]: "ask" }
    else if (isMapping(permission)) {
      permission[BYPASS_RULE] ??= permission[BYPASS_PERMISSION] ?? "ask"
      if (permission[BYPASS_RULE] === "allow")
        anchors.log("warn", `permission "${BYPASS_PERMISSION}" is "allow": the model can then grant itself bypasses`)
    } else target.permission = { [BYPASS_RULE]: "ask" }
  } catch (error) {
    anchors.failOpen("config hook", error)
  }
}

/**
 * A session created or updated links a subagent to its parent; a deleted session's state goes; a tool part that
 * ended in error (the call failed, or was refused after our hook let it through) gives back what it was counted for.
 */
async function onEvent(anchors: Anchors, { event }: HookInput<"event">): Promise<void> {
  try {
    const e = event as unknown as {
      type?: string
      properties?: { sessionID?: string; info?: { id?: string; parentID?: string }; part?: ToolPartEvent }
    }
    if (e.type === "message.part.updated") return onPartUpdated(anchors, e.properties?.part)
    const info = e.properties?.info
    const id = info?.id ?? e.properties?.sessionID
    if (!id) return
    if (e.type === "session.created" || e.type === "session.updated") {
      if (info?.parentID) anchors.sessions.link(id, info.parentID)
    } else if (e.type === "session.deleted") anchors.sessions.forget(id)
  } catch (error) {
    anchors.failOpen("event", error)
  }
}

type ToolPartEvent = { type?: string; sessionID?: string; callID?: string; state?: { status?: string } }

function onPartUpdated(anchors: Anchors, part: ToolPartEvent | undefined): void {
  if (part?.type !== "tool" || part.state?.status !== "error") return
  if (typeof part.sessionID !== "string" || typeof part.callID !== "string") return
  anchors.resolvedDirs.forget() // a failed call may have run in part
  const state = anchors.sessions.find(anchors.sessions.rootOf(part.sessionID))
  if (!state) return
  release(state, part.callID)
  dropNote(state, part.callID)
  endRun(state, part.callID) // a call that failed or was refused got no after hook: its run ends now
}

/** A user message: the agent sets the role; real text is evidence, confirms, and may earn a tip. */
async function onChatMessage(
  anchors: Anchors,
  hookInput: HookInput<"chat.message">,
  output: HookOutput<"chat.message">,
): Promise<void> {
  try {
    anchors.resolvedDirs.forget() // the human may have changed the tree since the last turn
    const { config } = anchors
    const root = anchors.sessions.rootOf(hookInput.sessionID)
    // A subagent's prompt is written by the model: it neither confirms nor changes the role.
    if (root !== hookInput.sessionID) return
    const state = anchors.sessions.state(root, config.defaultRole)
    const fromTemplate = anchors.templateTurns.delete(hookInput.sessionID)
    noteAgent(anchors, state, (output?.message as { agent?: string } | undefined)?.agent ?? hookInput.agent)
    refreshStatus(anchors, hookInput.sessionID, (output?.parts ?? []) as Part[])
    const text = ((output?.parts ?? []) as Part[])
      .filter((part) => part?.type === "text" && !part.synthetic && !part.ignored && typeof part.text === "string")
      .map((part) => part.text as string)
      .join("\n")
    if (!text.trim()) return
    state.warnedThisTurn.clear() // a new user turn (an /anchor command too): each warn contract may speak once more
    if (text.startsWith(ECHO_MARK)) return // our own /anchor result is not a user message: it does not confirm
    anchors.commandTurns.delete(hookInput.sessionID)
    snapshotTree(anchors, state) // in the background: what the tree holds before the agent's next changes
    anchors.secrets?.learn() // in the background: a changed .env is known before the agent's next result
    recordSeen(state, text, config.seenPatterns)
    const { confirmPattern } = config.settings
    if (!confirmPattern || confirmPattern.test(capText(text, MESSAGE_CAP))) confirm(state, Date.now())
    // The first user message of the process: the config problems, whose start-up toast nobody saw, come first.
    const problemsNow = !anchors.heardUser && anchors.config.problems.length > 0
    if (!anchors.heardUser) anchors.toastProblems(TOAST_AFTER_MESSAGE_MS)
    anchors.heardUser = true
    const tipDelay = TOAST_AFTER_MESSAGE_MS + (problemsNow ? TOAST_SHOWN_MS : 0)
    if (fromTemplate) return
    for (const hit of evaluateMessage(anchors.active(state.role, state.agent), text)) {
      anchors.toastSoon(`${SERVICE}: ${tipText(hit)}`, hit.contract.mode === "info" ? "info" : "warning", tipDelay)
      anchors.log(hit.contract.mode === "info" ? "info" : "warn", tipText(hit, "a user message"), {
        sessionID: hookInput.sessionID,
      })
    }
  } catch (error) {
    anchors.failOpen("chat.message", error)
  }
}

/**
 * The session's agent, which sets its role: from the person's message (v1), or from each call (an OpenCode 2 host
 * names the agent on the call, not on the message). Another agent starts the step counters over.
 */
function noteAgent(anchors: Anchors, state: SessionState, agent: unknown): void {
  if (typeof agent !== "string") return
  if (state.agent !== undefined && state.agent !== agent) resetCounters(state)
  state.agent = agent
  state.role = anchors.roleFor(agent) // again each time: /anchor reload may have mapped it anew
}

/**
 * What `/anchor <args>` puts in the user's message: the marked echo line, then the result. opencode shows it on the
 * person's screen as their own message, so it carries nothing addressed to the model: the model's instruction for
 * that turn goes into the system prompt (COMMAND_TURN_SYSTEM).
 */
function anchorCommandText(args: string, result: string): string {
  return `${ECHO_MARK} ${args}\n${result}`
}

const COMMAND_TURN_SYSTEM =
  "The user's last message is the output of the /anchor command of the semantic-anchors plugin; the user has " +
  "already read it on screen. Reply with one short sentence that acknowledges it (for example 'Noted.'), do not " +
  "repeat or summarise it, and do not call tools."

/**
 * opencode runs the command hook before chat.message names the agent, so a status or test written there shows the
 * role of the session's previous agent (or the default one, in a new session). Written again once the agent is known.
 */
function refreshStatus(anchors: Anchors, sessionID: string, parts: Part[]): void {
  const test = anchors.takeTest(sessionID)
  for (const part of parts) {
    if (part?.type !== "text" || typeof part.text !== "string" || !part.text.startsWith(ECHO_MARK)) continue
    const end = part.text.indexOf("\n")
    const args = part.text.slice(ECHO_MARK.length, end === -1 ? undefined : end).trim()
    const sub = args.split(/\s+/)[0]
    if (/^(status)?$/i.test(sub)) part.text = anchorCommandText(args, statusText(anchors, sessionID))
    // The call as typed (it may span lines, so not from the echo line), kept by the command hook.
    else if (/^test$/i.test(sub) && test !== undefined)
      part.text = anchorCommandText(`test ${test}`.trim(), testText(anchors, sessionID, test))
  }
}

/** `/anchor ...`: run it here and put the result in the command's text, which the model then reads and reports. */
async function onCommand(
  anchors: Anchors,
  hookInput: HookInput<"command.execute.before">,
  output: HookOutput<"command.execute.before">,
): Promise<void> {
  // Any command's message is a template the person did not write: it earns no tip (see onChatMessage).
  if (typeof hookInput?.sessionID === "string") anchors.templateTurns.add(hookInput.sessionID)
  if (hookInput?.command !== "anchor") return
  try {
    const result = runAnchorCommand(anchors, hookInput.sessionID, hookInput.arguments)
    const text = anchorCommandText(stripArgumentQuotes(hookInput.arguments ?? ""), result)
    // Edit in place: opencode ignores a new array.
    const parts = output.parts as Part[]
    const first = parts.findIndex((part) => part?.type === "text")
    if (first === -1) {
      anchors.log("warn", `/anchor: no text part to write the result into`)
      return
    }
    parts[first].text = text
    for (let i = parts.length - 1; i > first; i--) if (parts[i]?.type === "text") parts.splice(i, 1)
    anchors.commandTurns.add(hookInput.sessionID)
  } catch (error) {
    anchors.failOpen("command.execute.before", error)
  }
}

/**
 * The verdict on a tool call before it runs: the block message, or undefined when it may run. A pending pass lets
 * one blocked call through; an allowed call is counted, its warns wait for tool.execute.after, its tips are shown.
 */
function decideToolCall(
  anchors: Anchors,
  hookInput: HookInput<"tool.execute.before">,
  output: HookOutput<"tool.execute.before">,
  work?: WorkView,
): string | undefined {
  if (OWN_TOOLS.has(hookInput.tool)) return undefined
  const { tool, sessionID } = hookInput
  const state = anchors.stateOf(sessionID)
  const call = hookInput as { agent?: unknown }
  if (call.agent !== undefined && anchors.sessions.rootOf(sessionID) === sessionID)
    noteAgent(anchors, state, call.agent)
  const shown = Object.prototype.hasOwnProperty.call(anchors.hostNames, tool) ? anchors.hostNames[tool] : tool
  const plan = anchors.planFor(anchors.active(state.role, state.agent), tool)
  const facts: CallFacts = { tool, args: output?.args, work }
  const verdict = evaluatePlan(plan, facts, state, anchors.env)
  if (!anchors.resolvedDirs.empty && mayChangeLinks(facts)) anchors.resolvedDirs.forget()
  if (verdict.hits.length === 0) {
    reserve(state, hookInput.callID, plan, facts, anchors.env)
    return undefined // the allowed call without a note or tip: no text is built, no toast sent
  }
  if (verdict.mode === "block") {
    const blocking = verdict.hits.filter((hit) => hit.contract.mode === "block")
    const ids = blocking.map((hit) => hit.contract.id).join(", ")
    state.lastBlocked = { contracts: ids, tool: shown }
    if (state.passes === 0) {
      anchors.log("warn", `blocked ${aTool(shown)} call: ${rulesInWords(blocking)}`, { sessionID })
      anchors.toast(blockToast(shown, blocking), "warning")
      // A warn of the same call speaks in the block text instead (the call never gets a result to append it to).
      const warns = verdict.hits.filter(
        (hit) => hit.contract.mode === "warn" && !state.warnedThisTurn.has(hit.contract.id),
      )
      for (const hit of warns) state.warnedThisTurn.add(hit.contract.id)
      return blockMessage(shown, blocking, warns, state, anchors.config.settings, anchors.askTool)
    }
    state.passes--
    anchors.log("info", `bypass used: ${aTool(tool)} call blocked by ${ids} ran once`, { sessionID })
  }
  reserve(state, hookInput.callID, plan, facts, anchors.env)
  const warns = verdict.hits.filter((hit) => hit.contract.mode === "warn")
  if (warns.length)
    anchors.log("warn", `noted to the agent on ${aTool(tool)} call: ${rulesInWords(warns)}`, { sessionID })
  const first = noteFirstWarns(state, hookInput.callID, warns)
  if (first.length) anchors.toast(warnToast(tool, first), "info")
  for (const hit of verdict.hits.filter((hit) => hit.contract.mode === "info")) {
    anchors.toast(`${SERVICE}: ${tipText(hit)}`, "info")
    anchors.log("info", tipText(hit, `${aTool(tool)} call`), { sessionID })
  }
  return undefined
}

/**
 * A warn contract's note reaches the model once per user turn: with the first matching call, not with every call
 * (the log has each). Marked now, so parallel calls of one step do not both carry it; given back if the call fails.
 */
function noteFirstWarns(state: SessionState, callID: string, warns: Hit[]): Hit[] {
  const first = warns.filter((hit) => !state.warnedThisTurn.has(hit.contract.id))
  if (first.length === 0) return first
  const contracts = first.map((hit) => hit.contract.id)
  for (const id of contracts) state.warnedThisTurn.add(id)
  state.pendingNotes.set(callID, { text: warnNote(first), contracts })
  return first
}

/** A call that did not run never showed its note: the next matching call of the turn carries it instead. */
function dropNote(state: SessionState, callID: string): void {
  const note = state.pendingNotes.peek(callID)
  if (!note) return
  state.pendingNotes.delete(callID)
  for (const id of note.contracts) state.warnedThisTurn.delete(id)
}

/** The system prompt of a turn that answers an /anchor command asks the model for one short line. */
async function onSystem(
  anchors: Anchors,
  hookInput: HookInput<"experimental.chat.system.transform">,
  output: HookOutput<"experimental.chat.system.transform">,
): Promise<void> {
  try {
    const sessionID = hookInput?.sessionID
    if (typeof sessionID === "string" && anchors.commandTurns.has(sessionID) && Array.isArray(output?.system))
      output.system.push(COMMAND_TURN_SYSTEM)
  } catch (error) {
    anchors.failOpen("experimental.chat.system.transform", error)
  }
}

/** Before a tool runs: a block is a thrown error, which opencode shows as the call's result. */
async function onToolBefore(
  anchors: Anchors,
  hookInput: HookInput<"tool.execute.before">,
  output: HookOutput<"tool.execute.before">,
): Promise<void> {
  let blocked: string | undefined
  let work: WorkView | undefined
  try {
    // bounded as a whole: past WORK_CALL_MS the discards of this call are protected (their entries say so at once)
    const prepared = prepareDiscards(anchors, hookInput, output?.args)
    if (prepared) {
      work = prepared.work
      let timer: unknown
      const bound = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), WORK_CALL_MS)))
      const late = (await Promise.race([prepared.done, bound])) === "late"
      clearTimeout(timer)
      if (late) workFault(anchors, GIT_LATE)
    }
  } catch (error) {
    anchors.failOpen("the work ledger", error) // the discards of this call are then protected
  }
  try {
    blocked = decideToolCall(anchors, hookInput, output, work)
    if (!blocked) noteAgentWrites(anchors, hookInput, output?.args)
    if (!blocked) beginRun(anchors, hookInput, output?.args)
  } catch (error) {
    anchors.failOpen("tool.execute.before", error)
    return
  }
  // Thrown outside the try on purpose: inside it, the fail-open catch would swallow the block and the call would run.
  if (blocked) throw new Error(blocked)
}

/**
 * protect-secrets: the person's secrets taken out of a result before the model reads it, with a line saying what was
 * withheld and from where; the person gets a toast once a turn, the log a line (neither holds a value). The first
 * learning of the secrets is waited for once, within SECRET_WAIT_MS.
 */
async function withholdSecrets(
  anchors: Anchors,
  state: SessionState,
  hookInput: HookInput<"tool.execute.after">,
  output: HookOutput<"tool.execute.after">,
  secrets: SecretStore,
): Promise<void> {
  if (!anchors.inForce(state, PROTECTION_IDS[4])) return
  if (!secrets.learned) await secrets.firstLearning(SECRET_WAIT_MS)
  const found = secrets.matcher.redact(output.output)
  if (!found) return
  output.output = `${found.text}\n\n${secretsNote(found.notes, found.sources)}`
  const tool = anchors.hostNames[hookInput.tool] ?? hookInput.tool
  anchors.log("warn", `secrets from ${found.sources.join(", ")} taken out of ${aTool(tool)} result`, {
    sessionID: hookInput.sessionID,
    tool: hookInput.tool,
  })
  if (state.warnedThisTurn.has(PROTECTION_IDS[4])) return
  state.warnedThisTurn.add(PROTECTION_IDS[4])
  anchors.toast(secretsToast(tool, found.sources), "warning")
}

/** After a tool ran: its pending warn note is appended to the result, and the result is evidence. */
async function onToolAfter(
  anchors: Anchors,
  hookInput: HookInput<"tool.execute.after">,
  output: HookOutput<"tool.execute.after">,
): Promise<void> {
  try {
    if (OWN_TOOLS.has(hookInput.tool)) return
    if (!anchors.resolvedDirs.empty && mayChangeLinks({ tool: hookInput.tool, args: hookInput.args }))
      anchors.resolvedDirs.forget()
    const state = anchors.stateOf(hookInput.sessionID)
    settle(state, hookInput.callID)
    afterAgentCall(state, hookInput.callID)
    const original = typeof output?.output === "string" ? output.output : ""
    if (original && anchors.secrets) await withholdSecrets(anchors, state, hookInput, output, anchors.secrets)
    const note = state.pendingNotes.peek(hookInput.callID)
    if (note !== undefined) {
      state.pendingNotes.delete(hookInput.callID)
      output.output = `${original}\n\n${note.text}`
    }
    // Our own note is not evidence (it mentions "Source:" itself).
    const seen = [typeof output?.title === "string" ? output.title : "", original].filter(Boolean).join("\n")
    recordSeen(state, seen, anchors.config.seenPatterns)
  } catch (error) {
    anchors.failOpen("tool.execute.after", error)
  }
}

/** Startup: paths from the plugin input, then the files read and validated. No client call is awaited here. */
function startAnchors(input: PluginInput | undefined, v2 = false): Anchors {
  const paths = resolvePaths(input ?? {}, process.env)
  const guard = withResolvedLinks(guardFiles(paths), realpathOf)
  const resolvedDirs = new ResolvedDirs()
  const env: EngineEnv = {
    paths,
    guard,
    match: { directory: paths.directory, worktree: paths.worktree },
    realpath: (abs) => resolvedDirs.resolve(abs),
  }
  const anchors = new Anchors(input?.client, paths, env, resolvedDirs)
  if (v2) {
    anchors.askTool = false
    anchors.hostNames = V2_NAMES
  }
  try {
    anchors.install(loadConfig(paths))
  } catch (error) {
    anchors.failOpen("config load", error)
  }
  anchors.reportProblems()
  anchors.log("info", `loaded: ${filesSummary(anchors.config)}`)
  startSecrets(anchors)
  return anchors
}

/** protect-secrets' store, its first learning started now in the background. */
function startSecrets(anchors: Anchors): void {
  try {
    const { paths } = anchors
    const places = { project: paths.directory, home: paths.home, dataDir: paths.dataDir }
    const log = (message: string) => anchors.log("warn", `protect-secrets: ${message}`)
    const settings = () => anchors.config.settings
    anchors.secrets = new SecretStore(places, process.env, (abs) => agentOwns(anchors, abs), settings, log)
    anchors.secrets.learn()
  } catch (error) {
    anchors.failOpen("protect-secrets", error)
  }
}

/** The hooks both hosts have: tool calls, the person's messages, and events. */
function callHooks(anchors: Anchors): Hooks {
  return {
    event: (hookInput) => onEvent(anchors, hookInput),
    "chat.message": (hookInput, output) => onChatMessage(anchors, hookInput, output),
    "tool.execute.before": (hookInput, output) => onToolBefore(anchors, hookInput, output),
    "tool.execute.after": (hookInput, output) => onToolAfter(anchors, hookInput, output),
  }
}

const ID = "semantic-anchors"

// The v1 adapter: opencode's hooks, each handed to its named function above; nothing when the v2 entry already runs
// for this project (a v1 host that boots the v2 core calls both).
const server: Plugin = async (input) => {
  if (!claimHost(ID, input?.directory, "v1")) {
    logLine(input?.client, "info", "the v2 entry already runs for this project; the v1 entry stays off")
    return {}
  }
  const anchors = startAnchors(input)
  return {
    ...callHooks(anchors),
    tool: anchorTools(anchors),
    config: (cfg) => onConfig(anchors, cfg),
    "command.execute.before": (hookInput, output) => onCommand(anchors, hookInput, output),
    "experimental.chat.system.transform": (hookInput, output) => onSystem(anchors, hookInput, output),
  }
}

/**
 * `/anchor test` as an OpenCode 2 user types it (`test shell git push -f`, `test read {"path": "a"}`), in the names the
 * contracts use (`bash`, `filePath`); the other subcommands as they are.
 */
function inV1Names(args: string): string {
  const match = /^(\s*test\s+)(\S+)(\s*)([\s\S]*)$/i.exec(args)
  if (!match) return args
  const [, head, tool, gap, rest] = match
  let json: unknown
  try {
    json = rest.trimStart().startsWith("{") ? JSON.parse(rest) : undefined
  } catch {
    json = undefined // not JSON: the tool's main argument as text, or an error /anchor test explains
  }
  const call = v1Call(tool, json)
  return `${head}${call.tool}${gap}${json === undefined ? rest : JSON.stringify(call.args)}`
}

/**
 * The v2 adapter: OpenCode 2 calls setup(ctx), whose hooks and events setupV2 translates into the same hooks. No
 * tools (a v2 plugin tool cannot ask the human, so anchor_bypass has no port: the block tells the model to ask the
 * user to type /anchor bypass); /anchor is a v2 command whose answer is printed without waking the model.
 */
const setup = (ctx: unknown) => {
  let anchors: Anchors | undefined
  return setupV2(
    {
      id: ID,
      start: (input) => callHooks((anchors = startAnchors(input, true))),
      offWithout: {
        tool: "tool calls are not checked against the contracts",
        prompt: "user messages do not confirm, earn tips or count as evidence",
        event: "subagents count in their own session, and a failed call is not given back its count",
        command: "/anchor is off",
      },
      commands: () =>
        anchors
          ? [
              {
                name: "anchor",
                description: "semantic-anchors: status | test <tool> <arguments> | bypass <reason> | reload",
                run: (sessionID, args) =>
                  anchorCommandText(stripArgumentQuotes(args), runAnchorCommand(anchors!, sessionID, inV1Names(args))),
              },
            ]
          : [],
    },
    ctx,
  )
}

export default { id: ID, server, setup }

// The names the tests use (opencode reads only the default export).
export { MAX_ROOT_SESSIONS, MAX_PARENT_LINKS } from "./constants"
export { REGEX_INPUT_CAP } from "../shared/text"
export { ROLES, ANCHOR_IDS, BUILTIN_PRESETS, SCHEMA_KEYS, PROTECTION_IDS } from "./model"
export { WORK_CALL_MS, WORK_GIT_MS } from "./work-ledger"
export { formatProblem } from "./problems"
export { buildConfig, resolvePaths } from "./config"
export { loadConfig } from "./runtime"
export { isReadOnlyCommand } from "../shared/bash-programs"
