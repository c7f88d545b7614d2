/**
 * The contract model, the six built-ins with their examples, the 12 roles' presets, the schema keys, roles per
 * agent (`builtinContracts`, `BUILTIN_PRESETS`, `ROLES`, `SCHEMA_KEYS`).
 */
import { EDIT_TOOLS } from "../shared/tools"
import type { Protection, Problem, Raw, CommandPattern, MatchContext } from "./types"
import { globToRegExp } from "./names"

export type Mode = "block" | "warn" | "info"
export const MODES: readonly Mode[] = ["block", "warn", "info"]
export const MODE_RANK: Record<Mode | "allow", number> = { allow: 0, info: 1, warn: 2, block: 3 }

/** The 12 Semantic-Anchors roles (catalog `roles`). */
export const ROLES = [
  "software-developer",
  "software-architect",
  "qa-engineer",
  "devops-engineer",
  "product-owner",
  "business-analyst",
  "technical-writer",
  "ux-designer",
  "data-scientist",
  "consultant",
  "team-lead",
  "educator",
] as const

/**
 * The Semantic-Anchors ids (188), bundled so `anchorRefs` can be checked offline. Source: LLM-Coding/Semantic-Anchors
 * website/public/data/anchors.json at commit 1ca7f95b (2026-07-18), Apache-2.0.
 */
export const ANCHOR_IDS: ReadonlySet<string> = new Set(
  `4mat 50-72-rule addie-model adr-according-to-nygard aida-model arc42 atam bdd-given-when-then bem-methodology
  big-five blooms-taxonomy bluf c4-diagrams cap-theorem chain-of-thought circuit-breaker clean-architecture
  cockburn-use-cases code-smells cohesion-criteria consent-vs-consensus control-chart-shewhart conventional-commits
  conways-law cqrs crc-cards curse-of-knowledge cynefin-framework decisional-balance-sheet deep-modules
  definition-of-done design-by-contract devils-advocate diataxis-framework disc-model docs-as-code
  domain-driven-design double-diamond dreyfus-skill-acquisition dry ears-requirements effective-go effective-java
  eisenhower-matrix event-driven-architecture event-storming fagan-inspection fallacies-of-distributed-computing
  fermi-estimation feynman-technique fichtean-curve first-principles-thinking five-whys four-sides-model
  fowler-patterns freytags-pyramid gherkin github-flow gof-abstract-factory-pattern gof-adapter-pattern
  gof-bridge-pattern gof-builder-pattern gof-chain-of-responsibility-pattern gof-command-pattern
  gof-composite-pattern gof-decorator-pattern gof-design-patterns gof-facade-pattern gof-factory-method-pattern
  gof-flyweight-pattern gof-interpreter-pattern gof-iterator-pattern gof-mediator-pattern gof-memento-pattern
  gof-observer-pattern gof-prototype-pattern gof-proxy-pattern gof-singleton-pattern gof-state-pattern
  gof-strategy-pattern gof-template-method-pattern gof-visitor-pattern gom goodharts-law grasp gtd
  gutes-deutsch-wolf-schneider hemingway-bridge heros-journey hexaco hexagonal-architecture hoshin-kanri
  iec-61508-sil-levels impact-mapping inverted-pyramid-style invest iosp iso-25010 jobs-to-be-done kano-model
  kishotenketsu kiss-principle kotter-8-step-change-model laddering lasr law-of-demeter lehmans-classification
  linddun llm-evaluations luhmann-system-theory madr meaningful-human-control mece mental-model-according-to-naur
  mikado-method morphological-box moscow mutation-testing mvp myers-briggs-type-indicator nelson-rules occams-razor
  okr owasp-top-10 para-method pert plain-english-strunk-white postels-law prd problem-space-nvc
  progressive-disclosure property-based-testing pugh-matrix pyramid-principle quality-attribute-scenario
  red-green-tdd regulated-environment req42 save-the-cat semantic-versioning sender-receiver-discrepancy
  separation-of-concerns simon-constructivism single-level-of-abstraction-principle site-reliability-engineering
  socratic-method solid-dip solid-isp solid-lsp solid-ocp solid-principles solid-srp sota spc spike-solution
  ssot-principle story-circle-dan-harmon strangler-fig stride swot systemic-consulting tdd-chicago-school
  tdd-london-school team-topologies test-double-dummy test-double-fake test-double-meszaros test-double-mock
  test-double-spy test-double-stub test-seam testing-pyramid thin-vertical-slice three-act-structure timtowtdi
  todotxt-flavoured-markdown tracer-bullet twelve-factor-app unix-philosophy user-story-mapping
  vertical-slice-architecture walking-skeleton wardley-mapping what-qualifies-as-a-semantic-anchor
  what-would-chuck-norris-do xy-problem yagni zone-of-proximal-development`
    .split(/\s+/)
    .filter(Boolean),
)

