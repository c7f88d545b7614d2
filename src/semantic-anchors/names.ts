/**
 * Names and paths: did-you-mean, path normalisation, globs, brace expansion, one-line texts.
 */

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

export function closest(word: string, candidates: Iterable<string>): string | undefined {
  return closestGuess(word, candidates).guess
}

/** "did you mean" only when the guess is plausibly a typo. */
export function didYouMean(word: string, candidates: Iterable<string>): string {
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
export function normalizePath(path: string): string {
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

export function resolvePath(base: string, path: string, home?: string): string {
  if (home && (path === "~" || path.startsWith("~/"))) return normalizePath(home + path.slice(1))
  return normalizePath(path.startsWith("/") ? path : `${base}/${path}`)
}

/**
 * Whether an absolute path is a directory or lies under it (`strict`: under it only); the one "is this path inside
 * that directory" test of the plugin (a directory written with a trailing `/` too).
 */
export function isInside(abs: string, dir: string, strict = false): boolean {
  if (abs === dir) return !strict
  return abs.startsWith(dir) && (dir.endsWith("/") || abs[dir.length] === "/")
}

/** `abs` relative to `base`, or undefined when it lies outside. */
export function relativeInside(base: string, abs: string): string | undefined {
  if (abs === base) return "."
  if (!isInside(abs, base)) return undefined
  let start = base.length
  while (abs[start] === "/") start++
  return abs.slice(start)
}

/** A path as a person reads it: relative to the project, `~/...` in the home directory, else whole. */
export function pathLabel(path: string, project: string, home: string): string {
  const inProject = relativeInside(project, path)
  if (inProject !== undefined) return inProject
  const inHome = relativeInside(home, path)
  return inHome !== undefined && home !== "/" ? `~/${inHome}` : path
}

export function escapeRegex(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
}

/**
 * A glob as a RegExp: `**` spans directories (`**\/` also matches none), `*` and `?` stay within one segment.
 * With `hideDotfiles`, a segment that starts with a wildcard does not match a leading dot, as in the shell.
 */
export function globToRegExp(glob: string, hideDotfiles = false): RegExp {
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
export function globOutline(glob: string): string {
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
export function anyMatch(patterns: readonly RegExp[], text: string): boolean {
  for (const pattern of patterns) if (pattern.test(text)) return true
  return false
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
export function braceWords(word: string): string[] | undefined {
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
export function braceGlob(word: string): string {
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

/** A text as one bounded line: control characters and line breaks become spaces (the dialog shows one line). */
export function oneLine(text: string, cap: number): string {
  const line = text
    .replace(/[\u0000-\u001f\u007f-\u009f\u2028\u2029]+/g, " ")
    .replace(/\s+/g, " ")
    .trim()
  return line.length <= cap ? line : `${line.slice(0, cap - 3).trimEnd()}...`
}
