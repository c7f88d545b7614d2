/**
 * The stream watcher: a streamed part repeating one passage (`StreamWatcher`, the `STREAM_*` bounds, `cutText`).
 */
import { madeOfAsked, type Allowance, type Asked } from "./asked"
import { article } from "./texts"
import type { StreamLoop } from "./types"

/**
 * A streamed part (reasoning or answer) is fed to its own StreamWatcher one delta at a time. The watcher looks for
 * a passage of p characters (1 <= p <= STREAM_MAX_PERIOD) repeated back to back, exactly: each character equal to
 * the one p characters before it (a run). A run is solid from one and a half copies and STREAM_SOLID_CHARS
 * characters. Solid runs that follow one another without a gap (at most STREAM_GAP characters) make one repetition
 * region, so a loop that drifts stays one loop: its period changes (`the the the` becoming `thehehe`), a space or a
 * word differs now and then. The part is stopped when the region has lasted STREAM_REPEATS copies of the running
 * passage and STREAM_MIN_CHARS characters, whichever comes later, and the running passage is itself repeated (two
 * copies and STREAM_OWN_CHARS characters, unless it began the region): `!` at 800 characters, a 43-character
 * sentence at 800, a 500-character paragraph at its 6th copy. The rule allows 8 copies and 1,000
 * characters: the margin covers the chunk that carries the verdict (the abort follows it).
 *
 * Long passages: a passage of STREAM_LONG_CHARS characters or more repeated verbatim, STREAM_LONG_REPEATS copies
 * back to back (its own run, not the region: a copy that differs by one character starts the count again), is a
 * loop at the last character of that copy: a 1,200-character paragraph at character 4,800 of the loop, where the
 * main rule waited for 7,200 (the abort follows the chunk that carries that character). Three copies, or three and
 * most of a fourth, run. A long passage that varies (a counter, a word) is left to the main rule, which chains it
 * only when the running passage is itself repeated (two copies): so long copies that all differ a little run, as a
 * quoted log with timestamps does. Why 4: the issue asks the end of the 4th copy and 3 copies must run; the real
 * texts leave room below (see next paragraph), but 2 copies of a 776-character listing are real text. Passages up to
 * STREAM_MAX_PERIOD (8,000) characters are seen: the ring of STREAM_WINDOW characters holds one copy and the
 * characters to check a proposal back (STREAM_WINDOW - STREAM_MAX_PERIOD >= STREAM_GRAM); a longer one is not.
 *
 * What the real texts say (../shared/data/real-texts, bench: `npm run bench -- --texts`): with these values no
 * text of the 15,784 is stopped; at 4 copies and 400 characters one is (a reasoning that quotes a duplicated line of
 * code 4 times). A passage whose counter changes at every copy (`assistant57`, `assistant58`, ...) is not chained:
 * a quoted log with timestamps has that shape too. The long rule asked less: at 2 copies of 1,000+ characters, or 3
 * and 4 copies of 250+, no text is stopped; at 2 copies of 500+ one is (a transcript showing a listing twice).
 *
 * Whole lines of code, tables and diagrams: a passage that holds a line break, inside a Markdown code fence or
 * made only of table or diagram rows (lines that start with |, + or a box-drawing character, or hold a cell
 * separator, a | with a blank beside it, further on), is repeated code, data or layout (the same row of a dummy
 * weights file 16 times, the empty rows of a box, a table without outer pipes). It stops only at a backstop of
 * STREAM_CODE_REPEATS copies and STREAM_CODE_CHARS characters. A cycle inside a line (a made-up hash degenerating
 * into `JibdJibd...`) is no line of code and follows the main rule.
 *
 * Cost: bounded work per character, never a rescan of the part. The last STREAM_WINDOW characters sit in a ring;
 * a rolling hash of the last STREAM_GRAM characters indexes a table of the position where that gram was last seen,
 * which proposes the period p = distance back (a loop proposes its own period at almost every character). A
 * proposed period is checked back through the ring, at most STREAM_CHECK_BACK characters (so its run counts from
 * where the repetition began), then followed as one of at most STREAM_CANDIDATES candidates until its first
 * difference. The long rule adds no state: a candidate's run is its copies. Memory: the ring (16 KB) and the table
 * (16 KB), allocated at the first character; never the text. The table's slots are overwritten by the grams in
 * between: a proposal 8,000 characters back survives in about 1 slot of 7 (4,000: 1 of 3), enough for a loop, which
 * proposes its period at almost every character.
 */