/** One argument matcher; `kind`, `text` (`regex /x/i`, `glob a/**`) and `negate` are for the explanations. */
export type ArgMatcher = {
  keyPath: string[]
  test(value: unknown, ctx: MatchContext): boolean
  kind: string
  text: string
  negate: boolean
  screen?: ScreenPart
}

/**
 * A matcher's part in a screen (toolPlan): a regex that holds whenever the matcher holds (a `regex`, or a `glob` as
 * its regexes), so that one test of many matchers' parts joined with `|` can rule them all out at once.
 */
export type ScreenPart = { kind: "regex" | "glob"; source: string; flags: string }

// `toolsText` is the `tools` globs as written (`[bash, edit]`, or `(any tool)`), for the explanations.
export type Trigger =
  | {
      type: "tool"
      tools: RegExp[]
      toolsText: string
      runs: CommandPattern[] | null // `runs:`: the simple commands a bash call runs (null: no such key)
      args: ArgMatcher[]
      unlessSeen: RegExp | null
      protect?: Protection // built-in only: the default protection's checks (protectHolds)
    }
  | { type: "message"; pattern: RegExp | null; unless: RegExp | null; minLength: number }
  | { type: "state"; every: number; tools: RegExp[]; toolsText: string }
  // Built-in only: kinds that need path logic no YAML matcher expresses.
  | { type: "boundary"; allowed: RegExp[]; globs: string[] }
  | { type: "spread"; maxDirs: number }
  | { type: "integrity" }

/**
 * Who locked a contract, so a refusal can say who may change it: the plugin (guard-integrity; no file may) or the
 * global file (only that file may; the project file may not).
 */
export type Lock = { by: "plugin" } | { by: "global"; file: string }

export type Contract = {
  id: string
  description: string
  mode: Mode
  message?: string
  anchorRefs: string[]
  roles: string[] | null // null: built-ins -> their presets only; file contracts -> every role
  enabled: boolean
  lockedBy: Lock | null // null: not locked
  trigger: Trigger
  origin: string // "built-in" or the file label that defined or last changed it
  builtin: boolean
  examples?: Examples // checked at every load (checkExamples); they travel with the trigger they were written for
}

/**
 * A contract's examples: calls (or user messages) it must fire on, and ones it must let pass. A tool-call example is
 * judged as the call of a fresh session with `steps` changing steps already counted (state triggers) and `seen`
 * already seen (unlessSeen); a message example is one user message.
 */
export type Example = { tool: string; args: unknown; steps: number; seen?: string } | { message: string }
export type Examples = { fires: Example[]; passes: Example[] }

/** Tools that change files. opencode names its patch tool `patch` or `apply_patch` depending on the model. */
export const EDIT_TOOL_RES = EDIT_TOOLS.map((name) => globToRegExp(name))
const BOUNDARY_GLOBS = ["docs/**", "**/*.md", "**/*.adoc", "adr/**"]

/** Goal or verification words, English and German: a request that names neither gets a tip. */
const INTENT_WORDS =
  "\\b(?:goal|aim|purpose|so that|in order to|because|why|should|must|expect|verify|verif|test|check|ensure|" +
  "assert|accept|done when|success|ziel|damit|um zu|weil|warum|soll|muss|erwart|prüf|pruef|test|sicherstell|" +
  "abnahme|fertig wenn|erfolg|nachweis)"

