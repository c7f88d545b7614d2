/**
 * Whether a call waits, and how long: the sleep a command asks for, the time it ran (`sleepSeconds`, `waitSeconds`,
 * `expectedWait`).
 */
import type { Call } from "./results"
import { MAX_CYCLE } from "./cycle"

/** A sleep shorter than this is no wait: a loop that slips in `sleep 1` is still a loop. */
const WAIT_MIN_SECONDS = 5

/** Seconds a call waits on purpose: a bash command that sleeps WAIT_MIN_SECONDS or more first; otherwise 0. */
export function waitSeconds(tool: string, args: unknown): number {
  if (tool !== "bash" || typeof args !== "object" || args === null) return 0
  const command = (args as { command?: unknown }).command
  if (typeof command !== "string") return 0
  const seconds = sleepSeconds(command)
  return seconds >= WAIT_MIN_SECONDS ? seconds : 0
}

/**
 * The wait a call is taken to make before it runs: the sleep its command asks for, or else the wait of the same
 * call's (same signature) latest run: what that run measured, or, while its result is pending, what was expected of
 * it (a `process wait` that blocked 30 s will block again; one that answered at once will answer at once). The core
 * has no clock: durations come from the adapter.
 */
export function expectedWait(history: readonly Call[], signature: string, asked: number): number {
  if (asked > 0) return asked
  return lastRun(history, signature, history.length, false)?.wait ?? 0
}

/**
 * The newest call with this signature among the `before` first of the history (only a measured one when
 * `measured`), no further back than 2 * MAX_CYCLE calls: this runs on every call, and most calls are new. A cycle's
 * calls repeat within MAX_CYCLE calls, and a blocked wait (never recorded) puts at most one more turn between two
 * runs of the same call.
 */
export function lastRun(
  history: readonly Call[],
  signature: string,
  before: number,
  measured: boolean,
): Call | undefined {
  for (let i = before - 1; i >= Math.max(0, before - 2 * MAX_CYCLE); i--) {
    const call = history[i]
    if (call.signature === signature && (!measured || call.ran !== null)) return call
  }
  return undefined
}

/**
 * The wait a call made, once it ran for `ran` seconds (from tool.execute.before to its result): the sleep it asked
 * for, when it asked for one (the budget counts what was asked, not the shell's start-up around it: three `sleep 5`
 * fit a 15 s budget); otherwise a call that itself ran WAIT_MIN_SECONDS or more waited that long (a `gh run watch`,
 * a `process wait` with a timeout, a test runner polled with a timeout), as surely as a `sleep`, when its previous
 * run (`previous` seconds, the same call) did too: one slow run is no wait (the host's first bash call, 2.4 s here;
 * a loaded machine, where an echo/read loop of the real-host tests once ran past its window, most likely for one
 * slow call; a permission the human took a while to grant). A fast call is no wait.
 */
export function measuredWait(asked: number, ran: number, previous: number | null): number {
  if (asked > 0) return asked
  return ran >= WAIT_MIN_SECONDS && previous !== null && previous >= WAIT_MIN_SECONDS ? ran : 0
}

/**
 * The seconds a shell command line sleeps before it does anything else; 0 when it does not start by sleeping.
 * It reads the line as the shell would run it, one command after the other:
 * - the line is cut into commands at `&&`, `||`, `;` and line breaks; empty commands are skipped;
 * - leading `cd DIR` commands are passed over: changing directory takes no time;
 * - then every `sleep` command in a row adds its operands, each a plain number with an optional unit as GNU sleep
 *   reads it (`60`, `1.5`, `.5`, `30s`, `1m`, `2h`, `1d`; several operands add up);
 * - the reading ends at the first other command (`echo sleep 60` is no wait, `sleep 60 && echo x` is one), and
 *   at a sleep it cannot read: an option, a variable, a quoted or computed operand, `infinity`, or a `&`, `|` or
 *   redirection in that command (`sleep 60 &` runs in the background: no wait). A `#` word starts a comment.
 * Nothing of the command is kept: only the number.
 */
export function sleepSeconds(command: string): number {
  if (!MAY_SLEEP_FIRST.test(command)) return 0 // most commands: no reading at all
  let total = 0
  let started = false // a sleep was read: from now on only further sleeps add
  for (let start = 0; start <= command.length;) {
    SEPARATOR.lastIndex = start
    const separator = SEPARATOR.exec(command)
    const end = separator ? separator.index : command.length
    const words = commandWords(command.slice(start, end))
    start = end + (separator ? separator[0].length : 1)
    if (words === null) return total
    if (words.length === 0) continue
    if (!started && words[0] === "cd" && words.length <= 2 && words.every(isPlainWord)) continue
    if (words[0] !== "sleep" || words.length < 2) return total
    let seconds = 0
    for (const operand of words.slice(1)) {
      const value = sleepOperand(operand)
      if (value === null) return total
      seconds += value
    }
    total += seconds
    started = true
  }
  return total
}
const MAY_SLEEP_FIRST = /^[\s;]*(?:sleep|cd)\b/
const SEPARATOR = /&&|\|\||;|\n/g

/** The words of one command, split at blanks, a `#` word and what follows it (a comment) left out; null: too long. */
function commandWords(command: string): string[] | null {
  if (command.length > MAX_COMMAND_READ) return null
  const words = command.split(/[ \t\r]+/).filter((word) => word !== "")
  const comment = words.findIndex((word) => word.startsWith("#"))
  return comment === -1 ? words : words.slice(0, comment)
}

/** A word the shell takes as it is: no quote, variable, glob, subshell, pipe, background or redirection. */
function isPlainWord(word: string): boolean {
  return /^[\w./~+,:@%=-]+$/.test(word)
}

export const SLEEP_UNITS: Readonly<Record<string, number>> = { "": 1, s: 1, m: 60, h: 3600, d: 86400 }

/** One operand of GNU sleep in seconds (`1.5m` is 90), or null when it is not a plain number with a unit. */
function sleepOperand(operand: string): number | null {
  const match = /^(\d+(?:\.\d*)?|\.\d+)([smhd]?)$/.exec(operand)
  return match ? Number(match[1]) * SLEEP_UNITS[match[2]] : null
}

/** A `sleep` or `cd` command is short; a longer one is some other command and ends the reading (and its cost). */
export const MAX_COMMAND_READ = 256
