/**
 * semantic-anchors: an opencode plugin that holds the agent to project contracts (block / warn / tip), per role,
 * written in YAML, with a bypass that only the human can grant.
 *
 * What: a contract is a rule with a trigger and a mode. `block` stops a tool call before it runs (the model reads
 * why, the human can allow one call with `/anchor bypass <reason>`); `warn` lets the call run and appends a note to
 * its result; `info` shows the user a tip. Six contracts are built in (step-confirmation, source-anchor,
 * intent-anchor, boundary-anchor, emergence-anchor, guard-integrity) and each of the 12 Semantic-Anchors roles has a
 * preset of them. The role of a session comes from the opencode agent (build -> software-developer,
 * plan -> software-architect, configurable).
 *
 * Why: prompts ask, contracts enforce. "Stop and ask every three changes" or "only write docs as architect" hold
 * only when something outside the model counts and refuses; and the model must not be able to lift the rule itself.
 *
 * How to tune: YAML files, merged by contract id in this order: built-ins, the global file
 * `${XDG_CONFIG_HOME:-~/.config}/opencode/opencode-semantic-anchors.yaml` (or the file named by
 * OPENCODE_SEMANTIC_ANCHORS_CONFIG), the project file `<project>/.opencode/opencode-semantic-anchors.yaml`.
 * docs/contracts.md documents every key; `opencode-semantic-anchors.schema.json` lets editors check them. Bad input
 * never stops a session: a broken file is skipped, a broken contract disables only itself, and every problem is
 * reported with file, key path and fix (log, one toast, `/anchor status`). A tool trigger can name commands as they
 * are typed (`runs: ["git push --force"]`): it fires when any simple command the bash call would run is one, however
 * it is spelled, chained or wrapped, and never on text (an echo's arguments, a grep pattern, a commit message); the
 * ready rules are in `./install.sh --example-config`, the patterns in full in docs/contracts.md ("Command rules"). A
 * contract can carry `examples` (calls it must fire on, calls it must let pass), checked at every load;
 * `/anchor test <tool> <arguments>` shows the human how the contracts in force judge one call, matcher by matcher,
 * without counting or recording anything.
 *
 * The bounds that keep memory flat (root sessions kept, text caps, overrides by default) are the constants below.
 *
 * Layout, top-down: (1) pure core, no I/O: names, paths, globs, regexes, the contract model, built-ins and presets,
 * the validator; (2) rule engine: what an edit touches, the bash reader (PROGRAMS: what each program does with its
 * arguments; one reading per call serves the step counter, the command patterns and the integrity guard), the
 * command patterns (`runs:`; FLAG_NAMES: one flag's spellings) and the integrity guard, session state (RootSessions:
 * one eviction rule, least recently used), the bypass refusals, verdicts and the texts; (3) adapter, last: the plugin
 * instance (Anchors: config, sessions, client), `/anchor` (status, test, bypass, reload) and the two tools with their
 * one bypass path, each hook a named function (onConfig, onEvent, onChatMessage, onCommand, onToolBefore,
 * onToolAfter), then server().
 */

// opencode runs plugins on Bun. These are the only host globals used, declared here so the file type-checks
// without a runtime types package.
export declare const Bun: { YAML: { parse(text: string): unknown } }
export declare const process: { env: Record<string, string | undefined> }
export declare function setTimeout(callback: () => void, ms: number): unknown

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