export const STREAM_MAX_PERIOD = 8000
/** copies of the passage, and characters from the loop's start, before a stop (both must be reached) */
export const STREAM_REPEATS = 6
export const STREAM_MIN_CHARS = 800
/** the long-passage rule: a passage of STREAM_LONG_CHARS or more, repeated verbatim STREAM_LONG_REPEATS times */
export const STREAM_LONG_CHARS = 1000
export const STREAM_LONG_REPEATS = 4
/** the backstop for whole lines repeated in code, tables and diagrams */
export const STREAM_CODE_REPEATS = 64
export const STREAM_CODE_CHARS = 8000
/** a run is solid (part of a loop) from 1.5 copies spanning this many characters: shorter is coincidence */
const STREAM_SOLID_CHARS = 12
/** characters between two solid runs that still make one region (a glitch in a loop) */
const STREAM_GAP = 8
/** the running passage's own repetition, when the region began with another: copies beyond the first, characters */
const STREAM_OWN_COPIES = 1
const STREAM_OWN_CHARS = 100
/** characters kept: a power of two above STREAM_MAX_PERIOD + STREAM_GRAM, so a proposal can be checked back */
const STREAM_WINDOW = 8192
/** characters hashed to propose a period; grams shorter than this would propose noise in ordinary prose */
const STREAM_GRAM = 10
/** characters a proposed period is checked back: bounds the work per proposal (a loop is proposed early anyway) */
const STREAM_CHECK_BACK = 1024
/** slots of the gram table (a power of two); a collision only loses a proposal or proposes a period that fails */
const STREAM_TABLE = 4096
/** candidate periods followed at once */
const STREAM_CANDIDATES = 8

/** The long-passage rule: a passage of `chars` characters or more repeated verbatim `repeats` times is a loop. */
export type LongRule = { chars: number; repeats: number }

const HASH_BASE = 0x01000193
const HASH_OUT = (() => {
  let power = 1
  for (let i = 0; i < STREAM_GRAM; i++) power = Math.imul(power, HASH_BASE)
  return power
})()
const LINE_FEED = 10
const BACKTICK = 96
const TILDE = 126
const SPACE = 32
const TAB = 9
const QUOTE_MARK = 62

const PIPE = 124

/**
 * A table or diagram row starts with | or + or a box-drawing character (U+2500 to U+257F); a line that holds a cell
 * separator further on is a row too (a Markdown table may leave out its outer pipes: `n/a | skipped | none`).
 */
function isRowStart(c: number): boolean {
  return c === PIPE || c === 43 || (c >= 0x2500 && c <= 0x257f)
}

/** A table cell separator inside a line, seen at its second character: a | after a blank, or a blank after a |. */
function isCellSeparator(previous: number, c: number): boolean {
  const blank = (x: number) => x === SPACE || x === TAB
  return (c === PIPE && blank(previous)) || (previous === PIPE && blank(c))
}

export class StreamWatcher {
  /** characters seen */
  private seen = 0
  private ring: Uint16Array | null = null
  private grams: Int32Array | null = null
  private hash = 0
  private readonly periods = new Int32Array(STREAM_CANDIDATES)
  private readonly runs = new Int32Array(STREAM_CANDIDATES)
  private candidates = 0
  /** Markdown fence state: fence characters at the line's start, inside or not */
  private fenceChars = 0
  private fenceChar = 0
  private inFence = false
  private lastFence = -1
  private lastLineFeed = -1
  /**
   * The first character of the last line that is no table or diagram row, whether this line's first character was
   * seen, and the first character of this line while it may still be plain: a line that does not start as a row is
   * plain when it ends without a cell separator (a | with a blank beside it); one makes it a row at once. Until
   * then it counts as neither (its first characters, `n/a ` of `n/a | skipped`, do not tell), so a verdict taken
   * inside it rests on the lines before. A | between two other characters is no separator: chat-template tokens
   * such as `<|im_end|>`, repeated by a looping model, are text. The previous character tells a separator.
   */
  private lastPlainLine = -1
  private lineOpened = false
  private plainStart = -1
  private previous = 0
  /** the repetition region: its first character, its last, and the period it began with */
  private regionStart = 0
  private regionEnd = -1
  private regionPeriod = 0
  private verdict: StreamLoop | null = null

