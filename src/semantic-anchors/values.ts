/**
 * Values read from raw YAML and from tool arguments (`valueAt`, `asText`, `pathForGlob`).
 */
import { normalizePath, relativeInside } from "./names"
import type { MatchContext, Raw } from "./types"
import { Reporter, describe } from "./problems"

export function stringList(value: unknown, keyPath: string, r: Reporter, what: string): string[] | undefined {
  const list = typeof value === "string" ? [value] : value
  if (!Array.isArray(list) || list.length === 0 || list.some((item) => typeof item !== "string" || item === "")) {
    r.error(keyPath, `must be a non-empty list of ${what} (got ${describe(value)})`)
    return undefined
  }
  return list as string[]
}

/** The value at a dot path (`edits.0.filePath`) inside the tool arguments; undefined when any step is missing. */
export function valueAt(args: unknown, keyPath: readonly string[]): unknown {
  let value = args
  for (const key of keyPath) {
    if (typeof value !== "object" || value === null || !Object.prototype.hasOwnProperty.call(value, key))
      return undefined
    value = (value as Raw)[key]
  }
  return value
}

export function asText(value: unknown): string {
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
export function pathForGlob(value: string, ctx: MatchContext): string {
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