/** A tool-call example of a built-in contract. */
export function call(tool: string, args: Raw, more: { steps?: number; seen?: string } = {}): Example {
  return { tool, args, steps: more.steps ?? 0, seen: more.seen }
}

const WRITE_APP = { filePath: "src/app.ts", content: "export {}" }
const EDIT_APP = { filePath: "src/app.ts", oldString: "a", newString: "b" }

/** The contract every role has, whatever its preset says (contractsOfRole): the guard of the guard's own files. */
export const IN_EVERY_ROLE = "guard-integrity"

/** The default protection's five families (in every role, like guard-integrity), in the order the status lists them. */
export const PROTECTION_IDS = [
  "protect-remote-history",
  "protect-local-work",
  "protect-files",
  "protect-disks",
  "protect-secrets",
]

export function builtinContracts(): Contract[] {
  const base = {
    anchorRefs: [] as string[],
    roles: null,
    enabled: true,
    lockedBy: null,
    origin: "built-in",
    builtin: true,
  }
  return [
    {
      ...base,
      id: IN_EVERY_ROLE,
      description: "The agent may not edit, move or delete the guard's config files or the plugin files.",
      message: "These files define the rules the agent works under; only the human changes them.",
      mode: "block",
      anchorRefs: ["meaningful-human-control"],
      lockedBy: { by: "plugin" },
      trigger: { type: "integrity" },
      examples: {
        fires: [
          call("write", { filePath: ".opencode/opencode-semantic-anchors.yaml", content: "version: 1" }),
          call("bash", { command: "rm .opencode/opencode-semantic-anchors.yaml" }),
        ],
        passes: [call("write", WRITE_APP), call("bash", { command: "cat .opencode/opencode-semantic-anchors.yaml" })],
      },
    },
    {
      ...base,
      id: "step-confirmation",
      description: "Stop for the human's confirmation every 3 changing steps.",
      message: "Summarise what you changed so far and ask the user to confirm before the next change.",
      mode: "block",
      anchorRefs: ["meaningful-human-control"],
      trigger: {
        type: "state",
        every: 3,
        tools: [...EDIT_TOOLS, "bash"].map((name) => globToRegExp(name)),
        toolsText: `[${[...EDIT_TOOLS, "bash"].join(", ")}]`,
      },
      examples: {
        fires: [call("edit", EDIT_APP, { steps: 3 })],
        passes: [call("edit", EDIT_APP, { steps: 2 }), call("bash", { command: "git status" }, { steps: 3 })],
      },
    },
    {
      ...base,
      id: "source-anchor",
      description: "Write only on a cited source.",
      message: "Name the source this change rests on (a URL, or a line 'Source: ...') before or while writing.",
      mode: "warn",
      trigger: {
        type: "tool",
        tools: EDIT_TOOLS.map((name) => globToRegExp(name)),
        toolsText: `[${EDIT_TOOLS.join(", ")}]`,
        runs: null,
        args: [],
        unlessSeen: /https?:\/\/\S|\b(?:Source|Quelle)\s*:/i,
      },
      examples: {
        fires: [call("write", WRITE_APP)],
        passes: [
          call("write", WRITE_APP, { seen: "Source: https://example.com/spec#storage" }),
          call("read", { filePath: "src/app.ts" }),
        ],
      },
    },
    {
      ...base,
      id: "intent-anchor",
      description: "A request says what it is for and how to check it.",
      message: "Say the goal and how the result can be verified (e.g. 'so that ...', 'done when the tests pass').",
      mode: "info",
      anchorRefs: ["definition-of-done"],
      trigger: { type: "message", pattern: null, unless: new RegExp(INTENT_WORDS, "i"), minLength: 40 },
      examples: {
        fires: [{ message: "rename the helper functions in the parser module" }],
        passes: [
          { message: "rename the helper functions so that the parser reads top-down" },
          { message: "fix the typo" },
        ],
      },
    },
    {
      ...base,
      id: "boundary-anchor",
      description: "In this role the agent writes documentation only.",
      message:
        "Write the decision down in docs/, adr/ or a .md/.adoc file, and leave the code change to a developer role.",
      mode: "block",
      anchorRefs: ["separation-of-concerns"],
      trigger: { type: "boundary", globs: BOUNDARY_GLOBS, allowed: BOUNDARY_GLOBS.map((glob) => globToRegExp(glob)) },
      examples: {
        fires: [call("write", WRITE_APP)],
        passes: [
          call("write", { filePath: "docs/adr/0001-storage.md", content: "# Storage" }),
          call("bash", { command: "npm test" }),
        ],
      },
    },
    {
      ...base,
      id: "emergence-anchor",
      description: "Changes stay within at most 3 top-level directories between confirmations.",
      message: "The change is spreading; check with the user whether this scope is intended.",
      mode: "warn",
      anchorRefs: ["thin-vertical-slice"],
      trigger: { type: "spread", maxDirs: 3 },
      examples: {
        fires: [
          call("apply_patch", {
            patchText: [
              "*** Begin Patch",
              ...["src/a.ts", "test/a.test.ts", "docs/a.md", "scripts/a.sh"].map((path) => `*** Update File: ${path}`),
              "*** End Patch",
            ].join("\n"),
          }),
        ],
        passes: [call("write", WRITE_APP)],
      },
    },
  ]
}

