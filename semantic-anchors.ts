/**
 * semantic-anchors: an opencode plugin that holds the agent to project contracts (block / warn / tip), per role,
 * written in YAML, with a bypass that only the human can grant.
 *
 * What: a contract is a rule with a trigger and a mode. `block` stops a tool call before it runs (the model reads
 * why, the human can allow one call with `/anchor bypass <reason>`); `warn` lets the call run and appends a note to
 * its result; `info` shows the user a tip. Six contracts are built in (step-confirmation, source-anchor,
 * intent-anchor, boundary-anchor, emergence-anchor, guard-integrity) and each of the 12 Semantic-Anchors roles has a
 * preset of them. The role of a session comes from the opencode agent (build -> software-developer,
 * plan -> software-architect, configurable).
 *
 * Why: prompts ask, contracts enforce. "Stop and ask every three changes" or "only write docs as architect" hold
 * only when something outside the model counts and refuses; and the model must not be able to lift the rule itself.
 *
 * How to tune: YAML files, merged by contract id in this order: built-ins, the global file
 * `${XDG_CONFIG_HOME:-~/.config}/opencode/opencode-semantic-anchors.yaml` (or the file named by
 * OPENCODE_SEMANTIC_ANCHORS_CONFIG), the project file `<project>/.opencode/opencode-semantic-anchors.yaml`.
 * The README documents every key; `opencode-semantic-anchors.schema.json` lets editors check them. Bad input never
 * stops a session: a broken file is skipped, a broken contract disables only itself, and every problem is reported
 * with file, key path and fix (log, one toast, `/anchor status`).
 *
 * The bounds that keep memory flat (root sessions kept, text caps, overrides by default) are the constants below.
 *
 * Layout, top-down: (1) pure core, no I/O: names, paths, globs, regexes, the contract model, built-ins and presets,
 * the validator; (2) rule engine: what an edit touches, the integrity guard, session state (RootSessions: one
 * eviction rule, least recently used), the bypass refusals, verdicts and the texts; (3) adapter, last: the plugin
 * instance (Anchors: config, sessions, client), `/anchor` and the two tools with their one bypass path, each hook a
 * named function (onConfig, onEvent, onChatMessage, onCommand, onToolBefore, onToolAfter), then server().
 */
import type { Hooks, Plugin, PluginInput, ToolContext, ToolDefinition } from "@opencode-ai/plugin"
// @ts-ignore -- no Node types in this zero-dependency project; node:fs is built into Bun, which runs the plugin.
import { lstatSync, realpathSync } from "node:fs"

// opencode runs plugins on Bun. These are the only host globals used, declared here so the file type-checks
// without a runtime types package.
declare const Bun: {
  YAML: { parse(text: string): unknown }
  file(path: string): { text(): Promise<string> }
}
declare const process: { env: Record<string, string | undefined> }
declare function setTimeout(callback: () => void, ms: number): unknown

// Tuning constants (bounds that keep memory and time flat however long a session runs).
export const MAX_ROOT_SESSIONS = 128 // root sessions kept; the least recently used is dropped beyond
export const MAX_PARENT_LINKS = 4096 // child -> parent links kept; the least recently used is dropped beyond
const MAX_SEEN = 16 // texts kept per session for re-checking `unlessSeen` after a reload
const SEEN_CAP = 8192 // characters of one seen text that are kept and matched (head and tail)
export const REGEX_INPUT_CAP = 10_000 // characters a user regex ever runs on
const MESSAGE_CAP = 20_000 // characters of a user message that message contracts look at
const TOAST_AFTER_MESSAGE_MS = 700 // a toast sooner than ~0.5 s after a session's first message is painted over
const TOAST_SHOWN_MS = 5500 // how long the TUI shows a toast; a second one sooner replaces the first
const MAX_PENDING_NOTES = 256 // warn notes waiting for their tool.execute.after
const MAX_RESERVED = 256 // counted calls waiting to be known as run (tool.execute.after) or not (an error part)
const MAX_TOOL_PLANS = 256 // tool names whose plan is kept per role (toolPlan); beyond, the plans are made again
const MAX_LOGGED_PROBLEMS = 50 // config problems logged per file; the rest are counted (status lists all)
const DEFAULT_MAX_OVERRIDES = 3
const SERVICE = "semantic-anchors"
const TAG = "[semantic-anchors]"
const CONFIG_FILE_NAME = "opencode-semantic-anchors.yaml"
const OWN_TOOLS = new Set(["anchor_status", "anchor_bypass"])

// =================================================================================================================
// Pure core: names, paths, globs, regexes
// =================================================================================================================

type Mode = "block" | "warn" | "info"
const MODES: readonly Mode[] = ["block", "warn", "info"]
const MODE_RANK: Record<Mode | "allow", number> = { allow: 0, info: 1, warn: 2, block: 3 }

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

/** Edit distance, for "did you mean" hints. Only ever run on config problems, never per tool call. */
function editDistance(a: string, b: string): number {
  let previous = Array.from({ length: b.length + 1 }, (_, j) => j)
  for (let i = 1; i <= a.length; i++) {
    const current = [i]
    for (let j = 1; j <= b.length; j++) {
      current[j] = Math.min(previous[j] + 1, current[j - 1] + 1, previous[j - 1] + (a[i - 1] === b[j - 1] ? 0 : 1))
    }
    previous = current
  }
  return previous[b.length]
}

type Guess = { guess: string | undefined; distance: number }

// closest() per distinct word, per fixed candidate list (the schema's key lists, the bundled anchor ids): a file
// that repeats one typo 10,000 times computes its edit distances once. Bounded, since the lists live for ever.
const guessCache = new WeakMap<object, Map<string, Guess>>()
const GUESS_CACHE_SIZE = 1000

function closestGuess(word: string, candidates: Iterable<string>): Guess {
  const cacheable = Array.isArray(candidates) || candidates instanceof Set
  let cache = cacheable ? guessCache.get(candidates) : undefined
  const cached = cache?.get(word)
  if (cached) return cached
  let result: Guess = { guess: undefined, distance: Infinity }
  for (const candidate of candidates) {
    const distance = editDistance(word, candidate)
    if (distance < result.distance) result = { guess: candidate, distance }
  }
  if (cacheable) {
    if (!cache) guessCache.set(candidates, (cache = new Map()))
    if (cache.size >= GUESS_CACHE_SIZE) cache.clear()
    cache.set(word, result)
  }
  return result
}

function closest(word: string, candidates: Iterable<string>): string | undefined {
  return closestGuess(word, candidates).guess
}

/** "did you mean" only when the guess is plausibly a typo. */
function didYouMean(word: string, candidates: Iterable<string>): string {
  const { guess, distance } = closestGuess(word, candidates)
  return guess !== undefined && distance <= Math.max(2, Math.floor(guess.length / 3))
    ? ` (did you mean "${guess}"?)`
    : ""
}

/** A path normalizePath would change: empty, `//`, a `.` or `..` segment, or a trailing `/` (the root aside). */
const NOT_NORMAL = /^$|\/\/|(?:^|\/)\.\.?(?:\/|$)|[^]\/$/

/** POSIX path normalisation: collapses `//`, `.` and `..` (never above the root). */
function normalizePath(path: string): string {
  if (!NOT_NORMAL.test(path)) return path // the common case, checked per tool call: nothing to split and join
  const absolute = path.startsWith("/")
  const out: string[] = []
  for (const segment of path.split("/")) {
    if (segment === "" || segment === ".") continue
    if (segment === "..") {
      if (out.length > 0 && out[out.length - 1] !== "..") out.pop()
      else if (!absolute) out.push("..")
    } else out.push(segment)
  }
  const joined = out.join("/")
  return absolute ? `/${joined}` : joined || "."
}

function resolvePath(base: string, path: string, home?: string): string {
  if (home && (path === "~" || path.startsWith("~/"))) return normalizePath(home + path.slice(1))
  return normalizePath(path.startsWith("/") ? path : `${base}/${path}`)
}

/** `abs` relative to `base`, or undefined when it lies outside. */
function relativeInside(base: string, abs: string): string | undefined {
  if (abs === base) return "."
  if (!abs.startsWith(base) || (!base.endsWith("/") && abs[base.length] !== "/")) return undefined
  let start = base.length
  while (abs[start] === "/") start++
  return abs.slice(start)
}

function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
}

/**
 * A glob as a RegExp: `**` spans directories (`**\/` also matches none), `*` and `?` stay within one segment.
 * With `hideDotfiles`, a segment that starts with a wildcard does not match a leading dot, as in the shell.
 */
function globToRegExp(glob: string, hideDotfiles = false): RegExp {
  let source = ""
  let segmentStart = true
  for (let i = 0; i < glob.length; i++) {
    const ch = glob[i]
    if (hideDotfiles && segmentStart && (ch === "*" || ch === "?")) source += "(?!\\.)"
    segmentStart = false
    if (ch === "*" && glob[i + 1] === "*") {
      if (glob[i + 2] === "/") {
        source += "(?:.*/)?"
        i += 2
        segmentStart = true
      } else {
        source += ".*"
        i += 1
      }
    } else if (ch === "*") source += "[^/]*"
    else if (ch === "?") source += "[^/]"
    else {
      source += escapeRegex(ch)
      segmentStart = ch === "/"
    }
  }
  return new RegExp(`^${source}$`)
}

/**
 * A regex that holds whenever the glob does, and is cheap to test: the glob's literal head and tail around its
 * wildcards (`src/**\/*.ts` -> `^src/[\s\S]*\.ts$`, `**\/*.key` -> `\.key$`). A glob regex backtracks over every
 * `/` of the path; 50 of them cost far more than one test of 50 outlines joined (a screen, toolPlan).
 */
function globOutline(glob: string): string {
  const first = glob.search(/[*?]/)
  if (first < 0) return `^${escapeRegex(glob)}$`
  let last = Math.max(glob.lastIndexOf("*"), glob.lastIndexOf("?"))
  if (glob.startsWith("**/", last - 1)) last++ // `**/` may match nothing, its `/` included
  const head = escapeRegex(glob.slice(0, first))
  const tail = escapeRegex(glob.slice(last + 1))
  if (!head) return `${tail}$`
  return tail ? `^${head}[\\s\\S]*${tail}$` : `^${head}`
}

/** Matches a tool name against a compiled list of tool globs. */
function anyMatch(patterns: readonly RegExp[], text: string): boolean {
  for (const pattern of patterns) if (pattern.test(text)) return true
  return false
}

/** Cap what a regex runs on: the head and the tail, so a long tool output still shows its end. */
function capText(text: string, cap: number): string {
  return text.length <= cap ? text : `${text.slice(0, cap / 2)}\n${text.slice(-cap / 2)}`
}

/** A quantifier at `at` (`+ * ? {n} {n,} {n,m}`, with an optional lazy `?`), or undefined. */
function quantifierAt(source: string, at: number): { min: number; max: number; text: string } | undefined {
  const match = /^(?:([+*?])|\{(\d+)(,(\d*))?\})\??/.exec(source.slice(at, at + 24))
  if (!match) return undefined
  const text = match[0]
  if (match[1]) return { min: match[1] === "+" ? 1 : 0, max: match[1] === "?" ? 1 : Infinity, text }
  const min = Number(match[2])
  return { min, max: match[3] === undefined ? min : match[4] ? Number(match[4]) : Infinity, text }
}

