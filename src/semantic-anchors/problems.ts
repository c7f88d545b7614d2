/**
 * A config problem (file, key path, fix) and the `Reporter` that collects them (`formatProblem`).
 */
import { didYouMean } from "./names"
import type { Problem, Raw } from "./types"

export function formatProblem(problem: Problem): string {
  return `${problem.file}: ${problem.keyPath ? `${problem.keyPath}: ` : ""}${problem.text}`
}

export const isMapping = (value: unknown): value is Raw =>
  typeof value === "object" && value !== null && !Array.isArray(value)
export const describe = (value: unknown): string =>
  value === null
    ? "null"
    : Array.isArray(value)
      ? "a list"
      : typeof value === "object"
        ? "a mapping"
        : JSON.stringify(value)

/** Collects the problems of one file; paths are written as `contracts[2].trigger.args.command.regex`. */
export class Reporter {
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

export const join = (keyPath: string, key: string | number): string =>
  typeof key === "number" ? `${keyPath}[${key}]` : keyPath ? `${keyPath}.${key}` : key