/** Built-in presets, one per Semantic-Anchors role, each with the reason docs/contracts.md's presets table gives. */
export const BUILTIN_PRESETS: Record<(typeof ROLES)[number], { contracts: string[]; why: string }> = {
  "software-developer": {
    contracts: ["step-confirmation", "source-anchor", "intent-anchor"],
    why: "Fixed by the design: small confirmed steps, cited sources, a stated goal.",
  },
  "software-architect": {
    contracts: ["boundary-anchor", "emergence-anchor", "step-confirmation"],
    why: "Fixed by the design: decisions go into docs, scope creep is flagged, steps are confirmed.",
  },
  "qa-engineer": {
    contracts: ["intent-anchor", "step-confirmation"],
    why: "Every test needs a stated expectation; test changes are confirmed step by step.",
  },
  "devops-engineer": {
    contracts: ["step-confirmation", "emergence-anchor"],
    why: "Infrastructure changes have a wide blast radius: confirm often, flag changes spreading across areas.",
  },
  "product-owner": {
    contracts: ["boundary-anchor", "intent-anchor"],
    why: "Writes stories and acceptance criteria, not code; every request states its goal.",
  },
  "business-analyst": {
    contracts: ["boundary-anchor", "intent-anchor", "source-anchor"],
    why: "Requirements live in documents, name their goal and trace to a source.",
  },
  "technical-writer": {
    contracts: ["boundary-anchor", "source-anchor"],
    why: "Writes documentation only, and documentation cites what it describes.",
  },
  "ux-designer": {
    contracts: ["boundary-anchor", "intent-anchor"],
    why: "Delivers specs and docs, not code; every request names the user goal.",
  },
  "data-scientist": {
    contracts: ["source-anchor", "intent-anchor", "step-confirmation"],
    why: "Data and methods need a source, an analysis a hypothesis, and experiments go step by step.",
  },
  consultant: {
    contracts: ["boundary-anchor", "source-anchor", "intent-anchor"],
    why: "Advice is written, evidence-based and tied to the client's goal.",
  },
  "team-lead": {
    contracts: ["intent-anchor", "emergence-anchor"],
    why: "Keeps goals explicit and notices when a change grows beyond its scope.",
  },
  educator: {
    contracts: ["boundary-anchor", "source-anchor", "intent-anchor"],
    why: "Teaching material is documents with cited sources and stated learning goals.",
  },
}

