/**
 * The rule engine: active contracts per role, a call's verdict, a tool's plan, message contracts, the changing step
 * (`activeContracts`, `checkToolContract`, `toolPlan`, `checkMessageContract`, `isChangingStep`).
 */
import { EDIT_TOOLS, READING_TOOLS } from "../shared/tools"
import { runsHolds, runsScreenHolds } from "./command-patterns"
import { protectHolds } from "./protection"
import { MESSAGE_CAP, OWN_TOOLS } from "./constants"
import { REGEX_INPUT_CAP, capText } from "../shared/text"
import { anyMatch, oneLine, resolvePath } from "./names"
import {
  EDIT_TOOL_RES,
  MODE_RANK,
  contractsOfRole,
  lockedForAgent,
  type ArgMatcher,
  type Config,
  type Contract,
  type Mode,
  type ScreenPart,
} from "./model"
import { isMapping } from "./problems"
import { asText, pathForGlob, valueAt } from "./values"
import { NO_WORDS } from "../shared/bash-scan"
import { isReadOnlyCommand } from "../shared/bash-programs"
import { bashTouchesGuard, editTargets, isGuardPath } from "./integrity"
import type { SessionState } from "./sessions"
import type { EngineEnv, CallFacts } from "./types"

/**
 * The one decision on what applies to a session: the contracts of its role, plus the locked contracts its agent
 * gets under the global file's roles and presets. Why the agent too: a lock must hold whatever the project file says
 * about `roles` or `presets`, and a project that maps the agent to another role (or edits the role's preset) would
 * otherwise drop a contract the global file locked for it. The project file cannot change a locked contract itself
 * (lockRefusal), so its global definition is the one in `config.contracts`.
 */
export function activeContracts(config: Config, role: string, agent: string | undefined): Contract[] {
  const active = contractsOfRole(config, config.presets, role)
  for (const contract of lockedForAgent(config, agent)) if (!active.includes(contract)) active.push(contract)
  return active
}

export type Hit = { contract: Contract; detail: string }
export type Verdict = { mode: Mode | "allow"; hits: Hit[] }

/**
 * Whether a contract's trigger can apply to a tool of this name at all. The one place that reads tool names, so that
 * a ToolPlan can do it once per tool instead of once per call.
 */
function toolApplies(contract: Contract, tool: string): boolean {
  const trigger = contract.trigger
  switch (trigger.type) {
    case "tool":
    case "state":
      return anyMatch(trigger.tools, tool)
    case "boundary":
    case "spread":
      return anyMatch(EDIT_TOOL_RES, tool)
    case "integrity":
      return tool === "bash" || anyMatch(EDIT_TOOL_RES, tool)
    case "message":
      return false
  }
}

/** What one call is, worked out at most once however many contracts ask (the bash reading is the costly part). */

function isChanging(facts: CallFacts): boolean {
  facts.changing ??= isChangingStep(facts.tool, facts.args)
  return facts.changing
}

/**
 * What a contract says about one tool call; pure given the state (nothing is recorded here). The one place each
 * trigger decides: `/anchor test` and the examples call it, the real check calls checkApplicable through a ToolPlan.
 * Given `why`, it also says in words what held and what failed, matcher by matcher (`why?.push(...)` builds no text
 * when nobody asked).
 */
export function checkToolContract(
  contract: Contract,
  tool: string,
  args: unknown,
  state: SessionState,
  env: EngineEnv,
  why?: string[],
): string | undefined {
  if (toolApplies(contract, tool)) return checkApplicable(contract, { tool, args }, state, env, why)
  why?.push(notApplicableWhy(contract, tool))
  return undefined
}

/** Why a contract cannot apply to a tool of this name (toolApplies said no), for the explanations. */
function notApplicableWhy(contract: Contract, tool: string): string {
  const trigger = contract.trigger
  switch (trigger.type) {
    case "tool":
    case "state":
      return `tool ${tool}: not in tools ${trigger.toolsText}`
    case "boundary":
    case "spread":
      return `tool ${tool}: not an edit tool`
    case "integrity":
      return `tool ${tool}: neither an edit tool nor bash with a command`
    case "message":
      return "judged on user messages, not on tool calls"
  }
}

/**
 * checkToolContract for a contract known to apply to the tool's name (toolApplies): the real check's entry, through
 * a ToolPlan.
 */