  /** The repetition the person asked for, and what the watcher made of it; null when none (one field, one test). */
  private readonly allowance: Allowance | null

  /**
   * The long-passage rule's bounds; only the bench sets others, to measure how near real text comes to the rule.
   * `asked`: the repetition the person asked for (askedRepetition), for an answer's part only.
   */
  constructor(
    private readonly long: LongRule = { chars: STREAM_LONG_CHARS, repeats: STREAM_LONG_REPEATS },
    asked: Asked | null = null,
  ) {
    this.allowance = asked && { asked, run: -1, period: 0, chars: 0, first: null }
  }

  /** The first repetition let through as asked for (the adapter logs it), or null. */
  get allowed(): StreamLoop | null {
    return this.allowance?.first ?? null
  }

  /** Feeds one delta; returns the loop the first time one is certain, else null (and null after it). */
  feed(delta: string): StreamLoop | null {
    if (this.verdict) return null
    if (this.ring === null) {
      this.ring = new Uint16Array(STREAM_WINDOW)
      this.grams = new Int32Array(STREAM_TABLE)
    }
    for (let i = 0; i < delta.length; i++) {
      const loop = this.step(delta.charCodeAt(i))
      if (loop) return (this.verdict = loop)
    }
    return null
  }

  /** Characters fed so far. */
  get length(): number {
    return this.seen
  }

  /** Bytes this watcher holds (the bench's "state per part"). */
  get bytes(): number {
    return (this.ring?.byteLength ?? 0) + (this.grams?.byteLength ?? 0) + 2 * 4 * STREAM_CANDIDATES + 96
  }

  private step(c: number): StreamLoop | null {
    const ring = this.ring!
    const n = this.seen
    this.trackLines(c, n)
    let solidStart = -1
    let solidPeriod = 0
    let bestRun = 0
    let bestPeriod = 0
    for (let k = 0; k < this.candidates; k++) {
      const p = this.periods[k]
      if (ring[(n - p) & (STREAM_WINDOW - 1)] === c) {
        const run = ++this.runs[k]
        // solid: one and a half copies back to back, and not a coincidence of a few characters
        if (2 * run >= p && run + p >= STREAM_SOLID_CHARS) {
          const start = n + 1 - run - p
          if (solidPeriod === 0 || start < solidStart) {
            solidStart = start
            solidPeriod = p
          }
          if (run + p > bestRun + bestPeriod) {
            bestRun = run
            bestPeriod = p
          }
        }
      } else {
        this.candidates--
        this.periods[k] = this.periods[this.candidates]
        this.runs[k] = this.runs[this.candidates]
        k--
      }
    }
    ring[n & (STREAM_WINDOW - 1)] = c
    this.seen = n + 1
    if (solidPeriod > 0) {
      const loop = this.extendRegion(solidStart, solidPeriod, bestPeriod, bestRun)
      if (loop) return loop
    }
    this.propose(c, n)
    return null
  }

  /**
   * The repetition region: where the text has been repeating itself without a break, a solid run after another
   * (a loop that drifts: its period changes, a counter or a space differs now and then). A solid run that starts
   * inside the region, or right after it, extends it; one that starts later opens a new region.
   */
  private extendRegion(start: number, period: number, p: number, run: number): StreamLoop | null {
    if (this.regionEnd < 0 || start > this.regionEnd + STREAM_GAP) {
      this.regionStart = start
      this.regionPeriod = period
    } else if (start < this.regionStart) {
      this.regionStart = start // a longer passage, solid only now, began before the shorter one that opened it
      this.regionPeriod = period
    }
    this.regionEnd = this.seen - 1
    return this.judge(p, run)
  }

  /** The running passage of p characters, repeated verbatim for its last run + p characters: a loop or not yet. */
  private judge(p: number, run: number): StreamLoop | null {
    const loop = this.judgeLong(p, run + p) ?? this.judgeRegion(p, run + p)
    return loop && this.allowance && this.isAsked(this.allowance, loop, run) ? null : loop
  }

