/**
 * Block, warn and tip texts, toasts, the bypass question.
 */
import { TAG } from "./constants"
import { oneLine } from "./names"
import type { Contract, Settings } from "./model"
import { formatProblem } from "./problems"
import type { Problem } from "./types"
import type { SessionState } from "./sessions"
import type { Hit } from "./verdicts"

function anchorsText(contract: Contract): string {
  return contract.anchorRefs.length ? ` (anchors: ${contract.anchorRefs.join(", ")})` : ""
}

/** What lifts a block: a user message (step counts), evidence seen in the session (`unlessSeen`), or only the human. */
type Release = "message" | "evidence" | "bypass"

function releaseOf(contract: Contract): Release {
  const trigger = contract.trigger
  if (trigger.type === "state" || trigger.type === "spread") return "message"
  if (trigger.type === "tool" && trigger.unlessSeen) return "evidence"
  return "bypass"
}

/** A description inside a sentence: without its final full stop. */
function clause(text: string): string {
  return text.replace(/\.\s*$/, "")
}

/**
 * The block text. Line 1 is for the human (what was blocked, by which rule); the rest tells the model why, what
 * else the call would have triggered (a warn of the same call, e.g. emergence-anchor, which would otherwise never be
 * seen: the block comes first), and exactly what lifts the block. No Markdown: the TUI shows it raw. `askTool`: the
 * host lets anchor_bypass ask the human (v1); an OpenCode 2 host has no way to, so the model asks the user to type it.
 */
export function blockMessage(
  tool: string,
  hits: Hit[],
  warns: Hit[],
  state: SessionState,
  settings: Settings,
  askTool = true,
): string {
  const rules = hits.map(({ contract }) => `${contract.id}: ${clause(contract.description)}`).join("; ")
  const lines = [`semantic-anchors blocked this ${tool} call (rule ${rules}).`]
  for (const { contract, detail } of hits) {
    lines.push(
      `Contract "${contract.id}": ${contract.description}${contract.message ? ` ${contract.message}` : ""}${anchorsText(contract)}`,
    )
    lines.push(`Why now: ${detail}.`)
  }
  for (const { contract, detail } of warns) {
    lines.push(
      `The call would also have triggered "${contract.id}" (${detail}): ${contract.description}${contract.message ? ` ${contract.message}` : ""}`,
    )
  }
  lines.push(`The call did not run. ${releaseText(hits, settings)}`)
  const left = Math.max(0, settings.maxOverrides - state.overridesUsed)
  lines.push(
    left > 0
      ? `Only the human can let one blocked call through: /anchor bypass <reason> (${left} of ${settings.maxOverrides} overrides left); ${askTool ? "you may call anchor_bypass with a reason, which asks the human." : "if the call is needed, ask the user to type /anchor bypass followed by the reason."}`
      : `No overrides are left in this session (max ${settings.maxOverrides}); the human can run /anchor reload after changing the config.`,
  )
  return lines.join("\n")
}

/** What lifts the block, said truthfully: "any user message" only where a user message does. */
function releaseText(hits: Hit[], settings: Settings): string {
  const confirmHow = settings.confirmPattern
    ? `a user message matching /${settings.confirmPattern.source}/`
    : "any user message"
  const byMessage = hits.filter((hit) => releaseOf(hit.contract) === "message")
  const byEvidence = hits.filter((hit) => releaseOf(hit.contract) === "evidence")
  const byHuman = hits.filter((hit) => releaseOf(hit.contract) === "bypass")
  const parts: string[] = []
  if (byMessage.length) {
    const ids = byMessage.map((hit) => hit.contract.id).join(", ")
    parts.push(`Stop and ask the user: ${confirmHow} confirms and resets the step counters (${ids}).`)
  }
  for (const { contract } of byEvidence) {
    const pattern = (contract.trigger as { unlessSeen: RegExp }).unlessSeen
    parts.push(`"${contract.id}" is lifted once a user message or a tool result matches /${pattern.source}/.`)
  }
  if (byHuman.length) {
    const ids = byHuman.map((hit) => hit.contract.id).join(", ")
    parts.push(`No user message lifts ${ids}: take another way that keeps to the rule, or stop and ask the user.`)
  }
  return parts.join(" ")
}

export function warnNote(hits: Hit[]): string {
  return hits
    .map(
      ({ contract }) =>
        `${TAG} WARN ${contract.id}: ${contract.description}${contract.message ? ` ${contract.message}` : ""}${anchorsText(contract)}`,
    )
    .join("\n")
}

// What the person at the keyboard reads, as toasts: plain words first (what the rule wants), the contract's name in
// brackets, never an argument value. Each starts with the plugin's name, so a person knows who spoke.

