/**
 * Every key of a contract file, with file, key path and fix: matchers, triggers (a `runs` list compiled at
 * `trigger.runs[i]`), examples, presets, roles, settings, locks.
 */
import {
  PROTECTION_IDS,
  ANCHOR_IDS,
  IN_EVERY_ROLE,
  MODES,
  ROLES,
  SCHEMA_KEYS,
  TRIGGER_KEYS_BY_TYPE,
  contractsOfRole,
  copyView,
  knownRoles,
  lockedForAgent,
  roleForAgent,
  toolsText,
  type ArgMatcher,
  type Config,
  type Contract,
  type Example,
  type Examples,
  type Lock,
  type Mode,
  type ScreenPart,
  type Trigger,
} from "./model"
import { REGEX_INPUT_CAP, capText, regexHazard } from "../shared/text"
import { anyMatch, closest, didYouMean, globOutline, globToRegExp } from "./names"
import type { MatchContext, CommandPattern, EngineEnv } from "./types"
import { Reporter, describe, isMapping, join } from "./problems"
import { asText, pathForGlob, stringList } from "./values"
import { parseCommandPattern } from "./command-patterns"
import { checkExamples } from "./examples"

const ALLOWED_FLAGS = /^[imsu]*$/ // g and y would make repeated tests stateful

/** Compiles a user regex, or reports why not. A regex that can backtrack exponentially (regexHazard) is refused. */
function compileRegex(
  source: unknown,
  flags: unknown,
  keyPath: string,
  flagsPath: string,
  r: Reporter,
): RegExp | null | undefined {
  if (typeof source !== "string" || source === "") {
    r.error(keyPath, `must be a non-empty string holding a regular expression (got ${describe(source)})`)
    return undefined
  }
  let flagText = ""
  if (flags !== undefined) {
    if (typeof flags !== "string" || !ALLOWED_FLAGS.test(flags)) {
      r.error(
        flagsPath,
        `must be a string of regex flags from "imsu" (got ${describe(flags)}); g and y make repeated tests stateful`,
      )
      return undefined
    }
    flagText = flags
  }
  try {
    const compiled = new RegExp(source, flagText)
    const hazard = regexHazard(source)
    if (hazard) {
      r.error(
        keyPath,
        `${hazard}. The regex is refused: capping its input at ${REGEX_INPUT_CAP} characters does not bound this`,
      )
      return undefined
    }
    return compiled
  } catch (error) {
    const reason = String((error as Error).message ?? error).replace(
      /^Invalid regular expression:\s*(\/.*\/[a-z]*:\s*)?/,
      "",
    )
    r.error(keyPath, `invalid regular expression (${reason})`)
    return undefined
  }
}