function checkApplicable(
  contract: Contract,
  facts: CallFacts,
  state: SessionState,
  env: EngineEnv,
  why?: string[],
): string | undefined {
  const { tool, args } = facts
  const trigger = contract.trigger
  switch (trigger.type) {
    case "tool": {
      why?.push(`tool ${tool}: in tools ${trigger.toolsText}`)
      let held = true
      let ran: string | undefined
      if (trigger.runs) {
        ran = trigger.protect ? protectHolds(trigger, facts, env, why) : runsHolds(trigger.runs, args, env, why)
        if (ran === undefined && !why) return undefined
        held = ran !== undefined
      }
      for (const matcher of trigger.args) {
        const value = valueAt(args, matcher.keyPath)
        const holds = matcher.test(value, env.match)
        if (!holds && !why) return undefined
        why?.push(matcherWhy(matcher, value, holds, tool))
        held &&= holds
      }
      if (!held) return undefined // only when explaining: every matcher was said
      const seen = trigger.unlessSeen !== null && state.seenHits.has(trigger.unlessSeen)
      if (trigger.unlessSeen) why?.push(seenWhy(trigger.unlessSeen, seen))
      if (seen) return undefined
      const what = ran ?? `${tool} call matched`
      return trigger.unlessSeen
        ? `${what} and nothing seen in this session matches /${trigger.unlessSeen.source}/`
        : what
    }
    case "state": {
      if (!isChanging(facts)) {
        why?.push(`tool ${tool}: in tools ${trigger.toolsText}, but this call only looks: not a changing step`)
        return undefined
      }
      const count = state.steps.get(contract.id) ?? 0
      why?.push(stepsWhy(tool, trigger.toolsText, count, trigger.every))
      return count >= trigger.every
        ? `${count} changing steps since the user's last confirmation (limit ${trigger.every})`
        : undefined
    }
    case "boundary": {
      const outside = editTargets(args)
        .map((target) => pathForGlob(target, env.match))
        .filter((rel) => !anyMatch(trigger.allowed, rel))
      why?.push(
        outside.length
          ? `it writes ${outside.join(", ")}, outside ${trigger.globs.join(", ")}`
          : `no file it writes is outside ${trigger.globs.join(", ")}`,
      )
      return outside.length ? `${outside.join(", ")} is outside ${trigger.globs.join(", ")}` : undefined
    }
    case "spread": {
      const written = topDirs(args, env)
      if (written.length === 0) {
        why?.push("it writes into no top-level directory (files at the project root do not count)")
        return undefined
      }
      const dirs = new Set([...state.touchedDirs.keys(), ...written])
      why?.push(
        `with this call, ${dirs.size} top-level directories (${[...dirs].sort().join(", ")}) since the user's last confirmation, limit ${trigger.maxDirs}`,
      )
      return dirs.size > trigger.maxDirs
        ? `changes now span ${dirs.size} top-level directories (${[...dirs].sort().join(", ")}); limit ${trigger.maxDirs}`
        : undefined
    }
    case "integrity": {
      if (tool !== "bash") {
        // A link with an innocent name writes to its target: check the path as named and as resolved.
        const hit = editTargets(args).find((target) => {
          const abs = resolvePath(env.paths.directory, target, env.paths.home)
          return isGuardPath(abs, env.guard) || isGuardPath(env.realpath(abs), env.guard)
        })
        why?.push(hit ? `it writes ${hit}, a guard file` : "no file it writes is a guard file")
        return hit ? `${hit} is a guard file` : undefined
      }
      if (isMapping(args) && typeof args.command === "string") {
        const workdir = typeof args.workdir === "string" && args.workdir.trim() ? args.workdir : undefined
        const hit = bashTouchesGuard(args.command, env.paths, env.guard, env.realpath, workdir)
        why?.push(hit ? `the command touches ${hit}, a guard file or directory` : "the command touches no guard file")
        return hit ? `the command touches ${hit}, a guard file or directory` : undefined
      }
      why?.push(`tool ${tool}: neither an edit tool nor bash with a command`)
      return undefined
    }
    case "message":
      why?.push("judged on user messages, not on tool calls")
      return undefined
  }
}

// The explanations of checkToolContract and checkMessageContract: for `/anchor test` and the examples' problems.

