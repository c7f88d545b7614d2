/**
 * `/anchor` (status, test, bypass, reload) and the two tools.
 */
// @ts-ignore -- no Node types in this zero-dependency project; node:fs is built into Bun, which runs the plugin.
import { readFileSync, statSync } from "node:fs"
import type { ToolContext, ToolDefinition } from "@opencode-ai/plugin"
import { MESSAGE_CAP, OWN_TOOLS, TOAST_AFTER_MESSAGE_MS } from "./constants"
import { capText } from "../shared/text"
import { oneLine, resolvePath } from "./names"
import { type Contract, type Mode, PROTECTION_IDS } from "./model"
import { isMapping } from "./problems"
import type { Raw } from "./types"
import { bypassRefusal, newState, type SessionState } from "./sessions"
import {
  TOOL_ARGUMENTS,
  checkMessageContract,
  checkToolContract,
  effectiveMode,
  evaluateMessage,
  evaluatePlan,
  shownValue,
  type Hit,
  type Verdict,
} from "./verdicts"
import { BYPASS_ALWAYS, bypassAskToast, bypassFacts, bypassQuestion, bypassRefusedToast } from "./texts"
import { Anchors, bypass, filesSummary, loadConfig, statusText, stripArgumentQuotes } from "./runtime"
import { SECRET_FILE_MAX } from "./secret-files"

// `/anchor test`: one call judged as the next call of this session would be, with nothing counted or recorded.

/** The tools whose main argument /anchor test takes as plain text: the first of their arguments (todos is a list). */
const MAIN_ARGUMENT: Record<string, string> = Object.fromEntries(
  Object.entries(TOOL_ARGUMENTS)
    .filter(([tool]) => tool !== "todowrite")
    .map(([tool, names]) => [tool, names[0]]),
)

const TEST_USAGE =
  "Usage: /anchor test <tool> <arguments>, the arguments as a JSON object or the tool's main argument as plain text " +
  "(bash: command; read, write, edit: filePath; glob, grep: pattern; webfetch: url), e.g. /anchor test bash git push " +
  "--force origin main; /anchor test message <text> for a user message; /anchor test output <file> for what the " +
  "model would read of a file."

type TestCall = { tool: string; args: Raw } | { message: string } | { error: string }

