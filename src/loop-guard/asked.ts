/**
 * A repetition the person asked for: the person's latest message read for a count and a passage (askedRepetition),
 * and whether a repeated passage of the answer is made of it (madeOfAsked). The stream watcher lets such a
 * repetition run up to the asked count.
 */
import type { StreamLoop } from "./types"

/**
 * A repetition the person asked for is not a loop. The person's latest message (chat.message) is read once by
 * askedRepetition: it asks for a repetition when it names both
 * - a count: a number before `times`, `rows`, `lines`, `copies`, `columns`, `cells`, `repetitions`, `words` or a
 *   filler's name (`16 zeros`), or a grid `N x M` / `N by M` (their product); several counts multiply
 *   (`200 rows of 16 zeros` is 3,200); digits only (`2000`, `2,000`), at least 2;
 * - a passage: a quoted text (`'ha'`, "...", `...`, curly quotes), the word after `the word`, `the letter`,
 *   `the character`, `the phrase` and the like (`the word test`), or a filler named in the plural (`zeros` is `0`,
 *   `dashes` is `-`, see ASKED_FILLERS).
 * Then the answer's parts (never the reasoning) may repeat a passage made of that passage (any case) and separators
 * (anything but a letter: blanks, punctuation, digits, as in `ha ha`, `0 0 0` rows, numbered copies), for up to
 * ASKED_MARGIN times the count's worth of characters (count x (passage + ASKED_SEPARATOR_CHARS)); a repetition that
 * goes further, or any other passage repeated, is judged as before. The next message replaces the allowance: one that
 * asks for nothing of the kind removes it. "summarize the build script" asks for nothing.
 */
export type Asked = {
  /** the passages that may repeat, lower-cased, each with the characters a repetition of it may last */
  passages: { text: string; chars: number }[]
  /** the copies asked for */
  count: number
}

/**
 * A watcher's allowance: what was asked; the run last read (its start and period) and the characters its passage may
 * last (0 when it is no asked passage); the first repetition let through.
 */
export type Allowance = { asked: Asked; run: number; period: number; chars: number; first: StreamLoop | null }

/** how far past the asked count a repetition still runs (a model's intro, wider separators) */
export const ASKED_MARGIN = 1.5
/** characters counted per copy beside the passage: a separator such as `, ` or a line feed */
export const ASKED_SEPARATOR_CHARS = 2
/** characters of the message read; passages kept; a passage's length; the largest count taken */
const ASKED_MAX_READ = 16384
const ASKED_MAX_PASSAGES = 8
const ASKED_MAX_PASSAGE = 200
const ASKED_MAX_COUNT = 1_000_000

/** Fillers a person names instead of quoting them: `a grid of zeros`. */
const ASKED_FILLERS: Readonly<Record<string, string>> = {
  zeros: "0",
  zeroes: "0",
  ones: "1",
  dots: ".",
  dashes: "-",
  hyphens: "-",
  stars: "*",
  asterisks: "*",
  hashes: "#",
  underscores: "_",
}
const ASKED_NUMBER = String.raw`(\d{1,3}(?:,\d{3})+|\d+)`
const ASKED_GRID = new RegExp(String.raw`\b${ASKED_NUMBER}\s*(?:x|×|by)\s*${ASKED_NUMBER}\b`, "gi")
const ASKED_UNIT = new RegExp(
  String.raw`\b${ASKED_NUMBER}\s+(?:times|rows|lines|copies|columns|cells|repetitions|repeats|words|${Object.keys(ASKED_FILLERS).join("|")})\b`,
  "gi",
)
/** one pattern per kind of quotes, so a quote inside another is found (`opencode run` wraps a prompt in "...") */
const ASKED_QUOTED = [/(?<!\w)'([^'\n]+)'(?!\w)/g, /"([^"\n]+)"/g, /`([^`\n]+)`/g, /‘([^’\n]+)’/g, /“([^”\n]+)”/g]
const ASKED_NAMED =
  /\bthe (?:word|letter|character|char|symbol|emoji|digit|number|phrase|string|token) +["'`‘“]?([^\s"'`’”,;:!?]+)/gi
const ASKED_FILLER = new RegExp(String.raw`\b(${Object.keys(ASKED_FILLERS).join("|")})\b`, "gi")

/** What the person's message asks to be repeated, or null when it asks for no repetition (no count or no passage). */
export function askedRepetition(message: string): Asked | null {
  const text = message.slice(0, ASKED_MAX_READ)
  const count = askedCount(text)
  if (count < 2) return null
  const passages = askedPassages(text).map((passage) => ({
    text: passage,
    chars: Math.ceil(ASKED_MARGIN * count * (passage.length + ASKED_SEPARATOR_CHARS)),
  }))
  return passages.length === 0 ? null : { passages, count }
}

/** The count a message asks for: the product of its grids and its counts with a unit, capped; 0 when none. */
function askedCount(text: string): number {
  const number = (digits: string) => Number(digits.replaceAll(",", ""))
  let count = 0
  const multiply = (n: number) => (count = Math.min(ASKED_MAX_COUNT, (count || 1) * n))
  const rest = text.replace(ASKED_GRID, (_, a: string, b: string) => (multiply(number(a) * number(b)), " "))
  for (const match of rest.matchAll(ASKED_UNIT)) multiply(number(match[1]))
  return count
}

/** The passages a message names: quoted, after `the word` and the like, or a filler's name; lower-cased. */
function askedPassages(text: string): string[] {
  const found = new Set<string>()
  const add = (passage: string | undefined) => {
    const trimmed = passage?.trim().toLowerCase() ?? ""
    if (trimmed && trimmed.length <= ASKED_MAX_PASSAGE && found.size < ASKED_MAX_PASSAGES) found.add(trimmed)
  }
  for (const quoted of ASKED_QUOTED) for (const match of text.matchAll(quoted)) add(match[1])
  for (const match of text.matchAll(ASKED_NAMED)) add(match[1])
  for (const match of text.matchAll(ASKED_FILLER)) add(ASKED_FILLERS[match[1].toLowerCase()])
  return [...found]
}

/**
 * Whether a repeated passage (one copy, as the stream shows it: any rotation) is made of an asked passage and
 * separators: every character is inside an occurrence of it, read around the copy's end, or is no letter.
 */
export function madeOfAsked(period: string, passage: string): boolean {
  const p = period.length
  const text = period.toLowerCase().repeat(Math.ceil((passage.length - 1) / p) + 1)
  const covered = new Uint8Array(p)
  let coveredTo = 0
  let hits = 0
  for (let i = text.indexOf(passage); i >= 0 && i < p; i = text.indexOf(passage, i + 1)) {
    hits++
    for (let k = Math.max(i, coveredTo); k < i + passage.length; k++) covered[k % p] = 1
    coveredTo = Math.max(coveredTo, i + passage.length)
  }
  if (hits === 0) return false
  for (let k = 0; k < p; k++) if (!covered[k] && isLetter(period.charCodeAt(k))) return false
  return true
}

/** A letter, for madeOfAsked: ASCII letters and every character beyond ASCII (accents, scripts, emoji). */
function isLetter(c: number): boolean {
  return (c >= 65 && c <= 90) || (c >= 97 && c <= 122) || c >= 128
}