/** Argument names of opencode's built-in tools (1.18), so a matcher on a name the tool lacks can say so. */
export const TOOL_ARGUMENTS: Record<string, readonly string[]> = {
  bash: ["command", "timeout", "description", "workdir"],
  read: ["filePath", "offset", "limit"],
  write: ["filePath", "content"],
  edit: ["filePath", "oldString", "newString", "replaceAll"],
  multiedit: ["filePath", "edits"],
  patch: ["patchText"],
  apply_patch: ["patchText"],
  glob: ["pattern", "path"],
  grep: ["pattern", "path", "include"],
  list: ["path", "ignore"],
  webfetch: ["url", "format", "timeout"],
  websearch: ["query", "numResults", "livecrawl", "type", "contextMaxCharacters"],
  task: ["prompt", "description", "subagent_type", "command"],
  todowrite: ["todos"],
  skill: ["name"],
}

/** A value as an explanation shows it: one line, bounded. */
export function shownValue(value: unknown): string {
  return JSON.stringify(oneLine(asText(value), 100))
}

function matcherWhy(matcher: ArgMatcher, value: unknown, holds: boolean, tool: string): string {
  const where = `args.${matcher.keyPath.join(".")}`
  const rule = `${matcher.negate ? "not " : ""}${matcher.text}`
  if (value === undefined) {
    // own keys only: a tool named "constructor" must not find Object's
    const known = Object.prototype.hasOwnProperty.call(TOOL_ARGUMENTS, tool) ? TOOL_ARGUMENTS[tool] : undefined
    const missing =
      known && !known.includes(matcher.keyPath[0])
        ? `the ${tool} tool has no argument "${matcher.keyPath[0]}" (its arguments: ${known.join(", ")})`
        : `the call has no argument "${matcher.keyPath.join(".")}"`
    return `${where}: ${missing}; ${rule} ${holds ? "holds" : "fails"} on a missing argument`
  }
  if (matcher.kind === "exists") return `${where}: present; ${rule} ${holds ? "holds" : "fails"}`
  const matched = holds !== matcher.negate
  return `${where}: ${matcher.text} ${matched ? "matched" : "did not match"} ${shownValue(value)}${matcher.negate ? `; with not: ${holds ? "holds" : "fails"}` : ""}`
}

function seenWhy(pattern: RegExp, seen: boolean): string {
  return seen
    ? `unlessSeen ${pattern}: seen in this session (a user message or tool result matched), so it does not fire`
    : `unlessSeen ${pattern}: nothing seen in this session matches yet`
}

function stepsWhy(tool: string, tools: string, count: number, every: number): string {
  const verdict = count >= every ? "the limit is reached" : `this call would be step ${count + 1} of ${every}`
  return `tool ${tool}: in tools ${tools}, a changing step; ${count} counted since the user's last confirmation, limit ${every}: ${verdict}`
}

/** Top-level directories an edit call writes into (files at the project root are not counted). */
function topDirs(args: unknown, env: EngineEnv): string[] {
  const dirs: string[] = []
  for (const target of editTargets(args)) {
    const rel = pathForGlob(target, env.match)
    if (rel.startsWith("/") || rel.startsWith("..") || !rel.includes("/")) continue
    dirs.push(rel.slice(0, rel.indexOf("/")))
  }
  return dirs
}

/**
 * A screen: the screen parts of several tool contracts' matchers on one argument, joined into one regex. When it
 * fails on a call, none of those matchers can hold, so none of those contracts fires: an allowed call with 50 regex
 * contracts on bash's `command` costs one regex test, not 50. When it holds, each contract is checked as usual.
 */
type Screen =
  | { keyPath: string[]; kind: ScreenPart["kind"]; regex: RegExp }
  // the command rules of a plan: their patterns' `program subcommand` keys and programs (runsScreenHolds)
  | { kind: "runs"; keys: Set<string>; programs: string[] }

function screenHolds(screen: Screen, args: unknown, env: EngineEnv): boolean {
  if (screen.kind === "runs") return runsScreenHolds(screen.keys, screen.programs, args)
  const value = valueAt(args, screen.keyPath)
  if (value === undefined) return false // a regex or glob matcher never holds on a missing argument
  if (screen.kind === "regex") return screen.regex.test(capText(asText(value), REGEX_INPUT_CAP))
  return typeof value === "string" && screen.regex.test(pathForGlob(value, env.match))
}