/** The top-level branches of a group body: `a|b(c|d)` -> ["a", "b(c|d)"]. */
function topLevelBranches(body: string): string[] {
  const branches: string[] = []
  let depth = 0
  let inClass = false
  let start = 0
  for (let i = 0; i < body.length; i++) {
    const ch = body[i]
    if (ch === "\\") i++
    else if (inClass) inClass = ch !== "]"
    else if (ch === "[") inClass = true
    else if (ch === "(") depth++
    else if (ch === ")") depth--
    else if (ch === "|" && depth === 0) {
      branches.push(body.slice(start, i))
      start = i + 1
    }
  }
  branches.push(body.slice(start))
  return branches
}

/** Counted repeats of an optional item from this count up are reported: (a?){n} tries 2^n ways before failing. */
const BOUNDED_OPTIONAL_LIMIT = 10

/**
 * Why a regex can backtrack exponentially, or undefined. Capping the input does not help against these: /(a+)+$/
 * takes about a second on 26 characters and hours on 40. A simple static check of three shapes, each a repeated
 * group that can match the same text in many ways:
 * - nested quantifier: a group that contains `+`, `*` or `{n,}` and is itself repeated (`+ * {n,} {n,m}`), as in
 *   `(a+)+` or `(\w+\s?)*`; a fixed count such as `(\d+\.){3}` is not reported;
 * - overlapping alternation: a group repeated by `+ * {n,}` in which one branch is a prefix of another, as in
 *   `(a|a)*` or `(a|aa)+` (compared as written: `(\w|\d)+` is not caught);
 * - large bounded repeat of an optional item: a group that contains `?`, `*` or `{0,n}`, repeated
 *   BOUNDED_OPTIONAL_LIMIT or more times by a counted quantifier, as in `(a?){25}`.
 * A heuristic: it can miss a slow regex and flag a harmless one (`(a|ab)*`); the message says how to rewrite it.
 */
function regexHazard(source: string): string | undefined {
  type Group = { open: number; body: number; unbounded: boolean; optional: boolean }
  const stack: Group[] = []
  for (let i = 0; i < source.length;) {
    const ch = source[i]
    if (ch === "(") {
      const prefix = /^\((?:\?(?:[:=!]|<[=!]|<[^>]*>|[a-z-]*:))?/.exec(source.slice(i, i + 64))![0]
      stack.push({ open: i, body: i + prefix.length, unbounded: false, optional: false })
      i += prefix.length
      continue
    }
    if (ch === "|") {
      i++
      continue
    }
    // One atom: an escape, a class, a closing group or a single character; then its quantifier, if any.
    let end = i + 1
    let group: Group | undefined
    if (ch === "\\")
      end = /^\\[pPu]\{/.test(source.slice(i, i + 3)) ? source.indexOf("}", i) + 1 || source.length : i + 2
    else if (ch === "[") {
      for (end = i + 1; end < source.length && source[end] !== "]"; end++) if (source[end] === "\\") end++
      end++
    } else if (ch === ")") group = stack.pop()
    const q = quantifierAt(source, end)
    const top = stack[stack.length - 1]
    if (group) {
      const shown = `/${source.slice(group.open, end + (q?.text.length ?? 0))}/`
      const repeated = q !== undefined && q.max > 1 && (q.max === Infinity || q.max > q.min)
      if (group.unbounded && repeated) {
        return `nested quantifier in ${shown} (a quantified group that itself contains a quantifier) can take exponential time; rewrite it without a quantified group that itself contains a quantifier, e.g. (a+)+ -> a+, (\\w+\\s?)* -> [\\w\\s]*`
      }
      if (q && q.max === Infinity) {
        const branches = topLevelBranches(source.slice(group.body, i))
        for (const [x, a] of branches.entries()) {
          const b = branches.find((other, y) => y !== x && other.startsWith(a))
          if (b !== undefined)
            return `overlapping alternation in ${shown} (the branches "${a}" and "${b}" can match the same text, and the group repeats) can take exponential time; make the branches exclusive or merge them, e.g. (a|aa)+ -> a+`
        }
      }
      if (group.optional && q && q.max !== Infinity && q.max >= BOUNDED_OPTIONAL_LIMIT) {
        return `large bounded repeat of an optional item in ${shown} (each of its ${q.max} repeats may match or not) can take exponential time; bound the item itself instead, e.g. (a?){25} -> a{0,25}`
      }
      if (top) {
        top.unbounded ||= group.unbounded || q?.max === Infinity
        top.optional ||= group.optional || q?.min === 0
      }
    } else if (q && top) {
      top.unbounded ||= q.max === Infinity
      top.optional ||= q.min === 0
    }
    i = end + (q?.text.length ?? 0)
  }
  return undefined
}

// =================================================================================================================
// Pure core: contract model, built-ins, presets
// =================================================================================================================

/** Where the plugin looks, resolved once from the plugin input and the environment. */
type Paths = {
  directory: string
  worktree: string
  home: string
  globalDir: string // ${XDG_CONFIG_HOME:-$HOME/.config}/opencode
  globalFile: string // the global file, or the one OPENCODE_SEMANTIC_ANCHORS_CONFIG names
  globalFromEnv: boolean
  projectFile: string
}

/** What a matcher needs besides the value: paths are matched relative to the project when they lie inside it. */
type MatchContext = { directory: string; worktree: string }

type ArgMatcher = { keyPath: string[]; test(value: unknown, ctx: MatchContext): boolean; screen?: ScreenPart }

/**
 * A matcher's part in a screen (toolPlan): a regex that holds whenever the matcher holds (a `regex`, or a `glob` as
 * its regexes), so that one test of many matchers' parts joined with `|` can rule them all out at once.
 */
type ScreenPart = { kind: "regex" | "glob"; source: string; flags: string }

type Trigger =
  | { type: "tool"; tools: RegExp[]; args: ArgMatcher[]; unlessSeen: RegExp | null }
  | { type: "message"; pattern: RegExp | null; unless: RegExp | null; minLength: number }
  | { type: "state"; every: number; tools: RegExp[] }
  // Built-in only: kinds that need path logic no YAML matcher expresses.
  | { type: "boundary"; allowed: RegExp[]; globs: string[] }
  | { type: "spread"; maxDirs: number }
  | { type: "integrity" }

/**
 * Who locked a contract, so a refusal can say who may change it: the plugin (guard-integrity; no file may) or the
 * global file (only that file may; the project file may not).
 */
type Lock = { by: "plugin" } | { by: "global"; file: string }

type Contract = {
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
}

/** Tools that change files. opencode names its patch tool `patch` or `apply_patch` depending on the model. */
const EDIT_TOOLS = ["edit", "write", "patch", "multiedit", "apply_patch"]
const EDIT_TOOL_RES = EDIT_TOOLS.map((name) => globToRegExp(name))
const BOUNDARY_GLOBS = ["docs/**", "**/*.md", "**/*.adoc", "adr/**"]

/** Goal or verification words, English and German: a request that names neither gets a tip. */
const INTENT_WORDS =
  "\\b(?:goal|aim|purpose|so that|in order to|because|why|should|must|expect|verify|verif|test|check|ensure|" +
  "assert|accept|done when|success|ziel|damit|um zu|weil|warum|soll|muss|erwart|prüf|pruef|test|sicherstell|" +
  "abnahme|fertig wenn|erfolg|nachweis)"

function builtinContracts(): Contract[] {
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
      id: "guard-integrity",
      description: "The agent may not edit, move or delete the guard's config files or the plugin files.",
      message: "These files define the rules the agent works under; only the human changes them.",
      mode: "block",
      anchorRefs: ["meaningful-human-control"],
      lockedBy: { by: "plugin" },
      trigger: { type: "integrity" },
    },
    {
      ...base,
      id: "step-confirmation",
      description: "Stop for the human's confirmation every 3 changing steps.",
      message: "Summarise what you changed so far and ask the user to confirm before the next change.",
      mode: "block",
      anchorRefs: ["meaningful-human-control"],
      trigger: { type: "state", every: 3, tools: [...EDIT_TOOLS, "bash"].map((name) => globToRegExp(name)) },
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
        args: [],
        unlessSeen: /https?:\/\/\S|\b(?:Source|Quelle)\s*:/i,
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
    },
    {
      ...base,
      id: "emergence-anchor",
      description: "Changes stay within at most 3 top-level directories between confirmations.",
      message: "The change is spreading; check with the user whether this scope is intended.",
      mode: "warn",
      anchorRefs: ["thin-vertical-slice"],
      trigger: { type: "spread", maxDirs: 3 },
    },
  ]
}

/** Built-in presets, one per Semantic-Anchors role, each with the reason the README table gives. */
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

// =================================================================================================================
// Pure core: the validator
// =================================================================================================================

/** Every key and enum the validator accepts; a test keeps `opencode-semantic-anchors.schema.json` equal to it. */
export const SCHEMA_KEYS = {
  top: ["version", "settings", "roles", "presets", "contracts"],
  settings: ["maxOverrides", "confirmPattern"],
  roles: ["default", "agents"],
  contract: ["id", "description", "mode", "message", "anchorRefs", "roles", "enabled", "locked", "trigger"],
  trigger: ["type", "tools", "args", "unlessSeen", "pattern", "unless", "minLength", "every", "flags"],
  matcher: ["equals", "regex", "flags", "glob", "contains", "startsWith", "exists", "not"],
  matcherKinds: ["equals", "regex", "glob", "contains", "startsWith", "exists"],
  modes: ["block", "warn", "info"],
  triggerTypes: ["tool", "message", "state"],
} as const

const TRIGGER_KEYS_BY_TYPE: Record<string, readonly string[]> = {
  tool: ["type", "tools", "args", "unlessSeen", "flags"],
  message: ["type", "pattern", "unless", "minLength", "flags"],
  state: ["type", "every", "tools"],
}

type Severity = "error" | "warning"
type Problem = { severity: Severity; file: string; keyPath: string; text: string }

export function formatProblem(problem: Problem): string {
  return `${problem.file}: ${problem.keyPath ? `${problem.keyPath}: ` : ""}${problem.text}`
}

type Settings = { maxOverrides: number; confirmPattern: RegExp | null }

/** Which role an agent gets, and which contracts a role's preset names. */
type RoleView = {
  defaultRole: string
  agents: Map<string, string> // opencode agent name -> role
  presets: Map<string, string[]> // role -> contract ids
}

/** The merged, compiled configuration the engine runs on. */
type Config = RoleView & {
  settings: Settings
  globalView: RoleView // the roles and presets after the global file: where the locked contracts keep applying
  contracts: Map<string, Contract> // merge order
  seenPatterns: RegExp[] // every distinct `unlessSeen`, tested once per seen text
  problems: Problem[]
  files: { label: string; status: string }[]
}

