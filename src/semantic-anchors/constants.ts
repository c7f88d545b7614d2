/**
 * The host globals opencode's runtime (Bun) provides, declared here (no runtime types package), and the tuning
 * constants: the bounds that keep memory and time flat however long a session runs. The plugin's overview opens
 * hooks.ts, its entry module (and so the shipped file).
 */

// opencode runs plugins on Bun. These are the only host globals used, declared here so the file type-checks
// without a runtime types package.
export declare const Bun: { YAML: { parse(text: string): unknown } }
export declare const process: { env: Record<string, string | undefined> }
export declare function setTimeout(callback: () => void, ms: number): unknown
export declare function clearTimeout(timer: unknown): void
export declare const performance: { now(): number } // a clock that never steps back (what `seen` is timed by)
export declare class TextEncoder {
  encode(text: string): Uint8Array
}
export declare function btoa(data: string): string

// Tuning constants (bounds that keep memory and time flat however long a session runs).
export const MAX_ROOT_SESSIONS = 128 // root sessions kept; the least recently used is dropped beyond
export const MAX_PARENT_LINKS = 4096 // child -> parent links kept; the least recently used is dropped beyond
export const MAX_SEEN = 16 // texts kept per session for re-checking `unlessSeen` after a reload
export const SEEN_CAP = 8192 // characters of one seen text that are kept and matched (head and tail)
export const MESSAGE_CAP = 20_000 // characters of a user message that message contracts look at
export const TOAST_AFTER_MESSAGE_MS = 700 // a toast sooner than ~0.5 s after a session's first message is painted over
export const TOAST_SHOWN_MS = 5500 // how long the TUI shows a toast; a second one sooner replaces the first
export const MAX_PENDING_NOTES = 256 // warn notes waiting for their tool.execute.after
export const MAX_RESERVED = 256 // counted calls waiting to be known as run (tool.execute.after) or not (an error part)
export const MAX_TOOL_PLANS = 256 // tool names whose plan is kept per role (toolPlan); beyond, the plans are made again
export const MAX_RESOLVED_DIRS = 1024 // directories whose realpath is kept (ResolvedDirs); beyond, they are resolved again
export const MAX_LOGGED_PROBLEMS = 50 // config problems logged per file; the rest are counted (status lists all)
export const DEFAULT_MAX_OVERRIDES = 3
export const SERVICE = "semantic-anchors"
export const TAG = "[semantic-anchors]"
export const CONFIG_FILE_NAME = "opencode-semantic-anchors.yaml"
export const OWN_TOOLS = new Set(["anchor_status", "anchor_bypass"])