/**
 * What applies to one tool name, worked out once per list of active contracts and tool name (Anchors.planFor): the
 * contracts whose trigger can apply (in the active order), the screen each is behind (or -1), and the state
 * contracts that count the call as a step.
 */
export type ToolPlan = {
  edit: boolean // an edit tool: its targets count for the spread
  contracts: Contract[]
  screenOf: number[]
  screens: Screen[]
  unscreened: Contract[] // behind no screen, in the active order: all that is checked when no screen holds
  counting: string[] // the ids of the state contracts that count the call as a step (never written to)
}

export function toolPlan(active: readonly Contract[], tool: string): ToolPlan {
  const contracts = active.filter((contract) => toolApplies(contract, tool))
  const groups = new Map<string, { keyPath: string[]; part: ScreenPart; sources: string[]; members: number[] }>()
  const runs = { keys: new Set<string>(), programs: new Set<string>(), members: [] as number[] }
  contracts.forEach((contract, index) => {
    if (contract.trigger.type !== "tool") return
    if (contract.trigger.runs) {
      // a command rule is behind the plan's one runs screen: it can fire only when one of its programs runs
      for (const pattern of contract.trigger.runs) {
        for (const key of pattern.keys) runs.keys.add(key)
        for (const program of pattern.programs) runs.programs.add(program)
      }
      for (const key of contract.trigger.protect?.keys ?? NO_WORDS) runs.keys.add(key)
      runs.members.push(index)
      return
    }
    const matcher = contract.trigger.args.find((m) => m.screen)
    if (!matcher?.screen) return
    const part = matcher.screen
    const key = `${part.kind}\0${part.flags}\0${matcher.keyPath.join("\0")}`
    let group = groups.get(key)
    if (!group) groups.set(key, (group = { keyPath: matcher.keyPath, part, sources: [], members: [] }))
    group.sources.push(`(?:${part.source})`)
    group.members.push(index)
  })
  const screenOf = contracts.map(() => -1)
  const screens: Screen[] = []
  for (const { keyPath, part, sources, members } of groups.values()) {
    if (members.length < 2) continue // one matcher screens nothing
    let regex: RegExp
    try {
      regex = new RegExp(sources.join("|"), part.flags)
    } catch {
      continue // not expected (each part compiled alone); without a screen the contracts are checked one by one
    }
    for (const index of members) screenOf[index] = screens.length
    screens.push({ keyPath, kind: part.kind, regex })
  }
  if (runs.members.length > 1) {
    for (const index of runs.members) screenOf[index] = screens.length
    screens.push({ kind: "runs", keys: runs.keys, programs: [...runs.programs] })
  }
  const counting = contracts.filter((contract) => contract.trigger.type === "state").map((contract) => contract.id)
  const unscreened = contracts.filter((_, index) => screenOf[index] < 0)
  return { edit: anyMatch(EDIT_TOOL_RES, tool), contracts, screenOf, screens, unscreened, counting }
}

/**
 * The verdict on one call from its tool's plan. The screens are tested first: when none holds (the common case), only
 * the contracts behind no screen are looked at, so 50 screened contracts cost one test, not a pass over 50. An
 * allowed call allocates nothing but its empty verdict.
 */
export function evaluatePlan(plan: ToolPlan, facts: CallFacts, state: SessionState, env: EngineEnv): Verdict {
  let screened: boolean[] | undefined
  for (let s = 0; s < plan.screens.length; s++)
    if (screenHolds(plan.screens[s], facts.args, env)) (screened ??= plan.screens.map(() => false))[s] = true
  const contracts = screened ? plan.contracts : plan.unscreened
  let hits: Hit[] | undefined
  let mode: Mode | "allow" = "allow"
  for (let i = 0; i < contracts.length; i++) {
    const contract = contracts[i]
    if (screened) {
      const screen = plan.screenOf[i]
      if (screen >= 0 && !screened[screen]) continue
    }
    const detail = checkApplicable(contract, facts, state, env)
    if (detail === undefined) continue
    const effective = effectiveMode(contract)
    ;(hits ??= []).push({ contract: { ...contract, mode: effective }, detail })
    if (MODE_RANK[effective] > MODE_RANK[mode]) mode = effective
  }
  return { mode, hits: hits ?? NO_HITS }
}

const NO_HITS: Hit[] = []

