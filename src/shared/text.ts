/**
 * Text caps and the slow-regex check (`capText`, `regexHazard`, `REGEX_INPUT_CAP`).
 */

export const REGEX_INPUT_CAP = 10_000 // characters a user regex ever runs on

/** Cap what a regex runs on: the head and the tail, so a long tool output still shows its end. */
export function capText(text: string, cap: number): string {
  return text.length <= cap ? text : `${text.slice(0, cap / 2)}\n${text.slice(-cap / 2)}`
}

/** The longest quantifier read (`{12345,67890}?`) and group prefix (`(?<name>`, `(?i-m:`): the look-aheads. */
const QUANTIFIER_CHARS = 24
const GROUP_PREFIX_CHARS = 64

/** A quantifier at `at` (`+ * ? {n} {n,} {n,m}`, with an optional lazy `?`), or undefined. */
function quantifierAt(source: string, at: number): { min: number; max: number; text: string } | undefined {
  const match = /^(?:([+*?])|\{(\d+)(,(\d*))?\})\??/.exec(source.slice(at, at + QUANTIFIER_CHARS))
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
export function regexHazard(source: string): string | undefined {
  type Group = { open: number; body: number; unbounded: boolean; optional: boolean }
  const stack: Group[] = []
  for (let i = 0; i < source.length;) {
    const ch = source[i]
    if (ch === "(") {
      const prefix = /^\((?:\?(?:[:=!]|<[=!]|<[^>]*>|[a-z-]*:))?/.exec(source.slice(i, i + GROUP_PREFIX_CHARS))![0]
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