/** A copy of the roles and presets, which later files then cannot change. */
function copyView(view: RoleView): RoleView {
  return { defaultRole: view.defaultRole, agents: new Map(view.agents), presets: new Map(view.presets) }
}

function defaultConfig(): Config {
  const contracts = new Map<string, Contract>()
  for (const contract of builtinContracts()) contracts.set(contract.id, contract)
  const presets = new Map<string, string[]>()
  for (const role of ROLES) presets.set(role, [...BUILTIN_PRESETS[role].contracts])
  const view: RoleView = {
    defaultRole: "software-developer",
    agents: new Map([
      ["build", "software-developer"],
      ["plan", "software-architect"],
    ]),
    presets,
  }
  return {
    settings: { maxOverrides: DEFAULT_MAX_OVERRIDES, confirmPattern: null },
    ...view,
    globalView: copyView(view),
    contracts,
    seenPatterns: [],
    problems: [],
    files: [{ label: "built-ins", status: `${contracts.size} contracts, ${presets.size} presets` }],
  }
}

type Raw = Record<string, unknown>
const isMapping = (value: unknown): value is Raw => typeof value === "object" && value !== null && !Array.isArray(value)
const describe = (value: unknown): string =>
  value === null
    ? "null"
    : Array.isArray(value)
      ? "a list"
      : typeof value === "object"
        ? "a mapping"
        : JSON.stringify(value)

/** Collects the problems of one file; paths are written as `contracts[2].trigger.args.command.regex`. */
class Reporter {
  errors = 0 // errors so far, so a caller can tell whether its part failed
  constructor(
    readonly file: string,
    readonly out: Problem[],
  ) {}
  error(keyPath: string, text: string): void {
    this.errors++
    this.out.push({ severity: "error", file: this.file, keyPath, text })
  }
  warn(keyPath: string, text: string): void {
    this.out.push({ severity: "warning", file: this.file, keyPath, text })
  }
  /** Unknown keys are warnings: a typo must not pass silently, but it must not break the rest either. */
  unknownKeys(value: Raw, allowed: readonly string[], keyPath: string): void {
    for (const key of Object.keys(value)) {
      if (allowed.includes(key)) continue
      const hint = didYouMean(key, allowed)
      this.warn(
        join(keyPath, key),
        `unknown key "${key}"${hint || ` (allowed here: ${allowed.join(", ")})`}; it is ignored`,
      )
    }
  }
}

const join = (keyPath: string, key: string | number): string =>
  typeof key === "number" ? `${keyPath}[${key}]` : keyPath ? `${keyPath}.${key}` : key

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

function stringList(value: unknown, keyPath: string, r: Reporter, what: string): string[] | undefined {
  const list = typeof value === "string" ? [value] : value
  if (!Array.isArray(list) || list.length === 0 || list.some((item) => typeof item !== "string" || item === "")) {
    r.error(keyPath, `must be a non-empty list of ${what} (got ${describe(value)})`)
    return undefined
  }
  return list as string[]
}

/** The value at a dot path (`edits.0.filePath`) inside the tool arguments; undefined when any step is missing. */
function valueAt(args: unknown, keyPath: readonly string[]): unknown {
  let value = args
  for (const key of keyPath) {
    if (typeof value !== "object" || value === null || !Object.prototype.hasOwnProperty.call(value, key))
      return undefined
    value = (value as Raw)[key]
  }
  return value
}

function asText(value: unknown): string {
  if (typeof value === "string") return value
  if (typeof value === "object") {
    try {
      return JSON.stringify(value) ?? ""
    } catch {
      return ""
    }
  }
  return String(value)
}

// One-entry cache for pathForGlob: every glob contract of a call asks for the same argument's path, so with 100
// glob contracts the path was normalised 100 times per call. The result depends only on (value, ctx).
let lastGlobInput: string | undefined
let lastGlobCtx: MatchContext | undefined
let lastGlobPath = ""

/** A path argument as globs see it: relative to the project when inside it, `./` dropped. */
function pathForGlob(value: string, ctx: MatchContext): string {
  if (value === lastGlobInput && ctx === lastGlobCtx) return lastGlobPath
  lastGlobPath = pathForGlobUncached(value, ctx)
  lastGlobInput = value
  lastGlobCtx = ctx
  return lastGlobPath
}

function pathForGlobUncached(value: string, ctx: MatchContext): string {
  if (value.startsWith("/")) {
    const abs = normalizePath(value)
    return relativeInside(ctx.directory, abs) ?? relativeInside(ctx.worktree, abs) ?? abs
  }
  return normalizePath(value)
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
      return { keyPath: argPath, test: (present) => ((present !== undefined) === value) !== negate }
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
  return { keyPath: argPath, test: (present, ctx) => present !== undefined && check(present, ctx) !== negate, screen }
}

function toolGlobs(value: unknown, keyPath: string, r: Reporter): RegExp[] | undefined {
  if (value === undefined) return [/^/]
  const globs = stringList(value, keyPath, r, "tool-name globs")
  return globs?.map((glob) => globToRegExp(glob))
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
    const tools = toolGlobs(spec.tools, join(keyPath, "tools"), r)
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
    if (failed() || !tools || unlessSeen === undefined) return undefined
    return { type, tools, args, unlessSeen }
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
  return { type: "state", every: spec.every as number, tools }
}

/** Which layer a file is: the project file cannot change what the global file locked. */
type FileLayer = "global" | "project"

/** Why a file may not change a locked contract, naming who locked it and who may change it; undefined: it may. */
function lockRefusal(id: string, lock: Lock, layer: FileLayer): string | undefined {
  if (lock.by === "plugin")
    return `contract "${id}" is locked by the plugin; no file can change or disable it. Remove this entry`
  if (layer === "global") return undefined
  return `contract "${id}" is locked by the global file (${lock.file}); the project file cannot change or disable it. Remove this entry, or change it in the global file`
}

function applyContracts(config: Config, list: unknown, layer: FileLayer, r: Reporter): void {
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
    config.contracts.set(id, merged)
  })
}