/** A message trigger cannot block (that would fail the user's prompt): it warns instead. */
export function effectiveMode(contract: Contract): Mode {
  return contract.trigger.type === "message" && contract.mode === "block" ? "warn" : contract.mode
}

/**
 * Tools that only look, plan or delegate: never a changing step. READING_TOOLS (shared with loop-guard), the plugin's
 * own, and `task`: a subagent's own changes count for its root session, the `task` call that starts it does not.
 * Any other tool, an MCP tool included, may change something.
 */
const LOOKING_TOOLS = new Set([...OWN_TOOLS, ...READING_TOOLS, "task"])

/** Whether a call counts as a changing step: an edit tool, a bash command that is not read-only, an unknown tool. */
function isChangingStep(tool: string, args: unknown): boolean {
  if (EDIT_TOOLS.includes(tool)) return true
  if (tool === "bash") return !(isMapping(args) && typeof args.command === "string" && isReadOnlyCommand(args.command))
  return !LOOKING_TOOLS.has(tool)
}

/** A call that may make or remove a link: a changing step that is not an edit tool (ResolvedDirs forgets then). */
export function mayChangeLinks(facts: CallFacts): boolean {
  return !EDIT_TOOLS.includes(facts.tool) && isChanging(facts)
}

/**
 * Counts an allowed changing call at once (so parallel calls of one step never pass the limit together) and keeps
 * what it counted until the call's end is known: `settle` when it ran, `release` when it did not (blocked by another
 * plugin, denied by opencode's permissions, or failed). Blocked calls never get here.
 */
export function reserve(state: SessionState, callID: string, plan: ToolPlan, facts: CallFacts, env: EngineEnv): void {
  if ((plan.counting.length === 0 && !plan.edit) || !isChanging(facts)) return
  for (const id of plan.counting) state.steps.set(id, (state.steps.get(id) ?? 0) + 1)
  const dirs = plan.edit ? topDirs(facts.args, env) : NO_WORDS
  for (const dir of dirs) state.touchedDirs.set(dir, (state.touchedDirs.get(dir) ?? 0) + 1)
  state.reserved.set(callID, { steps: plan.counting, dirs })
}

/** The call ran: what it was counted for stays. */
export function settle(state: SessionState, callID: string): void {
  state.reserved.delete(callID)
}

/** The call did not run or failed: what it was counted for is given back. */
export function release(state: SessionState, callID: string): void {
  const counted = state.reserved.peek(callID)
  if (!counted) return
  state.reserved.delete(callID)
  for (const id of counted.steps) state.steps.set(id, Math.max(0, (state.steps.get(id) ?? 0) - 1))
  for (const dir of counted.dirs) {
    const left = (state.touchedDirs.get(dir) ?? 0) - 1
    if (left > 0) state.touchedDirs.set(dir, left)
    else state.touchedDirs.delete(dir)
  }
}

export function evaluateMessage(contracts: readonly Contract[], text: string): Hit[] {
  const hits: Hit[] = []
  for (const contract of contracts) {
    if (checkMessageContract(contract, text))
      hits.push({ contract: { ...contract, mode: effectiveMode(contract) }, detail: "message" })
  }
  return hits
}

/** Whether a message contract fires on a user's text; given `why`, it says why in words (as checkToolContract). */
export function checkMessageContract(contract: Contract, text: string, why?: string[]): boolean {
  const trigger = contract.trigger
  if (trigger.type !== "message") {
    why?.push("judged on tool calls, not on user messages")
    return false
  }
  const length = text.trim().length
  if (length < trigger.minLength) {
    why?.push(`minLength ${trigger.minLength}: the message has ${length} characters, too short to be judged`)
    return false
  }
  if (trigger.minLength > 0) why?.push(`minLength ${trigger.minLength}: the message has ${length} characters`)
  const capped = capText(text, MESSAGE_CAP)
  if (trigger.pattern) {
    const matched = trigger.pattern.test(capped)
    why?.push(`pattern ${trigger.pattern}: ${matched ? "matched" : "did not match"}`)
    if (!matched) return false
  }
  if (trigger.unless) {
    const matched = trigger.unless.test(capped)
    why?.push(`unless ${trigger.unless}: ${matched ? "matched, so it does not fire" : "did not match"}`)
    if (matched) return false
  }
  return true
}