/** `<tool> <arguments>` (or `message <text>`) as a call to judge. */
function parseTestCall(text: string): TestCall {
  const match = /^(\S+)\s*([\s\S]*)$/.exec(text.trim())
  if (!match) return { error: TEST_USAGE }
  const [, tool, rest] = match
  if (tool === "message") return rest ? { message: rest } : { error: TEST_USAGE }
  const main = Object.prototype.hasOwnProperty.call(MAIN_ARGUMENT, tool) ? MAIN_ARGUMENT[tool] : undefined
  let jsonError = ""
  if (rest.startsWith("{")) {
    try {
      const parsed: unknown = JSON.parse(rest)
      if (isMapping(parsed)) return { tool, args: parsed }
      jsonError = "not a JSON object"
    } catch (error) {
      jsonError = String((error as Error).message ?? error)
    }
  }
  if (rest === "") return { tool, args: {} }
  // `{"` opens a JSON object that did not parse: say so rather than test a path or command named `{"filePath": ...`
  // (a bash brace group, `{ make; }`, is still a command)
  if (jsonError && /^\{\s*"/.test(rest))
    return {
      error: `The arguments are not a JSON object (${jsonError}). Write them as one, e.g. /anchor test ${tool} {"name":"value"}, or as plain text for the tool's main argument.`,
    }
  if (main) return { tool, args: { [main]: rest } }
  return {
    error: `${jsonError ? `The arguments are not a JSON object (${jsonError}). ` : ""}"${tool}" is not one of opencode's built-in tools, so its main argument is not known: give its arguments as a JSON object, e.g. /anchor test ${tool} {"name":"value"}`,
  }
}

/** Why a contract does not apply to this role: off, limited to other roles, or not in the role's preset. */
function inactiveReason(contract: Contract): string {
  if (!contract.enabled) return "disabled"
  if (contract.roles && !contract.roles.includes("*")) return `roles: ${contract.roles.join(", ")}`
  return "not in this role's preset"
}

function lockText(contract: Contract): string {
  if (!contract.lockedBy) return ""
  return contract.lockedBy.by === "plugin"
    ? " [locked by the plugin]"
    : ` [locked by the global file (${contract.lockedBy.file})]`
}

const TEST_CALL_SHOWN = 300 // characters of the tested call echoed in the answer (it goes to the model too)

/** The text of `/anchor test`: the verdict, then each active contract with what held and what failed. */
export function testText(anchors: Anchors, sessionID: string, text: string): string {
  const parsed = parseTestCall(text)
  if ("error" in parsed) return parsed.error
  const { config } = anchors
  // Read only: a session with no state yet is judged as a fresh one, and none is created for it.
  const state = anchors.sessions.find(anchors.sessions.rootOf(sessionID)) ?? newState(config.defaultRole)
  const active = anchors.active(state.role, state.agent)
  const lines = ["semantic-anchors test, a dry run: nothing was counted, recorded or blocked."]
  const explained: { contract: Contract; fires: boolean; why: string[] }[] = []
  if ("message" in parsed) {
    lines.push(
      `user message: ${shownValue(parsed.message)}`,
      `role: ${state.role}${state.agent ? ` (agent ${state.agent})` : ""}`,
    )
    const hits = evaluateMessage(active, parsed.message)
    lines.push(`verdict: ${messageVerdict(hits)}`)
    const confirmPattern = config.settings.confirmPattern
    lines.push(
      !confirmPattern || confirmPattern.test(capText(parsed.message, MESSAGE_CAP))
        ? "as a real message it would confirm: the step counters would start again"
        : `as a real message it would not confirm (settings.confirmPattern /${confirmPattern.source}/ does not match)`,
    )
    for (const contract of active) {
      const why: string[] = []
      explained.push({ contract, fires: checkMessageContract(contract, parsed.message, why), why })
    }
  } else {
    const { tool, args } = parsed
    lines.push(
      `call: ${tool} ${oneLine(JSON.stringify(args), TEST_CALL_SHOWN)}`,
      `role: ${state.role}${state.agent ? ` (agent ${state.agent})` : ""}`,
    )
    if (OWN_TOOLS.has(tool)) {
      lines.push(`verdict: nothing: ${tool} is the plugin's own tool and is never checked`)
      return lines.join("\n")
    }
    const verdict = evaluatePlan(anchors.planFor(active, tool), { tool, args }, state, anchors.env)
    lines.push(`verdict: ${toolVerdict(verdict, state)}`)
    for (const contract of active) {
      const why: string[] = []
      explained.push({
        contract,
        fires: checkToolContract(contract, tool, args, state, anchors.env, why) !== undefined,
        why,
      })
    }
  }
  lines.push(`contracts active for this role (${active.length}):`)
  for (const { contract, fires, why } of explained) {
    const noted = fires && effectiveMode(contract) === "warn" && state.warnedThisTurn.has(contract.id)
    lines.push(
      `  ${effectiveMode(contract).padEnd(5)} ${contract.id}${lockText(contract)}: ${fires ? "fires" : "passes"}${noted ? " (its note was given in this turn already: this call would only be logged)" : ""}`,
    )
    for (const line of why) lines.push(`    ${line}`)
  }
  const inactive = [...config.contracts.values()].filter((contract) => !active.includes(contract))
  if (inactive.length)
    lines.push(`not active for this role: ${inactive.map((c) => `${c.id} (${inactiveReason(c)})`).join(", ")}`)
  return lines.join("\n")
}

function toolVerdict(verdict: Verdict, state: SessionState): string {
  const ids = (mode: Mode) =>
    verdict.hits
      .filter((hit) => hit.contract.mode === mode)
      .map((hit) => hit.contract.id)
      .join(", ")
  switch (verdict.mode) {
    case "block":
      return state.passes > 0
        ? `block (${ids("block")}), but a bypass is pending: the call would run once and use it`
        : `block (${ids("block")}): the call would not run`
    case "warn":
      return `warn (${ids("warn")}): the call would run, with a note to the agent`
    case "info":
      return `tip (${ids("info")}): the call would run, and the user would get a tip`
    case "allow":
      return "nothing: the call would run, with no note and no tip"
  }
}

function messageVerdict(hits: Hit[]): string {
  if (hits.length === 0) return "nothing: no tip, no warning"
  const tips = hits.filter((hit) => hit.contract.mode === "info").map((hit) => hit.contract.id)
  const warns = hits.filter((hit) => hit.contract.mode !== "info").map((hit) => hit.contract.id)
  return [
    warns.length ? `warn (${warns.join(", ")}): the user would get a warning toast` : "",
    tips.length ? `tip (${tips.join(", ")}): the user would get a tip` : "",
  ]
    .filter(Boolean)
    .join("; ")
}

/** `/anchor reload`: the files read again; every session's counters and overrides reset, its role and evidence kept. */
function reload(anchors: Anchors): string {
  anchors.install(loadConfig(anchors.paths))
  anchors.secrets?.learn() // the secret files and values a changed file names
  const { config } = anchors
  for (const state of anchors.sessions.all()) {
    const kept = newState(state.role)
    kept.agent = state.agent
    kept.seen = state.seen
    for (const text of kept.seen)
      for (const pattern of config.seenPatterns) if (pattern.test(text)) kept.seenHits.add(pattern)
    Object.assign(state, kept)
  }
  anchors.reportProblems()
  return `Reloaded: ${filesSummary(config)}; ${config.problems.length} problem(s). Counters and overrides reset; roles kept.`
}

/** The human's `/anchor` command: status, test, bypass or reload. */
export function runAnchorCommand(anchors: Anchors, sessionID: string, rawArguments: string): string {
  const text = stripArgumentQuotes(rawArguments ?? "")
  const [sub = "", ...rest] = text.split(/\s+/)
  switch (sub.toLowerCase()) {
    case "bypass":
      return bypass(
        anchors,
        sessionID,
        stripArgumentQuotes(rest.join(" ")),
        "/anchor bypass by the user",
        TOAST_AFTER_MESSAGE_MS,
      )
    case "status":
    case "":
      return statusText(anchors, sessionID)
    case "reload":
      return reload(anchors)
    case "test": {
      const call = text.replace(/^\S+\s*/, "")
      if (/^output(\s|$)/.test(call)) return outputPreview(anchors, sessionID, call.replace(/^output\s*/, ""))
      anchors.rememberTest(sessionID, call)
      return testText(anchors, sessionID, call)
    }
    default:
      return `Unknown /anchor subcommand "${sub}". Use: /anchor status | /anchor test <tool> <arguments> | /anchor bypass <reason> | /anchor reload`
  }
}

/** Characters of a previewed file shown; the rest is counted. */
const PREVIEW_CHARS = 2000

/**
 * `/anchor test output FILE`: the file's text as the model would read it in a tool result (`cat FILE`), with the
 * person's secrets taken out, and from where; nothing is recorded. The file is named, never typed in: a value typed
 * into the command would reach the model with the person's message.
 */
function outputPreview(anchors: Anchors, sessionID: string, file: string): string {
  if (!file) return "Usage: /anchor test output <file>: shows the file as the model would read it in a tool result."
  const state = anchors.sessions.find(anchors.sessions.rootOf(sessionID)) ?? newState(anchors.config.defaultRole)
  const on = anchors.inForce(state, PROTECTION_IDS[4])
  const path = resolvePath(anchors.paths.directory, file, anchors.paths.home)
  let text: string
  try {
    const info = statSync(path)
    if (!info.isFile()) return `${file} is not a regular file: not previewed.` // a FIFO would never end
    if (info.size > SECRET_FILE_MAX) return `${file} is larger than ${SECRET_FILE_MAX / 1024} KB: not previewed.`
    text = readFileSync(path, "utf8") as string
  } catch (error) {
    return `${file} cannot be read (${(error as { code?: string })?.code ?? error}).`
  }
  const found = on ? anchors.secrets?.matcher.redact(text) : undefined
  const shown = found?.text ?? text
  const cut = shown.length > PREVIEW_CHARS ? `\n... (${shown.length - PREVIEW_CHARS} more characters)` : ""
  const head = !on
    ? `protect-secrets is not active for role ${state.role}: the model would read ${file} as it is:`
    : found
      ? `${file} as the model would read it (secrets from ${found.sources.join(", ")} taken out):`
      : `${file} as the model would read it: unchanged, it holds none of the secrets the plugin knows (it reads them at start and at each message).`
  return `semantic-anchors test, a dry run: nothing was recorded.\n${head}\n${shown.slice(0, PREVIEW_CHARS)}${cut}`
}

const NO_ASK = "Bypass refused: this host cannot ask the human."

/** Characters of the model's bypass reason kept (the human reads it in the question, the log keeps it). */
const MAX_REASON_CHARS = 500

/**
 * The model's anchor_bypass: refusals first (the human is not asked for what would be refused), then opencode's
 * permission prompt, named `anchor-bypass: <the facts>` so the dialog shows them, with a toast of the same facts;
 * only an approved prompt (ctx.ask resolves) reaches the bypass. Every outcome is a toast too.
 */
async function askForBypass(anchors: Anchors, args: unknown, ctx: ToolContext): Promise<string> {
  const reason = isMapping(args) && typeof args.reason === "string" ? args.reason.trim().slice(0, MAX_REASON_CHARS) : ""
  const state = anchors.stateOf(ctx.sessionID)
  const settings = anchors.config.settings
  const refusal = bypassRefusal(state, reason, settings) ?? (typeof ctx?.ask !== "function" ? NO_ASK : undefined)
  if (refusal) {
    anchors.toast(bypassRefusedToast(refusal), "warning")
    return refusal
  }
  const facts = bypassFacts(state, reason, settings)
  anchors.toast(bypassAskToast(facts), "warning")
  try {
    await ctx.ask({
      permission: bypassQuestion(facts),
      patterns: [state.lastBlocked?.contracts ?? "*"],
      always: [BYPASS_ALWAYS],
      metadata: {
        reason,
        contract: state.lastBlocked?.contracts,
        tool: state.lastBlocked?.tool,
        overridesLeft: settings.maxOverrides - state.overridesUsed,
      },
    })
  } catch (error) {
    anchors.log("info", `anchor_bypass not approved: ${(error as Error)?.message ?? error}`)
    anchors.toast(bypassRefusedToast(), "warning")
    return "Bypass refused: the human did not approve. Do not retry the blocked call; ask the user how to proceed."
  }
  return bypass(anchors, ctx.sessionID, reason, "anchor_bypass approved by the human", 0)
}

/** The two tools the model gets: read the status, ask the human for a bypass. */
export function anchorTools(anchors: Anchors): Record<string, ToolDefinition> {
  return {
    anchor_status: plainTool({
      description:
        "Show the semantic-anchors contracts in force for this session: role, active contracts, counters, overrides, config problems. Read-only.",
      args: {},
      execute: async (_args, ctx) => statusText(anchors, ctx.sessionID),
    }),
    anchor_bypass: plainTool({
      description:
        "Ask the human to let the next blocked call run once. Needs a reason; the human must approve the permission prompt. You cannot grant it yourself.",
      args: {
        reason: {
          type: "string",
          description: "Why this blocked call should run anyway; shown to the human, who must approve.",
        },
      },
      execute: (args, ctx) => askForBypass(anchors, args, ctx),
    }),
  }
}

/**
 * A plugin tool as a plain object: opencode accepts `args` as JSON-Schema property objects (no zod at run time),
 * passes them to the model as required properties and does not validate them, so `execute` checks its input.
 */
function plainTool(definition: {
  description: string
  args: Record<string, { type: string; description: string }>
  execute(args: unknown, ctx: ToolContext): Promise<string>
}): ToolDefinition {
  return definition as unknown as ToolDefinition
}