  /**
   * A loop that is the repetition the person asked for: within its characters, and its running passage made of an
   * asked one (checked once per run: a run is one passage repeated verbatim, so it holds while the run lasts).
   */
  private isAsked(allowance: Allowance, loop: StreamLoop, run: number): boolean {
    const runStart = this.seen - run - loop.period
    if (runStart !== allowance.run || loop.period !== allowance.period) {
      const copy = this.lastChars(loop.period)
      const chars = allowance.asked.passages.map((passage) => (madeOfAsked(copy, passage.text) ? passage.chars : 0))
      allowance.chars = Math.max(...chars)
      allowance.run = runStart
      allowance.period = loop.period
    }
    if (loop.at - loop.start > allowance.chars) return false
    allowance.first ??= loop
    return true
  }

  /** The last n characters seen (n <= STREAM_MAX_PERIOD, so the ring holds them). */
  private lastChars(n: number): string {
    let text = ""
    for (let i = this.seen - n; i < this.seen; i++) text += String.fromCharCode(this.ring![i & (STREAM_WINDOW - 1)])
    return text
  }

  /**
   * The long-passage rule: a passage of long.chars (STREAM_LONG_CHARS) or more repeated verbatim (own: its copies
   * back to back, from the first copy's start) for long.repeats (STREAM_LONG_REPEATS) copies is a loop, unless it is
   * whole lines of code, a table or a diagram (those keep the code backstop, judged on the region). The cut keeps
   * the first of those copies.
   */
  private judgeLong(p: number, own: number): StreamLoop | null {
    if (p < this.long.chars || own < this.long.repeats * p) return null
    const start = this.seen - own
    if (this.isCode(start, p)) return null
    return { period: p, count: Math.floor(own / p), start, first: p, at: this.seen, code: false }
  }

  /** The main rule: the region has lasted STREAM_REPEATS copies and STREAM_MIN_CHARS, or the code backstop. */
  private judgeRegion(p: number, own: number): StreamLoop | null {
    const n = this.seen
    const span = n - this.regionStart
    if (span < STREAM_MIN_CHARS || span < STREAM_REPEATS * p) return null
    if (n - own > this.regionStart && (own < (STREAM_OWN_COPIES + 1) * p || own < STREAM_OWN_CHARS)) return null
    const code = this.isCode(this.regionStart, p)
    if (code && (span < STREAM_CODE_REPEATS * p || span < STREAM_CODE_CHARS)) return null
    return {
      period: p,
      count: Math.floor(span / p),
      start: this.regionStart,
      first: this.regionPeriod,
      at: n,
      code,
    }
  }

  /**
   * Whether a passage of p characters repeated since start is whole lines of code, a table or a diagram: every line
   * since start is inside one fence or a row, and the passage holds a line break.
   */
  private isCode(start: number, p: number): boolean {
    const rows = (this.inFence && this.lastFence < start) || this.lastPlainLine < start
    return rows && this.lastLineFeed >= this.seen - p
  }

  /**
   * Line feeds and Markdown code fences: ``` or ~~~ at a line's start opens or closes one, after any indentation or
   * blockquote marks (a fence inside a nested list item is indented 4 spaces or more, one in a quote follows `>`;
   * taking an indented code block's ``` line for a fence only gives its lines the code backstop).
   */
  private trackLines(c: number, n: number): void {
    const previous = this.previous
    this.previous = c
    if (c === LINE_FEED) {
      this.lastLineFeed = n
      this.fenceChars = 0
      this.lineOpened = false
      if (this.plainStart >= 0) this.lastPlainLine = this.plainStart // it ended with no |: a plain line
      this.plainStart = -1
      return
    }
    if (!this.lineOpened && c !== SPACE && c !== TAB) {
      this.lineOpened = true
      if (!isRowStart(c)) this.plainStart = n
    } else if (isCellSeparator(previous, c)) {
      this.plainStart = -1 // a table row without outer pipes
    }
    if (this.fenceChars < 0) return // this line is no fence line
    if (this.fenceChars === 0 && (c === SPACE || c === TAB || c === QUOTE_MARK)) return
    if ((c === BACKTICK || c === TILDE) && (this.fenceChars === 0 || c === this.fenceChar)) {
      this.fenceChar = c
      this.fenceChars += 1
      if (this.fenceChars === 3) {
        this.inFence = !this.inFence
        this.lastFence = n
      }
      return
    }
    this.fenceChars = -1
  }

