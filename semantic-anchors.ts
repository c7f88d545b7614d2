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
 * docs/contracts.md documents every key; `opencode-semantic-anchors.schema.json` lets editors check them. Bad input
 * never stops a session: a broken file is skipped, a broken contract disables only itself, and every problem is
 * reported with file, key path and fix (log, one toast, `/anchor status`). A tool trigger can name commands as they
 * are typed (`runs: ["git push --force"]`): it fires when any simple command the bash call would run is one, however
 * it is spelled, chained or wrapped, and never on text (an echo's arguments, a grep pattern, a commit message); the
 * ready rules are in `./install.sh --example-config`, the patterns in full in docs/contracts.md ("Command rules"). A
 * contract can carry `examples` (calls it must fire on, calls it must let pass), checked at every load;
 * `/anchor test <tool> <arguments>` shows the human how the contracts in force judge one call, matcher by matcher,
 * without counting or recording anything.
 *
 * The bounds that keep memory flat (root sessions kept, text caps, overrides by default) are the constants below.
 *
 * Layout, top-down: (1) pure core, no I/O: names, paths, globs, regexes, the contract model, built-ins and presets,
 * the validator; (2) rule engine: what an edit touches, the bash reader (PROGRAMS: what each program does with its
 * arguments; one reading per call serves the step counter, the command patterns and the integrity guard), the
 * command patterns (`runs:`; FLAG_NAMES: one flag's spellings) and the integrity guard, session state (RootSessions:
 * one eviction rule, least recently used), the bypass refusals, verdicts and the texts; (3) adapter, last: the plugin
 * instance (Anchors: config, sessions, client), `/anchor` (status, test, bypass, reload) and the two tools with their
 * one bypass path, each hook a named function (onConfig, onEvent, onChatMessage, onCommand, onToolBefore,
 * onToolAfter), then server().
 */
import type { Hooks, Plugin, PluginInput, ToolContext, ToolDefinition } from "@opencode-ai/plugin"
// @ts-ignore -- no Node types in this zero-dependency project; node:fs is built into Bun, which runs the plugin.
import { lstatSync, readFileSync, realpathSync } from "node:fs"

// opencode runs plugins on Bun. These are the only host globals used, declared here so the file type-checks
// without a runtime types package.
declare const Bun: { YAML: { parse(text: string): unknown } }
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
const MAX_RESOLVED_DIRS = 1024 // directories whose realpath is kept (ResolvedDirs); beyond, they are resolved again
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

/** No `//`, no segment starting with `.`, no trailing `/`: normal for sure, without a regex (checked per tool call). */
function looksNormal(path: string): boolean {
  return path !== "" && path[0] !== "." && path[path.length - 1] !== "/" && !path.includes("//") && !path.includes("/.")
}

/** POSIX path normalisation: collapses `//`, `.` and `..` (never above the root). */
function normalizePath(path: string): string {
  if (looksNormal(path) || !NOT_NORMAL.test(path)) return path // the common case: nothing to split and join
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
  // Kept by glob: a config names the same tool globs in many contracts (`bash`, `edit`), and a RegExp without the g
  // or y flag holds no state, so one object serves them all.
  const key = `${hideDotfiles ? "." : "-"}${glob}`
  let regex = globCache.get(key)
  if (!regex) {
    if (globCache.size >= GLOB_CACHE_SIZE) globCache.clear()
    globCache.set(key, (regex = compileGlob(glob, hideDotfiles)))
  }
  return regex
}
const globCache = new Map<string, RegExp>()
const GLOB_CACHE_SIZE = 1000

/** Characters a regex gives a meaning to (escapeRegex's set), `*` and `?` aside: globToRegExp reads those. */
const REGEX_SYNTAX = ".+^${}()|[]\\"

function compileGlob(glob: string, hideDotfiles: boolean): RegExp {
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
      source += REGEX_SYNTAX.includes(ch) ? `\\${ch}` : ch // escapeRegex, without a regex per character
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
  tmpdir: string // $TMPDIR, else /tmp: where a command rule's `$TMPDIR` points
  globalDir: string // ${XDG_CONFIG_HOME:-$HOME/.config}/opencode
  globalFile: string // the global file, or the one OPENCODE_SEMANTIC_ANCHORS_CONFIG names
  globalFromEnv: boolean
  projectFile: string
}

/** What a matcher needs besides the value: paths are matched relative to the project when they lie inside it. */
type MatchContext = { directory: string; worktree: string }

/** One argument matcher; `kind`, `text` (`regex /x/i`, `glob a/**`) and `negate` are for the explanations. */
type ArgMatcher = {
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
type ScreenPart = { kind: "regex" | "glob"; source: string; flags: string }

// `toolsText` is the `tools` globs as written (`[bash, edit]`, or `(any tool)`), for the explanations.
type Trigger =
  | {
      type: "tool"
      tools: RegExp[]
      toolsText: string
      runs: CommandPattern[] | null // `runs:`: the simple commands a bash call runs (null: no such key)
      args: ArgMatcher[]
      unlessSeen: RegExp | null
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
  examples?: Examples // checked at every load (checkExamples); they travel with the trigger they were written for
}

/**
 * A contract's examples: calls (or user messages) it must fire on, and ones it must let pass. A tool-call example is
 * judged as the call of a fresh session with `steps` changing steps already counted (state triggers) and `seen`
 * already seen (unlessSeen); a message example is one user message.
 */
type Example = { tool: string; args: unknown; steps: number; seen?: string } | { message: string }
type Examples = { fires: Example[]; passes: Example[] }

/** Tools that change files. opencode names its patch tool `patch` or `apply_patch` depending on the model. */
const EDIT_TOOLS = ["edit", "write", "patch", "multiedit", "apply_patch"]
const EDIT_TOOL_RES = EDIT_TOOLS.map((name) => globToRegExp(name))
const BOUNDARY_GLOBS = ["docs/**", "**/*.md", "**/*.adoc", "adr/**"]

/** Goal or verification words, English and German: a request that names neither gets a tip. */
const INTENT_WORDS =
  "\\b(?:goal|aim|purpose|so that|in order to|because|why|should|must|expect|verify|verif|test|check|ensure|" +
  "assert|accept|done when|success|ziel|damit|um zu|weil|warum|soll|muss|erwart|prüf|pruef|test|sicherstell|" +
  "abnahme|fertig wenn|erfolg|nachweis)"

/** A tool-call example of a built-in contract. */
function call(tool: string, args: Raw, more: { steps?: number; seen?: string } = {}): Example {
  return { tool, args, steps: more.steps ?? 0, seen: more.seen }
}

const WRITE_APP = { filePath: "src/app.ts", content: "export {}" }
const EDIT_APP = { filePath: "src/app.ts", oldString: "a", newString: "b" }

/** The contract every role has, whatever its preset says (contractsOfRole): the guard of the guard's own files. */
const IN_EVERY_ROLE = "guard-integrity"

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

// =================================================================================================================
// Pure core: the validator
// =================================================================================================================

/** Every key and enum the validator accepts; a test keeps `opencode-semantic-anchors.schema.json` equal to it. */
export const SCHEMA_KEYS = {
  top: ["version", "settings", "roles", "presets", "contracts"],
  settings: ["maxOverrides", "confirmPattern"],
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

const TRIGGER_KEYS_BY_TYPE: Record<string, readonly string[]> = {
  tool: ["type", "tools", "runs", "args", "unlessSeen", "flags"],
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

/** The `tools` of a trigger as written, for the explanations. */
function toolsText(value: unknown): string {
  return value === undefined ? "(any tool)" : `[${[value].flat().join(", ")}]`
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
type FileLayer = "global" | "project"

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
function applyFile(config: Config, raw: unknown, file: string, layer: FileLayer, env: EngineEnv): string {
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
  if (raw.contracts !== undefined && raw.contracts !== null) applyContracts(config, raw.contracts, layer, r, env)
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
  const found: DuplicateKey[] = []
  let stack: KeyScope[] = []
  let blockScalarIndent = -1 // inside a | or > scalar: lines indented deeper than this belong to it
  let flowDepth = 0 // inside a flow collection that spans lines
  let n = 0
  for (let start = 0; start <= text.length; n++) {
    let end = text.indexOf("\n", start)
    if (end < 0) end = text.length
    const lineEnd = end > start && text.charCodeAt(end - 1) === 13 ? end - 1 : end
    const lineStart = start
    start = end + 1
    let at = lineStart
    while (at < lineEnd && text.charCodeAt(at) === 32) at++
    const indent = at - lineStart
    const first = text.charCodeAt(at)
    const blank = at === lineEnd || ((first < 33 || first > 126) && /^\s*$/.test(text.slice(at, lineEnd)))
    if (blockScalarIndent >= 0) {
      if (blank || indent > blockScalarIndent) continue
      blockScalarIndent = -1
    }
    if (flowDepth > 0) {
      flowDepth = Math.max(0, flowDepth + flowDepthChange(text.slice(lineStart, lineEnd)))
      continue
    }
    if (blank || first === 35 /* # */) continue
    const line = text.slice(lineStart, lineEnd)
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
    const rest = column ? line.slice(column) : line
    let current: KeyScope | undefined
    while (stack.length && stack[stack.length - 1].indent > indent) stack.pop()
    const top = stack[stack.length - 1]
    if (dashes) {
      // A new item of the sequence under the enclosing mapping's last key.
      const seqKey = top?.lastKey ?? ""
      let index = 0
      if (top) {
        top.items ??= new Map()
        index = (top.items.get(seqKey) ?? -1) + 1
        top.items.set(seqKey, index)
      }
      current = new KeyScope(column, top, `[${index}]${"[0]".repeat(dashes - 1)}`)
      stack.push(current)
    }
    const key = rest.includes(":") ? KEY_LINE.exec(rest.length > 1024 ? rest.slice(0, 1024) : rest) : null
    if (!key) {
      flowDepth = flowOpened(rest)
      continue
    }
    if (!current) {
      if (top && top.indent === column) current = top
      else stack.push((current = new KeyScope(column, top, "")))
    }
    const name = key[1][0] === '"' || key[1][0] === "'" ? key[1].slice(1, -1) : key[1]
    const firstLine = current.keys.get(name)
    if (firstLine !== undefined && name !== "<<") {
      const keyPath = current.keyPath()
      found.push({ keyPath: keyPath ? `${keyPath}.${name}` : name, key: name, line: n + 1, firstLine })
    } else current.keys.set(name, n + 1)
    current.lastKey = name
    const value = rest.slice(key[0].length)
    if (BLOCK_SCALAR.test(value)) blockScalarIndent = column
    else flowDepth = flowOpened(value)
  }
  return found
}

/**
 * One mapping (or sequence item) of duplicateKeys' scan: the keys seen in it, by line. Its key path is made only when
 * a duplicate needs it: from the scope it is in, that scope's key when it opened, and its own `[index]` suffix.
 */
class KeyScope {
  readonly keys = new Map<string, number>()
  items?: Map<string, number> // the items seen of each sequence under a key of this mapping
  lastKey?: string
  private readonly parentKey?: string
  constructor(
    readonly indent: number,
    private readonly parent: KeyScope | undefined,
    private readonly suffix: string,
  ) {
    this.parentKey = parent?.lastKey
  }
  keyPath(): string {
    if (!this.parent) return this.suffix
    const base = this.parent.keyPath()
    const inner = !this.parentKey ? base : base ? `${base}.${this.parentKey}` : this.parentKey
    return inner + this.suffix
  }
}

/** Parses YAML text (JSON is YAML too) and applies it; a parse error skips the file. */
function applyText(config: Config, text: string, file: string, layer: FileLayer, env: EngineEnv): string {
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
  const status = applyFile(config, raw, file, layer, env)
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

/**
 * The built-ins' examples judged (a test keeps them passing; a problem here would name the built-in). They are the
 * same contracts at every load and judged with no file-system access, so the answer depends only on the paths: it is
 * worked out once per Paths object (the plugin keeps one for its life), not at every load and reload.
 */
const builtinExamplesJudged = new WeakMap<Paths, readonly Problem[]>()
function builtinExampleProblems(config: Config, env: EngineEnv): readonly Problem[] {
  let problems = builtinExamplesJudged.get(env.paths)
  if (!problems) {
    const found: Problem[] = []
    const builtins = new Reporter("built-ins", found)
    for (const contract of config.contracts.values())
      if (contract.examples) checkExamples(contract, join(contract.id, "examples"), "it stays in force", env, builtins)
    builtinExamplesJudged.set(env.paths, (problems = found))
  }
  return problems
}

/**
 * Builds the configuration from file contents already read (no I/O here, so it is fast and testable). `paths` is
 * where the examples are judged (a relative path in an example is inside this project); default: a project at `/`.
 */
export function buildConfig(reads: FileRead[], paths: Paths = resolvePaths({}, {})): Config {
  const config = defaultConfig()
  const env = exampleEnv(paths)
  config.problems.push(...builtinExampleProblems(config, env))
  for (const read of reads) {
    if (read.text !== undefined) {
      config.files.push({ label: read.label, status: applyText(config, read.text, read.label, read.layer, env) })
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

/** The files install.sh installs into a plugins directory. */
const PLUGIN_FILES = ["semantic-anchors.ts", "loop-guard.ts", "opencode-semantic-anchors.schema.json"]

/**
 * The guard's own files: config files, opencode config, plugin directories. `mentioned` holds when a text contains
 * any of `mentions` (one regex test instead of a search per name, on every bash call).
 */
type GuardFiles = { exact: Set<string>; roots: string[]; mentions: string[]; mentioned: RegExp }

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
  // The plugins install.sh puts there: every file in a plugins directory is a guard file (isGuardPath), but a find
  // name test or a glob is judged on known paths only, so these stand for them (`find / -name '*.ts' -delete`).
  for (const dir of roots.slice(2)) for (const name of PLUGIN_FILES) exact.add(`${dir}/${name}`)
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
  const mentioned = new RegExp(mentions.filter(Boolean).map(escapeRegex).join("|") || "(?!)")
  return { exact, roots, mentions, mentioned }
}

const PLUGIN_DIR_FILE = /(?:^|\/)\.?opencode\/plugins?\/[^/]+/
const CONFIG_BASENAME = /(?:^|\/)opencode-semantic-anchors\.(?:ya?ml|json)$/

function isGuardPath(abs: string, guard: GuardFiles): boolean {
  return guard.exact.has(abs) || CONFIG_BASENAME.test(abs) || PLUGIN_DIR_FILE.test(abs)
}

// The bash reader ---------------------------------------------------------------------------------------------------
//
// What a bash command does with each of its words, the way each tool's manual says. A quote-aware scan, not a shell:
// `scanCommand` splits a command line into simple commands (at unquoted `|`, `||`, `&&`, `;`, `&`, newlines and
// parentheses) with their redirections and here-documents; `readSimple` looks the program up in PROGRAMS, the one
// table of what each program does with its arguments: which are scripts or patterns (text, never paths), which are
// files it reads, which files it writes (creates, changes, moves or deletes). Three verdicts rest on one reading of
// the call (readCommand): the changing-step classifier (`isReadOnlyCommand`), guard-integrity (`bashTouchesGuard`)
// and the command patterns of `runs:` (every simple command it would run, recorded as RanCommand).
// A program the table does not know, an interpreter's script (awk, perl, python -c, ...), a script file and a
// command substitution are opaque: they may do anything, so the command is a changing step and a guard name anywhere
// in it blocks. A character of a script (`.`, `/`, `*`) is never taken for a path.

/** One simple command: its words with quotes removed, the files its redirections write, its here-documents' text. */
type SimpleCommand = { words: string[]; redirects: string[]; heredocs: string[] }

/** A scanned command line; `substituted`: it has `$(...)`, backquotes or `<(...)`, whose output is not known. */
type Scan = { commands: SimpleCommand[]; substituted: boolean }

const MAX_NESTING = 4 // `bash -c` in `$(...)` in `eval` ...: deeper than this is opaque
const MAX_PREFIXES = 16 // `sudo env nice ...` before the program: more than this is opaque

/** Where the `)` closing a `$(` or `<(` opened just before `start` is, quotes and nesting respected; -1 if none. */
function closingParen(text: string, start: number): number {
  let depth = 1
  for (let i = start; i < text.length; i++) {
    const ch = text[i]
    if (ch === "\\") i++
    else if (ch === "'") i = text.indexOf("'", i + 1) === -1 ? text.length : text.indexOf("'", i + 1)
    else if (ch === '"') {
      for (i++; i < text.length && text[i] !== '"'; i++) if (text[i] === "\\") i++
    } else if (ch === "(") depth++
    else if (ch === ")" && --depth === 0) return i
  }
  return -1
}

/** The characters scanCommand looks at, outside quotes and inside double quotes; the others only extend a word. */
function charTable(chars: string): Uint8Array {
  const table = new Uint8Array(128)
  for (const ch of chars) table[ch.charCodeAt(0)] = 1
  return table
}
const UNQUOTED = charTable(" \t\n'\"\\`$#|;()&<>")
const IN_DOUBLE_QUOTES = charTable('"\\`$')

/** Where the run of ordinary characters from `start` ends: the next character `special` marks, or the end. */
function plainRunEnd(command: string, start: number, special: Uint8Array): number {
  let at = start
  for (; at < command.length; at++) {
    const code = command.charCodeAt(at)
    if (code < 128 && special[code]) break
  }
  return at
}

/** The arrays a SimpleCommand has until its first redirect or here-document (most have none): never written to. */
const NO_WORDS: string[] = Object.freeze([]) as unknown as string[]

function newSimpleCommand(): SimpleCommand {
  return { words: [], redirects: NO_WORDS, heredocs: NO_WORDS }
}

type PendingHeredoc = { delimiter: string; stripTabs: boolean; into: SimpleCommand }

/** The simple commands of a command line, or null when it cannot be followed (an unterminated quote, too deep). */
function scanCommand(command: string, depth = 0): Scan | null {
  if (depth > MAX_NESTING) return null
  return new LineScanner(command, depth).run()
}

/**
 * scanCommand's state while it reads one line: the word being built and the simple command it belongs to. A class,
 * not closures over locals: every bash call of every session goes through it, and the closures were a third of it.
 */
class LineScanner {
  readonly scan: Scan = { commands: [], substituted: false }
  private current: SimpleCommand = newSimpleCommand()
  private word = ""
  private inWord = false
  private readonly heredocs: PendingHeredoc[] = []

  constructor(
    private readonly command: string,
    private readonly depth: number,
  ) {}

  private endWord(): void {
    if (this.inWord) this.current.words.push(this.word)
    this.word = ""
    this.inWord = false
  }

  private endCommand(): void {
    this.endWord()
    const current = this.current
    if (current.words.length || current.redirects.length) this.scan.commands.push(current)
    else if (!this.heredocs.length || this.heredocs[this.heredocs.length - 1].into !== current) return // kept for the next
    this.current = newSimpleCommand()
  }

  private addRedirect(target: string): void {
    if (harmlessTarget(target)) return
    if (this.current.redirects === NO_WORDS) this.current.redirects = []
    this.current.redirects.push(target)
  }

  // `$(...)`, backquotes, `<(...)`, `>(...)`: the inner command is read as well; what it prints is not known.
  private substitute(inner: string): boolean {
    const nested = scanCommand(inner, this.depth + 1)
    if (!nested) return false
    for (const one of nested.commands) this.scan.commands.push(one)
    this.scan.substituted = true
    return true
  }

  /** The index of the substitution's last character, or -1 when it cannot be followed. */
  private substitution(i: number): number {
    const command = this.command
    if (command[i] === "`") {
      let end = i + 1
      while (end < command.length && command[end] !== "`") end += command[end] === "\\" ? 2 : 1
      return end < command.length && this.substitute(command.slice(i + 1, end)) ? end : -1
    }
    if (command.startsWith("$((", i)) {
      const end = command.indexOf("))", i + 3) // arithmetic: no command inside
      return end === -1 ? -1 : end + 1
    }
    const open = command[i] === "$" || command[i] === "<" || command[i] === ">" ? i + 1 : i
    const end = closingParen(command, open + 1)
    return end !== -1 && this.substitute(command.slice(open + 1, end)) ? end : -1
  }

  run(): Scan | null {
    const command = this.command
    let quote = ""
    for (let i = 0; i < command.length; i++) {
      const ch = command[i]
      if (quote === "'") {
        // Nothing is special inside single quotes: the word takes everything up to the closing quote at once.
        const close = command.indexOf("'", i)
        this.word += command.slice(i, close === -1 ? command.length : close)
        if (close === -1) break
        quote = ""
        i = close
        continue
      }
      if (quote === '"') {
        if (ch === '"') quote = ""
        else if (ch === "\\" && i + 1 < command.length) {
          // Inside double quotes a backslash escapes only $ ` " \ and a newline; elsewhere it stays (sed needs it).
          const next = command[++i]
          if (next !== "\n") this.word += '$`"\\'.includes(next) ? next : `\\${next}`
        } else if (ch === "`" || (ch === "$" && command[i + 1] === "(")) {
          const end = this.substitution(i)
          if (end === -1) return null
          this.word += command.slice(i, end + 1)
          i = end
        } else {
          const end = plainRunEnd(command, i + 1, IN_DOUBLE_QUOTES)
          this.word += command.slice(i, end)
          i = end - 1
        }
        continue
      }
      if (ch === "'" || ch === '"') {
        quote = ch
        this.inWord = true
      } else if (ch === "\\") {
        if (command[i + 1] === "\n")
          i++ // a line continuation
        else if (i + 1 < command.length) {
          this.word += command[++i]
          this.inWord = true
        }
      } else if (ch === "`" || (ch === "$" && command[i + 1] === "(")) {
        const end = this.substitution(i)
        if (end === -1) return null
        this.word += command.slice(i, end + 1)
        this.inWord = true
        i = end
      } else if (ch === "#" && !this.inWord) {
        while (i + 1 < command.length && command[i + 1] !== "\n") i++
      } else if (ch === " " || ch === "\t") this.endWord()
      else if (ch === "\n") {
        this.endCommand()
        i = readHeredocs(command, i, this.heredocs)
      } else if (ch === "|" || ch === ";" || ch === "(" || ch === ")") this.endCommand()
      else if (ch === "&") {
        if (command[i + 1] === ">") {
          // &> and &>> send both streams to a file
          this.endWord()
          const target = redirectTarget(command, i + (command[i + 2] === ">" ? 3 : 2))
          this.addRedirect(target.word)
          i = target.end - 1
        } else this.endCommand()
      } else if (ch === ">") {
        // [n]>, >>, >|, n>&m: a write unless it goes to /dev/null or duplicates a descriptor; >(...) runs a command
        if (this.inWord && /^\d+$/.test(this.word)) {
          this.word = ""
          this.inWord = false
        } else this.endWord()
        if (command[i + 1] === "(") {
          const end = this.substitution(i)
          if (end === -1) return null
          i = end
          continue
        }
        let at = i + 1
        if (command[at] === ">" || command[at] === "|") at++
        const target = redirectTarget(command, at)
        this.addRedirect(target.word)
        i = target.end - 1
      } else if (ch === "<") {
        this.endWord()
        if (command[i + 1] === "(") {
          const end = this.substitution(i)
          if (end === -1) return null
          i = end
        } else if (command[i + 1] === "<" && command[i + 2] !== "<") {
          // a here-document: its body, on the lines after this one, is the command's input, not commands
          const stripTabs = command[i + 2] === "-"
          const target = redirectTarget(command, i + (stripTabs ? 3 : 2))
          // the delimiter is the word after quote removal: `<<\EOF` and `<<'EOF'` both end at a line `EOF`
          this.heredocs.push({ delimiter: target.word.replace(/\\/g, ""), stripTabs, into: this.current })
          i = target.end - 1
        } else {
          let at = i + 1
          while (command[at] === "<") at++
          i = redirectTarget(command, at).end - 1 // input redirection and here-strings read: skip their word
        }
      } else {
        const end = plainRunEnd(command, i + 1, UNQUOTED)
        this.word += command.slice(i, end)
        this.inWord = true
        i = end - 1
      }
    }
    if (quote) return null
    this.endCommand()
    return this.scan
  }
}

/** Reads the bodies of the here-documents opened on the line that ends at `newline`; returns the last index used. */
function readHeredocs(command: string, newline: number, pending: PendingHeredoc[]): number {
  if (pending.length === 0) return newline // most lines open none
  let at = newline
  for (const { delimiter, stripTabs, into } of pending.splice(0)) {
    // The body is the text between this line's end and the delimiter's line (or the end): found line by line,
    // cut once.
    const bodyStart = at + 1
    let bodyEnd = command.length
    while (at < command.length) {
      const lineStart = at + 1
      const newlineAt = command.indexOf("\n", lineStart)
      const lineEnd = newlineAt === -1 ? command.length : newlineAt
      let from = lineStart
      if (stripTabs) while (from < lineEnd && command[from] === "\t") from++
      at = lineEnd
      if (lineEnd - from === delimiter.length && command.startsWith(delimiter, from)) {
        bodyEnd = lineStart - 1
        break
      }
    }
    if (into.heredocs === NO_WORDS) into.heredocs = []
    into.heredocs.push(command.slice(bodyStart, Math.max(bodyStart, bodyEnd)))
  }
  return at
}

/** The word after a redirection operator (blanks skipped) and where it ends. Quotes are taken as they are. */
function redirectTarget(command: string, start: number): { word: string; end: number } {
  let at = start
  while (command[at] === " " || command[at] === "\t") at++
  const begin = at
  for (; at < command.length; at++) {
    const code = command.charCodeAt(at)
    if (code < 128 ? REDIRECT_WORD_END[code] : /\s/.test(command[at])) break
  }
  if (command[begin] === "&" && /\d|-/.test(command[begin + 1] ?? "")) at = Math.max(at, begin + 2)
  const word = command.slice(begin, at)
  return { word: word.includes("'") || word.includes('"') ? word.replace(/["']/g, "") : word, end: at }
}
/** What ends a redirection's word: a blank (any `\s`, beyond ASCII too) or an operator character. */
const REDIRECT_WORD_END = charTable(" \t\n\r\v\f|;&()<>")

function harmlessTarget(target: string): boolean {
  if (target[0] === "&") return /^&(\d+|-)$/.test(target)
  return target[0] === "/" && /^\/dev\/(null|stdout|stderr|tty)$/.test(target)
}

/**
 * What one simple command does with its words. `writes`: what it creates, changes, moves or deletes (with
 * `throughLinks` when it writes through a symbolic link to its target; with `filter` for `find`, whose tests say
 * which paths under the root it reaches); `reads`: files it only reads; `nested`: shell code it runs, read like a
 * command line (`bash -c`, `eval`, `sh <<EOF`); `changing`: a changing step; `opaque`: it runs code this reader does
 * not follow.
 */
type Target = { word: string; throughLinks: boolean; filter?: (findPath: string) => boolean }
type Reading = {
  writes: Target[]
  reads: string[]
  nested: string[]
  changing: boolean
  opaque: boolean
  lists?: Target[] // what it prints as paths, when that is narrower than its reads (find: what its tests select)
  codeFromPipe?: boolean // a shell that runs what it reads from a pipe: the line's here-documents may be that code
}
type ProgramReader = (args: string[], stdin: string[], depth: number) => Reading

/** The lists a reading has when its reader gave none: shared, never written to (a reader that adds to a list makes
 * its own: `reading({ writes: [] })`). */
const NO_TARGETS: Target[] = Object.freeze([]) as unknown as Target[]

function reading(part: Partial<Reading> = {}): Reading {
  // Built field by field, not spread: a bash call makes several, and the spread was a tenth of its reading's time.
  const one: Reading = {
    writes: part.writes ?? NO_TARGETS,
    reads: part.reads ?? NO_WORDS,
    nested: part.nested ?? NO_WORDS,
    changing: part.changing ?? false,
    opaque: part.opaque ?? false,
  }
  if (part.lists) one.lists = part.lists
  if (part.codeFromPipe) one.codeFromPipe = true
  return one
}
/** The readings most programs get (an unknown program; one that only prints): shared, never written to. */
const OPAQUE_READING: Reading = Object.freeze(reading({ changing: true, opaque: true }))
const NOTHING_READ: Reading = Object.freeze(reading())
const OPAQUE = (): Reading => OPAQUE_READING

/** Options and operands the way getopt splits them. `values`: short options that take a value (the rest of the
 * cluster, or the next word); `optional`: short options whose value can only be attached (`-i.bak`); `numeric`:
 * short options whose attached value is only a number, the cluster going on after it (perl's `-l0ne`); `long`: long
 * options that take the next word when written without `=`. `--` ends the options; options may follow operands. */
type OptionSpec = { values?: string; optional?: string; numeric?: string; long?: string[] }
type Getopt = { options: Map<string, string[]>; operands: string[] }

function getopt(args: readonly string[], spec: OptionSpec = {}): Getopt {
  const options = new Map<string, string[]>()
  const operands: string[] = []
  for (let k = 0; k < args.length; k++) {
    const arg = args[k]
    if (arg === "--") {
      operands.push(...args.slice(k + 1))
      break
    }
    if (arg.startsWith("--")) {
      const eq = arg.indexOf("=")
      const name = arg.slice(2, eq === -1 ? undefined : eq)
      if (eq !== -1) addOption(options, name, arg.slice(eq + 1))
      else if (spec.long?.includes(name)) addOption(options, name, args[++k] ?? "")
      else addOption(options, name, "")
    } else if (arg.length < 2 || arg[0] !== "-") operands.push(arg)
    else {
      for (let c = 1; c < arg.length; c++) {
        const letter = arg[c]
        if (spec.values?.includes(letter)) {
          addOption(options, letter, c + 1 < arg.length ? arg.slice(c + 1) : (args[++k] ?? ""))
          break
        }
        if (spec.optional?.includes(letter)) {
          addOption(options, letter, arg.slice(c + 1))
          break
        }
        if (spec.numeric?.includes(letter)) {
          const number = /^(?:x[0-9a-fA-F]*|[0-9]*)/.exec(arg.slice(c + 1))?.[0] ?? ""
          addOption(options, letter, number)
          c += number.length
          continue
        }
        addOption(options, letter, "")
      }
    }
  }
  return { options, operands }
}

function addOption(options: Map<string, string[]>, name: string, value: string): void {
  const list = options.get(name)
  if (list) list.push(value)
  else options.set(name, [value])
}

/** Whether an option was given, under either of its names (`-i`, `--in-place`). */
function has(parsed: Getopt, name: string, alias?: string): boolean {
  return parsed.options.has(name) || (alias !== undefined && parsed.options.has(alias))
}

/** The values an option was given, under its first name and then its other (`-e`, `--expression`): a new list. */
function values(parsed: Getopt, name: string, alias?: string): string[] {
  const out: string[] = []
  for (const value of parsed.options.get(name) ?? NO_WORDS) out.push(value)
  if (alias !== undefined) for (const value of parsed.options.get(alias) ?? NO_WORDS) out.push(value)
  return out
}

/** The words after a prefix program's own options (`sudo -u x`, `nice -n 5`): the command it runs. */
function afterOptions(args: readonly string[], valueLetters: string): string[] {
  let k = 0
  while (k < args.length && args[k].startsWith("-") && args[k] !== "-") {
    const arg = args[k++]
    if (arg === "--") break
    if (!arg.startsWith("--") && arg.length === 2 && valueLetters.includes(arg[1])) k++
  }
  return args.slice(k)
}

// Readers for the shapes most programs share.

/** Programs that print or look something up: their words are text (`echo`, `test`, `which`). */
const prints: ProgramReader = () => NOTHING_READ

/** Programs that only read: every operand a file it reads (`cat`, `ls`, `diff`). */
const readsFiles: ProgramReader = (args) => reading({ reads: getopt(args).operands })

/** Programs whose every operand is written (`rm`, `mkdir`, `touch`, `tee`). */
function writesFiles(spec: OptionSpec = {}, throughLinks = false): ProgramReader {
  return (args) => {
    const { operands } = getopt(args, spec)
    return reading({ writes: operands.map((word) => ({ word, throughLinks })), changing: true })
  }
}

/** `chmod MODE FILE...`, `chown OWNER FILE...`: the first operand is text (a mode may look like an option: -w). */
const modeThenFiles: ProgramReader = (args) => {
  let modeSeen = args.some((arg) => arg.startsWith("--reference"))
  const files: string[] = []
  for (const arg of args) {
    if (arg.startsWith("--") || /^-[RHLPcfvh]+$/.test(arg)) continue
    if (modeSeen) files.push(arg)
    modeSeen = true
  }
  return reading({ writes: files.map((word) => ({ word, throughLinks: true })), changing: true })
}

/** `cp`, `install`, `rsync`: SOURCE... DEST, or -t DIR SOURCE...: the sources are read, DEST written; `mv`: all. */
function copies(spec: OptionSpec, throughLinks: boolean, sourcesMove = false): ProgramReader {
  return (args) => {
    const parsed = getopt(args, spec)
    const target = values(parsed, "t", "target-directory")
    const { operands } = parsed
    let written: string[]
    let read: string[]
    if (target.length) [written, read] = [target, operands]
    else if (has(parsed, "d", "directory") && !sourcesMove)
      [written, read] = [operands, []] // install -d DIR...
    else [written, read] = [operands.slice(-1), operands.slice(0, -1)]
    if (sourcesMove) [written, read] = [[...written, ...read], []] // mv: the sources go away
    return reading({ writes: written.map((word) => ({ word, throughLinks })), reads: read, changing: true })
  }
}

/** `sort -o OUT`, `uniq IN OUT`, `tree -o OUT`: they read their inputs and write only the output file named. */
function writesOutput(spec: OptionSpec, split: (parsed: Getopt) => [written: string[], read: string[]]): ProgramReader {
  return (args) => {
    const [written, read] = split(getopt(args, spec))
    const writes = written.map((word) => ({ word, throughLinks: true }))
    return reading({ writes, reads: read, changing: written.length > 0 })
  }
}

/** `ln [-s] TARGET... LINK`: writes LINK (or, with one operand, a link of the same name here); TARGET is only named. */
const links: ProgramReader = (args) => {
  const parsed = getopt(args, { values: "tS", long: ["target-directory", "suffix"] })
  const target = values(parsed, "t", "target-directory")
  const { operands } = parsed
  const written = target.length
    ? target
    : operands.length === 1
      ? [operands[0].replace(/\/+$/, "").replace(/^.*\//, "")]
      : operands.slice(-1)
  const named = target.length || operands.length === 1 ? operands : operands.slice(0, -1)
  return reading({ writes: written.map((word) => ({ word, throughLinks: false })), reads: named, changing: true })
}

/** grep, rg, ag: the pattern (the first operand, unless -e/-f give it) is text; the other operands are read. */
function searches(spec: OptionSpec): ProgramReader {
  return (args) => {
    const parsed = getopt(args, spec)
    const patternGiven = has(parsed, "e", "regexp") || has(parsed, "f", "file")
    const files = patternGiven ? parsed.operands : parsed.operands.slice(1)
    return reading({ reads: [...files, ...values(parsed, "f", "file")] })
  }
}

/** `sudo`, `nice`, `timeout 5`, `xargs -n1`: the words after their options are a command of their own. */
function runs(valueLetters: string, skipOperands = 0): ProgramReader {
  return (args, stdin, depth) => {
    const rest = afterOptions(args, valueLetters).slice(skipOperands)
    if (rest.length === 0) return reading()
    // Their own words (`env -C DIR`) are read: a guard name there counts when the command changes something.
    const own = args.slice(0, args.length - rest.length)
    const inner = readSimple(rest, stdin, depth + 1)
    return { ...inner, reads: [...own, ...inner.reads] }
  }
}

/**
 * `xargs [OPTION]... COMMAND [ARG]...`: COMMAND runs on the words xargs reads from its input (`-a FILE` or a pipe),
 * which this reader does not follow: when COMMAND changes something (or is shell code) it is opaque, so a guard name anywhere in the
 * command line (`echo .opencode/x.yaml | xargs rm`) blocks as it did before the reader; a read-only one stays so.
 */
const readXargs: ProgramReader = (args, stdin, depth) => {
  const inner = runs("nILPsdEa")(args, stdin, depth)
  return inner.changing || inner.nested.length ? { ...inner, opaque: true, changing: true } : inner
}

/** `bash -c CODE`, `sh <<EOF`, `eval CODE`: shell code, read like a command line; a script file is opaque. */
const shell: ProgramReader = (args, stdin) => {
  const parsed = getopt(args, { values: "oO" })
  // `sh -c CODE NAME ARG...`: NAME and the ARGs are $0, $1, ...: the files CODE works on, read like operands
  if (has(parsed, "c")) return reading({ nested: parsed.operands.slice(0, 1), reads: parsed.operands.slice(1) })
  if (parsed.operands.length) return OPAQUE() // runs a script file
  // its code comes from its own here-document, or from a pipe (`cat <<EOF | sh`: that document is read as well)
  return stdin.length ? reading({ nested: stdin }) : { ...OPAQUE(), codeFromPipe: true }
}

// sed ---------------------------------------------------------------------------------------------------------------

/**
 * `sed [-n] [-e SCRIPT | -f FILE]... [-i[SUFFIX]] [FILE...]` (GNU sed's manual): the first operand is the script
 * when no -e/-f gives one; the other operands are the input files, written in place with -i / --in-place. A script
 * is read command by command: `w FILE`, `W FILE` and the `s///w FILE` flag write FILE; `e COMMAND` runs COMMAND
 * (read like any command line), `e` alone and the `s///e` flag run text the script makes (opaque); `r FILE`/`R FILE`
 * read. A script it cannot follow, or one from a file (-f), is opaque.
 */
const readSed: ProgramReader = (args) => {
  const parsed = getopt(args, {
    values: "efl",
    optional: "i",
    long: ["expression", "file", "line-length"],
  })
  const scripts = values(parsed, "e", "expression")
  const scriptFiles = values(parsed, "f", "file")
  const operands = parsed.operands
  // Without -e or -f, the first operand is the script and the rest are files.
  const scriptFirst = scripts.length === 0 && scriptFiles.length === 0
  if (scriptFirst) scripts.push(operands[0] ?? "")
  const inPlace = has(parsed, "i", "in-place")
  const throughLinks = has(parsed, "follow-symlinks")
  const result = reading({ writes: [], reads: [], nested: [], changing: inPlace, opaque: scriptFiles.length > 0 })
  for (let k = scriptFirst ? 1 : 0; k < operands.length; k++)
    if (inPlace) result.writes.push({ word: operands[k], throughLinks })
    else result.reads.push(operands[k])
  for (const file of scriptFiles) result.reads.push(file)
  for (const script of scripts) {
    const effects = sedScriptEffects(script)
    if (effects === null || effects.runs) result.opaque = true
    if (effects === null) continue
    for (const file of effects.writes) result.writes.push({ word: file, throughLinks: true })
    for (const file of effects.reads) result.reads.push(file)
    for (const line of effects.commands) result.nested.push(line)
  }
  if (result.opaque || result.writes.length || result.nested.length) result.changing = true
  return result
}

/**
 * What a sed script does besides printing: files it writes and reads, command lines it runs (`e COMMAND`), and
 * whether it runs text it makes itself (`e` alone, the `s///e` flag: opaque). Null when it cannot be followed.
 */
function sedScriptEffects(
  script: string,
): { writes: string[]; reads: string[]; commands: string[]; runs: boolean } | null {
  const effects = { writes: [] as string[], reads: [] as string[], commands: [] as string[], runs: false }
  let i = 0
  const blanks = () => {
    while (script[i] === " " || script[i] === "\t") i++
  }
  const restOfLine = () => {
    const end = script.indexOf("\n", i)
    const text = script.slice(i, end === -1 ? undefined : end).trim()
    i = end === -1 ? script.length : end
    return text
  }
  // Text up to an unescaped delimiter (a regex, a replacement); false when the script ends first.
  const delimited = (delimiter: string): boolean => {
    for (; i < script.length; i++) {
      if (script[i] === "\\") i++
      else if (script[i] === delimiter) {
        i++
        return true
      }
    }
    return false
  }
  const address = (): boolean => {
    if (isDigitAt(script, i)) while (isDigitAt(script, i) || script[i] === "~") i++
    else if (script[i] === "$") i++
    else if (script[i] === "/" || script[i] === "\\") {
      const delimiter = script[i] === "\\" ? script[++i] : "/"
      i++
      if (!delimited(delimiter)) return false
      while (script[i] === "I" || script[i] === "M") i++
    }
    return true
  }
  while (i < script.length) {
    while (isSpaceAt(script, i) || script[i] === ";" || script[i] === "}") i++
    if (i >= script.length) break
    if (script[i] === "#") {
      restOfLine()
      continue
    }
    if (!address()) return null
    blanks()
    if (script[i] === ",") {
      i++
      blanks()
      if (script[i] === "+" || script[i] === "~") for (i++; isDigitAt(script, i);) i++
      else if (!address()) return null
    }
    blanks()
    while (script[i] === "!") {
      i++
      blanks()
    }
    const command = script[i++]
    if (command === undefined) return null // an address without a command
    if (command === "{") continue
    if (command === "s" || command === "y") {
      const delimiter = script[i++]
      if (!delimiter || delimiter === "\n" || delimiter === "\\") return null
      if (!delimited(delimiter) || !delimited(delimiter)) return null
      if (command === "y") continue
      while (isDigitAt(script, i) || (i < script.length && "gpiImMe".includes(script[i])))
        if (script[i++] === "e") effects.runs = true
      if (script[i] === "w") {
        i++
        effects.writes.push(restOfLine())
      }
    } else if ("aic".includes(command)) {
      // text to the end of the line; a line ending in a backslash goes on
      for (;;) {
        const end = script.indexOf("\n", i)
        if (end === -1 || !/(^|[^\\])(\\\\)*\\$/.test(script.slice(i, end))) {
          i = end === -1 ? script.length : end
          break
        }
        i = end + 1
      }
    } else if (command === "w" || command === "W") effects.writes.push(restOfLine())
    else if (command === "r" || command === "R") effects.reads.push(restOfLine())
    else if (command === "e") {
      const line = restOfLine() // runs that command line, or without one the pattern space (unknown)
      if (line) effects.commands.push(line)
      else effects.runs = true
    } else if ("btT:v".includes(command)) {
      // a label ends at a blank or `;` (GNU sed 4.9): in `:a w FILE` the `w FILE` is a command of its own
      blanks()
      while (i < script.length && !isSpaceAt(script, i) && script[i] !== ";") i++
    } else if ("qQlL".includes(command)) {
      blanks()
      while (isDigitAt(script, i)) i++
    } else if (!"pPdDnNgGhHx=zF".includes(command)) return null
  }
  effects.writes = effects.writes.filter((file) => !harmlessTarget(file))
  return effects
}

/** [0-9] at `i` (false past the end): a test per character, without a regex per character. */
function isDigitAt(text: string, i: number): boolean {
  const code = text.charCodeAt(i)
  return code >= 48 && code <= 57
}

/** /\s/ at `i` (false past the end): ASCII blanks by code, other characters by the regex. */
function isSpaceAt(text: string, i: number): boolean {
  const code = text.charCodeAt(i)
  if (code < 128) return code === 32 || (code >= 9 && code <= 13)
  return /\s/.test(text[i])
}

// find --------------------------------------------------------------------------------------------------------------

/** find's tests and options that take the next word as their value (the name tests are read on their own). */
const FIND_VALUE_WORDS = new Set(
  `-maxdepth -mindepth -type -xtype -newer -anewer -cnewer -user -group -uid -gid -perm -size -mtime -atime -ctime
  -mmin -amin -cmin -used -links -inum -samefile -fstype -context -printf -lname -ilname -regextype -D`.split(/\s+/),
)
const FIND_NAME_TESTS = new Set([
  "-name",
  "-iname",
  "-path",
  "-ipath",
  "-wholename",
  "-iwholename",
  "-regex",
  "-iregex",
])
const FIND_EXEC = new Set(["-exec", "-execdir", "-ok", "-okdir"])
const FIND_REGEX_REPEATS = 3 // unbounded repeats a -regex may have to be judged: C(path length + 3, 3) tries at worst
const FIND_WRITES_FILE = new Set(["-fprint", "-fprint0", "-fls", "-fprintf"])

/**
 * A shell pattern as find's -name and -path read it (fnmatch: `*` and `?` also match `/` and a leading dot), as a test
 * whose time is at most pattern x text: a backtracking RegExp of `**********Q` held the host for seconds.
 */
function fnmatchTest(pattern: string, ignoreCase: boolean): (text: string) => boolean {
  if (pattern.includes("[:") || pattern.includes("[=") || pattern.includes("[.")) return () => true // POSIX classes
  const literal = (ch: string) =>
    ignoreCase ? (c: string) => c.toLowerCase() === ch.toLowerCase() : (c: string) => c === ch
  // Each item matches one character; null is a `*`, any run of characters.
  const items: (((c: string) => boolean) | null)[] = []
  for (let i = 0; i < pattern.length; i++) {
    const ch = pattern[i]
    if (ch === "*") items.push(null)
    else if (ch === "?") items.push(() => true)
    else if (ch === "\\" && i + 1 < pattern.length) items.push(literal(pattern[++i]))
    else if (ch === "[" && pattern.indexOf("]", i + 2) !== -1) {
      const end = pattern.indexOf("]", i + 2)
      const body = pattern.slice(i + 1, end).replace(/\\/g, "\\\\")
      let set: RegExp
      try {
        set = new RegExp(`^[${body.startsWith("!") ? `^${body.slice(1)}` : body}]$`, ignoreCase ? "i" : "")
      } catch {
        return () => true // a pattern this cannot read may match anything
      }
      items.push((c) => set.test(c))
      i = end
    } else items.push(literal(ch))
  }
  return (text) => {
    // The classic wildcard match: on a mismatch, the last `*` takes one more character and the rest is tried again.
    let p = 0
    let t = 0
    let star = -1
    let resume = 0
    while (t < text.length) {
      const item = items[p]
      if (item) {
        if (item(text[t])) {
          p++
          t++
          continue
        }
      } else if (item === null) {
        star = p++
        resume = t
        continue
      }
      if (star === -1) return false
      p = star + 1
      t = ++resume
    }
    while (items[p] === null) p++
    return p === items.length
  }
}

/** One name test as a predicate on the path find prints, or undefined when it could match anything. */
function findNameTest(test: string, pattern: string): ((path: string) => boolean) | undefined {
  const ignoreCase = test.startsWith("-i")
  if (test.endsWith("name") && !test.endsWith("wholename")) {
    const matches = fnmatchTest(pattern, ignoreCase)
    return (path) => matches(path.replace(/\/+$/, "").replace(/^.*\//, "") || path)
  }
  if (test.endsWith("regex")) {
    // Not read, so it may match anything: an Emacs escape other than of a special character (groups \( \|,
    // intervals \{, anchors \' \` \< \>, classes \w \s-: JavaScript reads most as literals), a POSIX class,
    // and a regex that could backtrack for long on the host's event loop (nested, or more than FIND_REGEX_REPEATS
    // unbounded repeats: `.*.*.*.*.*.*.*.*.*.*Q` took seconds).
    if (/\\[^.*+?[\]^$\\/]|\[[:=.]/.test(pattern)) return undefined
    if (regexHazard(pattern) || (pattern.match(/[*+]|\{\d*,\}/g)?.length ?? 0) > FIND_REGEX_REPEATS) return undefined
    try {
      const re = new RegExp(`^(?:${pattern})$`, ignoreCase ? "i" : "")
      return (path) => re.test(path)
    } catch {
      return undefined
    }
  }
  return fnmatchTest(pattern, ignoreCase)
}

/** Whether a path may make a find expression (or a part of it) true. */
type FindTest = (printedPath: string) => boolean
const ANY_PATH: FindTest = () => true

/**
 * `find ROOT... EXPRESSION` (GNU find's manual): `-delete`, and `-exec`/`-ok` with a command that writes its `{}`,
 * reach the paths under each ROOT for which the expression can be true. The expression is parsed (`!`, `-a`, `-o`,
 * `,`, parentheses) and judged by its name tests (-name, -iname, -path, -wholename, -regex and their -i forms):
 * every other test, every action and a negated test are taken as true for any path, so the judgement can only
 * err towards "reached". `-fprint FILE` writes FILE; the command of `-exec` is read like any other.
 */
const readFind: ProgramReader = (args, _stdin, depth) => {
  let k = 0
  while (k < args.length && /^-([HLP]|O\d*|D)$/.test(args[k])) k += args[k] === "-D" ? 2 : 1
  const roots: string[] = []
  while (k < args.length && !/^[-(!,)]/.test(args[k])) roots.push(args[k++])
  if (roots.length === 0) roots.push(".")
  const result = reading({ writes: [], reads: [...roots], nested: [] })
  let reachesMatches = false
  const primary = (): FindTest => {
    const arg = args[k++]
    if (FIND_NAME_TESTS.has(arg)) return findNameTest(arg, args[k++] ?? "") ?? ANY_PATH
    if (arg === "-delete") reachesMatches = true
    else if (FIND_EXEC.has(arg)) {
      let end = k
      while (end < args.length && args[end] !== ";" && args[end] !== "+") end++
      const outerFound = ranFound
      ranFound = roots // its `{}` is each file found under them: what command patterns match it as
      let inner: Reading
      try {
        inner = readSimple(args.slice(k, end), [], depth + 1)
      } finally {
        ranFound = outerFound
      }
      k = end + 1
      for (const target of inner.writes) {
        if (target.word.includes("{}")) reachesMatches = true
        else result.writes.push(target)
      }
      result.reads.push(...inner.reads.filter((word) => !word.includes("{}")))
      result.nested.push(...inner.nested)
      if (inner.opaque || inner.nested.length) reachesMatches = true // it may do anything with {}
      result.changing ||= inner.changing
      result.opaque ||= inner.opaque
    } else if (FIND_WRITES_FILE.has(arg)) {
      result.writes.push({ word: args[k++] ?? "", throughLinks: true })
      if (arg === "-fprintf") k++
    } else if (FIND_VALUE_WORDS.has(arg)) k++
    return ANY_PATH
  }
  const unary = (): FindTest => {
    if (args[k] === "!" || args[k] === "-not") {
      k++
      unary()
      return ANY_PATH // a negated name test can match what the test does not
    }
    if (args[k] === "(") {
      k++
      const inner = or()
      if (args[k] === ")") k++
      return inner
    }
    return primary()
  }
  const and = (): FindTest => {
    const tests = [unary()]
    while (k < args.length && !/^(-o|-or|,|\))$/.test(args[k])) {
      if (args[k] === "-a" || args[k] === "-and") k++
      else tests.push(unary())
    }
    return (path) => tests.every((test) => test(path))
  }
  const or = (): FindTest => {
    const branches = [and()]
    while (k < args.length && /^(-o|-or|,)$/.test(args[k])) {
      k++
      branches.push(and())
    }
    return (path) => branches.some((test) => test(path))
  }
  const expression = k < args.length ? or() : ANY_PATH
  while (k < args.length) or() // a stray `)`: read the rest too, for its actions
  result.lists = roots.map((root) => ({ word: root, throughLinks: false, filter: expression }))
  if (reachesMatches) result.writes.push(...result.lists)
  if (result.writes.length) result.changing = true
  return result
}

// git, awk, perl ------------------------------------------------------------------------------------------------------

/** git: the read-only subcommands read their operands; `rm`, `mv` and `clean` write theirs; any other changes. */
const readGit: ProgramReader = (args, _stdin, depth) => {
  const globals = gitGlobals(args)
  if (isReadOnlyGit(args, globals)) return reading({ reads: args.filter((arg) => !arg.startsWith("-")) })
  const { at, global } = globals
  const sub = args[at]
  const rest = args.slice(at + 1)
  if (sub === "clean") {
    const cleaned = gitCleanArgs(rest)
    const writes = (cleaned ?? []).map((word) => ({ word, throughLinks: false }))
    return reading({ writes, reads: global, changing: !!cleaned })
  }
  // A commit or tag message (-m TEXT, -am TEXT, --message=TEXT) is text; the other operands are paths or names, and
  // so is the value of any other --option=VALUE (`--directory=DIR`); `--output=FILE` (diff, log, archive) is written.
  const operands: string[] = []
  const output: string[] = []
  for (let j = 0; j < rest.length; j++) {
    const value = /^--([^=]+)=([\s\S]*)$/.exec(rest[j])
    if (rest[j] === "--") {
      operands.push(...rest.slice(j + 1))
      break
    }
    if (/^-[a-zA-Z]*m$/.test(rest[j]) || rest[j] === "--message") j++
    else if (value?.[1] === "output") output.push(value[2])
    else if (value && value[1] !== "message") operands.push(value[2])
    else if (!rest[j].startsWith("-")) operands.push(rest[j])
  }
  const removes = sub === "rm" || sub === "mv"
  const writes = [
    ...output.map((word) => ({ word, throughLinks: true })),
    ...(removes ? operands : []).map((word) => ({ word, throughLinks: false })),
  ]
  const runs = gitRuns(sub, rest)
  const own = reading({ writes, reads: removes ? global : [...global, ...operands], changing: true, nested: runs.code })
  if (runs.command.length === 0) return own
  // `git bisect run CMD ARG...`: git runs that command as a wrapper runs its own (`sudo CMD ARG...`)
  const inner = readSimple(runs.command, [], depth + 1)
  return {
    ...inner,
    writes: [...own.writes, ...inner.writes],
    reads: [...own.reads, ...inner.reads],
    nested: [...own.nested, ...inner.nested],
    changing: true,
  }
}

/** git's options whose value is shell code it runs: `git rebase -x CMD`, `git filter-branch --tree-filter CMD`. */
const GIT_CODE_OPTIONS = /^--(?:exec|(?:env|tree|index|parent|msg|commit|tag-name)-filter)$/

/**
 * What a git subcommand runs besides itself. `code`: shell code, read like a command line (as `eval`'s): `git rebase
 * -x CMD`/`--exec=CMD` (after each commit), the filters of `git filter-branch`, `git submodule foreach CMD` (one word,
 * in each submodule). `command`: a command given as its words, run as they are: `git bisect run CMD ARG...`, `git
 * submodule foreach CMD ARG...`. Where it runs (a submodule) is not followed: its paths resolve as the line's.
 */
function gitRuns(sub: string, rest: readonly string[]): { code: string[]; command: string[] } {
  const none = { code: NO_WORDS, command: NO_WORDS }
  if (sub === "bisect") return rest[0] === "run" ? { code: NO_WORDS, command: rest.slice(1) } : none
  if (sub === "submodule") {
    let k = rest.indexOf("foreach")
    if (k < 0) return none
    for (k++; k < rest.length && rest[k].startsWith("-"); k++); // --recursive
    if (k === rest.length - 1) return { code: [rest[k]], command: NO_WORDS }
    return { code: NO_WORDS, command: rest.slice(k) }
  }
  if (sub !== "rebase" && sub !== "filter-branch") return none
  const code: string[] = []
  for (let k = 0; k < rest.length; k++) {
    const equals = rest[k].indexOf("=")
    if (rest[k].startsWith("--") && equals > 0 && GIT_CODE_OPTIONS.test(rest[k].slice(0, equals)))
      code.push(rest[k].slice(equals + 1))
    else if (GIT_CODE_OPTIONS.test(rest[k]) || (sub === "rebase" && /^-[a-zA-Z]*x$/.test(rest[k])))
      code.push(rest[++k] ?? "")
  }
  return { code: code.filter((line) => line !== ""), command: NO_WORDS }
}

/** An awk program that writes or runs something: `system(...)`, `print > file`, `print | cmd`, `cmd | getline`. */
const AWK_EFFECTS = /\bsystem\s*\(|\bprintf?\b[^;{}]*[>|]|\|\s*getline/
/** A perl filter (-n/-p) that does more than print: these words write files, run commands or run code it reads. */
const PERL_EFFECTS =
  /\b(?:system|exec|unlink|rename|open|sysopen|mkdir|rmdir|symlink|link|chmod|chown|truncate|utime|qx|eval|require)\b|`/

/**
 * `awk [-F FS] [-v VAR=VALUE] [-f FILE | PROGRAM] [FILE | VAR=VALUE]...`: the program is a script, the operands are
 * read. An awk program can write files and run commands, so guard names in it count (opaque); it is a changing step
 * only when it writes or runs something (AWK_EFFECTS), or when it comes from a file.
 */
const readAwk: ProgramReader = (args) => {
  const parsed = getopt(args, { values: "Ffve", long: ["file", "assign", "field-separator", "source"] })
  const files = values(parsed, "f", "file")
  const scripts = values(parsed, "e", "source")
  const operands = [...parsed.operands]
  if (files.length === 0 && scripts.length === 0) scripts.push(operands.shift() ?? "")
  return reading({
    reads: [...files, ...operands.filter((word) => !/^[A-Za-z_][A-Za-z0-9_]*=/.test(word))],
    changing: files.length > 0 || scripts.some((script) => AWK_EFFECTS.test(script)),
    opaque: true,
  })
}

/**
 * `perl [-n|-p] [-i[EXT]] [-e CODE]... [PROGRAM] [FILE...]`: with -i the files are written in place. A perl program
 * can do anything (opaque); `perl -ne`/`-pe` without -i is a filter that only prints, unless its code names a
 * function that writes or runs (PERL_EFFECTS).
 */
const readPerl: ProgramReader = (args) => {
  const parsed = getopt(args, { values: "eEIMm", optional: "iFxCdD", numeric: "l0" })
  const code = values(parsed, "e", "E")
  const operands = [...parsed.operands]
  const programFile = code.length === 0 ? operands.shift() : undefined
  const inPlace = has(parsed, "i")
  const filter = has(parsed, "n", "p") && programFile === undefined && !has(parsed, "M", "m") // a module can do anything
  return reading({
    writes: inPlace ? operands.map((word) => ({ word, throughLinks: false })) : [],
    reads: [...(inPlace ? [] : operands), ...(programFile ? [programFile] : [])],
    changing: inPlace || !filter || code.some((text) => PERL_EFFECTS.test(text)),
    opaque: true,
  })
}

/** `dd if=FILE of=FILE`: of= is written. */
const readDd: ProgramReader = (args) =>
  reading({
    writes: args.filter((arg) => arg.startsWith("of=")).map((arg) => ({ word: arg.slice(3), throughLinks: true })),
    reads: args.filter((arg) => arg.startsWith("if=")).map((arg) => arg.slice(3)),
    changing: true,
  })

/** One reader for each name in a blank-separated list. */
function each(names: string, reader: ProgramReader): Record<string, ProgramReader> {
  return Object.fromEntries(names.split(/\s+/).map((name) => [name, reader]))
}

/**
 * The table: each program and what it does with its arguments. A program not listed is opaque (a changing step; a
 * guard name anywhere in the command blocks). docs/contracts.md summarises it ("How bash commands are read", "What
 * counts as a changing step").
 */
const PROGRAMS: Record<string, ProgramReader> = {
  // print or look up: the words are text
  ...each("echo printf true false : test [ [[ date sleep wait pwd which whereis type whoami id uname hostname", prints),
  ...each("printenv basename dirname seq expr tr", prints),
  // only read: every operand a file read
  ...each("cat head tail wc ls less more diff cmp comm du df realpath readlink nl cut column jq file stat", readsFiles),
  ...each("sha1sum sha256sum md5sum cksum od hexdump xxd strings bat tac rev fold paste cd pushd popd ps", readsFiles),
  ...each("grep egrep fgrep", searches({ values: "efmABCdD", long: ["regexp", "file", "max-count", "context"] })),
  ...each("rg ag ack", searches({ values: "efgtTmABCjMEr", long: ["regexp", "file", "glob", "type", "replace"] })),
  sort: writesOutput({ values: "kotST", long: ["output", "key", "field-separator"] }, (p) => [
    values(p, "o", "output"),
    p.operands,
  ]),
  uniq: writesOutput({ values: "fsw" }, (p) => [p.operands.slice(1, 2), p.operands.slice(0, 1)]),
  tree: writesOutput({ values: "LPIoH" }, (p) => [values(p, "o"), p.operands]),
  // scripts and patterns: text; only the file operands are read or written
  sed: readSed,
  ...each("awk gawk mawk nawk", readAwk),
  perl: readPerl,
  find: readFind,
  git: readGit,
  // change: the operands are written (created, changed, moved or deleted)
  ...each("rm rmdir unlink", writesFiles()),
  mkdir: writesFiles({ values: "m" }),
  touch: writesFiles({ values: "dtr" }),
  truncate: writesFiles({ values: "sr" }, true),
  shred: writesFiles({ values: "ns" }, true),
  tee: writesFiles({}, true),
  ...each("chmod chown chgrp", modeThenFiles),
  mv: copies({ values: "tS", long: ["target-directory", "suffix"] }, false, true),
  cp: copies({ values: "tS", long: ["target-directory", "suffix"] }, true),
  install: copies({ values: "tSmog", long: ["target-directory", "suffix", "mode", "owner", "group"] }, true),
  rsync: copies({ values: "efBT", long: ["rsh", "filter", "exclude", "include"] }, false),
  ln: links,
  dd: readDd,
  // run another command: read that one
  sudo: runs("ugCDhprtTU"),
  nice: runs("n"),
  ...each("nohup time exec", runs("a")),
  timeout: runs("sk", 1),
  stdbuf: runs("ioe"),
  setsid: runs(""),
  ionice: runs("cnp"),
  // `watch [-n SECONDS] COMMAND...` hands its words to `sh -c` as one line; with -x/--exec it runs them as they are
  watch: (args, _stdin, depth) => {
    const rest = afterOptions(args, "nq")
    const own = args.slice(0, args.length - rest.length)
    if (rest.length === 0) return reading()
    if (!own.some((arg) => arg === "--exec" || /^-[a-zA-Z]*x/.test(arg)))
      return reading({ nested: [rest.join(" ")], reads: own })
    const inner = readSimple(rest, [], depth + 1)
    return { ...inner, reads: [...own, ...inner.reads] }
  },
  xargs: readXargs,
  env: (args, stdin, depth) =>
    args.some((arg) => arg === "-S" || arg.startsWith("--split-string")) ? OPAQUE() : runs("uC")(args, stdin, depth),
  command: (args, stdin, depth) => (args.some((arg) => /^-[vV]$/.test(arg)) ? reading() : runs("")(args, stdin, depth)),
  ...each("bash sh zsh dash ksh", shell),
  eval: (args) => reading({ nested: [args.join(" ")] }),
}

/** PROGRAMS as a Map: looked up once per simple command of every bash call. */
const PROGRAM_READERS = new Map(Object.entries(PROGRAMS))

/** Shell words that open or close a compound command; the command after them is read. */
const SHELL_KEYWORDS = new Set(["!", "{", "}", "if", "then", "else", "elif", "fi", "do", "done", "while", "until"])
/** Shell words whose following words are a list of values (`for f in ...`, `case $x in ...`): they are read. */
const LIST_KEYWORDS = new Set(["for", "case", "select", "in", "esac"])
/**
 * Variables whose value is a command that a program runs without a terminal, and the programs that run it:
 * `GIT_EXTERNAL_DIFF='rm -rf x' git diff` runs `rm -rf x`. Such a value is read as a command line when the command's
 * program is one of these (`GIT_EDITOR=true git commit` stays what git commit is; `EDITOR=vim ls` is ls). Pagers
 * (GIT_PAGER, PAGER) are not here: they run only when the output is a terminal, and opencode's bash tool has none.
 */
const COMMAND_VARIABLES: ReadonlyMap<string, ReadonlySet<string>> = (() => {
  const git = new Set(["git"])
  const editing = new Set(["git", "crontab", "visudo", "sudoedit", "vipw", "vigr", "edquota", "fc"])
  const ssh = new Set(["git", "ssh", "scp", "sftp", "rsync"])
  return new Map([
    ...["GIT_EXTERNAL_DIFF", "GIT_SSH", "GIT_SSH_COMMAND", "GIT_EDITOR", "GIT_SEQUENCE_EDITOR", "GIT_ASKPASS"].map(
      (name) => [name, git] as const,
    ),
    ...["EDITOR", "VISUAL"].map((name) => [name, editing] as const),
    ["SSH_ASKPASS", ssh] as const,
  ])
})()
/** git config given in the environment (as `git -c`): git is then no read-only command, and the values are read. */
const GIT_CONFIG_VARIABLE = /^GIT_CONFIG_(?:PARAMETERS|COUNT|KEY_\d+|VALUE_\d+)$/
/** Variables that make a program load code from a file (a library, a start-up script): what runs is not known. */
const CODE_VARIABLES = new Set(["LD_PRELOAD", "LD_AUDIT", "BASH_ENV", "NODE_OPTIONS", "PERL5OPT"])

/**
 * What one simple command does: its program looked up in PROGRAMS after variable assignments and shell keywords.
 * `depth` counts the commands it runs through (`sudo nice timeout 5 ...`): past MAX_PREFIXES it is opaque.
 */
function readSimple(words: string[], stdin: string[], depth = 0): Reading {
  if (depth > MAX_PREFIXES) {
    recordRan(words, 0, stdin, true)
    return OPAQUE()
  }
  // A variable's value (`d=.opencode; rm -rf $d`) and a loop's words (`for f in .opencode/*`) may be paths the
  // command goes on to use: they are read, so a guard name there counts when the command changes something.
  let values = NO_WORDS
  let names = NO_WORDS // the variables assigned, in order with their values
  let i = 0
  for (; i < words.length; i++) {
    const assignment = words[i].includes("=") ? /^([A-Za-z_][A-Za-z0-9_]*)=/.exec(words[i]) : null
    if (assignment) {
      if (values === NO_WORDS) [values, names] = [[], []]
      values.push(words[i].slice(assignment[0].length))
      names.push(assignment[1])
    } else if (!SHELL_KEYWORDS.has(words[i])) break
  }
  if (i === words.length || LIST_KEYWORDS.has(words[i])) return reading({ reads: [...values, ...words.slice(i)] })
  const word = words[i]
  const program = word[0] === "/" ? word.replace(/^\/(?:usr\/(?:local\/)?)?s?bin\//, "") : word // /usr/bin/sed is sed; ./bin/test is not test
  const reader = PROGRAM_READERS.get(program)
  ranVia.push(program) // the commands its reader finds it running are run "after" it
  const loadsCode = values.length > 0 && names.some((name) => CODE_VARIABLES.has(name))
  const one = reader && !loadsCode ? reader(words.slice(i + 1), stdin, depth) : OPAQUE()
  ranVia.pop()
  // Recorded after its reader, so a wrapper's inner command comes first; code that only prints (an awk or perl
  // filter) is followed enough: it runs nothing.
  recordRan(words, i, stdin, one.opaque && one.changing)
  if (values.length === 0) return one
  const commands = values.filter((_, k) => COMMAND_VARIABLES.get(names[k])?.has(program))
  const setsGitConfig = program === "git" && names.some((name) => GIT_CONFIG_VARIABLE.test(name))
  return {
    ...one,
    reads: [...values, ...one.reads],
    nested: commands.length ? [...one.nested, ...commands] : one.nested,
    changing: one.changing || setsGitConfig,
  }
}

/** A whole command line read: every simple command's reading (nested code included) and the redirect targets;
 * `ran`: every simple command it would run, for the command patterns (`runs:`). */
type CommandReading = {
  readings: Reading[]
  redirects: string[]
  changing: boolean
  opaque: boolean
  ran: RanCommand[]
  index?: RanIndex // `ran` by program, made the first time a command rule asks (ranIndex)
}

/**
 * One simple command a call would run: `words[start]` is its program (as written: `/usr/bin/git`), the words after it
 * its arguments; `stdin` its here-documents; `via` the wrappers and code it runs inside, outermost first
 * (`sudo`, `bash -c`); `opaque`: it runs code the reader does not follow (an unknown program, `python3 -c`, `ssh`).
 */
type RanCommand = {
  words: string[]
  start: number
  program: string // the program's name without its path: `git` for `/usr/bin/git`
  stdin: string[]
  via: string[]
  cwd: string[] // the `cd DIR` before it on the line, in order: where its relative paths resolve (path patterns)
  found?: readonly string[] // run by `find ROOT... -exec`: its roots, what `{}` stands for (with what lies under them)
  opaque: boolean
  args?: string[] // the words after the program, made the first time a pattern's program is this one
  code?: string // opaqueText, made the first time a pattern asks
}

// Where readSimple records the commands it finds, at any depth of wrappers (`sudo timeout 5 git ...`): set by
// readCommandAt for the line it reads. Threading a list through every ProgramReader would touch each of them for a
// concern only the command patterns have; the reading is synchronous, so one list at a time is in use.
let ranSink: RanCommand[] = []
const ranVia: string[] = [] // the programs (and shells' code) the command being read runs inside, outermost first
const ranCd: string[] = [] // the directories `cd` went to earlier on the line being read (and the lines around it)
let ranFound: readonly string[] = NO_WORDS // the roots of the `find` whose -exec command is being read

function recordRan(words: string[], start: number, stdin: string[], opaque: boolean): void {
  const via = ranVia.length ? ranVia.slice() : NO_WORDS
  const cwd = ranCd.length ? ranCd.slice() : NO_WORDS
  const ran: RanCommand = { words, start, program: programName(words[start]), stdin, via, cwd, opaque }
  if (ranFound.length) ran.found = ranFound
  ranSink.push(ran)
}

/** A program word without its directory: `/usr/bin/git` -> `git`. */
function programName(word: string): string {
  const slash = word.lastIndexOf("/")
  return slash < 0 ? word : word.slice(slash + 1)
}

// One entry: guard-integrity and the changing-step check (per state contract, and again when the call is counted)
// read the same command of one call.
let lastCommand: string | undefined
let lastReading: CommandReading | undefined

function readCommand(command: string): CommandReading {
  if (lastReading === undefined || lastCommand !== command) {
    // a line is read from the top: no wrapper or cd of an earlier reading (one cut short by a throw) carries over
    ranVia.length = 0
    ranCd.length = 0
    ranFound = NO_WORDS
    lastReading = readCommandAt(command, 0)
    lastCommand = command
  }
  return lastReading
}

function readCommandAt(command: string, depth: number): CommandReading {
  const scan = scanCommand(command, depth)
  if (scan === null) {
    // a line it cannot follow (an unclosed quote, too deep): its whole text is opaque code
    const ran = [
      {
        words: [command],
        start: 0,
        program: "",
        stdin: NO_WORDS,
        via: ranVia.length ? ranVia.slice() : NO_WORDS,
        cwd: NO_WORDS,
        opaque: true,
      },
    ]
    return { readings: [], redirects: [], changing: true, opaque: true, ran }
  }
  const result: CommandReading = {
    readings: [],
    redirects: [],
    changing: scan.substituted,
    opaque: scan.substituted,
    ran: [],
  }
  const outerSink = ranSink
  const outerCd = ranCd.length // a `cd` inside this line (`bash -c 'cd x && ...'`) ends with it
  ranSink = result.ran
  try {
    for (const simple of scan.commands) {
      if (simple.redirects.length) {
        for (const target of simple.redirects) result.redirects.push(target)
        result.changing = true
      }
      if (simple.words.length === 0) continue
      const ranBefore = result.ran.length
      const one = readSimple(simple.words, simple.heredocs)
      result.readings.push(one)
      result.changing ||= one.changing
      result.opaque ||= one.opaque
      // the code a command runs (`bash -c CODE`) is run inside the program recorded last for it: the outermost
      const runner = result.ran.length > ranBefore ? result.ran[result.ran.length - 1] : undefined
      const inside = runner ? `${runner.program}'s code` : "code"
      if (runner && (runner.program === "cd" || runner.program === "pushd")) changeDirectory(ranArgs(runner))
      for (const code of one.nested) readNestedInto(result, code, depth, inside)
      // a shell reading code from a pipe (`cat <<EOF | sh`): the line's here-documents may be that code, and so may
      // any word of the line (`echo 'git push -f' | sh`): the whole line is the code it runs, for the patterns
      if (one.codeFromPipe) {
        if (runner) runner.code = capText(command, REGEX_INPUT_CAP)
        for (const other of scan.commands)
          for (const code of other.heredocs) readNestedInto(result, code, depth, inside)
      }
    }
  } finally {
    ranSink = outerSink
    ranCd.length = outerCd
  }
  return result
}

/** `cd DIR` for the commands after it on the line: `cd` alone goes home; `cd -` (the last directory) is not followed. */
function changeDirectory(args: readonly string[]): void {
  const operands = args.filter((arg) => !arg.startsWith("-") || arg === "-")
  if (operands[0] === "-") return
  ranCd.push(operands[0] ?? "~")
}

/** Reads shell code a command runs (`bash -c CODE`) and adds what it does to the line's reading. */
function readNestedInto(result: CommandReading, code: string, depth: number, inside: string): void {
  ranVia.push(inside)
  const inner = readCommandAt(code, depth + 1)
  ranVia.pop()
  for (const one of inner.readings) result.readings.push(one)
  for (const target of inner.redirects) result.redirects.push(target)
  for (const ran of inner.ran) result.ran.push(ran)
  result.changing ||= inner.changing
  result.opaque ||= inner.opaque
}

/**
 * Whether a bash command only looks around (lists, reads, searches, asks git what is there) and so is not a changing
 * step: nothing in it writes a file (no output redirection other than to /dev/null or a descriptor) and no program
 * in it changes anything or runs code this reader does not follow. A false count asks the human once too often, a
 * missed one lets a change through unconfirmed: anything unknown counts.
 */
function isReadOnlyCommand(command: string): boolean {
  const read = readCommand(command)
  return !read.changing && read.readings.length > 0 // an empty command: the classifier cannot tell, so it counts
}

// Command patterns (`runs:`) ---------------------------------------------------------------------------------------
//
// A tool trigger's `runs: ["git push --force", "git push +*"]` fires when any simple command the bash call would run
// (readCommand's `ran`: chains, subshells, `$(...)`, `bash -c`/`eval`, after wrappers and `VAR=x`) is that program
// with that subcommand, all those flags and an operand for each operand glob. A pattern is written as it is typed:
//   - the first word is the program, by name (`git` matches `/usr/bin/git`); `{git,hub}` is any of them;
//   - then its subcommand words (`push`, `delete`; `{commit,merge}` any of them), found after the program's own
//     options (`git -C dir -c k=v push`, `kubectl -n prod delete`), npm's read as npm does (`npm pub` is publish:
//     NPM_COMMANDS); programs the reader knows to take no subcommand (rm, chmod, ...) have none;
//   - flags are read as the program parses them: any order, `-rf` = `-r -f`, `--opt=value`, the options before the
//     subcommand too (not git's); where FLAG_NAMES knows a program, a flag's spellings are one flag (`git push -f` =
//     `--force`, `rm -r` = `-R` = `--recursive`); rm's and git's long options by unique prefix (LONG_OPTIONS);
//     `!--dry-run` says the flag must be absent; `{-f,--force-with-lease}` is any of them;
//   - operands are globs (`+*` a `+refspec`, `*` anything); one that starts with `/`, `~`, `$HOME`, `$PROJECT` or
//     `$TMPDIR` is a path glob (`**` spans directories) matched against the operand resolved from the project
//     directory (`../x` is outside it); `!glob` leaves out the operands it matches (`!/tmp/**`); find's `{}` (in
//     `find ROOT... -exec CMD {} +`) stands for each root and what lies under it (foundOperands).
// Text is never a command: an echo's arguments, a grep pattern, a commit message, a here-document fed to cat. Code
// the reader cannot follow (`python3 -c`, `ssh host '...'`, an unknown program) fires when it names the pattern's
// words (program, subcommand, a spelling of each flag): it may run them, and the contract says so. A message it
// sends (gh's --body, curl's --data: MESSAGE_OPTIONS) is text, left out of what it names.

/** One flag of a pattern: any of its spellings (`{-f,--force-with-lease}`); a spelling's names all present (`-rf`). */
type FlagSpelling = { names: string[]; value?: string }
type PatternFlag = { any: FlagSpelling[]; absent: boolean }
/** One operand of a pattern: any of its globs; `path`: matched as a resolved path; `excluded`: `!glob`. */
type PatternOperand = { globs: string[]; path: boolean; excluded: boolean }
type CommandPattern = {
  text: string // as written, for the explanations
  programs: string[]
  subcommands: string[][] // each position's alternatives
  flags: PatternFlag[]
  operands: PatternOperand[]
  named: RegExp[] // what code the reader cannot follow must name (program, subcommands, each flag), each a regex
  keys: string[] // `program subcommand` (or `program`) for each alternative: one must be among a call's (ranIndex)
}

/** Programs that run the command after their options: a pattern names that command, and matches it behind them. */
const SEEN_THROUGH = new Set(
  "sudo nice nohup time exec timeout stdbuf setsid ionice watch xargs env command".split(" "),
)

/** A subcommand word of a pattern: `push`, `rollout`, `dist-tag`; a flag, an operand glob or a path is none. */
const SUBCOMMAND_WORD = /^[A-Za-z][\w.:-]*$/

/** Programs the reader knows that take no subcommand: every word after them is an option or an operand. */
const NO_SUBCOMMAND = new Set([...PROGRAM_READERS.keys()].filter((name) => name !== "git"))

/**
 * Flags with more than one spelling, per program or `program subcommand`: each short letter and its long name, the
 * long name the one flag. A flag not listed is itself (`--hard`).
 */
const FLAG_NAMES: Record<string, Record<string, string>> = {
  rm: { r: "recursive", R: "recursive", f: "force", i: "interactive", d: "dir", v: "verbose" },
  "git push": { f: "force", d: "delete", n: "dry-run", u: "set-upstream", q: "quiet", v: "verbose", o: "push-option" },
  "git clean": { f: "force", n: "dry-run", i: "interactive", q: "quiet", e: "exclude" },
  "git reset": { q: "quiet", p: "patch", N: "intent-to-add" },
  "git commit": { n: "no-verify", a: "all", m: "message", F: "file", q: "quiet", v: "verbose", s: "signoff" },
  "git merge": { n: "no-stat", m: "message", F: "file", q: "quiet", v: "verbose", s: "strategy", X: "strategy-option" },
  "git checkout": { f: "force", q: "quiet", p: "patch" },
  // npm's shorthands (`npm help config`): -d/-q/-s set the log level, -f is --force; --dry-run has no short form
  "npm publish": { w: "workspace", d: "loglevel", q: "loglevel", s: "loglevel", f: "force", g: "global" },
  "kubectl delete": {
    n: "namespace",
    l: "selector",
    f: "filename",
    k: "kustomize",
    A: "all-namespaces",
    R: "recursive",
    o: "output",
  },
}

/** Options that take the next word as their value, per program or `program subcommand` (so it is no operand). */
const FLAG_VALUES: Record<string, OptionSpec> = {
  "git push": { values: "o", long: ["repo", "receive-pack", "exec", "push-option", "recurse-submodules"] },
  "git clean": { values: "e", long: ["exclude"] },
  "git commit": {
    values: "mFCct",
    long: ["message", "file", "reuse-message", "reedit-message", "template", "author", "date", "fixup", "squash"],
  },
  "git merge": { values: "mFsX", long: ["message", "file", "strategy", "strategy-option", "into-name"] },
  "npm publish": { values: "w", long: ["tag", "access", "otp", "registry", "workspace", "loglevel"] },
  "kubectl delete": {
    values: "nlfko",
    long: [
      "namespace",
      "kustomize",
      "selector",
      "filename",
      "output",
      "grace-period",
      "context",
      "cascade",
      "timeout",
      "kubeconfig",
    ],
  },
}

const MAX_PATTERN_WORDS = 32 // words of one pattern; a longer one is an error (no command rule needs more)
const RAN_SHOWN = 120 // characters of a matched command shown in a verdict

/** Own keys only: a program named "constructor" must not find Object's. */
function own<V>(table: Record<string, V>, key: string): V | undefined {
  return Object.prototype.hasOwnProperty.call(table, key) ? table[key] : undefined
}

/**
 * Long options of programs that take any unique prefix of one as it (getopt_long, git's parse-options): rm's
 * (`rm --help`, GNU coreutils) and git's per subcommand (`git push --git-completion-helper`, git 2.39), for git with
 * their `--no-` forms: `rm --recur` is --recursive, `git push --force-w` --force-with-lease, `git reset --har` --hard,
 * `git commit --no-verif` --no-verify; an ambiguous prefix (`--no-ver`: --no-verbose or --no-verify) is an error, so
 * stays itself here.
 */
const LONG_OPTIONS: Record<string, string[]> = {
  rm: "force interactive one-file-system no-preserve-root preserve-root recursive dir verbose help version".split(" "),
  "git push": [
    ..."verbose quiet repo all mirror delete tags dry-run porcelain force force-with-lease force-if-includes".split(
      " ",
    ),
    ..."recurse-submodules thin receive-pack exec set-upstream progress prune no-verify follow-tags signed".split(" "),
    ..."atomic push-option ipv4 ipv6 verify".split(" "),
  ],
  "git commit": [
    ..."quiet verbose file author date message reedit-message reuse-message fixup squash reset-author".split(" "),
    ..."trailer signoff template edit cleanup status gpg-sign all include interactive patch only no-verify".split(" "),
    ..."dry-run short branch ahead-behind porcelain long null amend no-post-rewrite untracked-files".split(" "),
    ..."pathspec-from-file pathspec-file-nul allow-empty allow-empty-message verify post-rewrite".split(" "),
  ],
  "git reset": [
    ..."quiet no-refresh mixed soft hard merge keep recurse-submodules patch intent-to-add".split(" "),
    ..."pathspec-from-file pathspec-file-nul refresh".split(" "),
  ],
  "git clean": "quiet dry-run force interactive exclude".split(" "),
  "git merge": [
    ..."stat summary log squash commit edit cleanup ff ff-only rerere-autoupdate verify-signatures strategy".split(" "),
    ..."strategy-option message file into-name verbose quiet abort quit continue allow-unrelated-histories".split(" "),
    ..."progress gpg-sign autostash overwrite-ignore signoff no-verify verify".split(" "),
  ],
}

/** A long option as its program reads it: the option a unique prefix stands for; the name itself otherwise. */
function longName(key: string, name: string): string {
  const known = own(LONG_OPTIONS, key)
  if (known === undefined || known.includes(name)) return name
  const negatable = key.startsWith("git ") // git's parse-options takes --no-X for X
  let found: string | undefined
  for (const option of known)
    for (const form of negatable ? [option, `no-${option}`] : [option])
      if (form.startsWith(name)) {
        if (found !== undefined && found !== form) return name // ambiguous: git refuses it
        found = form
      }
  return found ?? name
}

/** The one name of a flag under a program (`f` -> `force` for `git push`); the name itself when it has no other. */
function flagName(key: string, name: string): string {
  const names = own(FLAG_NAMES, key)
  return (names && own(names, name)) ?? (name.length > 1 ? longName(key, name) : name)
}

/** Every spelling of a flag under a program (`f` -> `--force`, `-f`), for code the reader cannot follow. */
function flagSpellings(key: string, name: string): string[] {
  const long = flagName(key, name)
  const spellings = [long.length > 1 ? `--${long}` : `-${long}`]
  for (const [letter, named] of Object.entries(own(FLAG_NAMES, key) ?? {}))
    if (named === long && letter !== long) spellings.push(`-${letter}`)
  return spellings
}

/** A word's alternatives: `{a,b}` expanded as bash does; the word itself when it has none. */
function alternatives(word: string): string[] {
  return braceWords(word) ?? [word]
}

/** A pattern operand that is a path: matched against the operand resolved from the project directory. */
const PATH_PATTERN = /^(?:\/|~|\$\{?(?:HOME|PROJECT|TMPDIR)\b)/

/** Where a word ends in code the reader cannot follow: a blank, a quote, a shell operator. */
const CODE_WORD_EDGE = `\\s'"\`;&|()`

/** A regex that holds when code names one of these words as a word (`git` in `os.system('git push')`). */
function namedWord(words: readonly string[], shortFlag = false): RegExp {
  const edge = `(?:^|[${CODE_WORD_EDGE}/=])`
  const end = `(?=$|[${CODE_WORD_EDGE}=])`
  const source = words
    .map((word) =>
      shortFlag && /^-[^-]$/.test(word)
        ? `-[A-Za-z]*${escapeRegex(word[1])}[A-Za-z]*` // a letter in a cluster: -fd names -f
        : escapeRegex(word),
    )
    .join("|")
  return new RegExp(`${edge}(?:${source})${end}`)
}

/** Whether a pattern word (or one of its `{...}` alternatives) is a flag: `-f`, `--force`; not `-` (stdin). */
function isFlagWord(word: string): boolean {
  return word.startsWith("-") && word !== "-"
}

/** The flags one pattern word asks for (`-rf` -> r and f; `--force`; `{-f,--force-with-lease}` one of two). */
function patternFlags(bare: string, absent: boolean): PatternFlag[] {
  const spelled = alternatives(bare)
  const spelling = (word: string): FlagSpelling => {
    if (!word.startsWith("--")) return { names: [...word.slice(1)] }
    const eq = word.indexOf("=")
    return eq < 0 ? { names: [word.slice(2)] } : { names: [word.slice(2, eq)], value: word.slice(eq + 1) }
  }
  if (spelled.length > 1 || bare.startsWith("--") || absent) return [{ any: spelled.map(spelling), absent }]
  return [...bare.slice(1)].map((letter) => ({ any: [{ names: [letter] }], absent: false }))
}

/**
 * A pattern read, or why it cannot be (empty, an unclosed quote, more than one command, no program): the text of
 * the problem, which the validator puts after the pattern's key path.
 */
function parseCommandPattern(text: string): CommandPattern | string {
  if (text.trim() === "") return 'is empty; write the command as you would type it, e.g. "git push --force"'
  const scan = scanCommand(text)
  if (scan === null)
    return `has an unclosed quote (${JSON.stringify(text)}); close it, or drop it: a pattern's words are plain words`
  if (scan.substituted) return 'has a $(...) or backquotes; write the command itself, e.g. "git push --force"'
  const one = scan.commands[0]
  if (scan.commands.length !== 1 || one.words.length === 0 || one.redirects.length || one.heredocs.length)
    return `is not one command (${JSON.stringify(text)}); write each command as its own pattern in the list: any one matches`
  const words = one.words
  if (words.length > MAX_PATTERN_WORDS) return `has more than ${MAX_PATTERN_WORDS} words; shorten it`
  // `{--force` is no list of alternatives but a literal word no command has: the rule would never fire
  const unbalanced = words.find((word) => word.split("{").length !== word.split("}").length)
  if (unbalanced !== undefined)
    return `has unbalanced braces in ${JSON.stringify(unbalanced)}; write {a,b} with both braces: "{-f,--force-with-lease}" is any of them`
  const first = words[0]
  if (/^[-!]/.test(first) || /^[A-Za-z_][A-Za-z0-9_]*=/.test(first) || /[*?[]/.test(first))
    return `names no program: its first word ${JSON.stringify(first)} must be the program, as in "git push --force" or "rm -rf /"`
  const programs = alternatives(first).map(programName)
  const wrapper = programs.find((name) => SEEN_THROUGH.has(name))
  if (wrapper)
    return `starts with ${wrapper}, which is seen through: write the command it runs ("rm -rf /" also matches "${wrapper} rm -rf /")`
  const pattern: CommandPattern = { text, programs, subcommands: [], flags: [], operands: [], named: [], keys: [] }
  let k = 1
  if (!programs.some((name) => NO_SUBCOMMAND.has(name)))
    for (; k < words.length; k++) {
      const subs = alternatives(words[k]) // `git {push,fetch}`: any of these subcommands
      if (!subs.every((sub) => SUBCOMMAND_WORD.test(sub))) break
      pattern.subcommands.push(subs)
    }
  for (; k < words.length; k++) {
    const absent = words[k].startsWith("!")
    const bare = absent ? words[k].slice(1) : words[k]
    if (bare === "" || bare === "--")
      return `has a lone ${JSON.stringify(words[k])}; write "!--flag" (the flag must be absent) or "!glob" (such operands are left out)`
    // `{-f,--force-with-lease}`: any of these flags; `{main,dev}`: any of these operands; a mix is neither
    const globs = alternatives(bare)
    const flags = globs.filter(isFlagWord).length
    if (flags > 0 && flags < globs.length)
      return `mixes flags and operands in ${JSON.stringify(bare)}; a {...} is either flags ("{-f,--force-with-lease}") or operands ("{main,dev}"): write one pattern for each`
    if (flags > 0) pattern.flags.push(...patternFlags(bare, absent))
    else pattern.operands.push({ globs, path: globs.every((glob) => PATH_PATTERN.test(glob)), excluded: absent })
  }
  for (const program of programs)
    if (pattern.subcommands.length === 0) pattern.keys.push(program)
    else for (const sub of pattern.subcommands[0]) pattern.keys.push(`${program} ${sub}`)
  // What code the reader cannot follow must name: the program, its subcommands, a spelling of each flag.
  const key = patternKey(programs[0], pattern.subcommands[0]?.[0])
  pattern.named.push(namedWord(programs))
  for (const sub of pattern.subcommands) pattern.named.push(namedWord(sub))
  for (const flag of pattern.flags)
    if (!flag.absent)
      pattern.named.push(
        namedWord(
          flag.any.flatMap((s) => s.names.flatMap((name) => flagSpellings(key, name))),
          true,
        ),
      )
  return pattern
}

/** The key of FLAG_NAMES and FLAG_VALUES for a program and its subcommand: `git push`, or `rm`. */
function patternKey(program: string, sub: string | undefined): string {
  return sub !== undefined && own(FLAG_NAMES, `${program} ${sub}`) !== undefined ? `${program} ${sub}` : program
}

/** What a path operand's `$VAR`s and `~` stand for: the project, the home and the temporary directory. */
type PathPlaces = { directory: string; project: string; home: string; tmpdir: string }

function expandPlaces(word: string, places: PathPlaces): string {
  if (word === "~" || word.startsWith("~/")) return places.home + word.slice(1)
  // `${HOME:?}`, `${TMPDIR:-/tmp}` (a default, or an error, for an unset variable) are read as the variable's value
  return word.replace(
    /\$(?:\{(HOME|PROJECT|TMPDIR|PWD)(?::?[-?=][^}]*)?\}|(HOME|PROJECT|TMPDIR|PWD)\b)/g,
    (_, a, b) => {
      const name = a ?? b
      return name === "HOME"
        ? places.home
        : name === "TMPDIR"
          ? places.tmpdir
          : name === "PWD"
            ? places.directory
            : places.project
    },
  )
}

/** Whether an operand of the command matches one operand glob of the pattern. */
function operandMatches(
  operand: PatternOperand,
  word: string,
  placesOf: () => PathPlaces,
  cwd: readonly string[],
): boolean {
  if (!operand.path) return operand.globs.some((glob) => wordGlob(glob).test(word))
  const places = placesOf()
  const abs = resolveOperand(word, places, cwd)
  return operand.globs.some((glob) => globToRegExp(normalizeGlob(expandPlaces(glob, places))).test(abs))
}

/** An operand as an absolute path: from the project directory, through the line's `cd`s (`cd /etc && rm -rf *`). */
function resolveOperand(word: string, places: PathPlaces, cwd: readonly string[]): string {
  let here = places.directory
  for (const dir of cwd) here = resolvePath(here, expandPlaces(dir, places))
  return resolvePath(here, expandPlaces(word, places))
}

/** A path glob with `//` and a trailing `/` taken out (`$PROJECT/**` with a project at `/`). */
function normalizeGlob(glob: string): string {
  const collapsed = glob.replace(/\/{2,}/g, "/")
  return collapsed.length > 1 && collapsed.endsWith("/") ? collapsed.slice(0, -1) : collapsed
}

/** An operand glob that is no path: `*` and `?` match any character, `/` too (`kubectl delete *` takes `pod/x`). */
function wordGlob(glob: string): RegExp {
  return globToRegExp(glob.replace(/\*+/g, "**"))
}

/**
 * npm's commands and aliases (npm 11, lib/utils/cmd-list.js). npm runs any unique prefix of one as it (`npm pub` is
 * `npm publish`, `npm unp` `npm unpublish`), an alias as the command it names (`npm i` is `npm install`).
 */
const NPM_COMMANDS = new Set([
  ..."access adduser approve-scripts audit bugs cache ci completion config dedupe deny-scripts".split(" "),
  ..."deprecate diff dist-tag docs doctor edit exec explain explore find-dupes fund get help".split(" "),
  ..."help-search init install install-ci-test install-scripts install-test link ll login logout".split(" "),
  ..."ls org outdated owner pack ping pkg prefix profile prune publish query rebuild repo".split(" "),
  ..."restart root run sbom search set shrinkwrap stage star stars start stop team test token".split(" "),
  ..."trust undeprecate uninstall unpublish unstar update version view whoami".split(" "),
])
const NPM_ALIASES = new Map(
  [
    ..."author:owner home:docs issues:bugs info:view show:view find:search add:install".split(" "),
    ..."unlink:uninstall remove:uninstall rm:uninstall r:uninstall un:uninstall rb:rebuild list:ls".split(" "),
    ..."ln:link create:init i:install it:install-test cit:install-ci-test u:update up:update".split(" "),
    ..."c:config s:search se:search tst:test t:test ddp:dedupe v:view run-script:run".split(" "),
    ..."clean-install:ci clean-install-test:install-ci-test x:exec why:explain la:ll".split(" "),
    ..."verison:version ic:ci innit:init in:install ins:install inst:install insta:install".split(" "),
    ..."instal:install isnt:install isnta:install isntal:install isntall:install install-clean:ci".split(" "),
    ..."isntall-clean:ci hlep:help dist-tags:dist-tag upgrade:update udpate:update rum:run".split(" "),
    ..."sit:install-ci-test urn:run ogr:org add-user:adduser".split(" "),
  ].map((pair) => pair.split(":") as [string, string]),
)

/** A subcommand word as its program reads it: npm's abbreviations and aliases made the command; others as written. */
function subcommandName(program: string, word: string): string {
  if (program !== "npm" || NPM_COMMANDS.has(word)) return word
  const alias = NPM_ALIASES.get(word)
  if (alias !== undefined) return alias
  let found: string | undefined
  for (const name of [...NPM_COMMANDS, ...NPM_ALIASES.keys()])
    if (name.startsWith(word)) {
      if (found !== undefined) return word // ambiguous: npm knows no such command
      found = name
    }
  return found === undefined ? word : (NPM_ALIASES.get(found) ?? found)
}

/**
 * Where a command's subcommand stands after the program's own options, or -1 when its words are not there. Other
 * programs' options before it go to `before` (`kubectl -n prod delete`: `-n prod`); git's global options do not.
 */
function subcommandsEnd(
  program: string,
  args: readonly string[],
  subcommands: readonly string[][],
  before: string[],
): number {
  let at = program === "git" ? gitSubcommandAt(args) : 0
  for (const wanted of subcommands) {
    // other programs' options before the subcommand: skipped, and the word after one as its possible value
    while (at < args.length && args[at].startsWith("-") && !wanted.includes(args[at])) {
      const takesNext = !args[at].includes("=") && at + 1 < args.length && !wanted.includes(args[at + 1])
      const next = at + (takesNext && !args[at + 1].startsWith("-") ? 2 : 1)
      for (; at < next; at++) before.push(args[at])
    }
    if (at >= args.length || !wanted.includes(subcommandName(program, args[at]))) return -1
    at++
  }
  return at
}

/** The words after a command's program, made once per command (every pattern on its program asks). */
function ranArgs(ran: RanCommand): string[] {
  ran.args ??= ran.start + 1 === ran.words.length ? NO_WORDS : ran.words.slice(ran.start + 1)
  return ran.args
}

/** How one simple command the call runs stands to a pattern: matched, or how near it came (for the explanations). */
type RunMatch = { matched: true } | { matched: false; near?: string }
const NO_MATCH: RunMatch = { matched: false }

/** Whether a simple command is the pattern's program with its subcommand, flags and operands. */
function matchRan(pattern: CommandPattern, ran: RanCommand, places: () => PathPlaces): RunMatch {
  const program = ran.program
  if (!pattern.programs.includes(program)) return NO_MATCH
  const args = ranArgs(ran)
  const before: string[] = []
  const end = subcommandsEnd(program, args, pattern.subcommands, before)
  if (end < 0) return NO_MATCH
  const key = patternKey(program, pattern.subcommands.length ? subcommandName(program, args[end - 1]) : undefined)
  const spec = own(FLAG_VALUES, key) ?? {}
  const parsed = getopt(end === 0 ? args : args.slice(end), spec)
  // the program's options before its subcommand are its flags too (kubectl, npm: `kubectl -n prod delete`); their
  // words that are no option of the subcommand's table are values of options it does not know, not operands
  const options = before.length ? [...getopt(before, spec).options, ...parsed.options] : parsed.options
  const given = new Map<string, string[]>()
  for (const [name, list] of options) {
    const one = flagName(key, name)
    given.set(one, [...(given.get(one) ?? NO_WORDS), ...list])
  }
  if (program === "npm") npmFlagsOff(key, options, given)
  const present = (s: FlagSpelling) =>
    s.names.every((name) => given.has(flagName(key, name))) &&
    (s.value === undefined || given.get(flagName(key, s.names[0]))!.some((v) => wordGlob(s.value!).test(v)))
  for (const flag of pattern.flags) {
    const holds = flag.any.some(present)
    if (holds === flag.absent)
      return { matched: false, near: flag.absent ? `with ${flagText(flag)}` : `without ${flagText(flag)}` }
  }
  const matches = (operand: PatternOperand, word: string) => operandMatches(operand, word, places, ran.cwd)
  const excludes = (word: string) => pattern.operands.some((o) => o.excluded && matches(o, word))
  // find's `{}` stands for a root and what lies under it: left out only when both are, matched when either is
  const all = foundOperands(parsed.operands, ran.found)
  const kept = all.filter(({ word, subtree }) => !(excludes(word) && (!subtree || excludes(`${word}/${UNDER_ROOT}`))))
  for (const operand of pattern.operands)
    if (
      !operand.excluded &&
      !kept.some(
        ({ word, subtree }) =>
          matches(operand, word) ||
          (subtree && (matches(operand, `${word}/${UNDER_ROOT}`) || globUnder(operand, word, places, ran.cwd))),
      )
    )
      return {
        matched: false,
        near: operandMissText(pattern, operand, kept.length ? [] : all, matches),
      }
  return { matched: true }
}

/**
 * Why no operand matched, for the explanations: when `!glob`s left every operand out (`leftOut`: all of them, else
 * none), which glob left out which (`/tmp/x is left out by !/tmp/**`, though `/tmp/x` matches `/**`); else that none
 * matches.
 */
function operandMissText(
  pattern: CommandPattern,
  operand: PatternOperand,
  leftOut: readonly { word: string }[],
  matches: (operand: PatternOperand, word: string) => boolean,
): string {
  if (leftOut.length === 0) return `no operand matches ${operand.globs.join(" or ")}`
  return leftOut
    .map(({ word }, k) => {
      const by = pattern.operands.find((o) => o.excluded && matches(o, word))
      const glob = by === undefined ? "" : ` by !${by.globs.length > 1 ? `{${by.globs.join(",")}}` : by.globs[0]}`
      return `${word}${k === 0 ? " is left out" : ""}${glob}`
    })
    .join(", ")
}

/** A name standing for any file under a root that find searches (`{}`), for the path globs. */
const UNDER_ROOT = "found-file"

/**
 * A command's operands, with `find ROOT... -exec CMD {}`'s `{}` made each root: `subtree` says the word stands for
 * that root and any file under it (find's -name and other tests are not judged: any may be found).
 */
function foundOperands(
  operands: readonly string[],
  found: readonly string[] | undefined,
): { word: string; subtree: boolean }[] {
  return operands.flatMap<{ word: string; subtree: boolean }>((word) =>
    found && word.includes("{}")
      ? found.map((root) => ({ word: word.split("{}").join(root), subtree: true }))
      : [{ word, subtree: false }],
  )
}

/** Whether a path glob names a place under a root (`/etc/nginx/**` under `/etc`): files find may find there. */
function globUnder(operand: PatternOperand, root: string, placesOf: () => PathPlaces, cwd: readonly string[]): boolean {
  if (!operand.path) return false
  const places = placesOf()
  const abs = resolveOperand(root, places, cwd)
  return operand.globs.some((glob) => {
    const literal = normalizeGlob(expandPlaces(glob, places)).split(/[*?[{]/)[0]
    const dir = literal.slice(0, literal.lastIndexOf("/") + 1)
    return dir.startsWith(abs === "/" ? "/" : `${abs}/`)
  })
}

/**
 * npm (nopt) reads `--no-x` and `--x=false` as x turned off: such a flag counts as not given (`npm publish
 * --dry-run=false` publishes). Given both ways (`--dry-run --no-dry-run`), it counts as off: the rule errs to fire.
 */
function npmFlagsOff(key: string, options: Iterable<[string, string[]]>, given: Map<string, string[]>): void {
  for (const [name, list] of options)
    if (name.startsWith("no-")) given.delete(flagName(key, name.slice(3)))
    else if (list.length > 0 && list.every((value) => value === "false")) given.delete(flagName(key, name))
}

/** A pattern flag as it was written: `--force`, `-f`, `-f or --force-with-lease`. */
function flagText(flag: PatternFlag): string {
  return flag.any
    .map((s) =>
      s.names.length === 1 && s.names[0].length > 1
        ? `--${s.names[0]}${s.value !== undefined ? `=${s.value}` : ""}`
        : `-${s.names.join("")}`,
    )
    .join(" or ")
}

/** A simple command as a verdict shows it: its words from the program on, one line, bounded. */
function ranText(ran: RanCommand): string {
  return oneLine(ran.words.slice(ran.start).join(" "), RAN_SHOWN)
}

/** Where a simple command runs: `after sudo, in bash's code`; empty at the top of the line. */
function ranWhere(ran: RanCommand): string {
  if (ran.via.length === 0) return ""
  return ` (${ran.via.map((v) => (v.endsWith(" code") || v.endsWith("'s code") ? `in ${v}` : `after ${v}`)).join(", ")})`
}

/**
 * Options whose value is a message a program sends or stores, never code it runs: a pull request's title and body,
 * release notes, an HTTP request's data. Such programs are not followed (gh runs code elsewhere: `gh codespace ssh`),
 * but a command rule's words only in such a value are text, as in a commit message: `gh pr create --body 'stop the
 * npm publish'` runs no npm. Their options: gh's pr, issue, release, gist and api; curl's request data.
 */
const MESSAGE_OPTIONS: ReadonlyMap<string, ReadonlySet<string>> = new Map([
  [
    "gh",
    new Set(
      "-t --title -b --body -n --notes -m --message --subject -d --desc --description -f --raw-field -F --field".split(
        " ",
      ),
    ),
  ],
  ["curl", new Set("-d --data --data-raw --data-ascii --data-binary --data-urlencode --json -F --form".split(" "))],
])

/**
 * The text of code the reader cannot follow: its words and here-documents, as the words code would name; the values
 * of a program's MESSAGE_OPTIONS left out (`--body TEXT`, `--body=TEXT`).
 */
function opaqueText(ran: RanCommand): string {
  const messages = MESSAGE_OPTIONS.get(ran.program)
  const words = messages ? withoutMessages(ran.words.slice(ran.start), messages) : ran.words.slice(ran.start)
  const text = words.join(" ")
  return ran.stdin.length ? `${text}\n${ran.stdin.join("\n")}` : text
}

/** A command's words without the values of its message options (the option itself kept, as what it says). */
function withoutMessages(words: readonly string[], messages: ReadonlySet<string>): string[] {
  const kept: string[] = []
  for (let k = 0; k < words.length; k++) {
    const equals = words[k].indexOf("=")
    if (words[k].startsWith("--") && equals > 0 && messages.has(words[k].slice(0, equals))) {
      kept.push(words[k].slice(0, equals))
      continue
    }
    kept.push(words[k])
    if (messages.has(words[k])) k++ // its value: the next word
  }
  return kept
}

/** The first simple command of a reading that a pattern matches, and what to say of it; undefined when none. */
function runsMatch(
  patterns: readonly CommandPattern[],
  read: CommandReading,
  places: () => PathPlaces,
): string | undefined {
  const { byProgram, opaqueRan } = ranIndex(read)
  for (const pattern of patterns)
    for (const name of pattern.programs) {
      const runs = byProgram.get(name) // the common case: none, so the pattern costs one lookup
      if (runs)
        for (const ran of runs)
          if (matchRan(pattern, ran, places).matched) return `runs \`${ranText(ran)}\`${ranWhere(ran)}`
    }
  if (opaqueRan.length === 0) return undefined
  for (const pattern of patterns)
    for (const ran of opaqueRan)
      if (isOpaqueNaming(pattern, ran))
        return `runs code the reader cannot follow that names \`${pattern.text}\`: \`${ranText(ran)}\`${ranWhere(ran)}`
  return undefined
}

/** A reading's commands by program, and its opaque ones: made once per reading (every command rule of a call asks). */
type RanIndex = { byProgram: Map<string, RanCommand[]>; opaqueRan: RanCommand[]; keys: Set<string> }

function ranIndex(read: CommandReading): RanIndex {
  if (read.index) return read.index
  const index: RanIndex = { byProgram: new Map(), opaqueRan: [], keys: new Set() }
  for (const ran of read.ran) {
    const list = index.byProgram.get(ran.program)
    if (list) list.push(ran)
    else index.byProgram.set(ran.program, [ran])
    if (ran.opaque) index.opaqueRan.push(ran)
    // `program word` for each word subcommandsEnd could take for the subcommand: after git's global options the
    // one word; for others the first word after the leading options, and each word after an option (its value, or
    // the subcommand itself)
    index.keys.add(ran.program)
    const words = ran.words
    let k = ran.start + 1
    if (ran.program === "git") k += gitSubcommandAt(ranArgs(ran))
    else
      while (k < words.length && words[k][0] === "-") {
        const value = k + 1 < words.length && words[k + 1][0] !== "-" // its value, or the subcommand
        if (value) index.keys.add(`${ran.program} ${subcommandName(ran.program, words[k + 1])}`)
        k += value ? 2 : 1
      }
    if (k < words.length) index.keys.add(`${ran.program} ${subcommandName(ran.program, words[k])}`)
  }
  read.index = index
  return index
}

/**
 * The runs screen of a plan: whether any command rule of it could fire on this call. One of the rules' keys is among
 * the call's (`git push` is run), or code the reader cannot follow names one of their programs. When it fails (most calls), none of the command rules is looked at.
 */
function runsScreenHolds(keys: ReadonlySet<string>, programs: readonly string[], args: unknown): boolean {
  if (!isMapping(args) || typeof args.command !== "string") return false
  const index = ranIndex(readCommand(args.command))
  for (const key of index.keys) if (keys.has(key)) return true
  for (const ran of index.opaqueRan) {
    ran.code ??= capText(opaqueText(ran), REGEX_INPUT_CAP)
    // its own program was keyed above (`npm test` is npm, read as a pattern on npm says: isOpaqueNaming)
    for (const program of programs) if (program !== ran.program && ran.code.includes(program)) return true
  }
  return false
}

/**
 * Whether a command runs code the reader cannot follow that names the pattern's words. The pattern's own program
 * is not such code: it was matched word by word (`npm publish --dry-run` is npm, read as the pattern says).
 */
function isOpaqueNaming(pattern: CommandPattern, ran: RanCommand): boolean {
  if (!ran.opaque || pattern.programs.includes(ran.program)) return false
  ran.code ??= capText(opaqueText(ran), REGEX_INPUT_CAP)
  const text = ran.code
  let named = false // the common case, decided without a regex: the code does not name the program at all
  for (const name of pattern.programs) named ||= text.includes(name)
  return named && pattern.named.every((regex) => regex.test(text))
}

/** Why no pattern matched, for `/anchor test` and the examples: where the words appear, and what they do there. */
function runsMissWhy(patterns: readonly CommandPattern[], read: CommandReading, places: () => PathPlaces): string {
  for (const pattern of patterns)
    for (const ran of read.ran) {
      const result = matchRan(pattern, ran, places)
      if (!result.matched && result.near) return `runs \`${ranText(ran)}\`, but ${result.near}: not \`${pattern.text}\``
    }
  for (const pattern of patterns)
    for (const ran of read.ran) {
      const program = ran.program
      const inWords = ran.words.slice(ran.start + 1).some((word) => pattern.named[0].test(word))
      if (inWords) return `\`${pattern.text}\` appears only as ${program}'s argument: not run`
      if (ran.stdin.some((doc) => pattern.named[0].test(doc)))
        return `\`${pattern.text}\` appears only in a here-document fed to ${program}: not run`
    }
  const shown = read.ran.slice(0, 5).map((ran) => `\`${ranText(ran)}\``)
  return shown.length
    ? `none of the commands it runs (${shown.join(", ")}${read.ran.length > 5 ? ", ..." : ""}) is ${patterns.map((p) => `\`${p.text}\``).join(" or ")}`
    : "it runs no command"
}

// The integrity guard's view of bash -------------------------------------------------------------------------------

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

/**
 * git's global options, before the subcommand: where the subcommand stands, the words of the options (-C DIR,
 * --git-dir=, --work-tree= name directories: read, so a guard name there counts), and whether one sets a config
 * value (-c KEY=VALUE, --config-env), which may be a command git runs (core.fsmonitor on status, diff.external on
 * diff, core.pager).
 */
function gitGlobals(args: string[]): { at: number; global: string[]; setsConfig: boolean } {
  const at = gitSubcommandAt(args)
  let setsConfig = false
  for (let k = 0; k < at; k++) if (args[k] === "-c" || args[k].startsWith("--config-env")) setsConfig = true
  const global = at === 0 ? NO_WORDS : args.slice(0, at).map((arg) => arg.replace(/^--(git-dir|work-tree)=/, ""))
  return { at, global, setsConfig }
}

/** Where git's subcommand stands: after its global options, `-C DIR` and `-c KEY=VALUE` taking the next word. */
function gitSubcommandAt(args: readonly string[]): number {
  let at = 0
  while (at < args.length && args[at].startsWith("-")) at += args[at] === "-C" || args[at] === "-c" ? 2 : 1
  return at
}

function isReadOnlyGit(args: string[], globals = gitGlobals(args)): boolean {
  const { at, setsConfig } = globals
  if (setsConfig) return false
  const sub = args[at]
  if (sub === undefined) return true
  if (sub === "diff" || sub === "log" || sub === "show") {
    // the commonest git calls of all: asked without slicing
    for (let k = at + 1; k < args.length; k++) if (args[k].startsWith("--output")) return false
    return true
  }
  const rest = args.slice(at + 1)
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

/** `git clean` deletes untracked files under its paths, the current directory when none is given; -n only lists. */
function gitCleanArgs(rest: string[]): string[] | undefined {
  if (rest.some((w) => w === "--dry-run" || /^-[a-zA-Z]*n/.test(w))) return undefined
  const args = rest.filter((w, i) => !w.startsWith("-") && rest[i - 1] !== "-e" && rest[i - 1] !== "--exclude")
  return args.length ? args : ["."]
}

/** "/a/b/c" -> ["/a/b/c", "/a/b", "/a"]: a glob that matches a parent directory takes the file with it. */
function ancestorsAndSelf(abs: string): string[] {
  const out = [abs]
  for (let cut = abs.lastIndexOf("/"); cut > 0; cut = abs.lastIndexOf("/", cut - 1)) out.push(abs.slice(0, cut))
  return out
}

/** Resolves symbolic links of a path that exists (or of its parent); the identity where nothing is known. */
type RealPath = (abs: string) => string

/**
 * The guard's files and directories with every parent directory (a glob or a find root reaching one takes them),
 * made once per guard: looked up for every path a bash command writes, searched for a glob or a find root.
 */
const withParentsCache = new WeakMap<GuardFiles, Set<string>>()
function guardPathsAndParents(guard: GuardFiles): Set<string> {
  let paths = withParentsCache.get(guard)
  if (!paths) withParentsCache.set(guard, (paths = new Set([...guard.exact, ...guard.roots].flatMap(ancestorsAndSelf))))
  return paths
}

/** Whether any of the guard's paths or their parents holds `test`. */
function someGuardPath(guard: GuardFiles, test: (path: string) => boolean): boolean {
  for (const path of guardPathsAndParents(guard)) if (test(path)) return true
  return false
}

const isUnder = (path: string, dir: string) => path === dir || path.startsWith(dir.endsWith("/") ? dir : `${dir}/`)

/** Whether a normal absolute path is a guard file or directory, or a directory with one under it (the root too). */
function holdsGuardPath(path: string, guard: GuardFiles): boolean {
  const normal = path.length > 1 && path.endsWith("/") ? path.replace(/\/+$/, "") : path
  return path === "/" || guardPathsAndParents(guard).has(normal)
}

/**
 * A shell word's glob with each run of wildcards made one, without the splits a backtracking RegExp tries for a run
 * (`rm /************Q` held the host for 5-20 s). As the shell reads it, a `*` never crosses a `/`: a run inside a
 * path component is one `*` (`***` -> `*`, `*?*` -> `?*`); a component that is only wildcards with a `**` in it is
 * `**`, taken as crossing directories (bash does with globstar; the guard assumes it may be on), and repeated
 * `**\/` are one.
 */
function collapseWildcards(glob: string): string {
  return glob.replace(/(?:\*\*\/)+/g, "**/").replace(/[*?]*\*[*?]*/g, (run: string, at: number, word: string) => {
    const wholeComponent = (at === 0 || word[at - 1] === "/") && (word[at + run.length] ?? "/") === "/"
    return wholeComponent && run.includes("**") ? "**" : `${"?".repeat(run.split("?").length - 1)}*`
  })
}

/** Whether writing `target` (a file, a directory and all under it, a glob, a find root with its tests) reaches a
 * guard file or directory. */
function targetHitsGuard(target: Target, paths: Paths, guard: GuardFiles, realpath: RealPath): boolean {
  const expanded = target.word.replace(/^\$\{?HOME\}?(?=\/|$)/, "~")
  const named = resolvePath(paths.directory, expanded, paths.home)
  // A bracket expression matches one character (`.[o]pencode`, `.[[:lower:]]pencode`): here, any one character; a
  // brace sequence (`.{o..o}pencode`) any text.
  const bracketed = named.includes("[") ? named.replace(/\[[!^]?\]?(?:\[:[a-z]+:\]|[^\]/])*\]/g, "?") : named
  const abs = bracketed.includes("{") ? bracketed.replace(/(^|[^$])\{[^{}/]*\.\.[^{}/]*\}/g, "$1*") : bracketed
  if (/[*?]/.test(abs)) {
    const pattern = globToRegExp(collapseWildcards(abs), true)
    return someGuardPath(guard, (path) => pattern.test(path))
  }
  const filter = target.filter
  if (filter) {
    // The path as find prints it: the root as written, then the rest.
    const printed = (path: string) =>
      path === abs ? target.word : `${target.word.replace(/\/+$/, "")}/${path.slice(abs.length).replace(/^\/+/, "")}`
    return someGuardPath(guard, (path) => isUnder(path, abs) && filter(printed(path)))
  }
  const hits = (path: string) => isGuardPath(path, guard) || holdsGuardPath(path, guard)
  return hits(abs) || (target.throughLinks && hits(realpath(abs)))
}

/** The command lines of the `$(...)` and backquote substitutions in a word. */
function substitutionsIn(word: string): string[] {
  const inner: string[] = []
  for (let i = 0; i < word.length; i++) {
    if (word[i] === "$" && word[i + 1] === "(" && word[i + 2] !== "(") {
      const end = closingParen(word, i + 2)
      if (end === -1) break
      inner.push(word.slice(i + 2, end))
      i = end
    } else if (word[i] === "`") {
      const end = word.indexOf("`", i + 1)
      if (end === -1) break
      inner.push(word.slice(i + 1, end))
      i = end
    }
  }
  return inner
}

/** The paths a command line may print: what find selects, the files other programs read. */
function listedPaths(command: string): Target[] {
  return readCommandAt(command, 1).readings.flatMap(
    (one) => one.lists ?? one.reads.map((word) => ({ word, throughLinks: false })),
  )
}

/**
 * Does a bash command change a guard file? A heuristic against accidents and casual evasion (quoting, `../`,
 * globs, deleting a parent directory, a link with an innocent name), not a sandbox: a determined shell user can
 * always hide a path (a variable, `$(...)`, an encoded name). It blocks when
 * - a file the command writes (an operand PROGRAMS calls written, a redirect target) is a guard file or directory,
 *   a parent of one, or a glob over either, or names one (`.opencode`, the config dir, ...); redirect targets and
 *   the operands of programs that write through links are resolved with `realpath` first;
 * - the command changes something and a file it reads names one (`cp .opencode/x.yaml /tmp`, `cd .opencode && rm *`);
 * - the command runs code the reader does not follow (an unknown program, an interpreter, `$(...)`) and names one
 *   anywhere.
 * Scripts and patterns it reads (sed, grep, awk) are never taken for paths.
 */
function bashTouchesGuard(
  command: string,
  paths: Paths,
  guard: GuardFiles,
  realpath: RealPath = (abs) => abs,
  workdir?: string,
): string | undefined {
  const read = readCommand(command)
  // opencode runs the command in the bash tool's `workdir` (its prompt says to use it instead of `cd`): relative
  // paths resolve there, and the directory is read like `cd DIR`: a guard name in it, or a guard directory (or a
  // directory inside one), counts when the command changes something or cannot be followed.
  const here = workdir ? { ...paths, directory: resolvePath(paths.directory, workdir, paths.home) } : paths
  if (workdir && (read.changing || read.opaque)) {
    const inGuardDir = [...guard.roots].some((root) => isUnder(here.directory, root))
    const hit = mentionIn(workdir, guard) ?? (inGuardDir ? workdir : undefined)
    if (hit) return hit
  }
  if (read.opaque && quotedMentions(guard).test(command)) {
    // Quotes and backslashes taken out, so `.open''code` names `.opencode`; a command without them is read as it is.
    const hit = mentionIn(command.replace(/\\\n/g, " ").replace(/["'\\]/g, ""), guard)
    if (hit) return hit
  }
  const targets: Target[] = []
  for (const one of read.readings) for (const target of one.writes) targets.push(target)
  for (const word of read.redirects) targets.push({ word, throughLinks: true })
  // A written word made by `$(...)` (`sed -i ... $(grep -rl x .)`): the paths its command reads or lists are written.
  const written = targets.length
  for (let t = 0; t < written; t++)
    if (/\$\(|`/.test(targets[t].word)) targets.push(...substitutionsIn(targets[t].word).flatMap(listedPaths))
  for (const target of targets)
    for (const word of braceWords(target.word) ?? [braceGlob(target.word)]) {
      const one = word === target.word ? target : { ...target, word }
      const hit = mentionIn(word, guard) ?? (targetHitsGuard(one, here, guard, realpath) ? word : undefined)
      if (hit) return hit
    }
  if (read.changing) {
    for (const one of read.readings)
      for (const read of one.reads) {
        const words = braceWords(read)
        // a word too big to expand: its glob, as a written path would be (the names alone cannot be told)
        if (!words && targetHitsGuard({ word: braceGlob(read), throughLinks: false }, here, guard, realpath))
          return read
        for (const word of words ?? []) {
          const hit = mentionIn(word, guard)
          if (hit) return hit
        }
      }
  }
  return undefined
}

/**
 * The guard's names with quotes and backslashes allowed between their characters (`.open''code`): a test on the raw
 * command line that holds whenever the line with them taken out would name one, without making that line. Made on
 * the first bash call that needs it, not at every load.
 */
const quotedMentionsCache = new WeakMap<GuardFiles, RegExp>()
function quotedMentions(guard: GuardFiles): RegExp {
  let regex = quotedMentionsCache.get(guard)
  if (!regex) {
    const quotable = (name: string) => [...name].map(escapeRegex).join(`["'\\\\]*`)
    regex = new RegExp(guard.mentions.filter(Boolean).map(quotable).join("|") || "(?!)")
    quotedMentionsCache.set(guard, regex)
  }
  return regex
}

const MAX_BRACE_WORDS = 64 // words one brace expansion may make (`{a,b}{c,d}...`); beyond, braceGlob stands for them
const MAX_BRACE_WORD_LENGTH = 256 // characters of a word that is expanded; a longer word is taken as braceGlob
const MAX_BRACE_STEPS = 20_000 // characters looked at while expanding one word; beyond, braceGlob

/**
 * The words bash's brace expansion makes of a word: each `{...}` with a comma at its own level, `${...}` aside
 * (`.{opencode,x}` -> `.opencode` `.x`, `.open{c,}ode` -> `.opencode` `.openode`); an unclosed `{` and a `{x}`
 * without a comma stay as they are, and a sequence `{a..z}` is left for targetHitsGuard (a wildcard). Undefined when
 * the expansion would go past its bounds: braceGlob then stands for all the words.
 */
function braceWords(word: string): string[] | undefined {
  if (!word.includes("{")) return [word]
  if (word.length > MAX_BRACE_WORD_LENGTH) return undefined
  const out: string[] = []
  const budget = { steps: MAX_BRACE_STEPS }
  return expandBraces(word, out, budget) ? out : undefined
}

/** braceWords' recursion: adds the words of `word` to `out`; false when a bound is passed. */
function expandBraces(word: string, out: string[], budget: { steps: number }): boolean {
  for (let open = word.indexOf("{"); open !== -1; open = word.indexOf("{", open + 1)) {
    if (word[open - 1] === "$") continue
    let depth = 0
    let close = -1
    const commas: number[] = []
    for (let j = open; j < word.length && close === -1; j++) {
      if (word[j] === "{") depth++
      else if (word[j] === "}" && --depth === 0) close = j
      else if (word[j] === "," && depth === 1) commas.push(j)
    }
    budget.steps -= (close === -1 ? word.length : close) - open
    if (budget.steps < 0) return false
    if (close === -1 || commas.length === 0) continue // literal, as bash reads it; a later `{` may still expand
    let from = open + 1
    for (const cut of [...commas, close]) {
      if (!expandBraces(word.slice(0, open) + word.slice(from, cut) + word.slice(close + 1), out, budget)) return false
      from = cut + 1
    }
    return true
  }
  if (out.length >= MAX_BRACE_WORDS) return false
  out.push(word)
  return true
}

/**
 * A glob that matches every word a brace expansion makes: each closed `{...}` (`${...}` aside) becomes `*`. For a
 * word braceWords does not expand: wider than the words themselves, so it errs towards touching a guard path.
 */
function braceGlob(word: string): string {
  const chars: string[] = []
  const opens: number[] = [] // where each open `{` stands in chars; -1 for `${`
  for (let i = 0; i < word.length; i++) {
    const ch = word[i]
    if (ch === "{") opens.push(word[i - 1] === "$" ? -1 : chars.length)
    if (ch === "}" && opens.length) {
      const at = opens.pop() as number
      if (at >= 0) {
        chars.length = at
        chars.push("*")
        continue
      }
    }
    chars.push(ch)
  }
  return chars.join("")
}

/** The first of the guard's names (`.opencode`, the config dir, ...) that a text contains. */
function mentionIn(text: string, guard: GuardFiles): string | undefined {
  if (!guard.mentioned.test(text)) return undefined
  for (const mention of guard.mentions) if (mention && text.includes(mention)) return mention
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
  const listed = new Set<Contract>() // not active.includes: that is quadratic, and a load asks for every role
  const add = (contract: Contract | undefined) => {
    if (contract && contract.enabled && !listed.has(contract)) {
      listed.add(contract)
      active.push(contract)
    }
  }
  add(config.contracts.get(IN_EVERY_ROLE))
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
 * What a contract says about one tool call; pure given the state (nothing is recorded here). The one place each
 * trigger decides: `/anchor test` and the examples call it, the real check calls checkApplicable through a ToolPlan.
 * Given `why`, it also says in words what held and what failed, matcher by matcher (`why?.push(...)` builds no text
 * when nobody asked).
 */
function checkToolContract(
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
        ran = runsHolds(trigger.runs, args, env, why)
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

/**
 * Whether a call runs a command one of the patterns names (`runs:`): what it runs and where, or undefined. The
 * command is read once per call (readCommand), the same reading guard-integrity and the step counter use; its
 * paths resolve in the bash tool's `workdir` when given.
 */
function runsHolds(
  patterns: readonly CommandPattern[],
  args: unknown,
  env: EngineEnv,
  why?: string[],
): string | undefined {
  if (!isMapping(args) || typeof args.command !== "string") {
    why?.push("runs: the call has no command argument (only bash has one)")
    return undefined
  }
  const read = readCommand(args.command)
  const workdir = typeof args.workdir === "string" ? args.workdir : undefined
  const places = () => pathPlaces(env, workdir)
  const ran = runsMatch(patterns, read, places)
  why?.push(ran ? `runs: ${ran}` : `runs: ${runsMissWhy(patterns, read, places)}`)
  return ran
}

const NO_PROJECT = "/\0no project" // a path no command operand resolves to

/** The places a path pattern names, for a call (made per call that reaches a command rule; a few strings). */
function pathPlaces(env: EngineEnv, workdir: string | undefined): PathPlaces {
  if (lastPlaces && lastPlacesEnv === env && lastPlacesWorkdir === workdir) return lastPlaces
  lastPlaces = pathPlacesUncached(env, workdir)
  lastPlacesEnv = env
  lastPlacesWorkdir = workdir
  return lastPlaces
}
// One entry: every path rule of a call asks for the same places.
let lastPlaces: PathPlaces | undefined
let lastPlacesEnv: EngineEnv | undefined
let lastPlacesWorkdir: string | undefined

function pathPlacesUncached(env: EngineEnv, workdir: string | undefined): PathPlaces {
  const { directory, worktree, home, tmpdir } = env.paths
  const inWorktree = worktree !== "/" && relativeInside(worktree, directory) !== undefined
  // a project at `/` is none the plugin was told of: `$PROJECT` then names no path, or every path would be inside it
  // (nor would relative paths be outside it: they resolve in a stand-in directory there)
  const project = inWorktree ? worktree : directory === "/" ? NO_PROJECT : directory
  const cwd = directory === "/" ? NO_PROJECT : directory
  const here = workdir?.trim() ? resolvePath(cwd, workdir, home) : cwd
  return { directory: here, project, home, tmpdir }
}

// The explanations of checkToolContract and checkMessageContract: for `/anchor test` and the examples' problems.

/** Argument names of opencode's built-in tools (1.18), so a matcher on a name the tool lacks can say so. */
const TOOL_ARGUMENTS: Record<string, readonly string[]> = {
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
function shownValue(value: unknown): string {
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

/** What the engine needs from outside: paths, the guard's files, and a realpath (the only file-system access). */
type EngineEnv = { paths: Paths; guard: GuardFiles; match: MatchContext; realpath: RealPath }

/** Where examples are judged: the project's paths, and no file-system access (an example is a call on paper). */
function exampleEnv(paths: Paths): EngineEnv {
  return {
    paths,
    guard: guardFiles(paths),
    match: { directory: paths.directory, worktree: paths.worktree },
    realpath: (abs) => abs,
  }
}

/**
 * Whether every example of a contract does what it says; each one that does not is an error at its key path
 * (`contracts[2].examples.passes[0]`) saying what the contract did instead, followed by `outcome`.
 */
function checkExamples(contract: Contract, keyPath: string, outcome: string, env: EngineEnv, r: Reporter): boolean {
  const errorsBefore = r.errors
  for (const listed of SCHEMA_KEYS.examples) {
    contract.examples?.[listed].forEach((example, i) => {
      const where = join(join(keyPath, listed), i)
      let judged: ReturnType<typeof judgeExample>
      try {
        judged = judgeExample(contract, example, env)
      } catch (error) {
        // An engine failure on an odd example must not take the rest of the file down with it.
        judged = `could not be judged (${(error as Error)?.message ?? error})`
      }
      if (typeof judged === "string") r.error(where, `${judged}; ${outcome}`)
      else if (judged.fires !== (listed === "fires"))
        r.error(
          where,
          judged.fires
            ? `listed under passes, but the contract fires: ${judged.why.join("; ")}; ${outcome}`
            : `listed under fires, but the contract lets it pass: ${judged.why.join("; ")}; ${outcome}`,
        )
    })
  }
  return r.errors === errorsBefore
}

/** One example judged by the same checks as a real call, in a fresh session; a string when it is the wrong kind. */
function judgeExample(
  contract: Contract,
  example: Example,
  env: EngineEnv,
): { fires: boolean; why: string[] } | string {
  const trigger = contract.trigger
  const why: string[] = []
  if ("message" in example) {
    if (trigger.type !== "message")
      return `is a user message, but a ${trigger.type} trigger is judged on tool calls: write it as { tool: ..., args: {...} }`
    return { fires: checkMessageContract(contract, example.message, why), why }
  }
  if (trigger.type === "message")
    return `is a tool call, but a message trigger is judged on user messages: write it as { message: "..." }`
  const state = newState("")
  if (example.steps) state.steps.set(contract.id, example.steps)
  if (example.seen !== undefined && trigger.type === "tool" && trigger.unlessSeen)
    recordSeen(state, example.seen, [trigger.unlessSeen])
  const fires = checkToolContract(contract, example.tool, example.args, state, env, why) !== undefined
  return { fires, why }
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
type ToolPlan = {
  edit: boolean // an edit tool: its targets count for the spread
  contracts: Contract[]
  screenOf: number[]
  screens: Screen[]
  unscreened: Contract[] // behind no screen, in the active order: all that is checked when no screen holds
  counting: string[] // the ids of the state contracts that count the call as a step (never written to)
}

function toolPlan(active: readonly Contract[], tool: string): ToolPlan {
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
function evaluatePlan(plan: ToolPlan, facts: CallFacts, state: SessionState, env: EngineEnv): Verdict {
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

/** A call that may make or remove a link: a changing step that is not an edit tool (ResolvedDirs forgets then). */
function mayChangeLinks(facts: CallFacts): boolean {
  return !EDIT_TOOLS.includes(facts.tool) && isChanging(facts)
}

/** What one allowed call was counted for, to give back if it turns out not to have run. */
type Reservation = { steps: readonly string[]; dirs: readonly string[] } // the plan's list and topDirs': not copied

/**
 * Counts an allowed changing call at once (so parallel calls of one step never pass the limit together) and keeps
 * what it counted until the call's end is known: `settle` when it ran, `release` when it did not (blocked by another
 * plugin, denied by opencode's permissions, or failed). Blocked calls never get here.
 */
function reserve(state: SessionState, callID: string, plan: ToolPlan, facts: CallFacts, env: EngineEnv): void {
  if ((plan.counting.length === 0 && !plan.edit) || !isChanging(facts)) return
  for (const id of plan.counting) state.steps.set(id, (state.steps.get(id) ?? 0) + 1)
  const dirs = plan.edit ? topDirs(facts.args, env) : NO_WORDS
  for (const dir of dirs) state.touchedDirs.set(dir, (state.touchedDirs.get(dir) ?? 0) + 1)
  state.reserved.set(callID, { steps: plan.counting, dirs })
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
  const hits: Hit[] = []
  for (const contract of contracts) {
    if (checkMessageContract(contract, text))
      hits.push({ contract: { ...contract, mode: effectiveMode(contract) }, detail: "message" })
  }
  return hits
}

/** Whether a message contract fires on a user's text; given `why`, it says why in words (as checkToolContract). */
function checkMessageContract(contract: Contract, text: string, why?: string[]): boolean {
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
    tmpdir: normalizePath(env.TMPDIR || "/tmp"),
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
class ResolvedDirs {
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
  /** The call of a session's `/anchor test`, judged again in chat.message once the agent (and so the role) is known. */
  private readonly pendingTests = new Map<string, string>()

  constructor(
    readonly client: Client | undefined,
    readonly paths: Paths,
    readonly env: EngineEnv,
    /** The directories env.realpath has resolved, forgotten when a call may have changed links (ResolvedDirs). */
    readonly resolvedDirs = new ResolvedDirs(),
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

  rememberTest(sessionID: string, call: string): void {
    this.pendingTests.delete(sessionID)
    this.pendingTests.set(sessionID, call)
    if (this.pendingTests.size > MAX_ROOT_SESSIONS)
      this.pendingTests.delete(this.pendingTests.keys().next().value as string)
  }

  /** The call of the session's `/anchor test` in this turn, taken (once). */
  takeTest(sessionID: string): string | undefined {
    const call = this.pendingTests.get(sessionID)
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
  "--force origin main; or /anchor test message <text> for a user message."

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
function testText(anchors: Anchors, sessionID: string, text: string): string {
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
function runAnchorCommand(anchors: Anchors, sessionID: string, rawArguments: string): string {
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
      anchors.rememberTest(sessionID, call)
      return testText(anchors, sessionID, call)
    }
    default:
      return `Unknown /anchor subcommand "${sub}". Use: /anchor status | /anchor test <tool> <arguments> | /anchor bypass <reason> | /anchor reload`
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
): string | undefined {
  if (OWN_TOOLS.has(hookInput.tool)) return undefined
  const { tool, sessionID } = hookInput
  const state = anchors.stateOf(sessionID)
  const plan = anchors.planFor(anchors.active(state.role, state.agent), tool)
  const facts: CallFacts = { tool, args: output?.args }
  const verdict = evaluatePlan(plan, facts, state, anchors.env)
  if (!anchors.resolvedDirs.empty && mayChangeLinks(facts)) anchors.resolvedDirs.forget()
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
    if (!anchors.resolvedDirs.empty && mayChangeLinks({ tool: hookInput.tool, args: hookInput.args }))
      anchors.resolvedDirs.forget()
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
function startAnchors(input: PluginInput | undefined): Anchors {
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
  try {
    anchors.install(loadConfig(paths))
  } catch (error) {
    anchors.failOpen("config load", error)
  }
  anchors.reportProblems()
  anchors.log("info", `loaded: ${filesSummary(anchors.config)}`)
  return anchors
}

// The adapter: opencode's hooks, each handed to its named function above.
const server: Plugin = async (input) => {
  const anchors = startAnchors(input)
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
