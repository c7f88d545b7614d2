/**
 * The `OPENCODE_LOOP_GUARD*` variables, their ranges and problems (`readSettings`, `readStreamMode`).
 */
import type { IgnoredKey } from "./signatures"
import { SLEEP_UNITS } from "./waits"
import { duration } from "./texts"

/**
 * OPENCODE_LOOP_GUARD_STREAM=block|warn|off: what a loop in the stream does; unset, it follows OPENCODE_LOOP_GUARD
 * (so `off` there switches both off).
 */
export function readStreamMode(
  env: Record<string, string | undefined>,
  main: Mode,
): { mode: Mode; problems: string[] } {
  const text = env.OPENCODE_LOOP_GUARD_STREAM?.trim().toLowerCase()
  if (!text) return { mode: main, problems: [] }
  if (text === "block" || text === "warn" || text === "off") return { mode: text, problems: [] }
  return {
    mode: main,
    problems: [
      `OPENCODE_LOOP_GUARD_STREAM=${quote(env.OPENCODE_LOOP_GUARD_STREAM)} is not block, warn or off; using ${main}`,
    ],
  }
}

export type Mode = "block" | "warn" | "off"
export type Settings = {
  mode: Mode
  repetitions: number
  failures: number
  maxBlocks: number
  exempt: string[]
  /** seconds a waiting cycle may sleep in all; 0: waits get no budget (a cycle with a sleep is a loop) */
  waitBudget: number
  /** waits (laps) a waiting cycle may take */
  waitLaps: number
  /** argument keys left out of the signature of the tools their glob matches, besides IGNORED_KEYS */
  ignoreKeys: IgnoredKey[]
}
function defaultSettings(): Settings {
  return {
    mode: "block",
    repetitions: 3,
    failures: 3,
    maxBlocks: 5,
    exempt: [],
    waitBudget: 30 * 60,
    waitLaps: 60,
    ignoreKeys: [],
  }
}
const MAX_REPETITIONS = 50
/** The longest wait budget a setting may ask for: a day. */
const MAX_WAIT_BUDGET = 86400

/** Reads the variables; every invalid value is reported (to be logged) and replaced by its default. */
export function readSettings(env: Record<string, string | undefined>): { settings: Settings; problems: string[] } {
  const problems: string[] = []
  const settings = defaultSettings()

  const mode = env.OPENCODE_LOOP_GUARD?.trim().toLowerCase()
  if (mode === "block" || mode === "warn" || mode === "off") settings.mode = mode
  else if (mode)
    problems.push(`OPENCODE_LOOP_GUARD=${quote(env.OPENCODE_LOOP_GUARD)} is not block, warn or off; using block`)

  const defaults = defaultSettings()
  settings.repetitions = wholeNumber(
    env,
    "OPENCODE_LOOP_GUARD_REPETITIONS",
    2,
    MAX_REPETITIONS,
    false,
    defaults.repetitions,
    problems,
  )
  settings.failures = wholeNumber(env, "OPENCODE_LOOP_GUARD_FAILURES", 2, 50, true, defaults.failures, problems)
  settings.maxBlocks = wholeNumber(env, "OPENCODE_LOOP_GUARD_MAX_BLOCKS", 1, 1000, true, defaults.maxBlocks, problems)
  settings.waitBudget = waitBudget(env, defaults.waitBudget, problems)
  settings.waitLaps = wholeNumber(env, "OPENCODE_LOOP_GUARD_WAIT_LAPS", 1, 10000, false, defaults.waitLaps, problems)

  for (const glob of (env.OPENCODE_LOOP_GUARD_EXEMPT ?? "").split(",").map((g) => g.trim())) {
    if (!glob) continue
    if (TOOL_GLOB.test(glob)) settings.exempt.push(glob)
    else
      problems.push(
        `OPENCODE_LOOP_GUARD_EXEMPT: ${quote(glob)} is not a tool-name glob (letters, digits, _ . : / - * ?); ignored`,
      )
  }
  settings.ignoreKeys = ignoreKeysSetting(env, problems)
  return { settings, problems }
}
/** A tool-name glob as the settings take it: letters, digits, _ . : / - and the wildcards * and ?. */
const TOOL_GLOB = /^[\w.*?:/-]+$/
/** A top-level argument key as OPENCODE_LOOP_GUARD_IGNORE_KEYS names it: letters, digits, _ $ and -. */
const ARGUMENT_KEY = /^[\w$-]+$/

/**
 * OPENCODE_LOOP_GUARD_IGNORE_KEYS=tool:key,tool:key (e.g. mcp_search_lookup:request_id,mcp_*:nonce): each entry a
 * tool-name glob (as OPENCODE_LOOP_GUARD_EXEMPT's), a colon, and a top-level argument key left out of the signature
 * of the matching tools' calls. The key is what follows the last colon (a tool name may hold colons). An invalid
 * entry is reported and ignored; the valid ones apply.
 */
function ignoreKeysSetting(env: Record<string, string | undefined>, problems: string[]): IgnoredKey[] {
  const entries: IgnoredKey[] = []
  for (const entry of (env.OPENCODE_LOOP_GUARD_IGNORE_KEYS ?? "").split(",").map((e) => e.trim())) {
    if (!entry) continue
    const colon = entry.lastIndexOf(":")
    const glob = entry.slice(0, Math.max(colon, 0))
    const key = entry.slice(colon + 1)
    if (colon > 0 && TOOL_GLOB.test(glob) && ARGUMENT_KEY.test(key)) entries.push({ glob, key })
    else
      problems.push(
        `OPENCODE_LOOP_GUARD_IGNORE_KEYS: ${quote(entry)} is not tool:key (a tool-name glob, a colon, an argument ` +
          `key: letters, digits, _ $ -; e.g. mcp_search_lookup:request_id); ignored`,
      )
  }
  return entries
}

/** A whole-number variable in min..max (or 0 when `zeroIsOff`); unset gives `fallback`, invalid is reported. */
function wholeNumber(
  env: Record<string, string | undefined>,
  name: string,
  min: number,
  max: number,
  zeroIsOff: boolean,
  fallback: number,
  problems: string[],
): number {
  const text = env[name]?.trim()
  if (!text) return fallback
  const n = /^\d+$/.test(text) ? Number(text) : NaN
  if ((n >= min && n <= max) || (zeroIsOff && n === 0)) return n
  const range = `a whole number from ${min} to ${max}${zeroIsOff ? " (or 0 = off)" : ""}`
  problems.push(`${name}=${quote(text)} is not ${range}; using ${fallback}`)
  return fallback
}

/** OPENCODE_LOOP_GUARD_WAIT_BUDGET: whole seconds, or a whole number with s, m or h (90, 15s, 30m, 1h); 0 = none. */
function waitBudget(env: Record<string, string | undefined>, fallback: number, problems: string[]): number {
  const name = "OPENCODE_LOOP_GUARD_WAIT_BUDGET"
  const text = env[name]?.trim()
  if (!text) return fallback
  const match = /^(\d+)([smh]?)$/.exec(text.toLowerCase())
  const seconds = match ? Number(match[1]) * SLEEP_UNITS[match[2]] : NaN
  if (seconds >= 1 && seconds <= MAX_WAIT_BUDGET) return seconds
  if (seconds === 0) return 0
  problems.push(
    `${name}=${quote(text)} is not a duration from 1s to 24h (whole seconds, or with s, m or h: 90, 15s, 30m, 1h; ` +
      `or 0 = waits get no budget); using ${duration(fallback)}`,
  )
  return fallback
}

function quote(text: string | undefined): string {
  return JSON.stringify(String(text).slice(0, 40))
}