  /** The last STREAM_GRAM characters' hash proposes the period back to where that gram was last seen. */
  private propose(c: number, n: number): void {
    const ring = this.ring!
    const grams = this.grams!
    const out = n >= STREAM_GRAM ? ring[(n - STREAM_GRAM) & (STREAM_WINDOW - 1)] : 0
    this.hash = (Math.imul(this.hash, HASH_BASE) + c - Math.imul(out, HASH_OUT)) | 0
    const seen = this.seen
    if (seen < STREAM_GRAM) return
    const slot = (this.hash ^ (this.hash >>> 15)) & (STREAM_TABLE - 1)
    const before = grams[slot]
    grams[slot] = seen
    const p = seen - before
    if (before === 0 || p > STREAM_MAX_PERIOD) return
    for (let k = 0; k < this.candidates; k++) if (this.periods[k] === p) return
    const run = this.runBack(p)
    if (run < STREAM_GRAM) return // a hash collision, not a repeat
    this.adopt(p, run)
  }

  /** Characters, counted back from the last one, equal to the one p before (as far as the ring reaches). */
  private runBack(p: number): number {
    const ring = this.ring!
    const limit = Math.min(this.seen - p, STREAM_WINDOW - p, STREAM_CHECK_BACK)
    let run = 0
    while (
      run < limit &&
      ring[(this.seen - 1 - run) & (STREAM_WINDOW - 1)] === ring[(this.seen - 1 - run - p) & (STREAM_WINDOW - 1)]
    )
      run++
    return run
  }

  /** A new candidate takes a free slot, or the slot of the shortest run when its own is longer. */
  private adopt(p: number, run: number): void {
    if (this.candidates < STREAM_CANDIDATES) {
      this.periods[this.candidates] = p
      this.runs[this.candidates] = run
      this.candidates++
      return
    }
    let weakest = 0
    for (let k = 1; k < STREAM_CANDIDATES; k++) if (this.runs[k] < this.runs[weakest]) weakest = k
    if (this.runs[weakest] >= run) return
    this.periods[weakest] = p
    this.runs[weakest] = run
  }
}

/** Which part looped: the model's reasoning or its visible answer (the part's type as opencode announces it). */
export type StreamKind = "reasoning" | "text"

export function streamWhat(kind: StreamKind, loop: StreamLoop): string {
  const whose = kind === "reasoning" ? "its reasoning" : "its answer"
  return `${whose} repeated ${article(loop.period)} ${loop.period}-character passage ${loop.count} times`
}

/** The toast: loop-guard, reasoning or answer, the passage's length and count; never the passage itself. */
export function streamToast(kind: StreamKind, loop: StreamLoop, stopped: boolean): string {
  return stopped
    ? `loop-guard: stopped the agent: ${streamWhat(kind, loop)}`
    : `loop-guard: ${streamWhat(kind, loop)} (warn mode: not stopped)`
}

/** Where the looping part is cut in the model's next context, and the note that replaces the rest. */
export type StreamCut = { offset: number; note: string }

export function streamCut(loop: StreamLoop): StreamCut {
  return {
    offset: loop.start + loop.first,
    note:
      `[loop-guard stopped a repetition here: the passage above was repeated ${loop.count} times; ` +
      "the repetitions were cut. Do not repeat it: continue with what comes next, or tell the user what blocks you.]",
  }
}

/** A part's text cut after the loop's first passage, with the note (unchanged when shorter than the cut). */
export function cutText(text: string, cut: StreamCut): string {
  let offset = cut.offset
  if (text.length <= offset) return text
  const unit = text.charCodeAt(offset - 1)
  if (unit >= 0xd800 && unit <= 0xdbff) offset += 1 // never split a surrogate pair
  return `${text.slice(0, offset)}\n\n${cut.note}`
}