function compileMatcher(key: string, spec: unknown, keyPath: string, r: Reporter): ArgMatcher | undefined {
  if (!isMapping(spec)) {
    r.error(keyPath, `must be a mapping with one of ${SCHEMA_KEYS.matcherKinds.join(", ")} (got ${describe(spec)})`)
    return undefined
  }
  r.unknownKeys(spec, SCHEMA_KEYS.matcher, keyPath)
  const kinds = SCHEMA_KEYS.matcherKinds.filter((kind) => spec[kind] !== undefined)
  if (kinds.length !== 1) {
    r.error(
      keyPath,
      kinds.length === 0
        ? `needs one of ${SCHEMA_KEYS.matcherKinds.join(", ")}`
        : `has ${kinds.join(" and ")}; use one matcher per argument (split the rule into two contracts)`,
    )
    return undefined
  }
  if (spec.not !== undefined && typeof spec.not !== "boolean") {
    r.error(join(keyPath, "not"), `must be true or false (got ${describe(spec.not)})`)
    return undefined
  }
  const negate = spec.not === true
  if (spec.flags !== undefined && kinds[0] !== "regex")
    r.warn(join(keyPath, "flags"), "is used only with regex; it is ignored")
  const kind = kinds[0]
  const value = spec[kind]
  const argPath = key.split(".")
  let test: ((present: unknown, ctx: MatchContext) => boolean) | undefined
  let screen: ScreenPart | undefined
  switch (kind) {
    case "exists":
      if (typeof value !== "boolean") {
        r.error(join(keyPath, kind), `must be true or false (got ${describe(value)})`)
        return undefined
      }
      // The one matcher a missing argument can satisfy.
      return {
        keyPath: argPath,
        test: (present) => ((present !== undefined) === value) !== negate,
        kind,
        text: `exists: ${value}`,
        negate,
      }
    case "equals":
      if (typeof value !== "string" && typeof value !== "number" && typeof value !== "boolean") {
        r.error(join(keyPath, kind), `must be a string, number or boolean (got ${describe(value)})`)
        return undefined
      }
      test = (present) => present === value || (typeof present !== "object" && String(present) === String(value))
      break
    case "regex": {
      const regex = compileRegex(value, spec.flags, join(keyPath, kind), join(keyPath, "flags"), r)
      if (!regex) return undefined
      test = (present) => regex.test(capText(asText(present), REGEX_INPUT_CAP))
      // Inside a joined regex a backreference (`\1`, `\k<name>`) would point at another matcher's group, and a group
      // name may be used once: a matcher with either is not screened.
      if (!negate && !/\\[1-9k]|\(\?<[^=!]/.test(regex.source))
        screen = { kind: "regex", source: regex.source, flags: regex.flags }
      break
    }
    case "glob": {
      const globs = stringList(value, join(keyPath, kind), r, "globs")
      if (!globs) return undefined
      // One regex for all the matcher's globs: one test instead of one per glob.
      const regex = new RegExp(globs.map((glob) => `(?:${globToRegExp(glob).source})`).join("|"))
      test = (present, ctx) => typeof present === "string" && regex.test(pathForGlob(present, ctx))
      if (!negate) screen = { kind: "glob", source: globs.map(globOutline).join("|"), flags: "" }
      break
    }
    case "contains":
    case "startsWith":
      if (typeof value !== "string") {
        r.error(join(keyPath, kind), `must be a string (got ${describe(value)})`)
        return undefined
      }
      test =
        kind === "contains"
          ? (present) => asText(present).includes(value)
          : (present) => asText(present).startsWith(value)
      break
  }
  const check = test!
  // A missing argument makes every matcher but `exists` false, `not` or not.
  return {
    keyPath: argPath,
    test: (present, ctx) => present !== undefined && check(present, ctx) !== negate,
    kind,
    text: `${kind} ${matcherValueText(kind, value, spec.flags)}`,
    negate,
    screen,
  }
}

/** A matcher's value as the explanations show it: `/push/i`, `secrets/**, **\/*.pem`, `"make"`. */
function matcherValueText(kind: string, value: unknown, flags: unknown): string {
  if (kind === "regex") return `/${value}/${flags ?? ""}`
  if (kind === "glob") return [value].flat().join(", ")
  return JSON.stringify(value)
}

function toolGlobs(value: unknown, keyPath: string, r: Reporter): RegExp[] | undefined {
  if (value === undefined) return [/^/]
  const globs = stringList(value, keyPath, r, "tool-name globs")
  return globs?.map((glob) => globToRegExp(glob))
}

/**
 * `runs:`: one command pattern or a list (any one matches), each read by parseCommandPattern. A pattern that cannot
 * be read is an error at its own key path (`trigger.runs[1]`), which disables the contract.
 */
function compileRuns(value: unknown, keyPath: string, r: Reporter): CommandPattern[] | undefined {
  const list = typeof value === "string" ? [value] : value
  if (!Array.isArray(list) || list.length === 0) {
    r.error(
      keyPath,
      `must be a non-empty list of commands as you would type them, e.g. ["git push --force", "git push +*"] (got ${Array.isArray(value) ? "an empty list" : describe(value)})`,
    )
    return undefined
  }
  const patterns: CommandPattern[] = []
  list.forEach((item, i) => {
    const where = typeof value === "string" ? keyPath : join(keyPath, i)
    if (typeof item !== "string") {
      r.error(where, `must be a command as you would type it, e.g. "git push --force" (got ${describe(item)})`)
      return
    }
    const parsed = parseCommandPattern(item)
    if (typeof parsed === "string") r.error(where, parsed)
    else patterns.push(parsed)
  })
  return patterns.length === list.length ? patterns : undefined
}

function compileTrigger(spec: unknown, keyPath: string, r: Reporter, mode: Mode | undefined): Trigger | undefined {
  if (!isMapping(spec)) {
    r.error(keyPath, `must be a mapping with a type (tool, message or state) (got ${describe(spec)})`)
    return undefined
  }
  const type = spec.type
  if (typeof type !== "string" || !(SCHEMA_KEYS.triggerTypes as readonly string[]).includes(type)) {
    r.error(
      join(keyPath, "type"),
      `must be one of tool, message, state (got ${describe(type)})${typeof type === "string" ? didYouMean(type, SCHEMA_KEYS.triggerTypes) : ""}`,
    )
    return undefined
  }
  for (const key of Object.keys(spec)) {
    if ((TRIGGER_KEYS_BY_TYPE[type] ?? []).includes(key)) continue
    if ((SCHEMA_KEYS.trigger as readonly string[]).includes(key))
      r.warn(join(keyPath, key), `is not used by a trigger of type ${type}; it is ignored`)
    else
      r.warn(
        join(keyPath, key),
        `unknown key "${key}"${didYouMean(key, TRIGGER_KEYS_BY_TYPE[type]) || ` (allowed here: ${TRIGGER_KEYS_BY_TYPE[type].join(", ")})`}; it is ignored`,
      )
  }
  const errorsBefore = r.errors
  const failed = () => r.errors > errorsBefore
  const flagsPath = join(keyPath, "flags")
  const optionalRegex = (key: string): RegExp | null | undefined =>
    spec[key] === undefined ? null : compileRegex(spec[key], spec.flags, join(keyPath, key), flagsPath, r)

  if (type === "tool") {
    // `runs:` is about bash commands: without `tools` it applies to bash alone
    const toolsGiven = spec.tools !== undefined || spec.runs === undefined ? spec.tools : ["bash"]
    const tools = toolGlobs(toolsGiven, join(keyPath, "tools"), r)
    const runs = spec.runs === undefined ? null : compileRuns(spec.runs, join(keyPath, "runs"), r)
    if (runs && spec.tools !== undefined && tools && !anyMatch(tools, "bash"))
      r.warn(
        join(keyPath, "tools"),
        `has no bash, and runs is judged on the command a bash call runs: add bash to tools (a tool of another name fires only when it has a command argument)`,
      )
    const args: ArgMatcher[] = []
    if (spec.args !== undefined) {
      if (!isMapping(spec.args))
        r.error(join(keyPath, "args"), `must be a mapping of argument name to matcher (got ${describe(spec.args)})`)
      else {
        for (const [key, matcher] of Object.entries(spec.args)) {
          const compiled = compileMatcher(key, matcher, join(join(keyPath, "args"), key), r)
          if (compiled) args.push(compiled)
        }
      }
    }
    const unlessSeen = optionalRegex("unlessSeen")
    if (failed() || !tools || unlessSeen === undefined || runs === undefined) return undefined
    return { type, tools, toolsText: toolsText(toolsGiven), runs, args, unlessSeen }
  }
  if (type === "message") {
    const pattern = optionalRegex("pattern")
    const unless = optionalRegex("unless")
    let minLength = 0
    if (spec.minLength !== undefined) {
      if (!Number.isInteger(spec.minLength) || (spec.minLength as number) < 0) {
        r.error(join(keyPath, "minLength"), `must be a whole number >= 0 (got ${describe(spec.minLength)})`)
      } else minLength = spec.minLength as number
    }
    if (spec.pattern === undefined && spec.unless === undefined) {
      r.error(
        keyPath,
        "a message trigger needs pattern (fires when the user's text matches) or unless (fires when it does not)",
      )
    }
    if (mode === "block") {
      r.warn(
        join(keyPath, "type"),
        "a user message cannot be blocked (that would fail the user's prompt); this contract warns instead",
      )
    }
    if (failed() || pattern === undefined || unless === undefined) return undefined
    return { type, pattern, unless, minLength }
  }
  // state
  const tools = toolGlobs(spec.tools, join(keyPath, "tools"), r)
  if (!Number.isInteger(spec.every) || (spec.every as number) < 1) {
    r.error(
      join(keyPath, "every"),
      `must be a whole number >= 1: how many matching calls pass before the human must confirm (got ${describe(spec.every)})`,
    )
    return undefined
  }
  if (failed() || !tools) return undefined
  return { type: "state", every: spec.every as number, tools, toolsText: toolsText(spec.tools) }
}

/** The shape of `examples` (what each example claims is checked later, by checkExamples, once the trigger is known). */
function compileExamples(spec: unknown, keyPath: string, r: Reporter): Examples | undefined {
  if (!isMapping(spec)) {
    r.error(keyPath, `must be a mapping with fires and/or passes, each a list of examples (got ${describe(spec)})`)
    return undefined
  }
  r.unknownKeys(spec, SCHEMA_KEYS.examples, keyPath)
  const errorsBefore = r.errors
  const examples: Examples = { fires: [], passes: [] }
  for (const key of SCHEMA_KEYS.examples) {
    const list = spec[key]
    if (list === undefined) continue
    if (!Array.isArray(list)) {
      r.error(
        join(keyPath, key),
        `must be a list of examples (got ${describe(list)}); write each as "- { tool: bash, args: { command: ... } }"`,
      )
      continue
    }
    list.forEach((item, i) => {
      const example = compileExample(item, join(join(keyPath, key), i), r)
      if (example) examples[key].push(example)
    })
  }
  return r.errors > errorsBefore ? undefined : examples
}

function compileExample(item: unknown, keyPath: string, r: Reporter): Example | undefined {
  if (!isMapping(item)) {
    r.error(keyPath, `must be a mapping: { tool: <name>, args: {...} } or { message: "..." } (got ${describe(item)})`)
    return undefined
  }
  r.unknownKeys(item, SCHEMA_KEYS.example, keyPath)
  if (item.message !== undefined) {
    if (item.tool !== undefined) {
      r.error(keyPath, "has both tool and message: an example is either a tool call or a user message")
      return undefined
    }
    if (typeof item.message !== "string") {
      r.error(join(keyPath, "message"), `must be the text of a user message (got ${describe(item.message)})`)
      return undefined
    }
    return { message: item.message }
  }
  const errorsBefore = r.errors
  if (typeof item.tool !== "string" || item.tool === "")
    r.error(
      join(keyPath, "tool"),
      item.tool === undefined
        ? "is required: the name of the tool called (e.g. bash), or write the example as { message: ... }"
        : `must be a tool name (got ${describe(item.tool)})`,
    )
  if (item.args !== undefined && !isMapping(item.args))
    r.error(join(keyPath, "args"), `must be a mapping of argument name to value (got ${describe(item.args)})`)
  if (item.steps !== undefined && (!Number.isInteger(item.steps) || (item.steps as number) < 0))
    r.error(
      join(keyPath, "steps"),
      `must be a whole number >= 0: the changing steps counted before this call (got ${describe(item.steps)})`,
    )
  if (item.seen !== undefined && typeof item.seen !== "string")
    r.error(join(keyPath, "seen"), `must be a text seen earlier in the session (got ${describe(item.seen)})`)
  if (r.errors > errorsBefore) return undefined
  return {
    tool: item.tool as string,
    args: item.args ?? {},
    steps: (item.steps as number | undefined) ?? 0,
    seen: item.seen as string | undefined,
  }
}

/** Which layer a file is: the project file cannot change what the global file locked. */
export type FileLayer = "global" | "project"

/** Why a file may not change a locked contract, naming who locked it and who may change it; undefined: it may. */
function lockRefusal(id: string, lock: Lock, layer: FileLayer): string | undefined {
  if (lock.by === "plugin")
    return `contract "${id}" is locked by the plugin; no file can change or disable it. Remove this entry`
  if (layer === "global") return undefined
  return `contract "${id}" is locked by the global file (${lock.file}); the project file cannot change or disable it. Remove this entry, or change it in the global file`
}

function applyContracts(config: Config, list: unknown, layer: FileLayer, r: Reporter, env: EngineEnv): void {
  if (!Array.isArray(list)) {
    r.error("contracts", `must be a list of contracts (got ${describe(list)}); start each one with "- id: ..."`)
    return
  }
  const seen = new Map<string, number>()
  list.forEach((entry, index) => {
    const keyPath = `contracts[${index}]`
    if (!isMapping(entry)) {
      r.error(keyPath, `must be a mapping with id, description, mode and trigger (got ${describe(entry)})`)
      return
    }
    const errorsBefore = r.errors
    r.unknownKeys(entry, SCHEMA_KEYS.contract, keyPath)
    const id = entry.id
    if (typeof id !== "string" || !/^[a-z0-9-]+$/.test(id)) {
      const suggestion =
        typeof id === "string"
          ? id
              .toLowerCase()
              .replace(/[^a-z0-9-]+/g, "-")
              .replace(/^-+|-+$/g, "")
          : ""
      r.error(
        join(keyPath, "id"),
        id === undefined
          ? `is required: a name of a-z, 0-9 and "-", unique in the file`
          : `must use only a-z, 0-9 and "-" (got ${describe(id)})${suggestion ? `; try "${suggestion}"` : ""}`,
      )
      return
    }
    if (seen.has(id)) {
      r.error(
        join(keyPath, "id"),
        `duplicate id "${id}" (also contracts[${seen.get(id)}]); give each contract its own id`,
      )
      return
    }
    seen.set(id, index)
    const existing = config.contracts.get(id)
    const refusal = existing?.lockedBy ? lockRefusal(id, existing.lockedBy, layer) : undefined
    if (refusal) {
      r.error(keyPath, refusal)
      return
    }
    const mode = entry.mode
    if (mode !== undefined && (typeof mode !== "string" || !(MODES as readonly string[]).includes(mode))) {
      r.error(
        join(keyPath, "mode"),
        `must be one of block, warn, info (got ${describe(mode)})${typeof mode === "string" ? didYouMean(mode, MODES) : ""}`,
      )
    }
    const validMode = (MODES as readonly unknown[]).includes(mode) ? (mode as Mode) : undefined
    for (const key of ["description", "message"] as const) {
      const value = entry[key]
      if (value !== undefined && (typeof value !== "string" || value.trim() === ""))
        r.error(join(keyPath, key), `must be a non-empty string (got ${describe(value)})`)
    }
    for (const key of ["enabled", "locked"] as const) {
      if (entry[key] !== undefined && typeof entry[key] !== "boolean")
        r.error(join(keyPath, key), `must be true or false (got ${describe(entry[key])})`)
    }
    if (entry.locked !== undefined && layer === "project")
      r.warn(join(keyPath, "locked"), "is honoured only in the global file; it is ignored here")
    let anchorRefs: string[] | undefined
    if (entry.anchorRefs !== undefined) {
      if (!Array.isArray(entry.anchorRefs) || entry.anchorRefs.some((ref) => typeof ref !== "string")) {
        r.error(
          join(keyPath, "anchorRefs"),
          `must be a list of Semantic-Anchors ids (got ${describe(entry.anchorRefs)})`,
        )
      } else {
        anchorRefs = entry.anchorRefs as string[]
        anchorRefs.forEach((ref, i) => {
          if (!ANCHOR_IDS.has(ref))
            r.warn(
              join(join(keyPath, "anchorRefs"), i),
              `unknown Semantic-Anchors id "${ref}" (closest: "${closest(ref, ANCHOR_IDS)}")`,
            )
        })
      }
    }
    let roles: string[] | undefined
    if (entry.roles !== undefined) {
      if (
        !Array.isArray(entry.roles) ||
        entry.roles.length === 0 ||
        entry.roles.some((role) => typeof role !== "string" || role === "")
      ) {
        r.error(
          join(keyPath, "roles"),
          `must be a non-empty list of role names or ["*"] (got ${describe(entry.roles)}); leave it out for every role`,
        )
      } else roles = entry.roles as string[]
    }
    const trigger =
      entry.trigger === undefined
        ? undefined
        : compileTrigger(entry.trigger, join(keyPath, "trigger"), r, validMode ?? existing?.mode)
    const examples =
      entry.examples === undefined ? undefined : compileExamples(entry.examples, join(keyPath, "examples"), r)
    if (!existing) {
      for (const key of ["description", "mode", "trigger"] as const) {
        if (entry[key] === undefined)
          r.error(join(keyPath, key), `is required for a new contract ("${id}" is not a built-in or earlier contract)`)
      }
    }
    if (r.errors > errorsBefore) return // an invalid contract disables only itself
    const merged: Contract = {
      ...(existing ?? { anchorRefs: [], roles: null, enabled: true, lockedBy: null, builtin: false }),
      id,
      description: (entry.description as string | undefined) ?? existing?.description ?? "",
      mode: validMode ?? existing!.mode,
      trigger: trigger ?? existing!.trigger,
      origin: r.file,
    } as Contract
    if (entry.message !== undefined) merged.message = entry.message as string
    if (anchorRefs) merged.anchorRefs = anchorRefs
    if (roles) merged.roles = roles
    if (entry.enabled !== undefined) merged.enabled = entry.enabled as boolean
    if (entry.locked !== undefined && layer === "global")
      merged.lockedBy = entry.locked ? { by: "global", file: r.file } : null
    // Examples were written for a trigger: a new trigger without examples of its own drops the earlier ones.
    if (examples) merged.examples = examples
    else if (trigger) delete merged.examples
    const outcome = existing ? "this change is left out, the earlier definition stays" : "the contract is left out"
    if (merged.examples && !checkExamples(merged, join(keyPath, "examples"), outcome, env, r)) return
    config.contracts.set(id, merged)
  })
}

function applyPresets(config: Config, presets: unknown, r: Reporter): void {
  if (!isMapping(presets)) {
    r.error("presets", `must be a mapping of role to a list of contract ids (got ${describe(presets)})`)
    return
  }
  for (const [role, ids] of Object.entries(presets)) {
    const keyPath = join("presets", role)
    if (!Array.isArray(ids) || ids.some((id) => typeof id !== "string")) {
      r.error(keyPath, `must be a list of contract ids (got ${describe(ids)}); the role keeps its previous preset`)
      continue
    }
    const kept: string[] = []
    ;(ids as string[]).forEach((id, i) => {
      if (config.contracts.has(id)) kept.push(id)
      else
        r.warn(
          join(keyPath, i),
          `unknown contract id "${id}" (closest: "${closest(id, config.contracts.keys())}"); it is left out`,
        )
    })
    if (!(ROLES as readonly string[]).includes(role)) {
      const hint = didYouMean(role, ROLES)
      if (hint) r.warn(keyPath, `"${role}" is not a Semantic-Anchors role${hint}; it is kept as a custom role`)
    }
    config.presets.set(role, kept)
  }
}

function checkRoleName(config: Config, role: string, keyPath: string, r: Reporter): void {
  if (!knownRoles(config).has(role)) {
    r.warn(
      keyPath,
      `unknown role "${role}" (closest: "${closest(role, knownRoles(config))}"); with no preset it gets only contracts for every role`,
    )
  }
}

function applyRoles(config: Config, roles: unknown, r: Reporter): void {
  if (!isMapping(roles)) {
    r.error("roles", `must be a mapping with default and agents (got ${describe(roles)})`)
    return
  }
  r.unknownKeys(roles, SCHEMA_KEYS.roles, "roles")
  if (roles.default !== undefined) {
    if (typeof roles.default !== "string" || roles.default === "")
      r.error("roles.default", `must be a role name (got ${describe(roles.default)})`)
    else {
      checkRoleName(config, roles.default, "roles.default", r)
      config.defaultRole = roles.default
    }
  }
  if (roles.agents !== undefined) {
    if (!isMapping(roles.agents)) {
      r.error("roles.agents", `must be a mapping of opencode agent name to role (got ${describe(roles.agents)})`)
      return
    }
    config.agents = new Map(config.agents)
    for (const [agent, role] of Object.entries(roles.agents)) {
      if (typeof role !== "string" || role === "") {
        r.error(join("roles.agents", agent), `must be a role name (got ${describe(role)})`)
        continue
      }
      checkRoleName(config, role, join("roles.agents", agent), r)
      config.agents.set(agent, role)
    }
  }
}

/** The largest settings.maxOverrides a file may set. */
const MAX_OVERRIDES_SETTING = 1000

/**
 * Locks hold (activeContracts keeps them in force); this reports each project `roles` or `presets` entry that tries
 * to drop a locked contract, so the project's author learns it has no effect there. The rest of the entry applies.
 */
function reportDroppedLocks(config: Config, r: Reporter): void {
  const lockedBy = (contract: Contract) =>
    contract.lockedBy?.by === "global" ? `the global file (${contract.lockedBy.file})` : "the plugin"
  const dropped = (locked: Contract[], kept: Contract[]) => locked.filter((contract) => !kept.includes(contract))
  // A lock that every role keeps (the plugin's own, on IN_EVERY_ROLE) cannot be dropped: with no other lock there is
  // nothing to report, and a load need not work out every role's contracts twice to find that out.
  let otherLocks = false
  for (const contract of config.contracts.values())
    if (contract.lockedBy && contract.id !== IN_EVERY_ROLE) otherLocks = true
  if (!otherLocks) return
  const global = config.globalView
  for (const role of new Set([...global.presets.keys(), ...config.presets.keys()])) {
    const locked = contractsOfRole(config, global.presets, role).filter((contract) => contract.lockedBy)
    for (const contract of dropped(locked, contractsOfRole(config, config.presets, role)))
      r.error(
        join("presets", role),
        `leaves out contract "${contract.id}", locked by ${lockedBy(contract)}; it stays in force for every agent with role "${role}" under the global file's roles. Add it to this preset, or unlock the contract in the global file`,
      )
  }
  const remapped = (agent: string | undefined) => roleForAgent(config, agent) !== roleForAgent(global, agent)
  const droppedFor = (agent: string | undefined) =>
    dropped(lockedForAgent(config, agent), contractsOfRole(config, config.presets, roleForAgent(config, agent)))
  for (const agent of config.agents.keys()) {
    if (!remapped(agent)) continue
    for (const contract of droppedFor(agent))
      r.error(
        join("roles.agents", agent),
        `maps agent "${agent}" to "${roleForAgent(config, agent)}", which would drop contract "${contract.id}", locked by ${lockedBy(contract)}; it stays in force for this agent. Remove the mapping, or unlock the contract in the global file`,
      )
  }
  if (!remapped(undefined)) return
  for (const contract of droppedFor(undefined))
    r.error(
      "roles.default",
      `gives the agents not in roles.agents the role "${config.defaultRole}", which would drop contract "${contract.id}", locked by ${lockedBy(contract)}; it stays in force for those agents. Remove roles.default here, or unlock the contract in the global file`,
    )
}

function applySettings(config: Config, settings: unknown, r: Reporter): void {
  if (!isMapping(settings)) {
    r.error("settings", `must be a mapping (got ${describe(settings)})`)
    return
  }
  r.unknownKeys(settings, SCHEMA_KEYS.settings, "settings")
  if (settings.maxOverrides !== undefined) {
    const value = settings.maxOverrides
    if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > MAX_OVERRIDES_SETTING) {
      r.error(
        "settings.maxOverrides",
        `must be a whole number from 0 to ${MAX_OVERRIDES_SETTING} (got ${describe(value)}); keeping ${config.settings.maxOverrides}`,
      )
    } else config.settings = { ...config.settings, maxOverrides: value as number }
  }
  if (settings.confirmPattern !== undefined) {
    if (settings.confirmPattern === null) config.settings = { ...config.settings, confirmPattern: null }
    else {
      const regex = compileRegex(settings.confirmPattern, "i", "settings.confirmPattern", "settings.confirmPattern", r)
      if (regex) config.settings = { ...config.settings, confirmPattern: regex }
    }
  }
  for (const key of ["secretFiles", "notSecrets"] as const) {
    const value = settings[key]
    if (value === undefined) continue
    const list = typeof value === "string" ? [value] : value
    if (!Array.isArray(list) || !list.every((item) => typeof item === "string" && item.trim() !== "")) {
      r.error(`settings.${key}`, `must be a list of non-empty strings (got ${describe(value)}); it is ignored`)
      continue
    }
    // the files' lists add up (the global file's and the project's); a project cannot take a secret file away
    config.settings = { ...config.settings, [key]: [...config.settings[key], ...(list as string[])] }
  }
}