function knownRoles(view: RoleView): Set<string> {
  return new Set<string>([...ROLES, ...view.presets.keys()])
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

/**
 * Locks hold (activeContracts keeps them in force); this reports each project `roles` or `presets` entry that tries
 * to drop a locked contract, so the project's author learns it has no effect there. The rest of the entry applies.
 */
function reportDroppedLocks(config: Config, r: Reporter): void {
  const lockedBy = (contract: Contract) =>
    contract.lockedBy?.by === "global" ? `the global file (${contract.lockedBy.file})` : "the plugin"
  const dropped = (locked: Contract[], kept: Contract[]) => locked.filter((contract) => !kept.includes(contract))
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
    if (!Number.isInteger(value) || (value as number) < 0 || (value as number) > 1000) {
      r.error(
        "settings.maxOverrides",
        `must be a whole number from 0 to 1000 (got ${describe(value)}); keeping ${config.settings.maxOverrides}`,
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
}

/**
 * Validates one parsed file and merges it into `config` (mutated). Problems go to config.problems. A file whose top
 * level is unusable (not a mapping, wrong version) is skipped whole; otherwise each part stands on its own.
 */
function applyFile(config: Config, raw: unknown, file: string, layer: FileLayer): string {
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
  if (raw.contracts !== undefined && raw.contracts !== null) applyContracts(config, raw.contracts, layer, r)
  if (raw.presets !== undefined) applyPresets(config, raw.presets, r)
  if (raw.roles !== undefined) applyRoles(config, raw.roles, r)
  if (raw.settings !== undefined) applySettings(config, raw.settings, r)
  if (layer === "global") config.globalView = copyView(config)
  else reportDroppedLocks(config, r)
  const added = config.contracts.size - before
  return `loaded${added ? `, ${added} new contract${added === 1 ? "" : "s"}` : ""}`
}

/** The change in flow-collection depth (`{ [` minus `} ]`) over a line, outside quotes and comments. */
function flowDepthChange(text: string): number {
  let depth = 0
  let quote = 0 // the char code of the open quote, or 0
  for (let i = 0; i < text.length; i++) {
    const ch = text.charCodeAt(i)
    if (quote) {
      if (ch === 92 /* \ */ && quote === 34) i++
      else if (ch === quote) quote = 0
    } else if (ch === 34 /* " */ || ch === 39 /* ' */) quote = ch
    else if (ch === 35 /* # */ && (i === 0 || text.charCodeAt(i - 1) === 32 || text.charCodeAt(i - 1) === 9)) break
    else if (ch === 123 /* { */ || ch === 91 /* [ */) depth++
    else if (ch === 125 /* } */ || ch === 93 /* ] */) depth--
  }
  return depth
}

/** How deep a line leaves an open flow collection (0 when it opens none, the common case). */
function flowOpened(text: string): number {
  return text.includes("{") || text.includes("[") ? Math.max(0, flowDepthChange(text)) : 0
}

type DuplicateKey = { keyPath: string; key: string; line: number; firstLine: number }

const KEY_LINE = /^("(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"{[\]}&*!|>%@`,?:-][^#]*?)\s*:(?=\s|$)/
const BLOCK_SCALAR = /^\s*[|>][-+0-9]*\s*(#.*)?$/

/**
 * Keys written twice in one mapping. Bun.YAML keeps the last value silently, so `mode: block` followed by
 * `mode: info` would pass unseen. This is a line scan of the raw text, not a second YAML parser: it follows block
 * style only (indentation, `- ` items, `key: value` lines), and skips block scalars (`|`, `>`), comments and flow
 * collections (`{...}`, `[...]`), whose keys it does not check. Lines are numbered from 1.
 */
function duplicateKeys(text: string): DuplicateKey[] {
  type Scope = {
    indent: number
    keyPath: string
    keys: Map<string, number>
    lastKey?: string
    items: Map<string, number>
  }
  const found: DuplicateKey[] = []
  const scope = (indent: number, keyPath: string): Scope => ({ indent, keyPath, keys: new Map(), items: new Map() })
  const childPath = (parent: Scope | undefined): string =>
    !parent
      ? ""
      : !parent.lastKey
        ? parent.keyPath
        : parent.keyPath
          ? `${parent.keyPath}.${parent.lastKey}`
          : parent.lastKey
  let stack: Scope[] = []
  let blockScalarIndent = -1 // inside a | or > scalar: lines indented deeper than this belong to it
  let flowDepth = 0 // inside a flow collection that spans lines
  const lines = text.split("\n")
  for (let n = 0; n < lines.length; n++) {
    let line = lines[n]
    if (line.endsWith("\r")) line = line.slice(0, -1)
    let indent = 0
    while (line.charCodeAt(indent) === 32) indent++
    const blank = indent === line.length || /^\s*$/.test(line)
    if (blockScalarIndent >= 0) {
      if (blank || indent > blockScalarIndent) continue
      blockScalarIndent = -1
    }
    if (flowDepth > 0) {
      flowDepth = Math.max(0, flowDepth + flowDepthChange(line))
      continue
    }
    if (blank || line[indent] === "#") continue
    if (indent === 0 && /^(---|\.\.\.)(\s|$)/.test(line)) {
      stack = []
      continue
    }
    // `- - key: value`: count the sequence dashes; the content starts at `column`.
    let column = indent
    let dashes = 0
    while (line[column] === "-" && (line[column + 1] === " " || column + 1 === line.length)) {
      dashes++
      column++
      while (line[column] === " ") column++
    }
    const rest = line.slice(column)
    let current: Scope | undefined
    while (stack.length && stack[stack.length - 1].indent > indent) stack.pop()
    const top = stack[stack.length - 1]
    if (dashes) {
      // A new item of the sequence under the enclosing mapping's last key.
      const seqKey = top?.lastKey ?? ""
      const index = (top?.items.get(seqKey) ?? -1) + 1
      top?.items.set(seqKey, index)
      current = scope(column, `${childPath(top)}[${index}]${"[0]".repeat(dashes - 1)}`)
      stack.push(current)
    }
    const key = rest.includes(":") ? KEY_LINE.exec(rest.length > 1024 ? rest.slice(0, 1024) : rest) : null
    if (!key) {
      flowDepth = flowOpened(rest)
      continue
    }
    if (!current) {
      if (top && top.indent === column) current = top
      else stack.push((current = scope(column, childPath(top))))
    }
    const name = key[1][0] === '"' || key[1][0] === "'" ? key[1].slice(1, -1) : key[1]
    const first = current.keys.get(name)
    if (first !== undefined && name !== "<<") {
      found.push({
        keyPath: current.keyPath ? `${current.keyPath}.${name}` : name,
        key: name,
        line: n + 1,
        firstLine: first,
      })
    } else current.keys.set(name, n + 1)
    current.lastKey = name
    const value = rest.slice(key[0].length)
    if (BLOCK_SCALAR.test(value)) blockScalarIndent = column
    else flowDepth = flowOpened(value)
  }
  return found
}

/** Parses YAML text (JSON is YAML too) and applies it; a parse error skips the file. */
function applyText(config: Config, text: string, file: string, layer: FileLayer): string {
  let raw: unknown
  try {
    raw = Bun.YAML.parse(text)
  } catch (error) {
    const reason = String((error as Error).message ?? error).replace(/^YAML Parse error:\s*/, "")
    config.problems.push({
      severity: "error",
      file,
      keyPath: "",
      text: `cannot parse YAML (${reason}); the file is ignored and the other files stay in force`,
    })
    return "ignored"
  }
  const status = applyFile(config, raw, file, layer)
  if (status !== "ignored") {
    for (const dup of duplicateKeys(text)) {
      config.problems.push({
        severity: "warning",
        file,
        keyPath: dup.keyPath,
        text: `key "${dup.key}" is written twice in one mapping (lines ${dup.firstLine} and ${dup.line}); YAML keeps only the last one, so line ${dup.firstLine} has no effect. Delete one of them`,
      })
    }
  }
  return status
}

/** Collects the distinct `unlessSeen` patterns so each seen text is tested once per pattern, not once per call. */
function finishConfig(config: Config): Config {
  const patterns = new Map<string, RegExp>()
  for (const contract of config.contracts.values()) {
    if (contract.trigger.type === "tool" && contract.trigger.unlessSeen) {
      const regex = contract.trigger.unlessSeen
      patterns.set(`${regex.source}/${regex.flags}`, regex)
    }
  }
  config.seenPatterns = [...patterns.values()]
  return config
}

type FileRead = { path: string; label: string; layer: FileLayer; text?: string; error?: string }

/** Builds the configuration from file contents already read (no I/O here, so it is fast and testable). */
export function buildConfig(reads: FileRead[]): Config {
  const config = defaultConfig()
  for (const read of reads) {
    if (read.text !== undefined) {
      config.files.push({ label: read.label, status: applyText(config, read.text, read.label, read.layer) })
    } else if (read.error === "ENOENT") {
      config.files.push({ label: read.label, status: "not found" })
    } else {
      config.problems.push({
        severity: "error",
        file: read.label,
        keyPath: "",
        text: `cannot read the file (${read.error}); it is ignored and the other files stay in force`,
      })
      config.files.push({ label: read.label, status: "unreadable" })
    }
  }
  return finishConfig(config)
}

// =================================================================================================================
// Rule engine: what an edit touches, the integrity guard, active contracts
// =================================================================================================================

/** The files an edit-tool call writes: `filePath`, or the paths named in a patch text. */
function editTargets(args: unknown): string[] {
  if (!isMapping(args)) return []
  const targets: string[] = []
  for (const key of ["filePath", "file_path", "path"])
    if (typeof args[key] === "string") targets.push(args[key] as string)
  for (const key of ["patchText", "patch", "input"]) {
    const text = args[key]
    if (typeof text !== "string") continue
    for (const match of text.matchAll(/^\*\*\* (?:(?:Add|Update|Delete) File|Move to): (.+)$/gm))
      targets.push(match[1].trim())
    for (const match of text.matchAll(/^(?:\+\+\+|---) (?:[ab]\/)?(.+)$/gm))
      if (match[1].trim() !== "/dev/null") targets.push(match[1].trim())
  }
  return targets
}

/** The guard's own files: config files, opencode config, plugin directories. */
type GuardFiles = { exact: Set<string>; roots: string[]; mentions: string[] }

function guardFiles(paths: Paths): GuardFiles {
  const projectDir = `${paths.directory}/.opencode`
  const exact = new Set<string>([
    paths.globalFile,
    `${paths.globalDir}/${CONFIG_FILE_NAME}`,
    `${paths.globalDir}/opencode-semantic-anchors.yml`,
    paths.projectFile,
    `${projectDir}/opencode-semantic-anchors.yml`,
    ...[paths.directory, projectDir, paths.globalDir].flatMap((dir) => [
      `${dir}/opencode.json`,
      `${dir}/opencode.jsonc`,
    ]),
  ])
  // Directories whose removal or move takes guard files with them.
  const roots = [
    projectDir,
    paths.globalDir,
    `${projectDir}/plugin`,
    `${projectDir}/plugins`,
    `${paths.globalDir}/plugin`,
    `${paths.globalDir}/plugins`,
  ]
  const mentions = [
    ".opencode",
    "opencode/plugin",
    "opencode-semantic-anchors",
    ".config/opencode",
    "XDG_CONFIG_HOME",
    "opencode.json",
    "semantic-anchors.ts",
    paths.globalDir,
  ]
  if (paths.globalFromEnv) {
    mentions.push(paths.globalFile)
    const base = paths.globalFile.split("/").pop()
    if (base) mentions.push(base)
  }
  return { exact, roots, mentions }
}

const PLUGIN_DIR_FILE = /(?:^|\/)\.?opencode\/plugins?\/[^/]+/
const CONFIG_BASENAME = /(?:^|\/)opencode-semantic-anchors\.(?:ya?ml|json)$/

function isGuardPath(abs: string, guard: GuardFiles): boolean {
  return guard.exact.has(abs) || CONFIG_BASENAME.test(abs) || PLUGIN_DIR_FILE.test(abs)
}

/**
 * Whether a bash command only looks around (lists, reads, searches, asks git what is there) and so is not a changing
 * step. A small quote-aware scan, not a shell: it splits the command into simple commands at unquoted `|`, `||`,
 * `&&`, `;`, `&`, newlines and parentheses, and calls the whole command read-only only when every simple command is
 * one it knows to be read-only and nothing writes a file. Anything it cannot be sure of (output redirection to a
 * file, a here-document, command substitution, an unknown command, a `find -exec`) is a changing step: a false
 * count asks the human once too often, a missed one lets a change through unconfirmed.
 */
function isReadOnlyCommand(command: string): boolean {
  const simple = simpleCommands(command)
  if (simple === null || simple.length === 0) return false
  return simple.every(isReadOnlySimple)
}

/** The words of each simple command, or null when the text does something a scan cannot follow (see above). */
function simpleCommands(command: string): string[][] | null {
  const commands: string[][] = []
  let words: string[] = []
  let word = ""
  let inWord = false
  let quote = ""
  const endWord = () => {
    if (inWord) words.push(word)
    word = ""
    inWord = false
  }
  const endCommand = () => {
    endWord()
    if (words.length) commands.push(words)
    words = []
  }
  for (let i = 0; i < command.length; i++) {
    const ch = command[i]
    if (quote) {
      if (ch === quote) quote = ""
      else if (quote === '"' && (ch === "`" || (ch === "$" && command[i + 1] === "("))) return null
      else if (quote === '"' && ch === "\\" && i + 1 < command.length) word += command[++i]
      else word += ch
      continue
    }
    if (ch === "'" || ch === '"') {
      quote = ch
      inWord = true
    } else if (ch === "\\") {
      if (command[i + 1] === "\n")
        i++ // a line continuation
      else if (i + 1 < command.length) {
        word += command[++i]
        inWord = true
      }
    } else if (ch === "`" || (ch === "$" && command[i + 1] === "(")) return null
    else if (ch === "#" && !inWord) {
      while (i + 1 < command.length && command[i + 1] !== "\n") i++
    } else if (ch === " " || ch === "\t") endWord()
    else if (ch === "|" || ch === ";" || ch === "\n" || ch === "(" || ch === ")") endCommand()
    else if (ch === "&") {
      if (command[i + 1] === ">") {
        // &> and &>> send both streams to a file
        endWord()
        const target = redirectTarget(command, i + (command[i + 2] === ">" ? 3 : 2))
        if (!harmlessTarget(target.word)) return null
        i = target.end - 1
      } else endCommand()
    } else if (ch === ">") {
      // [n]>, >>, >|, n>&m: a write unless it goes to /dev/null or duplicates a descriptor
      if (inWord && !/^\d+$/.test(word)) return null // `a>b` glued to a word: too odd to follow
      word = ""
      inWord = false
      let at = i + 1
      if (command[at] === ">" || command[at] === "|") at++
      const target = redirectTarget(command, at)
      if (!harmlessTarget(target.word)) return null
      i = target.end - 1
    } else if (ch === "<") {
      if (command[i + 1] === "<" && command[i + 2] !== "<") return null // a here-document: its body is not commands
      endWord()
      let at = i + 1
      while (command[at] === "<") at++
      i = redirectTarget(command, at).end - 1 // input redirection reads: skip its source
    } else {
      word += ch
      inWord = true
    }
  }
  if (quote) return null
  endCommand()
  return commands
}

/** The word after a redirection operator (blanks skipped) and where it ends. Quotes are taken as they are. */
function redirectTarget(command: string, start: number): { word: string; end: number } {
  let at = start
  while (command[at] === " " || command[at] === "\t") at++
  const begin = at
  while (at < command.length && !/[\s|;&()<>]/.test(command[at])) at++
  if (command[begin] === "&" && /\d|-/.test(command[begin + 1] ?? "")) at = Math.max(at, begin + 2)
  return { word: command.slice(begin, at).replace(/["']/g, ""), end: at }
}

function harmlessTarget(target: string): boolean {
  return target === "/dev/null" || /^&(\d+|-)$/.test(target)
}

/** Commands that only read or print, whatever their options (the ones that can write are handled below). */
const READ_ONLY_PROGRAMS = new Set(
  `ls pwd cat head tail wc grep egrep fgrep rg ag which whereis type tree stat file echo printf less
  more diff cmp comm du df basename dirname realpath readlink nl cut tr column jq sha1sum sha256sum
  md5sum cksum test [ true false date whoami id uname hostname printenv env cd pushd popd ps od
  hexdump xxd strings bat sleep wait`.split(/\s+/),
)

/** Words that run the rest of the simple command as a command of its own. */
const PREFIX_PROGRAMS = new Set(["sudo", "command", "time", "nice", "nohup"])

/** git subcommands that never write (besides `branch`, `diff`, `log` and `show`, checked with their options). */
const READ_ONLY_GIT = new Set([
  "status",
  "blame",
  "rev-parse",
  "ls-files",
  "describe",
  "shortlog",
  "grep",
  "cat-file",
  "ls-tree",
])

/** `git branch` options that list or filter; anything else (-d, -D, -m, -c, -u, --set-upstream-to, a name) changes. */
const GIT_BRANCH_LISTING =
  /^(-a|--all|-r|--remotes|-v+|--verbose|-l|--list|--show-current|--contains|--no-contains|--merged|--no-merged|--points-at|--sort(=.*)?|--format(=.*)?|--color(=.*)?|--no-color|--column(=.*)?|--no-column|-i|--ignore-case|--abbrev(=.*)?|--no-abbrev)$/

function isReadOnlySimple(words: string[]): boolean {
  let i = 0
  while (i < words.length && (/^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]) || PREFIX_PROGRAMS.has(words[i]))) i++
  if (words[i] === "timeout") i += 2 // timeout DURATION command
  const program = words[i]
  const args = words.slice(i + 1)
  if (program === undefined) return true // only assignments: nothing runs
  if (program === "env") return args.every((arg) => /^[A-Za-z_][A-Za-z0-9_]*=/.test(arg)) || isReadOnlySimple(args)
  if (program === "git") return isReadOnlyGit(args)
  if (program === "find")
    return !args.some((arg) => /^-(delete|exec|execdir|ok|okdir|fprint|fprint0|fprintf|fls)$/.test(arg))
  if (program === "sed")
    return !args.some((arg) => /^(-[a-zA-Z]*i|--in-place)/.test(arg) || /^-[a-zA-Z]*w|^--write/.test(arg))
  if (program === "sort") return !args.some((arg) => /^(-[a-zA-Z]*o|--output)/.test(arg))
  if (program === "uniq") return args.filter((arg) => !arg.startsWith("-")).length <= 1 // `uniq in out` writes out
  if (program === "xargs") return isReadOnlySimple(xargsCommand(args))
  return READ_ONLY_PROGRAMS.has(program) && !(program === "tree" && args.some((arg) => arg === "-o"))
}

function isReadOnlyGit(args: string[]): boolean {
  let i = 0
  // Global options before the subcommand: -C <dir>, -c <key=value>, --no-pager, --git-dir=...
  while (i < args.length && args[i].startsWith("-")) i += args[i] === "-C" || args[i] === "-c" ? 2 : 1
  const sub = args[i]
  const rest = args.slice(i + 1)
  if (sub === undefined) return true
  if (sub === "diff" || sub === "log" || sub === "show") return !rest.some((arg) => arg.startsWith("--output"))
  if (sub === "branch") return isBranchListing(rest)
  if (sub === "remote")
    return rest.every((arg) => arg === "-v" || arg === "--verbose") || /^(show|get-url)$/.test(rest[0])
  if (sub === "stash") return /^(list|show)$/.test(rest[0] ?? "")
  if (sub === "tag") return rest.length === 0 || rest.includes("-l") || rest.includes("--list")
  if (sub === "config")
    return rest.some((arg) => arg === "--get" || arg === "--list" || arg === "-l" || arg === "--get-all")
  return READ_ONLY_GIT.has(sub)
}

/**
 * `git branch` lists when every word is a listing option, or a value of one (`--contains HEAD`); with `-l`/`--list`
 * the other words are patterns. A bare name creates a branch.
 */
function isBranchListing(args: string[]): boolean {
  const listing = args.includes("-l") || args.includes("--list")
  return args.every((arg, i) => {
    if (GIT_BRANCH_LISTING.test(arg)) return true
    if (arg.startsWith("-")) return false
    return listing || BRANCH_VALUE_OPTIONS.has(args[i - 1] ?? "")
  })
}
const BRANCH_VALUE_OPTIONS = new Set([
  "--contains",
  "--no-contains",
  "--merged",
  "--no-merged",
  "--points-at",
  "--sort",
  "--format",
])

/** The command xargs runs: its own options (and their values) skipped. */
function xargsCommand(args: string[]): string[] {
  let i = 0
  while (i < args.length && args[i].startsWith("-")) i += /^-[nILPsdEa]$/.test(args[i]) ? 2 : 1
  return args.slice(i)
}

const CHANGING_COMMANDS = new Set([
  "rm",
  "rmdir",
  "mv",
  "cp",
  "ln",
  "unlink",
  "truncate",
  "shred",
  "chmod",
  "chown",
  "tee",
  "dd",
  "rsync",
  "install",
  "touch",
  "sed",
  "perl",
])

function splitSegments(command: string): string[][] {
  return command
    .split(/&&|\|\||[;|&\n]/)
    .map((segment) => segment.trim().split(/\s+/).filter(Boolean))
    .filter((words) => words.length > 0)
}

/** The command word of a segment, after `sudo`, `env` and variable assignments. */
function commandWords(words: string[]): string[] {
  let i = 0
  while (
    i < words.length &&
    (/^[A-Za-z_][A-Za-z0-9_]*=/.test(words[i]) || words[i] === "sudo" || words[i] === "env" || words[i] === "command")
  )
    i++
  return words.slice(i)
}

/** "/a/b/c" -> ["/a/b/c", "/a/b", "/a"]: a glob that matches a parent directory takes the file with it. */
function ancestorsAndSelf(abs: string): string[] {
  const out = [abs]
  for (let cut = abs.lastIndexOf("/"); cut > 0; cut = abs.lastIndexOf("/", cut - 1)) out.push(abs.slice(0, cut))
  return out
}

/** Commands that write through a symbolic link to its target (rm and mv act on the link itself). */
const WRITE_THROUGH_LINKS = new Set(["tee", "truncate", "shred", "chmod", "chown", "cp"])

/** Resolves symbolic links of a path that exists (or of its parent); the identity where nothing is known. */
type RealPath = (abs: string) => string

/** `git clean` deletes untracked files under its paths, the current directory when none is given; -n only lists. */
function gitCleanArgs(words: string[]): string[] | undefined {
  const rest = words.slice(2)
  if (rest.some((w) => w === "--dry-run" || /^-[a-zA-Z]*n/.test(w))) return undefined
  const args = rest.filter((w, i) => !w.startsWith("-") && rest[i - 1] !== "-e" && rest[i - 1] !== "--exclude")
  return args.length ? args : ["."]
}

/**
 * Does a bash command change a guard file? A heuristic against accidents and casual evasion (quoting, `../`,
 * globs, deleting a parent directory, a link with an innocent name), not a sandbox: a determined shell user can
 * always hide a path (a variable, `$(...)`, an encoded name).
 * It blocks when a guard file or directory is named and the command is not read-only, or when a changing command
 * (rm, mv, cp, sed, git clean, redirects, ...) has an argument that resolves or globs onto a guard file or one of
 * its parents. Redirect targets and the arguments of commands that write through links are resolved with
 * `realpath` (links that exist) before the check.
 */
function bashTouchesGuard(
  command: string,
  paths: Paths,
  guard: GuardFiles,
  realpath: RealPath = (abs) => abs,
): string | undefined {
  const normalized = command.replace(/\\\n/g, " ").replace(/["'\\]/g, "")
  const segments = splitSegments(normalized)
  const readOnly = isReadOnlyCommand(command)
  if (!readOnly) {
    for (const mention of guard.mentions) if (mention && normalized.includes(mention)) return mention
  }
  const candidates = [...guard.exact, ...guard.roots]
  let withParents: string[] | undefined // candidates and all their parent directories, built on the first glob
  const hitsGuard = (abs: string): boolean =>
    isGuardPath(abs, guard) ||
    candidates.some((candidate) => candidate === abs || candidate.startsWith(abs.endsWith("/") ? abs : `${abs}/`))
  for (const segment of segments) {
    const words = commandWords(segment)
    const redirectTargets = normalized.includes(">")
      ? segment.filter((_, i) => i > 0 && /^\d?>>?$/.test(segment[i - 1]))
      : []
    const git = words[0] === "git"
    const changing =
      words.length > 0 &&
      (CHANGING_COMMANDS.has(words[0]) ||
        (git && /^(rm|mv)$/.test(words[1] ?? "")) ||
        (words[0] === "find" && words.includes("-delete")))
    const args =
      git && words[1] === "clean"
        ? (gitCleanArgs(words) ?? [])
        : changing
          ? words.slice(git ? 2 : 1).filter((w) => !w.startsWith("-"))
          : []
    const followsLinks = WRITE_THROUGH_LINKS.has(words[0] ?? "")
    for (const [word, throughLink] of [
      ...args.map((w) => [w, followsLinks] as const),
      ...redirectTargets.map((w) => [w, true] as const),
    ]) {
      const expanded = word.replace(/^\$\{?HOME\}?(?=\/|$)/, "~")
      const abs = resolvePath(paths.directory, expanded, paths.home)
      if (/[*?]/.test(abs)) {
        const pattern = globToRegExp(abs, true)
        withParents ??= [...new Set(candidates.flatMap(ancestorsAndSelf))]
        if (withParents.some((path) => pattern.test(path))) return word
      } else if (hitsGuard(abs) || (throughLink && hitsGuard(realpath(abs)))) {
        return word
      }
    }
  }
  return undefined
}

// =================================================================================================================
// Rule engine: session state and verdicts
// =================================================================================================================

type SessionState = {
  role: string
  agent?: string
  steps: Map<string, number> // state-contract id -> matching calls since the last confirmation
  touchedDirs: Map<string, number> // top-level directory -> changing calls into it since the last confirmation
  reserved: Map<string, Reservation> // callID -> what a call that has not finished yet was counted for
  overridesUsed: number
  passes: number // granted bypasses not yet used (0 or 1)
  lastConfirmation: number | null
  lastBlocked?: LastBlocked // what the human is told a bypass is for
  seen: string[] // bounded evidence: user messages and tool results
  seenHits: Set<RegExp> // which unlessSeen patterns matched anything seen so far
  pendingNotes: Map<string, PendingNote> // callID -> warn note for tool.execute.after
  warnedThisTurn: Set<string> // warn contracts whose note the model got since the last user message
}

/** The last blocked call: its contracts' ids and the tool (never an argument value). */
type LastBlocked = { contracts: string; tool: string }

/** A warn note waiting for its call's result, and the contracts it speaks for. */
type PendingNote = { text: string; contracts: string[] }

function newState(role: string): SessionState {
  return {
    role,
    steps: new Map(),
    touchedDirs: new Map(),
    reserved: new Map(),
    overridesUsed: 0,
    passes: 0,
    lastConfirmation: null,
    seen: [],
    seenHits: new Set(),
    pendingNotes: new Map(),
    warnedThisTurn: new Set(),
  }
}

/** Step counters and the spread start again; calls still running belong before this point, so none is given back. */
function resetCounters(state: SessionState): void {
  state.steps.clear()
  state.touchedDirs.clear()
  state.reserved.clear()
}

function confirm(state: SessionState, now: number): void {
  resetCounters(state)
  state.lastConfirmation = now
}

function recordSeen(state: SessionState, text: string, patterns: readonly RegExp[]): void {
  if (!text) return
  const kept = capText(text, SEEN_CAP)
  state.seen.push(kept)
  if (state.seen.length > MAX_SEEN) state.seen.shift()
  for (const pattern of patterns) if (!state.seenHits.has(pattern) && pattern.test(kept)) state.seenHits.add(pattern)
}

/**
 * A bounded map that drops the least recently used entry: Map insertion order is the recency order, and a get moves
 * its entry to the end. The one eviction rule here, for root sessions and for child -> parent links (as loop-guard).
 */
class RecentMap<V> {
  private readonly map = new Map<string, V>()
  constructor(readonly capacity: number) {}

  private newest: string | undefined // the most recently used key: asking for it again needs no reordering

  /** The value, marked most recently used. */
  get(key: string): V | undefined {
    const value = this.map.get(key)
    if (value !== undefined && key !== this.newest) {
      this.map.delete(key)
      this.map.set(key, value)
      this.newest = key
    }
    return value
  }

  /** Stores the value as the most recently used, dropping the least recently used beyond the capacity. */
  set(key: string, value: V): void {
    this.map.delete(key)
    this.map.set(key, value)
    this.newest = key
    if (this.map.size > this.capacity) this.map.delete(this.map.keys().next().value as string)
  }

  delete(key: string): void {
    this.map.delete(key)
    if (key === this.newest) this.newest = undefined
  }

  values(): IterableIterator<V> {
    return this.map.values()
  }
}

/**
 * Session state lives with the root session: a subagent's calls count for the session that started it. At most
 * MAX_ROOT_SESSIONS states and MAX_PARENT_LINKS links are kept; beyond that the least recently used is dropped.
 */
class RootSessions {
  private readonly states = new RecentMap<SessionState>(MAX_ROOT_SESSIONS)
  private readonly parents = new RecentMap<string>(MAX_PARENT_LINKS)

  link(childID: string, parentID: string): void {
    if (parentID !== childID) this.parents.set(childID, parentID)
  }

  /** The root of a session: parent links followed (a bounded walk, so a linked loop cannot hang a call). */
  rootOf(sessionID: string): string {
    let id = sessionID
    for (let hops = 0; hops < 32; hops++) {
      const parent = this.parents.get(id)
      if (!parent || parent === id) break
      id = parent
    }
    return id
  }

  /** The state of a root session, created with `role` when new. */
  state(rootID: string, role: string): SessionState {
    let state = this.states.get(rootID)
    if (!state) this.states.set(rootID, (state = newState(role)))
    return state
  }

  /** The state of a root session, or undefined when it has none (an event must not create one). */
  find(rootID: string): SessionState | undefined {
    return this.states.get(rootID)
  }

  /** session.deleted: the session's state and its own parent link go. */
  forget(sessionID: string): void {
    this.states.delete(sessionID)
    this.parents.delete(sessionID)
  }

  all(): IterableIterator<SessionState> {
    return this.states.values()
  }
}

/**
 * Why a bypass cannot be granted now, or undefined. The one list of refusals, in one order and one wording, for both
 * ways to ask: the human's `/anchor bypass` and the model's anchor_bypass (checked before the human is asked, and
 * again when granting, since the state may change while the question is open).
 */
function bypassRefusal(state: SessionState, reason: string, settings: Settings): string | undefined {
  if (!reason)
    return "Bypass refused: a reason is required (/anchor bypass <reason>; for anchor_bypass the string `reason` is required)."
  if (state.passes > 0) return "Bypass refused: a bypass is already pending; it lets the next blocked call run once."
  if (state.overridesUsed >= settings.maxOverrides)
    return `Error: Max overrides (${settings.maxOverrides}) reached. Cannot bypass.`
  return undefined
}

/** Grants one pass: an override is spent, the next blocked call runs once, and the grant confirms. */
function grantPass(state: SessionState, now: number): void {
  state.overridesUsed++
  state.passes = 1
  confirm(state, now)
}

/** The role an agent gets: the configured mapping, else the agent's own name when it is a role, else the default. */
function roleForAgent(view: RoleView, agent: string | undefined): string {
  if (agent === undefined) return view.defaultRole
  return view.agents.get(agent) ?? (knownRoles(view).has(agent) ? agent : view.defaultRole)
}

/**
 * The contracts a role gets from one set of presets, in a fixed order: guard-integrity, the role's preset, then
 * file contracts whose `roles` are absent, "*" or name the role.
 */
function contractsOfRole(config: Config, presets: RoleView["presets"], role: string): Contract[] {
  const active: Contract[] = []
  const add = (contract: Contract | undefined) => {
    if (contract && contract.enabled && !active.includes(contract)) active.push(contract)
  }
  add(config.contracts.get("guard-integrity"))
  for (const id of presets.get(role) ?? []) add(config.contracts.get(id))
  for (const contract of config.contracts.values()) {
    const forRole =
      contract.roles === null ? !contract.builtin : contract.roles.includes("*") || contract.roles.includes(role)
    if (forRole) add(contract)
  }
  return active
}

/** The locked contracts an agent gets under the global file's roles and presets (globalView). */
function lockedForAgent(config: Config, agent: string | undefined): Contract[] {
  const globalRole = roleForAgent(config.globalView, agent)
  return contractsOfRole(config, config.globalView.presets, globalRole).filter((contract) => contract.lockedBy)
}

/**
 * The one decision on what applies to a session: the contracts of its role, plus the locked contracts its agent
 * gets under the global file's roles and presets. Why the agent too: a lock must hold whatever the project file says
 * about `roles` or `presets`, and a project that maps the agent to another role (or edits the role's preset) would
 * otherwise drop a contract the global file locked for it. The project file cannot change a locked contract itself
 * (lockRefusal), so its global definition is the one in `config.contracts`.
 */
function activeContracts(config: Config, role: string, agent: string | undefined): Contract[] {
  const active = contractsOfRole(config, config.presets, role)
  for (const contract of lockedForAgent(config, agent)) if (!active.includes(contract)) active.push(contract)
  return active
}

type Hit = { contract: Contract; detail: string }
type Verdict = { mode: Mode | "allow"; hits: Hit[] }

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
type CallFacts = { tool: string; args: unknown; changing?: boolean }

function isChanging(facts: CallFacts): boolean {
  facts.changing ??= isChangingStep(facts.tool, facts.args)
  return facts.changing
}

/**
 * What a contract says about one tool call, for a contract known to apply to the tool's name (toolApplies); pure
 * given the state (nothing is recorded here).
 */
function checkApplicable(
  contract: Contract,
  facts: CallFacts,
  state: SessionState,
  env: EngineEnv,
): string | undefined {
  const { tool, args } = facts
  const trigger = contract.trigger
  switch (trigger.type) {
    case "tool": {
      for (const matcher of trigger.args) if (!matcher.test(valueAt(args, matcher.keyPath), env.match)) return undefined
      if (trigger.unlessSeen && state.seenHits.has(trigger.unlessSeen)) return undefined
      return trigger.unlessSeen
        ? `${tool} call and nothing seen in this session matches /${trigger.unlessSeen.source}/`
        : `${tool} call matched`
    }
    case "state": {
      if (!isChanging(facts)) return undefined
      const count = state.steps.get(contract.id) ?? 0
      return count >= trigger.every
        ? `${count} changing steps since the user's last confirmation (limit ${trigger.every})`
        : undefined
    }
    case "boundary": {
      const outside = editTargets(args)
        .map((target) => pathForGlob(target, env.match))
        .filter((rel) => !anyMatch(trigger.allowed, rel))
      return outside.length ? `${outside.join(", ")} is outside ${trigger.globs.join(", ")}` : undefined
    }
    case "spread": {
      const written = topDirs(args, env)
      if (written.length === 0) return undefined
      const dirs = new Set([...state.touchedDirs.keys(), ...written])
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
        return hit ? `${hit} is a guard file` : undefined
      }
      if (isMapping(args) && typeof args.command === "string") {
        const hit = bashTouchesGuard(args.command, env.paths, env.guard, env.realpath)
        return hit ? `the command touches ${hit}, a guard file or directory` : undefined
      }
      return undefined
    }
    case "message":
      return undefined
  }
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

/** What the engine needs from outside: paths, the guard's files, and a realpath (the only file-system access). */
type EngineEnv = { paths: Paths; guard: GuardFiles; match: MatchContext; realpath: RealPath }

/**
 * A screen: the screen parts of several tool contracts' matchers on one argument, joined into one regex. When it
 * fails on a call, none of those matchers can hold, so none of those contracts fires: an allowed call with 50 regex
 * contracts on bash's `command` costs one regex test, not 50. When it holds, each contract is checked as usual.
 */
type Screen = { keyPath: string[]; kind: ScreenPart["kind"]; regex: RegExp }

function screenHolds(screen: Screen, args: unknown, env: EngineEnv): boolean {
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
type ToolPlan = {
  edit: boolean // an edit tool: its targets count for the spread
  contracts: Contract[]
  screenOf: number[]
  screens: Screen[]
  counting: Contract[]
}

function toolPlan(active: readonly Contract[], tool: string): ToolPlan {
  const contracts = active.filter((contract) => toolApplies(contract, tool))
  const groups = new Map<string, { keyPath: string[]; part: ScreenPart; sources: string[]; members: number[] }>()
  contracts.forEach((contract, index) => {
    if (contract.trigger.type !== "tool") return
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
  const counting = contracts.filter((contract) => contract.trigger.type === "state")
  return { edit: anyMatch(EDIT_TOOL_RES, tool), contracts, screenOf, screens, counting }
}

/** The verdict on one call from its tool's plan. An allowed call allocates nothing but its empty verdict. */
function evaluatePlan(plan: ToolPlan, facts: CallFacts, state: SessionState, env: EngineEnv): Verdict {
  let hits: Hit[] | undefined
  let mode: Mode | "allow" = "allow"
  let screened: (boolean | undefined)[] | undefined
  for (let i = 0; i < plan.contracts.length; i++) {
    const contract = plan.contracts[i]
    const screen = plan.screenOf[i]
    if (screen >= 0) {
      screened ??= []
      screened[screen] ??= screenHolds(plan.screens[screen], facts.args, env)
      if (!screened[screen]) continue
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
function effectiveMode(contract: Contract): Mode {
  return contract.trigger.type === "message" && contract.mode === "block" ? "warn" : contract.mode
}

/**
 * Tools that only look, plan or delegate: never a changing step. (A subagent's own changes count for its root
 * session; the `task` call that starts it does not.) Any other tool, an MCP tool included, may change something.
 */
const LOOKING_TOOLS = new Set([
  ...OWN_TOOLS,
  ..."read grep glob list webfetch websearch codesearch todowrite todoread task skill lsp question".split(" "),
])

/** Whether a call counts as a changing step: an edit tool, a bash command that is not read-only, an unknown tool. */
function isChangingStep(tool: string, args: unknown): boolean {
  if (EDIT_TOOLS.includes(tool)) return true
  if (tool === "bash") return !(isMapping(args) && typeof args.command === "string" && isReadOnlyCommand(args.command))
  return !LOOKING_TOOLS.has(tool)
}

/** What one allowed call was counted for, to give back if it turns out not to have run. */
type Reservation = { steps: string[]; dirs: string[] }

/**
 * Counts an allowed changing call at once (so parallel calls of one step never pass the limit together) and keeps
 * what it counted until the call's end is known: `settle` when it ran, `release` when it did not (blocked by another
 * plugin, denied by opencode's permissions, or failed). Blocked calls never get here.
 */
function reserve(state: SessionState, callID: string, plan: ToolPlan, facts: CallFacts, env: EngineEnv): void {
  if ((plan.counting.length === 0 && !plan.edit) || !isChanging(facts)) return
  const counted: Reservation = { steps: [], dirs: [] }
  for (const contract of plan.counting) {
    state.steps.set(contract.id, (state.steps.get(contract.id) ?? 0) + 1)
    counted.steps.push(contract.id)
  }
  if (plan.edit) {
    for (const dir of topDirs(facts.args, env)) {
      state.touchedDirs.set(dir, (state.touchedDirs.get(dir) ?? 0) + 1)
      counted.dirs.push(dir)
    }
  }
  state.reserved.set(callID, counted)
  // Beyond the bound the oldest call is taken as run: counting one call too many is the safe side.
  if (state.reserved.size > MAX_RESERVED) state.reserved.delete(state.reserved.keys().next().value as string)
}

/** The call ran: what it was counted for stays. */
function settle(state: SessionState, callID: string): void {
  state.reserved.delete(callID)
}

/** The call did not run or failed: what it was counted for is given back. */
function release(state: SessionState, callID: string): void {
  const counted = state.reserved.get(callID)
  if (!counted) return
  state.reserved.delete(callID)
  for (const id of counted.steps) state.steps.set(id, Math.max(0, (state.steps.get(id) ?? 0) - 1))
  for (const dir of counted.dirs) {
    const left = (state.touchedDirs.get(dir) ?? 0) - 1
    if (left > 0) state.touchedDirs.set(dir, left)
    else state.touchedDirs.delete(dir)
  }
}

function evaluateMessage(contracts: readonly Contract[], text: string): Hit[] {
  const capped = capText(text, MESSAGE_CAP)
  const hits: Hit[] = []
  for (const contract of contracts) {
    const trigger = contract.trigger
    if (trigger.type !== "message") continue
    if (text.trim().length < trigger.minLength) continue
    if (trigger.pattern && !trigger.pattern.test(capped)) continue
    if (trigger.unless && trigger.unless.test(capped)) continue
    hits.push({ contract: { ...contract, mode: effectiveMode(contract) }, detail: "message" })
  }
  return hits
}

// Texts the model and the user read -------------------------------------------------------------------------------

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
 * seen: the block comes first), and exactly what lifts the block. No Markdown: the TUI shows it raw.
 */
function blockMessage(tool: string, hits: Hit[], warns: Hit[], state: SessionState, settings: Settings): string {
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
      ? `Only the human can let one blocked call through: /anchor bypass <reason> (${left} of ${settings.maxOverrides} overrides left); you may call anchor_bypass with a reason, which asks the human.`
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

function warnNote(hits: Hit[]): string {
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
function tipText(hit: Hit, on?: string): string {
  return `tip${on ? ` on ${on}` : ""}: ${hit.contract.message ?? hit.contract.description} (${hit.contract.id})`
}

/** "a bash call", "an edit call": the article a tool's name takes in a sentence for the person. */
function aTool(tool: string): string {
  return `${/^[aeiou]/i.test(tool) ? "an" : "a"} ${tool}`
}

/** The rules of a toast in plain words, each with its id: "Never rewrite shared history (no-force-push)". */
function rulesInWords(hits: Hit[]): string {
  return hits.map(({ contract }) => `${clause(contract.description)} (${contract.id})`).join("; ")
}

function blockToast(tool: string, hits: Hit[]): string {
  const rules = rulesInWords(hits)
  const lifts = hits.every((hit) => releaseOf(hit.contract) === "message")
    ? "Your next message lets the agent go on."
    : "The agent was told why; /anchor bypass <reason> lets one call through."
  return `semantic-anchors: blocked ${aTool(tool)} call: ${rules}. ${lifts}`
}

function warnToast(tool: string, hits: Hit[]): string {
  const rules = rulesInWords(hits)
  return `semantic-anchors: the ${tool} call ran, with a note to the agent: ${rules}.`
}

// The bypass question. opencode's TUI draws a permission it does not know by its name alone (patterns and metadata
// are not shown), and its "Allow always" screen lists the request's `always` entries: so the name carries the facts,
// and the one `always` entry tells the person that "always" still means this one call. The entry is a sentence that
// never equals a later question's pattern (a contract id), so opencode asks again next time.

/** The permission every bypass question's name starts with; the config hook's rule BYPASS_RULE matches them all. */
const BYPASS_PERMISSION = "anchor-bypass"
const BYPASS_RULE = `${BYPASS_PERMISSION}*`
const BYPASS_ALWAYS = "this one blocked call only: semantic-anchors asks again next time"
const REASON_SHOWN = 120 // characters of the model's reason in the question and the toasts

/** A text as one bounded line: control characters and line breaks become spaces (the dialog shows one line). */
function oneLine(text: string, cap: number): string {
  const line = text
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
  return line.length <= cap ? line : `${line.slice(0, cap - 3).trimEnd()}...`
}

/** What the human decides on: which contract blocked which tool, the model's reason, the overrides left. */
function bypassFacts(state: SessionState, reason: string, settings: Settings): string {
  const last = state.lastBlocked
  const blocked = last
    ? `contract${last.contracts.includes(",") ? "s" : ""} ${last.contracts} blocked ${aTool(last.tool)} call`
    : "no call was blocked yet in this session"
  const left = Math.max(0, settings.maxOverrides - state.overridesUsed)
  return `${blocked}; reason: ${oneLine(reason, REASON_SHOWN)}; ${left} of ${settings.maxOverrides} overrides left`
}

function bypassQuestion(facts: string): string {
  return `${BYPASS_PERMISSION}: ${facts}`
}

function bypassAskToast(facts: string): string {
  return `semantic-anchors: the agent asks you to let one blocked call run once: ${facts}. Answer in the dialog below.`
}

function bypassGrantedToast(used: number, max: number): string {
  return `semantic-anchors: bypass granted once (override ${used} of ${max}): the next blocked call in this session may run once.`
}

/** A refusal, from the rules (bypassRefusal's words, without the model's backticks) or from the human (Reject). */
function bypassRefusedToast(refusal?: string): string {
  const why = refusal
    ? refusal.replace(/^(Bypass refused|Error):\s*/, "").replaceAll("`", "")
    : "you did not allow it; the blocked call stays blocked."
  return `semantic-anchors: bypass refused: ${why}`
}

function problemsToast(problems: readonly Problem[]): string {
  const errors = problems.filter((p) => p.severity === "error").length
  const first = problems[0]
  return (
    `semantic-anchors: ${problems.length} config problem${problems.length === 1 ? "" : "s"} ` +
    `(${errors} error${errors === 1 ? "" : "s"}), first: ${formatProblem(first)}; run /anchor status to see all.`
  )
}

// =================================================================================================================
// Adapter: opencode's hooks, the /anchor command and the two tools
// =================================================================================================================

/** Resolves every path from the plugin input and the environment at server() time (never process.cwd()). */
export function resolvePaths(
  input: { directory?: string; worktree?: string },
  env: Record<string, string | undefined>,
): Paths {
  const home = env.HOME || "/"
  const directory = normalizePath(input.directory || input.worktree || home)
  const worktree = normalizePath(input.worktree || directory)
  const globalDir = normalizePath(`${env.XDG_CONFIG_HOME || `${home}/.config`}/opencode`)
  const fromEnv = env.OPENCODE_SEMANTIC_ANCHORS_CONFIG
  return {
    directory,
    worktree,
    home,
    globalDir,
    globalFile: fromEnv ? resolvePath(directory, fromEnv, home) : `${globalDir}/${CONFIG_FILE_NAME}`,
    globalFromEnv: Boolean(fromEnv),
    projectFile: `${directory}/.opencode/${CONFIG_FILE_NAME}`,
  }
}

function labelFor(path: string, paths: Paths): string {
  const inProject = relativeInside(paths.directory, path)
  if (inProject !== undefined) return inProject
  const inHome = relativeInside(paths.home, path)
  return inHome !== undefined && paths.home !== "/" ? `~/${inHome}` : path
}

async function readFile(path: string): Promise<{ text?: string; error?: string }> {
  try {
    return { text: await Bun.file(path).text() }
  } catch (error) {
    const code = (error as { code?: string }).code
    return { error: code === "ENOENT" ? "ENOENT" : `${code ?? "error"}: ${(error as Error).message ?? error}` }
  }
}

export async function loadConfig(paths: Paths): Promise<Config> {
  const reads: FileRead[] = []
  for (const [path, layer] of [
    [paths.globalFile, "global"],
    [paths.projectFile, "project"],
  ] as const) {
    const read = await readFile(path)
    // A missing file is the normal case, except the one the user named explicitly.
    if (read.error === "ENOENT" && layer === "global" && paths.globalFromEnv)
      read.error = "ENOENT: OPENCODE_SEMANTIC_ANCHORS_CONFIG names a file that does not exist"
    reads.push({ path, label: labelFor(path, paths), layer, ...read })
  }
  return buildConfig(reads)
}

/**
 * The file system's view of a path for the integrity check: links resolved when the path exists, or when its parent
 * directory does (a new file written into a linked directory). On any error, the path as given: the check by name
 * still applies.
 */
function realpathOf(abs: string): string {
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

/** Adds the resolved form of each guard path, so a project reached through a link (macOS /tmp) still matches. */
function withResolvedLinks(guard: GuardFiles, realpath: RealPath): GuardFiles {
  const exact = new Set(guard.exact)
  for (const path of guard.exact) exact.add(realpath(path))
  const roots = [...new Set([...guard.roots, ...guard.roots.map(realpath)])]
  return { ...guard, exact, roots }
}

type Client = PluginInput["client"]
type Level = "debug" | "info" | "warn" | "error"
type Variant = "info" | "success" | "warning" | "error"
type Part = { type?: string; text?: string; synthetic?: boolean; ignored?: boolean }
type HookName =
  | "config"
  | "event"
  | "chat.message"
  | "command.execute.before"
  | "experimental.chat.system.transform"
  | "tool.execute.before"
  | "tool.execute.after"
type HookInput<K extends HookName> = Parameters<NonNullable<Hooks[K]>>[0]
type HookOutput<K extends HookName> = Parameters<NonNullable<Hooks[K]>>[1]

const ECHO_MARK = `${TAG} /anchor`

/** Strips the literal double quotes `opencode run` wraps around a multi-word argument. */
function stripArgumentQuotes(text: string): string {
  let out = text.trim()
  while (out.length >= 2 && ((out.startsWith('"') && out.endsWith('"')) || (out.startsWith("'") && out.endsWith("'"))))
    out = out.slice(1, -1).trim()
  return out
}

/** One plugin instance: the config in force, the root sessions, and the host's client. */
class Anchors {
  config = defaultConfig()
  readonly sessions = new RootSessions()
  private activeCache = new Map<string, Map<string, Contract[]>>() // role -> agent ("" for none) -> contracts
  private readonly loggedFailures = new Set<string>()
  /** Whether a user message has come in this process (the first one re-sends the config-problems toast). */
  heardUser = false
  /** Sessions whose current turn is an /anchor command: the model is told to answer it in one line. */
  readonly commandTurns = new Set<string>()
  /** Sessions whose next user message is a slash command's expanded template, not the person's own words. */
  readonly templateTurns = new Set<string>()

  constructor(
    readonly client: Client | undefined,
    readonly paths: Paths,
    readonly env: EngineEnv,
  ) {}

  // Client calls are fire and forget: never awaited (an awaited toast at init hung opencode), failures swallowed.
  /**
   * A line of opencode's log. opencode prints no service name for a plugin's line, so the message starts with it
   * (`semantic-anchors: `, here and nowhere else: a person greps for it); the level is opencode's own field.
   */
  log(level: Level, message: string, extra?: Record<string, unknown>): void {
    try {
      const pending = this.client?.app?.log?.({
        body: { service: SERVICE, level, message: `${SERVICE}: ${message}`, extra },
      })
      ;(pending as Promise<unknown> | undefined)?.catch?.(() => {})
    } catch {
      // logging must never break the session
    }
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
    if (this.loggedFailures.size < 100) this.loggedFailures.add(text)
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
  }

  /** The active contracts of a role and agent (locks follow the agent), computed once per config. */
  active(role: string, agent: string | undefined): Contract[] {
    // Two maps, not one key made of both names: this runs on every tool call, and a new string per call costs.
    let byAgent = this.activeCache.get(role)
    if (!byAgent) this.activeCache.set(role, (byAgent = new Map()))
    let list = byAgent.get(agent ?? "")
    if (!list) byAgent.set(agent ?? "", (list = activeContracts(this.config, role, agent)))
    return list
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
function filesSummary(config: Config): string {
  return config.files.map((file) => `${file.label} (${file.status})`).join("; ")
}

/** The text of `/anchor status` and of the anchor_status tool. */
function statusText(anchors: Anchors, sessionID: string): string {
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
function bypass(anchors: Anchors, sessionID: string, reason: string, via: string, toastDelayMs: number): string {
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

/** `/anchor reload`: the files read again; every session's counters and overrides reset, its role and evidence kept. */
async function reload(anchors: Anchors): Promise<string> {
  anchors.install(await loadConfig(anchors.paths))
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

/** The human's `/anchor` command: status, bypass or reload. */
async function runAnchorCommand(anchors: Anchors, sessionID: string, rawArguments: string): Promise<string> {
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
      return await reload(anchors)
    default:
      return `Unknown /anchor subcommand "${sub}". Use: /anchor status | /anchor bypass <reason> | /anchor reload`
  }
}

const NO_ASK = "Bypass refused: this host cannot ask the human."

/**
 * The model's anchor_bypass: refusals first (the human is not asked for what would be refused), then opencode's
 * permission prompt, named `anchor-bypass: <the facts>` so the dialog shows them, with a toast of the same facts;
 * only an approved prompt (ctx.ask resolves) reaches the bypass. Every outcome is a toast too.
 */
async function askForBypass(anchors: Anchors, args: unknown, ctx: ToolContext): Promise<string> {
  const reason = isMapping(args) && typeof args.reason === "string" ? args.reason.trim().slice(0, 500) : ""
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
function anchorTools(anchors: Anchors): Record<string, ToolDefinition> {
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
        description: "semantic-anchors: status | bypass <reason> | reload",
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
  const state = anchors.sessions.find(anchors.sessions.rootOf(part.sessionID))
  if (!state) return
  release(state, part.callID)
  dropNote(state, part.callID)
}

/** A user message: the agent sets the role; real text is evidence, confirms, and may earn a tip. */
async function onChatMessage(
  anchors: Anchors,
  hookInput: HookInput<"chat.message">,
  output: HookOutput<"chat.message">,
): Promise<void> {
  try {
    const { config } = anchors
    const root = anchors.sessions.rootOf(hookInput.sessionID)
    // A subagent's prompt is written by the model: it neither confirms nor changes the role.
    if (root !== hookInput.sessionID) return
    const state = anchors.sessions.state(root, config.defaultRole)
    const fromTemplate = anchors.templateTurns.delete(hookInput.sessionID)
    const agent = (output?.message as { agent?: string } | undefined)?.agent ?? hookInput.agent
    if (agent !== undefined) {
      if (state.agent !== undefined && state.agent !== agent) {
        resetCounters(state)
      }
      state.agent = agent
      state.role = roleForAgent(config, agent)
    }
    refreshStatus(anchors, hookInput.sessionID, (output?.parts ?? []) as Part[])
    const text = ((output?.parts ?? []) as Part[])
      .filter((part) => part?.type === "text" && !part.synthetic && !part.ignored && typeof part.text === "string")
      .map((part) => part.text as string)
      .join("\n")
    if (!text.trim()) return
    state.warnedThisTurn.clear() // a new user turn (an /anchor command too): each warn contract may speak once more
    if (text.startsWith(ECHO_MARK)) return // our own /anchor result is not a user message: it does not confirm
    anchors.commandTurns.delete(hookInput.sessionID)
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
 * opencode runs the command hook before chat.message names the agent, so a status written there shows the role of
 * the session's previous agent (or the default one, in a new session). Written again once the agent is known.
 */
function refreshStatus(anchors: Anchors, sessionID: string, parts: Part[]): void {
  for (const part of parts) {
    if (part?.type !== "text" || typeof part.text !== "string" || !part.text.startsWith(ECHO_MARK)) continue
    const end = part.text.indexOf("\n")
    const args = part.text.slice(ECHO_MARK.length, end === -1 ? undefined : end).trim()
    if (/^(status)?$/i.test(args.split(/\s+/)[0])) part.text = anchorCommandText(args, statusText(anchors, sessionID))
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
    const result = await runAnchorCommand(anchors, hookInput.sessionID, hookInput.arguments)
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
): string | undefined {
  if (OWN_TOOLS.has(hookInput.tool)) return undefined
  const { tool, sessionID } = hookInput
  const state = anchors.stateOf(sessionID)
  const plan = anchors.planFor(anchors.active(state.role, state.agent), tool)
  const facts: CallFacts = { tool, args: output?.args }
  const verdict = evaluatePlan(plan, facts, state, anchors.env)
  if (verdict.hits.length === 0) {
    reserve(state, hookInput.callID, plan, facts, anchors.env)
    return undefined // the allowed call without a note or tip: no text is built, no toast sent
  }
  if (verdict.mode === "block") {
    const blocking = verdict.hits.filter((hit) => hit.contract.mode === "block")
    const ids = blocking.map((hit) => hit.contract.id).join(", ")
    state.lastBlocked = { contracts: ids, tool }
    if (state.passes === 0) {
      anchors.log("warn", `blocked ${aTool(tool)} call: ${rulesInWords(blocking)}`, { sessionID })
      anchors.toast(blockToast(tool, blocking), "warning")
      // A warn of the same call speaks in the block text instead (the call never gets a result to append it to).
      const warns = verdict.hits.filter(
        (hit) => hit.contract.mode === "warn" && !state.warnedThisTurn.has(hit.contract.id),
      )
      for (const hit of warns) state.warnedThisTurn.add(hit.contract.id)
      return blockMessage(tool, blocking, warns, state, anchors.config.settings)
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
  if (state.pendingNotes.size > MAX_PENDING_NOTES)
    state.pendingNotes.delete(state.pendingNotes.keys().next().value as string)
  return first
}

/** A call that did not run never showed its note: the next matching call of the turn carries it instead. */
function dropNote(state: SessionState, callID: string): void {
  const note = state.pendingNotes.get(callID)
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
  try {
    blocked = decideToolCall(anchors, hookInput, output)
  } catch (error) {
    anchors.failOpen("tool.execute.before", error)
    return
  }
  // Thrown outside the try on purpose: inside it, the fail-open catch would swallow the block and the call would run.
  if (blocked) throw new Error(blocked)
}

/** After a tool ran: its pending warn note is appended to the result, and the result is evidence. */
async function onToolAfter(
  anchors: Anchors,
  hookInput: HookInput<"tool.execute.after">,
  output: HookOutput<"tool.execute.after">,
): Promise<void> {
  try {
    if (OWN_TOOLS.has(hookInput.tool)) return
    const state = anchors.stateOf(hookInput.sessionID)
    settle(state, hookInput.callID)
    const original = typeof output?.output === "string" ? output.output : ""
    const note = state.pendingNotes.get(hookInput.callID)
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
async function startAnchors(input: PluginInput | undefined): Promise<Anchors> {
  const paths = resolvePaths(input ?? {}, process.env)
  const guard = withResolvedLinks(guardFiles(paths), realpathOf)
  const env: EngineEnv = {
    paths,
    guard,
    match: { directory: paths.directory, worktree: paths.worktree },
    realpath: realpathOf,
  }
  const anchors = new Anchors(input?.client, paths, env)
  try {
    anchors.install(await loadConfig(paths))
  } catch (error) {
    anchors.failOpen("config load", error)
  }
  anchors.reportProblems()
  anchors.log("info", `loaded: ${filesSummary(anchors.config)}`)
  return anchors
}

// The adapter: opencode's hooks, each handed to its named function above.
const server: Plugin = async (input) => {
  const anchors = await startAnchors(input)
  return {
    tool: anchorTools(anchors),
    config: (cfg) => onConfig(anchors, cfg),
    event: (hookInput) => onEvent(anchors, hookInput),
    "chat.message": (hookInput, output) => onChatMessage(anchors, hookInput, output),
    "command.execute.before": (hookInput, output) => onCommand(anchors, hookInput, output),
    "experimental.chat.system.transform": (hookInput, output) => onSystem(anchors, hookInput, output),
    "tool.execute.before": (hookInput, output) => onToolBefore(anchors, hookInput, output),
    "tool.execute.after": (hookInput, output) => onToolAfter(anchors, hookInput, output),
  }
}

export default { id: "semantic-anchors", server }