/**
 * A tip for the user (info contracts): what the rule asks of their request. The toast puts the plugin's name first;
 * the log line says what it was `on` (the level is the log's own field).
 */
export function tipText(hit: Hit, on?: string): string {
  return `tip${on ? ` on ${on}` : ""}: ${hit.contract.message ?? hit.contract.description} (${hit.contract.id})`
}

/** "a bash call", "an edit call": the article a tool's name takes in a sentence for the person. */
export function aTool(tool: string): string {
  return `${/^[aeiou]/i.test(tool) ? "an" : "a"} ${tool}`
}

/** The rules of a toast in plain words, each with its id: "Never rewrite shared history (no-force-push)". */
export function rulesInWords(hits: Hit[]): string {
  return hits.map(({ contract }) => `${clause(contract.description)} (${contract.id})`).join("; ")
}

export function blockToast(tool: string, hits: Hit[]): string {
  const rules = rulesInWords(hits)
  const lifts = hits.every((hit) => releaseOf(hit.contract) === "message")
    ? "Your next message lets the agent go on."
    : "The agent was told why; /anchor bypass <reason> lets one call through."
  return `semantic-anchors: blocked ${aTool(tool)} call: ${rules}. ${lifts}`
}

/** The line after a result that secrets were taken out of: what was withheld and from where, never the value. */
export function secretsNote(count: number, sources: string[]): string {
  const what = count === 1 ? "1 secret" : `${count} secrets`
  return `semantic-anchors took ${what} from ${sources.join(", ")} out of this result (protect-secrets): the person's secrets stay on this machine. Do not try to read them another way; use the variable or file by name, or ask the user.`
}

/** The person's toast, once a turn: which secrets the model did not see. */
export function secretsToast(tool: string, sources: string[]): string {
  return `semantic-anchors: secrets from ${sources.join(", ")} were taken out of ${aTool(tool)} result before the model read it.`
}

export function warnToast(tool: string, hits: Hit[]): string {
  const rules = rulesInWords(hits)
  return `semantic-anchors: the ${tool} call ran, with a note to the agent: ${rules}.`
}

// The bypass question. opencode's TUI draws a permission it does not know by its name alone (patterns and metadata
// are not shown), and its "Allow always" screen lists the request's `always` entries: so the name carries the facts,
// and the one `always` entry tells the person that "always" still means this one call. The entry is a sentence that
// never equals a later question's pattern (a contract id), so opencode asks again next time.

/** The permission every bypass question's name starts with; the config hook's rule BYPASS_RULE matches them all. */
export const BYPASS_PERMISSION = "anchor-bypass"
export const BYPASS_RULE = `${BYPASS_PERMISSION}*`
export const BYPASS_ALWAYS = "this one blocked call only: semantic-anchors asks again next time"
const REASON_SHOWN = 120 // characters of the model's reason in the question and the toasts

/** What the human decides on: which contract blocked which tool, the model's reason, the overrides left. */
export function bypassFacts(state: SessionState, reason: string, settings: Settings): string {
  const last = state.lastBlocked
  const blocked = last
    ? `contract${last.contracts.includes(",") ? "s" : ""} ${last.contracts} blocked ${aTool(last.tool)} call`
    : "no call was blocked yet in this session"
  const left = Math.max(0, settings.maxOverrides - state.overridesUsed)
  return `${blocked}; reason: ${oneLine(reason, REASON_SHOWN)}; ${left} of ${settings.maxOverrides} overrides left`
}

export function bypassQuestion(facts: string): string {
  return `${BYPASS_PERMISSION}: ${facts}`
}

export function bypassAskToast(facts: string): string {
  return `semantic-anchors: the agent asks you to let one blocked call run once: ${facts}. Answer in the dialog below.`
}

export function bypassGrantedToast(used: number, max: number): string {
  return `semantic-anchors: bypass granted once (override ${used} of ${max}): the next blocked call in this session may run once.`
}

/** A refusal, from the rules (bypassRefusal's words, without the model's backticks) or from the human (Reject). */
export function bypassRefusedToast(refusal?: string): string {
  const why = refusal
    ? refusal.replace(/^(Bypass refused|Error):\s*/, "").replaceAll("`", "")
    : "you did not allow it; the blocked call stays blocked."
  return `semantic-anchors: bypass refused: ${why}`
}

export function problemsToast(problems: readonly Problem[]): string {
  const errors = problems.filter((p) => p.severity === "error").length
  const first = problems[0]
  return (
    `semantic-anchors: ${problems.length} config problem${problems.length === 1 ? "" : "s"} ` +
    `(${errors} error${errors === 1 ? "" : "s"}), first: ${formatProblem(first)}; run /anchor status to see all.`
  )
}