/**
 * `settings.protection: block | warn | off`: the five families of the default protection (PROTECTION_IDS) at once,
 * as if the file listed each with that mode (`off`: `enabled: false`), before its own entries, which may change one
 * family again. A family the global file locked stays as it is against the project file, with the lock's error.
 */
function applyProtection(config: Config, value: unknown, file: string, layer: FileLayer, r: Reporter): void {
  if (value !== "block" && value !== "warn" && value !== "off") {
    r.error(
      "settings.protection",
      `must be block, warn or off (got ${describe(value)}); the default protection stays as it is`,
    )
    return
  }
  for (const id of PROTECTION_IDS) {
    const contract = config.contracts.get(id)
    if (!contract) continue
    const refusal = contract.lockedBy ? lockRefusal(id, contract.lockedBy, layer) : undefined
    if (refusal) {
      r.error("settings.protection", refusal.replace(/\. Remove this entry/, ". Remove settings.protection here"))
      continue
    }
    const changed = value === "off" ? { enabled: false } : { enabled: true, mode: value as Mode }
    config.contracts.set(id, { ...contract, ...changed, origin: file })
  }
}

/**
 * Validates one parsed file and merges it into `config` (mutated). Problems go to config.problems. A file whose top
 * level is unusable (not a mapping, wrong version) is skipped whole; otherwise each part stands on its own.
 */
