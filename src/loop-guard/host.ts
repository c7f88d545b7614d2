/**
 * The host's channels, each fire and forget: the log, the human's toasts, the stop of a session's run, and the
 * environment and the clock the adapter reads.
 */
import type { PluginInput } from "@opencode-ai/plugin"

export type Client = PluginInput["client"] | undefined
export type Log = (level: "info" | "warn" | "error", message: string, extra?: Record<string, unknown>) => void

/**
 * Fire and forget: a client call must never delay or fail a tool call, nor be awaited while opencode starts (an
 * awaited call at start-up hung the host). Errors, thrown or rejected, are dropped.
 */
function fireAndForget(send: () => unknown): void {
  try {
    const pending = send() as { catch?: (f: () => void) => void } | undefined
    if (pending && typeof pending.catch === "function") pending.catch(() => {})
  } catch {
    // best effort
  }
}

export function logger(client: Client): Log {
  return (level, message, extra) =>
    fireAndForget(() => client?.app?.log({ body: { service: "loop-guard", level, message, extra } }))
}

/** The human's channel: a toast in the TUI (resolves even with no TUI attached). */
export type Toast = (message: string, variant: "warning" | "error") => void
export function toaster(client: Client): Toast {
  return (message, variant) => fireAndForget(() => client?.tui?.showToast({ body: { message, variant } }))
}

/** The bounded stop: ends the session's run as the human's interrupt would. */
export function aborter(client: Client): (sessionID: string) => void {
  return (sessionID) => fireAndForget(() => client?.session?.abort({ path: { id: sessionID } }))
}

/** The process environment, read without Node's type declarations (the plugin runs on Bun; tests too). */
export function environment(): Record<string, string | undefined> {
  return (globalThis as { process?: { env?: Record<string, string | undefined> } }).process?.env ?? {}
}

/**
 * The adapter's clock in milliseconds: Date.now, or a `clock` function passed in the plugin's options (tests
 * inject one; opencode's config can hold no function, so a user's options never replace it).
 */
export function clockOf(options: Record<string, unknown> | undefined): () => number {
  const clock = options?.clock
  return typeof clock === "function" ? () => Number(clock()) : Date.now
}