/** Every key and enum the validator accepts; a test keeps `opencode-semantic-anchors.schema.json` equal to it. */
export const SCHEMA_KEYS = {
  top: ["version", "settings", "roles", "presets", "contracts"],
  settings: ["maxOverrides", "confirmPattern", "protection", "secretFiles", "notSecrets"],
  roles: ["default", "agents"],
  contract: ["id", "description", "mode", "message", "anchorRefs", "roles", "enabled", "locked", "trigger", "examples"],
  trigger: ["type", "tools", "runs", "args", "unlessSeen", "pattern", "unless", "minLength", "every", "flags"],
  matcher: ["equals", "regex", "flags", "glob", "contains", "startsWith", "exists", "not"],
  matcherKinds: ["equals", "regex", "glob", "contains", "startsWith", "exists"],
  examples: ["fires", "passes"],
  example: ["tool", "args", "steps", "seen", "message"],
  modes: ["block", "warn", "info"],
  triggerTypes: ["tool", "message", "state"],
} as const

export const TRIGGER_KEYS_BY_TYPE: Record<string, readonly string[]> = {
  tool: ["type", "tools", "runs", "args", "unlessSeen", "flags"],
  message: ["type", "pattern", "unless", "minLength", "flags"],
  state: ["type", "every", "tools"],
}

export type Settings = {
  maxOverrides: number
  confirmPattern: RegExp | null
  secretFiles: string[] // protect-secrets: more of the person's secret files (globs: project-relative, `~/`, absolute)
  notSecrets: string[] // protect-secrets: values that are no secrets, never taken out
}

/** Which role an agent gets, and which contracts a role's preset names. */
export type RoleView = {
  defaultRole: string
  agents: Map<string, string> // opencode agent name -> role
  presets: Map<string, string[]> // role -> contract ids
}

/** The merged, compiled configuration the engine runs on. */
export type Config = RoleView & {
  settings: Settings
  globalView: RoleView // the roles and presets after the global file: where the locked contracts keep applying
  contracts: Map<string, Contract> // merge order
  seenPatterns: RegExp[] // every distinct `unlessSeen`, tested once per seen text
  problems: Problem[]
  files: { label: string; status: string }[]
}

/** A copy of the roles and presets, which later files then cannot change. */
export function copyView(view: RoleView): RoleView {
  return { defaultRole: view.defaultRole, agents: new Map(view.agents), presets: new Map(view.presets) }
}

/** The `tools` of a trigger as written, for the explanations. */
export function toolsText(value: unknown): string {
  return value === undefined ? "(any tool)" : `[${[value].flat().join(", ")}]`
}

export function knownRoles(view: RoleView): Set<string> {
  return new Set<string>([...ROLES, ...view.presets.keys()])
}

/** The role an agent gets: the configured mapping, else the agent's own name when it is a role, else the default. */
export function roleForAgent(view: RoleView, agent: string | undefined): string {
  if (agent === undefined) return view.defaultRole
  return view.agents.get(agent) ?? (knownRoles(view).has(agent) ? agent : view.defaultRole)
}

/**
 * The contracts a role gets from one set of presets, in a fixed order: guard-integrity, the role's preset, then
 * file contracts whose `roles` are absent, "*" or name the role.
 */
export function contractsOfRole(config: Config, presets: RoleView["presets"], role: string): Contract[] {
  const active: Contract[] = []
  const listed = new Set<Contract>() // not active.includes: that is quadratic, and a load asks for every role
  const add = (contract: Contract | undefined) => {
    if (contract && contract.enabled && !listed.has(contract)) {
      listed.add(contract)
      active.push(contract)
    }
  }
  add(config.contracts.get(IN_EVERY_ROLE))
  for (const id of PROTECTION_IDS) add(config.contracts.get(id))
  for (const id of presets.get(role) ?? []) add(config.contracts.get(id))
  for (const contract of config.contracts.values()) {
    const forRole =
      contract.roles === null ? !contract.builtin : contract.roles.includes("*") || contract.roles.includes(role)
    if (forRole) add(contract)
  }
  return active
}

/** The locked contracts an agent gets under the global file's roles and presets (globalView). */
export function lockedForAgent(config: Config, agent: string | undefined): Contract[] {
  const globalRole = roleForAgent(config.globalView, agent)
  return contractsOfRole(config, config.globalView.presets, globalRole).filter((contract) => contract.lockedBy)
}