export function applyFile(config: Config, raw: unknown, file: string, layer: FileLayer, env: EngineEnv): string {
  const r = new Reporter(file, config.problems)
  if (raw === null || raw === undefined) return "empty"
  if (!isMapping(raw)) {
    r.error(
      "",
      `the top level must be a mapping starting with "version: 1" (got ${describe(raw)}); the file is ignored`,
    )
    return "ignored"
  }
  if (raw.version === undefined) r.warn("version", `is missing; add "version: 1" as the first line`)
  else if (typeof raw.version === "string" && Number(raw.version) === 1) {
    // YAML reads `version: "1"` as text; say so rather than call "1" an unsupported version.
    r.error(
      "version",
      `must be the number 1, not the string "${raw.version}"; write version: 1 without quotes. The file is ignored`,
    )
    return "ignored"
  } else if (raw.version !== 1) {
    r.error("version", `unsupported version ${describe(raw.version)}; this plugin reads version 1. The file is ignored`)
    return "ignored"
  }
  r.unknownKeys(raw, SCHEMA_KEYS.top, "")
  const before = config.contracts.size
  if (isMapping(raw.settings) && raw.settings.protection !== undefined)
    applyProtection(config, raw.settings.protection, file, layer, r)
  if (raw.contracts !== undefined && raw.contracts !== null) applyContracts(config, raw.contracts, layer, r, env)
  if (raw.presets !== undefined) applyPresets(config, raw.presets, r)
  if (raw.roles !== undefined) applyRoles(config, raw.roles, r)
  if (raw.settings !== undefined) applySettings(config, raw.settings, r)
  if (layer === "global") config.globalView = copyView(config)
  else reportDroppedLocks(config, r)
  const added = config.contracts.size - before
  return `loaded${added ? `, ${added} new contract${added === 1 ? "" : "s"}` : ""}`
}
