/**
 * The scripts inside arguments: what a sed script writes, find's name tests (`sedScriptEffects`, `fnmatchTest`).
 */
import { regexHazard } from "./text"
import { harmlessTarget } from "./bash-scan"

/**
 * What a sed script does besides printing: files it writes and reads, command lines it runs (`e COMMAND`), and
 * whether it runs text it makes itself (`e` alone, the `s///e` flag: opaque). Null when it cannot be followed.
 */
export function sedScriptEffects(
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
export const FIND_VALUE_WORDS = new Set(
  `-maxdepth -mindepth -type -xtype -newer -anewer -cnewer -user -group -uid -gid -perm -size -mtime -atime -ctime
  -mmin -amin -cmin -used -links -inum -samefile -fstype -context -printf -lname -ilname -regextype -D`.split(/\s+/),
)
export const FIND_NAME_TESTS = new Set([
  "-name",
  "-iname",
  "-path",
  "-ipath",
  "-wholename",
  "-iwholename",
  "-regex",
  "-iregex",
])
export const FIND_EXEC = new Set(["-exec", "-execdir", "-ok", "-okdir"])
const FIND_REGEX_REPEATS = 3 // unbounded repeats a -regex may have to be judged: C(path length + 3, 3) tries at worst
export const FIND_WRITES_FILE = new Set(["-fprint", "-fprint0", "-fls", "-fprintf"])

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
export function findNameTest(test: string, pattern: string): ((path: string) => boolean) | undefined {
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
export type FindTest = (printedPath: string) => boolean
export const ANY_PATH: FindTest = () => true
